//! SQLite visit store. Writes go through the one write connection the link store uses too (SQLite
//! has one writer) and start with `BEGIN IMMEDIATE`; a link write queues behind the visit
//! transaction in progress (16,000 visits hold it for a few hundred milliseconds). Multi-row `VALUES`
//! statements in a few fixed sizes ([`chunks`]), kept prepared. Visit times are Unix milliseconds.

use super::api::{deltas, BatchOutcome};
use super::sql::{SqlVisitStore, VisitDialect};
use super::write::{
    add_counters, bind_visits, chunks, distinct, first_seen, outcome, placeholders, upsert_rollups,
    user_agents, VISIT_COLUMNS, VISIT_COLUMN_COUNT,
};
use crate::storage::sql::Value;
use crate::storage::{sqlite_file, ConnectOptions, Lite, StorageError, StorageResult};
use crate::visits::rollup::NewVisitors;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_visit_enrich::Visit;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Pool, Row, Sqlite, Transaction};
use std::collections::HashSet;
use std::sync::Arc;

/// Read connections of the visit store at most (stats and the health check; the link store
/// has its own).
const MAX_READERS: u32 = 8;

/// Rows per multi-row statement at most (22 parameters each for visits, under SQLite's 32766
/// limit).
pub(crate) const ROWS_PER_STATEMENT: usize = 512;

pub(crate) struct SqliteVisits {
    /// Holds the file's one writer open while this store lives: it is shared by handle count, and
    /// a second writer on the file would meet SQLITE_BUSY ([`sqlite_file::shared_writer`]).
    _writer: Arc<SqlitePool>,
}

pub(crate) type SqliteVisitStore = SqlVisitStore<SqliteVisits>;

impl SqliteVisitStore {
    pub async fn connect(options: &ConnectOptions) -> StorageResult<Self> {
        let (url, acquire_timeout) = (&options.url, options.acquire_timeout);
        let connect = sqlite_file::connect_options(url, acquire_timeout, options.sqlite_cache)?;
        // Shared with the link store on the same file, so a create queues behind at most the
        // visit transaction in progress.
        let writer = sqlite_file::shared_writer(&connect, acquire_timeout).await?;
        let readers = options.max_connections.clamp(1, MAX_READERS);
        let reader =
            sqlite_file::reader(&connect, readers, acquire_timeout, options.sqlite_cache).await?;
        Ok(Self {
            writer: Pool::clone(&writer),
            dialect: SqliteVisits { _writer: writer },
            reader,
        })
    }
}

/// The text form of `links` timestamps (see storage/sqlite): fixed width, so text order is time.
fn link_ts(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

fn db(error: sqlx::Error) -> StorageError {
    StorageError::classify(error)
}

fn chunks_of<T>(rows: &[T]) -> impl Iterator<Item = &[T]> {
    chunks(rows, ROWS_PER_STATEMENT, usize::MAX, |_| 0)
}

/// Inserts visits (ids distinct within `visits`) unless already stored; returns those inserted,
/// in order. Each chunk is first inserted without `RETURNING` inside a savepoint: when every row
/// went in (the rule: redelivery is rare) that is the answer, and no row comes back to the client.
/// When some were already there, the chunk is rolled back to the savepoint and inserted again
/// with `RETURNING event_id` to learn which.
async fn insert_visits<'q>(
    tx: &mut Transaction<'static, Sqlite>,
    visits: &[&'q Visit],
) -> StorageResult<Vec<&'q Visit>> {
    let mut inserted = Vec::with_capacity(visits.len());
    for chunk in chunks_of(visits) {
        let sql = format!(
            "INSERT INTO visits ({VISIT_COLUMNS}) VALUES {} ON CONFLICT (event_id) DO NOTHING",
            placeholders(chunk.len(), VISIT_COLUMN_COUNT)
        );
        let insert = |sql| bind_visits(sqlx::query(sql), chunk, |ms| ms);
        sqlx::query("SAVEPOINT visits_chunk")
            .execute(&mut **tx)
            .await
            .map_err(db)?;
        let done = insert(&sql).execute(&mut **tx).await.map_err(db)?;
        if done.rows_affected() == chunk.len() as u64 {
            sqlx::query("RELEASE visits_chunk")
                .execute(&mut **tx)
                .await
                .map_err(db)?;
            inserted.extend_from_slice(chunk);
            continue;
        }
        sqlx::query("ROLLBACK TO visits_chunk; RELEASE visits_chunk")
            .execute(&mut **tx)
            .await
            .map_err(db)?;
        let returning = format!("{sql} RETURNING event_id");
        let mut ids = HashSet::with_capacity(chunk.len());
        for row in insert(&returning).fetch_all(&mut **tx).await.map_err(db)? {
            ids.insert(row.try_get::<String, _>(0)?);
        }
        inserted.extend(chunk.iter().filter(|v| ids.contains(&v.event_id)));
    }
    Ok(inserted)
}

/// Stores the user agents the visits refer to that are not stored yet.
async fn insert_user_agents(
    tx: &mut Transaction<'static, Sqlite>,
    agents: &[(i64, &str)],
) -> StorageResult<()> {
    for chunk in chunks_of(agents) {
        let sql = format!(
            "INSERT INTO user_agents (id, agent) VALUES {} ON CONFLICT (id) DO NOTHING",
            placeholders(chunk.len(), 2)
        );
        let query =
            (chunk.iter()).fold(sqlx::query(&sql), |q, (id, agent)| q.bind(id).bind(*agent));
        query.execute(&mut **tx).await.map_err(db)?;
    }
    Ok(())
}

/// Inserts the (code, visitor) pairs not yet known; returns those that were new.
async fn insert_visitors(
    tx: &mut Transaction<'static, Sqlite>,
    pairs: &[(&str, &[u8; 16], i64)],
) -> StorageResult<NewVisitors> {
    let mut new = NewVisitors::default();
    for chunk in chunks_of(pairs) {
        let sql = format!(
            "INSERT INTO link_visitors (code, visitor, first_seen) VALUES {} \
             ON CONFLICT (code, visitor) DO NOTHING RETURNING code, visitor",
            placeholders(chunk.len(), 3)
        );
        let mut query = sqlx::query(&sql);
        for (code, visitor, at) in chunk {
            query = query.bind(*code).bind(visitor.as_slice()).bind(at);
        }
        for row in query.fetch_all(&mut **tx).await.map_err(db)? {
            let (code, visitor): (&str, &[u8]) = (row.try_get(0)?, row.try_get(1)?);
            // A code's string is allocated once per batch, not once per new visitor.
            match new.get_mut(code) {
                Some(visitors) => visitors.insert(visitor.to_vec()),
                None => (new.entry(code.to_owned()).or_default()).insert(visitor.to_vec()),
            };
        }
    }
    Ok(new)
}

#[async_trait]
impl VisitDialect for SqliteVisits {
    type Sql = Lite;

    // rowid: SQLite's DELETE takes no LIMIT unless built with it.
    const DELETE_VISITS_BEFORE: &'static str = "DELETE FROM visits WHERE rowid IN \
         (SELECT rowid FROM visits WHERE visited_at < ? LIMIT ?)";

    fn visit_time(at: DateTime<Utc>) -> Value {
        Value::Int(at.timestamp_millis())
    }

    fn read_visit_time(row: &SqliteRow, column: &str) -> StorageResult<DateTime<Utc>> {
        let ms: i64 = row.try_get(column)?;
        DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| StorageError::Corrupt(format!("{column} out of range: {ms}")))
    }

    async fn store_batch(
        &self,
        writer: &Pool<Sqlite>,
        visits: &[Visit],
        count_bots: bool,
    ) -> StorageResult<BatchOutcome> {
        let mut tx = writer.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
        let inserted = insert_visits(&mut tx, &distinct(visits)).await?;
        insert_user_agents(&mut tx, &user_agents(&inserted)).await?;
        let new_visitors = insert_visitors(&mut tx, &first_seen(&inserted)).await?;
        let d = deltas(&inserted, new_visitors, count_bots);
        upsert_rollups::<Lite>(&mut *tx, &d, ROWS_PER_STATEMENT, |rollup| {
            format!(
                "ON CONFLICT ({}) DO UPDATE SET {}",
                rollup.keys.join(", "),
                add_counters(rollup.counters, |c| format!("excluded.{c}"))
            )
        })
        .await?;
        let links: Vec<(&&str, &(i64, i64))> = d.links.iter().collect();
        for chunk in chunks_of(&links) {
            let sql = format!(
                "WITH v (code, n, at) AS (VALUES {}) \
                 UPDATE links SET visit_count = links.visit_count + v.n, \
                   last_visit_at = MAX(COALESCE(links.last_visit_at, ''), v.at) \
                 FROM v WHERE links.code = v.code",
                placeholders(chunk.len(), 3)
            );
            let mut query = sqlx::query(&sql);
            for (code, (n, at)) in chunk {
                query = query.bind(*code).bind(n).bind(link_ts(*at));
            }
            query.execute(&mut *tx).await.map_err(db)?;
        }
        crate::webhooks::feed::append::<Lite>(&mut tx, &inserted).await?;
        tx.commit().await.map_err(db)?;
        Ok(outcome(visits.len(), inserted.len()))
    }
}
