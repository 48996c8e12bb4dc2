//! SQLite visit store. Writes go through one connection (SQLite has one writer) and start with
//! `BEGIN IMMEDIATE`; the link API's own writer waits on SQLite's busy timeout meanwhile (a batch
//! of 1000 visits holds the lock for a few milliseconds). Visits, visitors and rollups are written
//! with one statement per table, their rows bound as one JSON array (`json_each`).

use super::{
    breakdown_days, deltas, dense_series, BatchOutcome, Counts, Dimension, Entry, IdleLink, Stats,
    StatsQuery, VisitStore, ALL_LINKS, SQLITE_ROWS_PER_STATEMENT,
};
use crate::storage::{Backend, StorageError, StorageResult};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_analytics::{Audience, Visit};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct SqliteVisitStore {
    writer: SqlitePool,
    reader: SqlitePool,
}

impl SqliteVisitStore {
    pub async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> StorageResult<Self> {
        let connect = SqliteConnectOptions::from_str(url)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(acquire_timeout.max(Duration::from_secs(5)));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(acquire_timeout)
            .connect_with(connect.clone())
            .await
            .map_err(StorageError::classify)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(max_connections.clamp(1, 8))
            .acquire_timeout(acquire_timeout)
            .idle_timeout(Some(Duration::from_secs(600)))
            .connect_with(connect.read_only(true))
            .await
            .map_err(StorageError::classify)?;
        Ok(Self { writer, reader })
    }
}

/// `(?, ?, ?), (?, ?, ?)`: `rows` groups of `columns` placeholders.
fn placeholders(rows: usize, columns: usize) -> String {
    let group = format!("({})", vec!["?"; columns].join(", "));
    vec![group; rows].join(", ")
}

/// The text form of `links` timestamps (see storage/sqlite.rs): fixed width, so text order is time.
fn link_ts(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

fn db(error: sqlx::Error) -> StorageError {
    StorageError::classify(error)
}

const VISIT_COLUMNS: &str =
    "event_id, code, visited_at, status, ip, visitor, user_agent, browser, \
     browser_version, os, os_version, device, audience, agent, country, region, city, isp, \
     referrer_host, short_domain, language";

/// Inserts the visits not stored yet; returns the ids of those inserted.
///
/// The whole batch goes in as one JSON text read by `json_each`: one bind and one fixed statement
/// (prepared once, cached by sqlx) instead of 21 binds per visit, each copied into sqlx's worker
/// thread. Binds were most of the cost of the multi-row `VALUES` form. `WHERE true` lets SQLite's
/// parser tell the upsert clause from a join constraint.
async fn insert_visits(
    tx: &mut Transaction<'static, Sqlite>,
    visits: &[Visit],
) -> StorageResult<HashSet<String>> {
    let rows = serde_json::to_string(&VisitRows(visits)).map_err(json_error)?;
    let ids: Vec<String> = sqlx::query_scalar(&format!(
        "INSERT INTO visits ({VISIT_COLUMNS}) \
         SELECT value->>0, value->>1, value->>2, value->>3, value->>4, unhex(value->>5), \
           value->>6, value->>7, value->>8, value->>9, value->>10, value->>11, value->>12, \
           value->>13, value->>14, value->>15, value->>16, value->>17, value->>18, value->>19, \
           value->>20 \
         FROM json_each(?1) WHERE true \
         ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
    ))
    .bind(rows)
    .fetch_all(&mut **tx)
    .await
    .map_err(db)?;
    Ok(ids.into_iter().collect())
}

/// Inserts the (code, visitor, first seen) pairs not yet known (one JSON bind, as visits);
/// returns those that were new.
async fn insert_visitors(
    tx: &mut Transaction<'static, Sqlite>,
    pairs: &[(String, String, i64)],
) -> StorageResult<HashSet<(String, Vec<u8>)>> {
    if pairs.is_empty() {
        return Ok(HashSet::new());
    }
    let rows = serde_json::to_string(pairs).map_err(json_error)?;
    let new = sqlx::query(
        "INSERT INTO link_visitors (code, visitor, first_seen) \
         SELECT value->>0, unhex(value->>1), value->>2 FROM json_each(?1) WHERE true \
         ON CONFLICT (code, visitor) DO NOTHING RETURNING code, visitor",
    )
    .bind(rows)
    .fetch_all(&mut **tx)
    .await
    .map_err(db)?;
    new.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect()
}

/// Encoding strings and integers as JSON cannot fail in practice; reported as the driver would.
fn json_error(error: serde_json::Error) -> StorageError {
    StorageError::Other(sqlx::Error::Encode(Box::new(error)))
}

/// Visits as a JSON array of 21-element arrays, in [`VISIT_COLUMNS`] order (the visitor hash in
/// hex, decoded by `unhex`), written straight from the borrowed visits.
struct VisitRows<'a>(&'a [Visit]);

impl serde::Serialize for VisitRows<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeSeq, SerializeTuple};
        struct Row<'a>(&'a Visit);
        impl serde::Serialize for Row<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let v = self.0;
                let mut t = serializer.serialize_tuple(21)?;
                t.serialize_element(&v.event_id)?;
                t.serialize_element(&v.code)?;
                t.serialize_element(&v.time_ms)?;
                t.serialize_element(&v.status)?;
                t.serialize_element(&v.ip)?;
                t.serialize_element(&v.visitor)?;
                t.serialize_element(&v.user_agent)?;
                t.serialize_element(&v.browser)?;
                t.serialize_element(&v.browser_version)?;
                t.serialize_element(&v.os)?;
                t.serialize_element(&v.os_version)?;
                t.serialize_element(v.device.as_str())?;
                t.serialize_element(v.audience.as_str())?;
                t.serialize_element(&v.agent_label)?;
                t.serialize_element(&v.country)?;
                t.serialize_element(&v.region)?;
                t.serialize_element(&v.city)?;
                t.serialize_element(&v.isp)?;
                t.serialize_element(&v.referrer_host)?;
                t.serialize_element(&v.short_domain)?;
                t.serialize_element(&v.language)?;
                t.end()
            }
        }
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for visit in self.0 {
            seq.serialize_element(&Row(visit))?;
        }
        seq.end()
    }
}

/// One upsert statement for a whole rollup table: each row holds its values in column order (keys,
/// then counters), and they go in as one JSON bind read by `json_each` (see [`insert_visits`]).
/// Counters add up on conflict.
async fn upsert<R: serde::Serialize>(
    tx: &mut Transaction<'static, Sqlite>,
    table: &str,
    key_columns: &[&str],
    counters: &[&str],
    rows: &[R],
) -> StorageResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let columns: Vec<&str> = key_columns.iter().chain(counters).copied().collect();
    let values: Vec<String> = (0..columns.len()).map(|i| format!("value->>{i}")).collect();
    let updates: Vec<String> = counters
        .iter()
        .map(|c| format!("{c} = {c} + excluded.{c}"))
        .collect();
    let sql = format!(
        "INSERT INTO {table} ({}) SELECT {} FROM json_each(?1) WHERE true \
         ON CONFLICT ({}) DO UPDATE SET {}",
        columns.join(", "),
        values.join(", "),
        key_columns.join(", "),
        updates.join(", ")
    );
    let json = serde_json::to_string(rows).map_err(json_error)?;
    sqlx::query(&sql)
        .bind(json)
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    Ok(())
}

fn counts(row: &SqliteRow, from: usize) -> StorageResult<Counts> {
    Ok(Counts {
        humans: row.try_get(from)?,
        bots: row.try_get(from + 1)?,
        previews: row.try_get(from + 2)?,
        new_visitors: row.try_get(from + 3)?,
    })
}

impl SqliteVisitStore {
    /// The query's non-empty buckets, in order.
    async fn buckets(&self, q: &StatsQuery) -> StorageResult<Vec<(i64, Counts)>> {
        let code = q.code.as_deref().unwrap_or(ALL_LINKS);
        let span = q.interval.seconds();
        let rows = sqlx::query(
            "SELECT bucket, humans, bots, previews, new_visitors FROM visit_buckets \
             WHERE code = ?1 AND span = ?2 AND bucket >= ?3 AND bucket < ?4 ORDER BY bucket",
        )
        .bind(code)
        .bind(span)
        .bind(q.from)
        .bind(q.to)
        .fetch_all(&self.reader)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| Ok((row.try_get::<i64, _>(0)?, counts(row, 1)?)))
            .collect()
    }

    /// One breakdown over the whole days covering the query, from its daily rollup table.
    async fn breakdown(&self, q: &StatsQuery, dimension: Dimension) -> StorageResult<Vec<Entry>> {
        let code = q.code.as_deref().unwrap_or(ALL_LINKS);
        let (day_from, day_to) = breakdown_days(q);
        let (table, column) = dimension.source();
        let rank = dimension.rank(q.include_bots);
        let machines_only = if dimension == Dimension::Agent {
            "AND agent <> ''"
        } else {
            ""
        };
        let rows = sqlx::query(&format!(
            "SELECT {column}, SUM(humans), SUM(bots), SUM(previews) \
             FROM {table} WHERE code = ?1 AND day >= ?2 AND day < ?3 {machines_only} \
             GROUP BY {column} HAVING {rank} > 0 ORDER BY {rank} DESC, {column} = '', {column} LIMIT ?4"
        ))
        .bind(code)
        .bind(day_from)
        .bind(day_to)
        .bind(i64::from(q.top))
        .fetch_all(&self.reader)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let value: String = row.try_get(0)?;
                Ok(Entry {
                    value: (!value.is_empty()).then_some(value),
                    humans: row.try_get(1)?,
                    bots: row.try_get(2)?,
                    previews: row.try_get(3)?,
                })
            })
            .collect()
    }

    /// All-links queries: the links with the most clicks over the range.
    async fn top_links(&self, q: &StatsQuery) -> StorageResult<Vec<(String, Counts)>> {
        let span = q.interval.seconds();
        let rank = Dimension::Browser.rank(q.include_bots);
        let rows = sqlx::query(&format!(
            "SELECT code, SUM(humans), SUM(bots), SUM(previews), SUM(new_visitors) FROM visit_buckets \
             WHERE span = ?1 AND bucket >= ?2 AND bucket < ?3 AND code <> '*' \
             GROUP BY code HAVING {rank} > 0 ORDER BY {rank} DESC, code LIMIT ?4"
        ))
        .bind(span)
        .bind(q.from)
        .bind(q.to)
        .bind(i64::from(q.top))
        .fetch_all(&self.reader)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| Ok((row.try_get(0)?, counts(row, 1)?)))
            .collect()
    }
}

#[async_trait]
impl VisitStore for SqliteVisitStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn store_batch(&self, visits: &[Visit], count_bots: bool) -> StorageResult<BatchOutcome> {
        if visits.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db)?;
        let mut ids = insert_visits(&mut tx, visits).await?;
        // `remove`: an id twice in one batch counts once.
        let inserted: Vec<&Visit> = visits.iter().filter(|v| ids.remove(&v.event_id)).collect();
        // The first visit of each (link, person) in this batch; visitor hashes stay hex for JSON.
        let mut first_seen: HashMap<(&str, &str), i64> = HashMap::new();
        for v in inserted.iter().filter(|v| v.audience == Audience::Human) {
            first_seen
                .entry((v.code.as_str(), v.visitor.as_str()))
                .or_insert(v.time_ms);
        }
        let mut pairs: Vec<(String, String, i64)> = first_seen
            .into_iter()
            .map(|((code, visitor), at)| (code.to_owned(), visitor.to_owned(), at))
            .collect();
        pairs.sort();
        let new_visitors = insert_visitors(&mut tx, &pairs).await?;
        let d = deltas(&inserted, &new_visitors, count_bots);

        upsert(
            &mut tx,
            "visit_buckets",
            &["code", "span", "bucket"],
            &["humans", "bots", "previews", "new_visitors"],
            &d.buckets
                .iter()
                .map(|((code, span, bucket), c)| {
                    (
                        code,
                        span,
                        bucket,
                        c.humans,
                        c.bots,
                        c.previews,
                        c.new_visitors,
                    )
                })
                .collect::<Vec<_>>(),
        )
        .await?;
        let audience_counters = ["humans", "bots", "previews"];
        upsert(
            &mut tx,
            "visit_agents",
            &["code", "day", "browser", "os", "device", "agent"],
            &audience_counters,
            &d.agents
                .iter()
                .map(|((code, day, browser, os, device, agent), a)| {
                    (
                        code, day, browser, os, device, agent, a.humans, a.bots, a.previews,
                    )
                })
                .collect::<Vec<_>>(),
        )
        .await?;
        upsert(
            &mut tx,
            "visit_places",
            &["code", "day", "country", "region", "city"],
            &audience_counters,
            &d.places
                .iter()
                .map(|((code, day, country, region, city), a)| {
                    (
                        code, day, country, region, city, a.humans, a.bots, a.previews,
                    )
                })
                .collect::<Vec<_>>(),
        )
        .await?;
        upsert(
            &mut tx,
            "visit_sources",
            &["code", "day", "referrer_host", "short_domain"],
            &audience_counters,
            &d.sources
                .iter()
                .map(|((code, day, referrer, domain), a)| {
                    (code, day, referrer, domain, a.humans, a.bots, a.previews)
                })
                .collect::<Vec<_>>(),
        )
        .await?;
        let links: Vec<(&String, &(i64, i64))> = d.links.iter().collect();
        for chunk in links.chunks(SQLITE_ROWS_PER_STATEMENT) {
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
        tx.commit().await.map_err(db)?;
        let inserted = inserted.len() as u64;
        Ok(BatchOutcome {
            inserted,
            duplicates: visits.len() as u64 - inserted,
        })
    }

    async fn stats(&self, q: &StatsQuery) -> StorageResult<Stats> {
        // The series, the nine breakdowns and the top links are independent reads of small rollup
        // tables: run them at once on several pool connections, so the answer takes about as long
        // as the slowest query rather than the sum of eleven.
        let breakdowns =
            futures_util::future::try_join_all(Dimension::ALL.map(|dimension| async move {
                Ok::<_, StorageError>((dimension, self.breakdown(q, dimension).await?))
            }));
        let top_links = async {
            match q.code {
                Some(_) => Ok(Vec::new()),
                None => self.top_links(q).await,
            }
        };
        let (sparse, breakdowns, top_links) =
            tokio::try_join!(self.buckets(q), breakdowns, top_links)?;
        let mut stats = Stats::default();
        for (_, c) in &sparse {
            stats.totals.add(c);
        }
        stats.series = dense_series(q, sparse);
        stats.breakdowns = breakdowns;
        stats.top_links = top_links;
        Ok(stats)
    }

    async fn idle_links(
        &self,
        now: DateTime<Utc>,
        idle_since: DateTime<Utc>,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<IdleLink>> {
        let ts = |at: DateTime<Utc>| link_ts(at.timestamp_millis());
        let rows = sqlx::query(
            "SELECT code FROM links \
             WHERE revoked_at IS NULL AND COALESCE(last_visit_at, created_at) < ?1 \
               AND (expires_at IS NULL OR expires_at > ?2) AND code > ?3 \
             ORDER BY code LIMIT ?4",
        )
        .bind(ts(idle_since))
        .bind(ts(now))
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                Ok(IdleLink {
                    code: row.try_get(0)?,
                })
            })
            .collect()
    }

    async fn delete_visits_before(&self, before: DateTime<Utc>, limit: u32) -> StorageResult<u64> {
        let done = sqlx::query(
            "DELETE FROM visits WHERE rowid IN \
             (SELECT rowid FROM visits WHERE visited_at < ?1 LIMIT ?2)",
        )
        .bind(before.timestamp_millis())
        .bind(i64::from(limit))
        .execute(&self.writer)
        .await
        .map_err(db)?;
        Ok(done.rows_affected())
    }

    async fn visit_rows(&self) -> StorageResult<i64> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM visits")
            .fetch_one(&self.reader)
            .await
            .map_err(db)?)
    }
}
