//! SQLite visit store. Writes go through the one write connection the link store uses too (SQLite
//! has one writer) and start with `BEGIN IMMEDIATE`; a link write queues behind the visit
//! transaction in progress (16,000 visits hold it for a few hundred milliseconds). The batch's rows
//! are written through the connection's raw handle, one-row statements bound in place ([`raw`]);
//! the transaction and the feed row go through sqlx. Visit times are Unix milliseconds.

mod raw;

use crate::corrections;
use crate::sql::{SqlVisitStore, VisitDialect};
use crate::write::{distinct, first_seen, outcome, user_agents, VISIT_COLUMNS, VISIT_COLUMN_COUNT};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_store::sql::Value;
use shortlink_store::{sqlite_file, ConnectOptions, Lite, StorageError, StorageResult};
use shortlink_visit_enrich::Visit;
use shortlink_visits::hindsight::Correction;
use shortlink_visits::rollup::{AllLinks, NewVisitors};
use shortlink_visits::store::{folding, BatchOutcome};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Pool, Row, Sqlite};
use std::sync::Arc;

/// Read connections of the visit store at most (stats and the health check; the link store
/// has its own).
const MAX_READERS: u32 = 8;

/// Rows written per lock of the connection's handle at most: the rows are written on the calling
/// (runtime) thread, which each lock holds for a few milliseconds, not for a whole batch.
const ROWS_PER_LOCK: usize = 2048;

pub struct SqliteVisits {
    /// Holds the file's one writer open while this store lives: it is shared by handle count, and
    /// a second writer on the file would meet SQLITE_BUSY ([`sqlite_file::shared_writer`]).
    _writer: Arc<SqlitePool>,
}

pub type SqliteVisitStore = SqlVisitStore<SqliteVisits>;

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
        corrections: &[Correction],
        all_links: &AllLinks,
        count_bots: bool,
    ) -> StorageResult<BatchOutcome> {
        let mut tx = writer.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
        let mut applied = Vec::with_capacity(corrections.len());
        for chunk in corrections::in_key_order(corrections).chunks(ROWS_PER_LOCK) {
            raw::with_handle(&mut tx, |h| raw::correct(h, chunk, &mut applied)).await?;
        }
        let distinct = distinct(visits);
        let mut inserted = Vec::with_capacity(distinct.len());
        for chunk in distinct.chunks(ROWS_PER_LOCK) {
            raw::with_handle(&mut tx, |h| raw::insert_visits(h, chunk, &mut inserted)).await?;
        }
        let agents = user_agents(&inserted);
        raw::with_handle(&mut tx, |h| raw::insert_user_agents(h, &agents)).await?;
        let mut new_visitors = NewVisitors::default();
        for chunk in first_seen(&inserted).chunks(ROWS_PER_LOCK) {
            raw::with_handle(&mut tx, |h| {
                raw::insert_visitors(h, chunk, &mut new_visitors)
            })
            .await?;
        }
        let mut d = folding(&inserted, all_links, new_visitors, count_bots);
        corrections::fold(&mut d, &applied);
        let d = d.finish();
        for table in raw::Rollup::ALL {
            raw::with_handle(&mut tx, |h| raw::add_rollup(h, &d, table)).await?;
        }
        let links: Vec<(&str, i64, String)> = (d.links.iter())
            .map(|(code, (n, at))| (*code, *n, link_ts(*at)))
            .collect();
        raw::with_handle(&mut tx, |h| raw::add_to_links(h, &links)).await?;
        let reclassified = corrections::reclassified(&applied);
        super::feed::append::<Lite>(&mut tx, &inserted, &reclassified).await?;
        tx.commit().await.map_err(db)?;
        let mut outcome = outcome(visits.len(), inserted.len());
        outcome.reclassified = applied.len() as u64;
        Ok(outcome)
    }
}
