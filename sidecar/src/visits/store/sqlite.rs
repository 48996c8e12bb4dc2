//! SQLite visit store. Writes go through the one write connection the link store uses too (SQLite
//! has one writer) and start with `BEGIN IMMEDIATE`; a link write queues behind the visit
//! transaction in progress (16,000 visits hold it for a few hundred milliseconds). Multi-row `VALUES`
//! statements in a few fixed sizes ([`sqlite_chunks`]), kept prepared.

use super::{
    breakdown_days, deltas, rank_breakdowns, sqlite_chunks, visitor_bytes, BatchOutcome, Counts,
    Dimension, Entry, GroupRow, IdleLink, StatsQuery, VisitStore, ALL_LINKS,
};
use crate::storage::{sqlite_file, Backend, StorageError, StorageResult};
use crate::visits::rollup::NewVisitors;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_visit_enrich::{Audience, Visit};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Row, Sqlite, Transaction};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct SqliteVisitStore {
    /// Shared with the link store on the same file, so a create queues behind at most the visit
    /// transaction in progress ([`crate::storage::sqlite_file`]).
    writer: Arc<SqlitePool>,
    reader: SqlitePool,
}

impl SqliteVisitStore {
    pub async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> StorageResult<Self> {
        let connect = sqlite_file::connect_options(url, acquire_timeout)?;
        let writer = sqlite_file::shared_writer(&connect, acquire_timeout).await?;
        let reader =
            sqlite_file::reader(&connect, max_connections.clamp(1, 8), acquire_timeout).await?;
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

/// One multi-row insert of `chunk` into `visits`, ignoring ids already stored; `returning` adds
/// `RETURNING event_id`.
fn visits_insert<'q>(
    sql: &'q str,
    chunk: &[&'q Visit],
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    let mut query = sqlx::query(sql);
    for v in chunk {
        // `&str`, not `&String`: sqlx copies owned strings into its arguments, borrows these.
        let text = |value: &'q Option<String>| value.as_deref();
        query = query
            .bind(v.event_id.as_str())
            .bind(v.code.as_str())
            .bind(v.time_ms)
            .bind(v.status.map(i64::from))
            .bind(text(&v.ip))
            .bind(visitor_bytes(&v.visitor))
            .bind(text(&v.user_agent))
            .bind(text(&v.browser))
            .bind(text(&v.browser_version))
            .bind(text(&v.os))
            .bind(text(&v.os_version))
            .bind(v.device.as_str())
            .bind(v.audience.as_str())
            .bind(text(&v.agent_label))
            .bind(text(&v.country))
            .bind(text(&v.region))
            .bind(text(&v.city))
            .bind(text(&v.isp))
            .bind(text(&v.referrer_host))
            .bind(text(&v.short_domain))
            .bind(text(&v.language));
    }
    query
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
    for chunk in sqlite_chunks(visits) {
        let sql = format!(
            "INSERT INTO visits ({VISIT_COLUMNS}) VALUES {} ON CONFLICT (event_id) DO NOTHING",
            placeholders(chunk.len(), 21)
        );
        sqlx::query("SAVEPOINT visits_chunk")
            .execute(&mut **tx)
            .await
            .map_err(db)?;
        let done = visits_insert(&sql, chunk)
            .execute(&mut **tx)
            .await
            .map_err(db)?;
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
        for row in visits_insert(&returning, chunk)
            .fetch_all(&mut **tx)
            .await
            .map_err(db)?
        {
            ids.insert(row.try_get::<String, _>(0)?);
        }
        inserted.extend(chunk.iter().filter(|v| ids.contains(&v.event_id)));
    }
    Ok(inserted)
}

/// Inserts the (code, visitor) pairs not yet known; returns those that were new.
async fn insert_visitors(
    tx: &mut Transaction<'static, Sqlite>,
    pairs: &[(&str, Vec<u8>, i64)],
) -> StorageResult<NewVisitors> {
    let mut new = NewVisitors::new();
    for chunk in sqlite_chunks(pairs) {
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
            new.entry(row.try_get(0)?)
                .or_default()
                .insert(row.try_get(1)?);
        }
    }
    Ok(new)
}

/// One multi-row upsert per chunk: `rows` yields each row's binds through `bind`.
async fn upsert<K, V>(
    tx: &mut Transaction<'static, Sqlite>,
    table: &str,
    key_columns: &[&str],
    counters: &[&str],
    rows: &std::collections::BTreeMap<K, V>,
    bind: impl for<'q> Fn(
        sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
        &'q K,
        &'q V,
    ) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
) -> StorageResult<()> {
    let columns: Vec<&str> = key_columns.iter().chain(counters).copied().collect();
    let updates: Vec<String> = counters
        .iter()
        .map(|c| format!("{c} = {c} + excluded.{c}"))
        .collect();
    let rows: Vec<(&K, &V)> = rows.iter().collect();
    for chunk in sqlite_chunks(&rows) {
        let sql = format!(
            "INSERT INTO {table} ({}) VALUES {} ON CONFLICT ({}) DO UPDATE SET {}",
            columns.join(", "),
            placeholders(chunk.len(), columns.len()),
            key_columns.join(", "),
            updates.join(", ")
        );
        let mut query = sqlx::query(&sql);
        for (k, v) in chunk {
            query = bind(query, k, v);
        }
        query.execute(&mut **tx).await.map_err(db)?;
    }
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
        // An id twice in one batch is stored and counted once.
        let mut seen = HashSet::with_capacity(visits.len());
        let unique: Vec<&Visit> = visits
            .iter()
            .filter(|v| seen.insert(v.event_id.as_str()))
            .collect();
        let inserted = insert_visits(&mut tx, &unique).await?;
        let mut first_seen: HashMap<(&str, Vec<u8>), i64> = HashMap::new();
        for v in inserted.iter().filter(|v| v.audience == Audience::Human) {
            first_seen
                .entry((v.code.as_str(), visitor_bytes(&v.visitor)))
                .or_insert(v.time_ms);
        }
        let mut pairs: Vec<(&str, Vec<u8>, i64)> = first_seen
            .into_iter()
            .map(|((code, visitor), at)| (code, visitor, at))
            .collect();
        pairs.sort();
        let new_visitors = insert_visitors(&mut tx, &pairs).await?;
        let d = deltas(&inserted, new_visitors, count_bots);

        upsert(
            &mut tx,
            "visit_buckets",
            &["code", "span", "bucket"],
            &["humans", "bots", "previews", "new_visitors"],
            &d.buckets,
            |q, (code, span, bucket), c| {
                q.bind(*code)
                    .bind(span)
                    .bind(bucket)
                    .bind(c.humans)
                    .bind(c.bots)
                    .bind(c.previews)
                    .bind(c.new_visitors)
            },
        )
        .await?;
        let audience_counters = ["humans", "bots", "previews"];
        upsert(
            &mut tx,
            "visit_agents",
            &["code", "day", "browser", "os", "device", "agent"],
            &audience_counters,
            &d.agents,
            |q, (code, day, browser, os, device, agent), a| {
                q.bind(*code)
                    .bind(day)
                    .bind(*browser)
                    .bind(*os)
                    .bind(*device)
                    .bind(*agent)
                    .bind(a.humans)
                    .bind(a.bots)
                    .bind(a.previews)
            },
        )
        .await?;
        upsert(
            &mut tx,
            "visit_places",
            &["code", "day", "country", "region", "city"],
            &audience_counters,
            &d.places,
            |q, (code, day, country, region, city), a| {
                q.bind(*code)
                    .bind(day)
                    .bind(*country)
                    .bind(*region)
                    .bind(*city)
                    .bind(a.humans)
                    .bind(a.bots)
                    .bind(a.previews)
            },
        )
        .await?;
        upsert(
            &mut tx,
            "visit_sources",
            &["code", "day", "referrer_host", "short_domain"],
            &audience_counters,
            &d.sources,
            |q, (code, day, referrer, domain), a| {
                q.bind(*code)
                    .bind(day)
                    .bind(*referrer)
                    .bind(*domain)
                    .bind(a.humans)
                    .bind(a.bots)
                    .bind(a.previews)
            },
        )
        .await?;
        let links: Vec<(&&str, &(i64, i64))> = d.links.iter().collect();
        for chunk in sqlite_chunks(&links) {
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

    /// The breakdowns of one daily rollup table over the whole days covering the query: its rows
    /// summed per combination of dimension values, ranked per dimension in memory.
    async fn breakdowns(
        &self,
        q: &StatsQuery,
        table: &str,
        dimensions: &[Dimension],
    ) -> StorageResult<Vec<(Dimension, Vec<Entry>)>> {
        let code = q.code.as_deref().unwrap_or(ALL_LINKS);
        let (day_from, day_to) = breakdown_days(q);
        let columns: Vec<&str> = dimensions.iter().map(|d| d.source().1).collect();
        let columns = columns.join(", ");
        let n = dimensions.len();
        let rows = sqlx::query(&format!(
            "SELECT {columns}, SUM(humans), SUM(bots), SUM(previews) FROM {table} \
             WHERE code = ?1 AND day >= ?2 AND day < ?3 GROUP BY {columns}"
        ))
        .bind(code)
        .bind(day_from)
        .bind(day_to)
        .fetch_all(&self.reader)
        .await
        .map_err(db)?;
        let rows = rows
            .iter()
            .map(|row| {
                Ok(GroupRow {
                    values: (0..n).map(|i| row.try_get(i)).collect::<Result<_, _>>()?,
                    humans: row.try_get(n)?,
                    bots: row.try_get(n + 1)?,
                    previews: row.try_get(n + 2)?,
                })
            })
            .collect::<StorageResult<Vec<_>>>()?;
        Ok(rank_breakdowns(dimensions, &rows, q.include_bots, q.top))
    }

    /// All-links queries: the links with the most clicks over the range.
    async fn top_links(&self, q: &StatsQuery) -> StorageResult<Vec<(String, Counts)>> {
        let span = q.interval.seconds();
        let rank = if q.include_bots {
            "SUM(humans) + SUM(bots) + SUM(previews)"
        } else {
            "SUM(humans)"
        };
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

    async fn first_visits(&self, codes: &[String]) -> StorageResult<Vec<(String, DateTime<Utc>)>> {
        if codes.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = sqlx::QueryBuilder::<Sqlite>::new(
            "SELECT code, MIN(first_seen) AS first FROM link_visitors WHERE code IN (",
        );
        let mut list = query.separated(", ");
        for code in codes {
            list.push_bind(code);
        }
        query.push(") GROUP BY code");
        let rows: Vec<(String, i64)> = query
            .build_query_as()
            .fetch_all(&self.reader)
            .await
            .map_err(db)?;
        Ok(rows
            .into_iter()
            .filter_map(|(code, ms)| Some((code, DateTime::from_timestamp_millis(ms)?)))
            .collect())
    }

    async fn clicks_by_domain(&self, since: DateTime<Utc>) -> StorageResult<Vec<(String, i64)>> {
        sqlx::query_as(
            "SELECT short_domain, COUNT(*) FROM visits WHERE visited_at >= ?1 \
             AND audience = 'human' AND short_domain IS NOT NULL GROUP BY short_domain",
        )
        .bind(since.timestamp_millis())
        .fetch_all(&self.reader)
        .await
        .map_err(db)
    }

    async fn delete_visits_before(&self, before: DateTime<Utc>, limit: u32) -> StorageResult<u64> {
        let done = sqlx::query(
            "DELETE FROM visits WHERE rowid IN \
             (SELECT rowid FROM visits WHERE visited_at < ?1 LIMIT ?2)",
        )
        .bind(before.timestamp_millis())
        .bind(i64::from(limit))
        .execute(&*self.writer)
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
