//! The [`VisitStore`] of every SQL backend, written once: the stats, breakdowns, top links, idle
//! links, first visits, clicks per domain and cleanup are the same statements everywhere (written
//! with `?`, rendered with each database's placeholders, sums cast to the dialect's 64-bit type).
//! A backend's [`VisitDialect`] holds only what differs: how visit times are stored, the idle-link
//! and bounded-delete statements, and the batch write.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value, IN_LIST};
use shortlink_store::{Backend, StorageError, StorageResult};
use shortlink_visit_enrich::Visit;
use shortlink_visits::conversions::ConversionStore;
use shortlink_visits::deliveries::model::{DeliveryState, MessageRow, Receipt, UpsertedMessage};
use shortlink_visits::deliveries::{
    CallbackTokenStore, DeliveryStore, FunnelStore, GatewayStore, MessageStateStore, SendQueueStore,
};
use shortlink_visits::domain_chart::DomainChartStore;
use shortlink_visits::hindsight::{Correction, LinkFacts};
use shortlink_visits::orphans::OrphanStore;
use shortlink_visits::retention::RetentionStore;
use shortlink_visits::rollup::{all_links_code, AllLinks, Counts, ALL_LINKS};
use shortlink_visits::store::DayPartitions;
use shortlink_visits::store::{
    breakdown_days, rank_breakdowns, BatchOutcome, Dimension, Entry, GroupRow, IdleLink, RuleEntry,
    StatsQuery, VisitStore,
};
use shortlink_visits::subjects::SubjectStore;
use sqlx::{Database, Pool, Transaction};
use std::collections::HashSet;

type Row<V> = <<<V as VisitDialect>::Sql as Dialect>::DB as Database>::Row;
type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// What one backend's visit store does its own way.
#[async_trait]
pub trait VisitDialect: Send + Sync + 'static {
    /// The link storage's dialect: placeholders, text and time of `links`, the 64-bit type.
    type Sql: Dialect;

    /// The live links idle since `?`: a condition on `links` (MariaDB: an indexed virtual column).
    const IDLE_SINCE: &'static str =
        "revoked_at IS NULL AND COALESCE(last_visit_at, created_at) < ?";

    /// Deletes at most `?` (the second value) raw visits before `?` (the first).
    const DELETE_VISITS_BEFORE: &'static str;

    /// A time of `visits` or `link_visitors` as stored (SQLite: Unix milliseconds).
    fn visit_time(at: DateTime<Utc>) -> Value {
        Value::Time(at)
    }

    fn read_visit_time(row: &Row<Self>, column: &str) -> StorageResult<DateTime<Utc>> {
        <Self::Sql as Dialect>::read_time(row, column)
    }

    /// What a read of `columns` of the raw visits made from `first` to `last` (both included)
    /// reads instead of `visits`; `None` for `visits`. PostgreSQL names the partitions of a day
    /// or two (`postgres/named.rs`).
    async fn visits_between(
        &self,
        _reader: &Pool<Db<Self>>,
        _first: DateTime<Utc>,
        _last: DateTime<Utc>,
        _columns: &str,
    ) -> StorageResult<Option<String>> {
        Ok(None)
    }

    /// A read of [`VisitDialect::visits_between`]'s answer found a table gone: ask anew next time.
    fn forget_days(&self) {}

    /// The store as its raw visits' day partitions, on a backend that keeps them (PostgreSQL).
    fn day_partitions(_store: &SqlVisitStore<Self>) -> Option<&dyn DayPartitions>
    where
        Self: Sized,
    {
        None
    }

    /// `count` delivery receipts were stored (a chunk committed): PostgreSQL gives the delivery
    /// tables their first statistics here (`postgres/young.rs`); the others plan well without.
    async fn receipts_stored(&self, _writer: &Pool<Db<Self>>, _count: usize) {}

    /// Inserts a chunk's receipts not stored yet in one statement that answers which went in
    /// (PostgreSQL, `postgres/receipts.rs`). `None`: the backend reads the stored ones first
    /// instead (`deliveries/chunk.rs`) and has no [`VisitDialect::upsert_messages`] either.
    async fn insert_receipts(
        &self,
        _tx: &mut Transaction<'static, Db<Self>>,
        _workspace: WorkspaceId,
        _receipts: &[Receipt],
    ) -> StorageResult<Option<HashSet<(String, DeliveryState)>>> {
        Ok(None)
    }

    /// Inserts or supersedes messages' rows in one statement, answering each row after it
    /// (where [`VisitDialect::insert_receipts`] answers).
    async fn upsert_messages(
        &self,
        _tx: &mut Transaction<'static, Db<Self>>,
        _workspace: WorkspaceId,
        _messages: &[MessageRow],
    ) -> StorageResult<Vec<UpsertedMessage>> {
        Err(StorageError::NotYet("a messages' upsert on this backend"))
    }

    /// Stores a batch and applies its corrections in one transaction on `writer`
    /// ([`VisitStore::store_corrected`], `corrections.rs`).
    async fn store_batch(
        &self,
        writer: &Pool<Db<Self>>,
        visits: &[Visit],
        corrections: &[Correction],
        all_links: &AllLinks,
        count_bots: bool,
    ) -> StorageResult<BatchOutcome>;
}

/// Visits in a SQL database. Writes go to `writer`, reads to `reader`: the same pool except on
/// SQLite, whose one writer is shared with the link store ([`shortlink_store::sqlite_file`]).
pub struct SqlVisitStore<V: VisitDialect> {
    pub dialect: V,
    pub writer: Pool<Db<V>>,
    pub reader: Pool<Db<V>>,
}

/// A driver error sorted as the link storage sorts its own.
pub(crate) fn db(error: sqlx::Error) -> StorageError {
    StorageError::classify(error)
}

/// SQLSTATE of a statement naming a table that does not exist (PostgreSQL).
pub(crate) const UNDEFINED_TABLE: &str = "42P01";

/// `?, ?, ...` for `n` values.
pub(crate) fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// Every row `query` returns, on a connection of `pool`.
pub(crate) async fn fetch_all<V: VisitDialect>(
    pool: &Pool<Db<V>>,
    query: Statement,
) -> StorageResult<Vec<Row<V>>> {
    let mut connection = pool.acquire().await.map_err(db)?;
    Db::<V>::fetch_all(&mut connection, query).await.map_err(db)
}

/// Runs `query` on a connection of `pool`; the rows it changed.
pub(crate) async fn execute<V: VisitDialect>(
    pool: &Pool<Db<V>>,
    query: Statement,
) -> StorageResult<u64> {
    let mut connection = pool.acquire().await.map_err(db)?;
    Db::<V>::execute(&mut connection, query).await.map_err(db)
}

impl<V: VisitDialect> SqlVisitStore<V> {
    /// The rows of the statement `query` writes over `visits` (the name it is given, to be
    /// aliased: `FROM {visits} AS v`) when it reads only visits made from `first` to `last`
    /// (both included), on the reader: what [`VisitDialect::visits_between`] names, or the
    /// table. A named table gone meanwhile (a day dropped by another sidecar's cleanup) fails
    /// the statement as undefined: it is then run on the table.
    pub async fn rows_between(
        &self,
        first: DateTime<Utc>,
        last: DateTime<Utc>,
        columns: &str,
        query: impl Fn(&str) -> Statement,
    ) -> StorageResult<Vec<Row<V>>> {
        let named = (self.dialect)
            .visits_between(&self.reader, first, last, columns)
            .await?;
        if let Some(source) = named {
            let mut connection = self.reader.acquire().await.map_err(db)?;
            match Db::<V>::fetch_all(&mut connection, query(&source)).await {
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(UNDEFINED_TABLE) => {
                    self.dialect.forget_days();
                }
                rows => return rows.map_err(db),
            }
        }
        self.rows(&self.reader, query("visits")).await
    }

    async fn rows(&self, pool: &Pool<Db<V>>, query: Statement) -> StorageResult<Vec<Row<V>>> {
        fetch_all::<V>(pool, query).await
    }

    fn counts(row: &Row<V>) -> StorageResult<Counts> {
        Ok(Counts {
            humans: Db::<V>::int(row, "humans")?,
            bots: Db::<V>::int(row, "bots")?,
            previews: Db::<V>::int(row, "previews")?,
            scanners: Db::<V>::int(row, "scanners")?,
            new_visitors: Db::<V>::int(row, "new_visitors")?,
        })
    }

    /// Whether the installation has no workspace but the default, and never had one (the usual
    /// case: then no rollup needs to know whose a link is, and no code can be a deleted
    /// workspace's). A deleted workspace's audit head stays (docs/SECURITY.md), and every
    /// workspace that ever had a link or a key has one: so "never had" is one indexed read too.
    async fn only_default_workspace(&self) -> StorageResult<bool> {
        let others = Statement::new(
            "SELECT id FROM workspaces WHERE id <> 1 \
             UNION ALL SELECT workspace_id FROM audit_heads WHERE workspace_id > 1 LIMIT 1",
        );
        Ok(self.rows(&self.reader, others).await?.is_empty())
    }

    /// Where the batch's links are summed for all links (issue 53), and the codes of the batch
    /// that no link holds (issue 66): asked of the links only while the installation has, or
    /// had, a workspace besides the default. A code without a link there is a deleted
    /// workspace's (a click still in the stream, a worker's spool or its cache when the delete
    /// ran), or a record SQL never had: its visits belong to nobody, and counting them as
    /// `default`'s (whose all-links rows and feed take every code no other workspace claims)
    /// would hand another brand's clicks to it.
    async fn owners(&self, visits: &[Visit]) -> StorageResult<(AllLinks, HashSet<String>)> {
        let mut all_links = AllLinks::default();
        if self.only_default_workspace().await? {
            return Ok((all_links, HashSet::new()));
        }
        let mut unowned: HashSet<String> =
            (visits.iter()).map(|visit| visit.code.clone()).collect();
        let codes: Vec<String> = unowned.iter().cloned().collect();
        for chunk in codes.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT code, workspace_id FROM links WHERE code IN ({})",
                    vec!["?"; chunk.len()].join(", ")
                ),
                chunk.iter().map(|code| Value::Text(code.clone())),
            );
            for row in self.rows(&self.reader, query).await? {
                let workspace = WorkspaceId::from_db(Db::<V>::int(&row, "workspace_id")?);
                let code = V::Sql::read_text(&row, "code")?;
                unowned.remove(&code);
                all_links.insert(code, workspace);
            }
        }
        Ok((all_links, unowned))
    }

    /// The batch with the addresses of the visits of workspaces that truncate them (their
    /// retention policy's `anonymize_ip`, issue 56) truncated, as `--anonymize-ip` does for
    /// every visit; `None` when no workspace asks for it (one indexed read per batch). The
    /// visitor hash stays the full address's, as with the flag.
    async fn truncated(
        &self,
        visits: &[Visit],
        all_links: &AllLinks,
    ) -> StorageResult<Option<Vec<Visit>>> {
        let query = Statement::new(
            "SELECT workspace_id FROM retention_policies WHERE campaign = '' AND anonymize_ip = 1",
        );
        let keys: std::collections::HashSet<String> = (self.rows(&self.reader, query).await?)
            .iter()
            .map(|row| {
                let workspace = WorkspaceId::from_db(Db::<V>::int(row, "workspace_id")?);
                Ok(all_links_code(workspace).into_owned())
            })
            .collect::<StorageResult<_>>()?;
        if keys.is_empty() {
            return Ok(None);
        }
        // An address that does not parse is not kept at all rather than kept whole.
        let truncate = |ip: &str| {
            (ip.parse().ok())
                .map(|ip| shortlink_visit_enrich::privacy::anonymize_ip(ip).to_string())
        };
        Ok(Some(
            (visits.iter())
                .map(|visit| {
                    let mut visit = visit.clone();
                    if keys.contains(all_links.key(&visit.code)) {
                        visit.ip = visit.ip.as_deref().and_then(truncate);
                    }
                    visit
                })
                .collect(),
        ))
    }

    /// `CAST(SUM(c) AS <64-bit>) AS c` for each of `columns`.
    fn sums(columns: &[&str]) -> String {
        let sums: Vec<String> = columns
            .iter()
            .map(|c| format!("CAST(SUM({c}) AS {}) AS {c}", V::Sql::BIGINT))
            .collect();
        sums.join(", ")
    }
}

#[async_trait]
impl<V: VisitDialect> VisitStore for SqlVisitStore<V> {
    fn backend(&self) -> Backend {
        V::Sql::BACKEND
    }

    async fn store_corrected(
        &self,
        visits: &[Visit],
        corrections: &[Correction],
        count_bots: bool,
    ) -> StorageResult<BatchOutcome> {
        if visits.is_empty() && corrections.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let (all_links, unowned) = self.owners(visits).await?;
        let all = visits.len();
        let owned: Option<Vec<Visit>> = (!unowned.is_empty()).then(|| {
            (visits.iter())
                .filter(|visit| !unowned.contains(&visit.code))
                .cloned()
                .collect()
        });
        let visits = owned.as_deref().unwrap_or(visits);
        let dropped = (all - visits.len()) as u64;
        if visits.is_empty() && corrections.is_empty() {
            return Ok(BatchOutcome {
                unowned: dropped,
                ..BatchOutcome::default()
            });
        }
        let truncated = self.truncated(visits, &all_links).await?;
        let visits = truncated.as_deref().unwrap_or(visits);
        let mut outcome = self
            .dialect
            .store_batch(&self.writer, visits, corrections, &all_links, count_bots)
            .await?;
        outcome.unowned = dropped;
        Ok(outcome)
    }

    async fn link_facts(&self, codes: &[&str]) -> StorageResult<LinkFacts> {
        self.facts_of(codes).await
    }

    async fn campaign_counts(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
    ) -> StorageResult<Counts> {
        let columns = ["humans", "bots", "previews", "scanners", "new_visitors"];
        let sums: Vec<String> = (columns.iter())
            .map(|c| format!("CAST(COALESCE(SUM({c}), 0) AS {}) AS {c}", V::Sql::BIGINT))
            .collect();
        // The daily rows of the campaign's links (the links' campaign index narrows them).
        let query = statement(
            &format!(
                "SELECT {} FROM visit_buckets WHERE span = ? AND code IN \
                 (SELECT code FROM links WHERE workspace_id = ? AND campaign = ?)",
                sums.join(", ")
            ),
            [
                Value::Int(shortlink_visits::rollup::Interval::Day.seconds()),
                Value::Int(workspace.get()),
                Value::Text(campaign.to_owned()),
            ],
        );
        match self.rows(&self.reader, query).await?.first() {
            Some(row) => Self::counts(row),
            None => Ok(Counts::default()),
        }
    }

    /// The query's non-empty buckets, in order.
    async fn buckets(&self, q: &StatsQuery) -> StorageResult<Vec<(i64, Counts)>> {
        let all_links = all_links_code(q.workspace);
        let code = q.code.as_deref().unwrap_or(&all_links);
        let query = statement(
            "SELECT bucket, humans, bots, previews, scanners, new_visitors FROM visit_buckets \
             WHERE code = ? AND span = ? AND bucket >= ? AND bucket < ? ORDER BY bucket",
            [
                Value::Text(code.to_owned()),
                Value::Int(q.interval.seconds()),
                Value::Int(q.from),
                Value::Int(q.to),
            ],
        );
        (self.rows(&self.reader, query).await?.iter())
            .map(|row| Ok((Db::<V>::int(row, "bucket")?, Self::counts(row)?)))
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
        let all_links = all_links_code(q.workspace);
        let code = q.code.as_deref().unwrap_or(&all_links);
        let (day_from, day_to) = breakdown_days(q);
        let columns: Vec<&str> = dimensions.iter().map(|d| d.source().1).collect();
        let query = statement(
            &format!(
                "SELECT {}, {} FROM {table} WHERE code = ? AND day >= ? AND day < ? GROUP BY {}",
                columns.join(", "),
                Self::sums(&["humans", "bots", "previews", "scanners"]),
                columns.join(", "),
            ),
            [
                Value::Text(code.to_owned()),
                Value::Int(day_from),
                Value::Int(day_to),
            ],
        );
        let rows = (self.rows(&self.reader, query).await?.iter())
            .map(|row| {
                Ok(GroupRow {
                    values: (columns.iter())
                        .map(|c| V::Sql::read_text(row, c))
                        .collect::<StorageResult<_>>()?,
                    humans: Db::<V>::int(row, "humans")?,
                    bots: Db::<V>::int(row, "bots")?,
                    previews: Db::<V>::int(row, "previews")?,
                    scanners: Db::<V>::int(row, "scanners")?,
                })
            })
            .collect::<StorageResult<Vec<_>>>()?;
        Ok(rank_breakdowns(dimensions, &rows, q.include_bots, q.top))
    }

    /// All-links queries: the links with the most clicks over the range.
    async fn top_links(&self, q: &StatsQuery) -> StorageResult<Vec<(String, Counts)>> {
        let shared = !self.only_default_workspace().await?;
        let rank = if q.include_bots {
            "SUM(humans) + SUM(bots) + SUM(previews) + SUM(scanners)"
        } else {
            "SUM(humans)"
        };
        let query = statement(
            &format!(
                "SELECT code, {} FROM visit_buckets \
                 WHERE span = ? AND bucket >= ? AND bucket < ? AND code NOT LIKE '{ALL_LINKS}%'{} \
                 GROUP BY code HAVING {rank} > 0 ORDER BY {rank} DESC, code LIMIT ?",
                Self::sums(&["humans", "bots", "previews", "scanners", "new_visitors"]),
                // Only the workspace's links; nothing to leave out while it is the only one.
                match shared {
                    false => "",
                    true => " AND code IN (SELECT code FROM links WHERE workspace_id = ?)",
                },
            ),
            [q.interval.seconds(), q.from, q.to]
                .into_iter()
                .chain(shared.then_some(q.workspace.get()))
                .chain([i64::from(q.top)])
                .map(Value::Int),
        );
        (self.rows(&self.reader, query).await?.iter())
            .map(|row| Ok((V::Sql::read_text(row, "code")?, Self::counts(row)?)))
            .collect()
    }

    async fn idle_links(
        &self,
        now: DateTime<Utc>,
        idle_since: DateTime<Utc>,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<IdleLink>> {
        let query = statement(
            &format!(
                "SELECT code, workspace_id FROM links WHERE {} \
                   AND (expires_at IS NULL OR expires_at > ?) AND code > ? \
                 ORDER BY code LIMIT ?",
                V::IDLE_SINCE
            ),
            [
                V::Sql::time(idle_since),
                V::Sql::time(now),
                Value::Text(after.unwrap_or("").to_owned()),
                Value::Int(i64::from(limit)),
            ],
        );
        (self.rows(&self.reader, query).await?.iter())
            .map(|row| {
                Ok(IdleLink {
                    code: V::Sql::read_text(row, "code")?,
                    workspace: WorkspaceId::from_db(<V::Sql as Dialect>::DB::int(
                        row,
                        "workspace_id",
                    )?),
                })
            })
            .collect()
    }

    async fn delete_visits_before(&self, before: DateTime<Utc>, limit: u32) -> StorageResult<u64> {
        let query = statement(
            V::DELETE_VISITS_BEFORE,
            [V::visit_time(before), Value::Int(i64::from(limit))],
        );
        let mut connection = self.writer.acquire().await.map_err(db)?;
        Db::<V>::execute(&mut connection, query).await.map_err(db)
    }

    async fn prune_feed(&self, before_ms: i64) -> StorageResult<u64> {
        let query = statement(
            "DELETE FROM visit_feed WHERE committed_ms < ?",
            [Value::Int(before_ms)],
        );
        let mut connection = self.writer.acquire().await.map_err(db)?;
        Db::<V>::execute(&mut connection, query).await.map_err(db)
    }

    async fn first_visits(&self, codes: &[String]) -> StorageResult<Vec<(String, DateTime<Utc>)>> {
        let mut first = Vec::with_capacity(codes.len());
        for chunk in codes.chunks(IN_LIST) {
            let query = statement(
                &format!(
                    "SELECT code, MIN(first_seen) AS first FROM link_visitors \
                     WHERE code IN ({}) GROUP BY code",
                    vec!["?"; chunk.len()].join(", ")
                ),
                chunk.iter().cloned().map(Value::Text),
            );
            for row in self.rows(&self.reader, query).await? {
                first.push((
                    V::Sql::read_text(&row, "code")?,
                    V::read_visit_time(&row, "first")?,
                ));
            }
        }
        Ok(first)
    }

    async fn clicks_by_domain(&self, since: DateTime<Utc>) -> StorageResult<Vec<(String, i64)>> {
        let query = statement(
            &format!(
                "SELECT short_domain, {} FROM domain_clicks WHERE minute >= ? \
                 GROUP BY short_domain",
                Self::sums(&["humans"])
            ),
            [Value::Int(minute_of(since))],
        );
        (self.rows(&self.reader, query).await?.iter())
            .map(|row| {
                Ok((
                    V::Sql::read_text(row, "short_domain")?,
                    Db::<V>::int(row, "humans")?,
                ))
            })
            .collect()
    }

    async fn forget_domain_clicks_before(&self, before: DateTime<Utc>) -> StorageResult<u64> {
        let query = statement(
            "DELETE FROM domain_clicks WHERE minute < ?",
            [Value::Int(minute_of(before))],
        );
        let mut connection = self.writer.acquire().await.map_err(db)?;
        Db::<V>::execute(&mut connection, query).await.map_err(db)
    }

    async fn rule_breakdown(&self, q: &StatsQuery) -> StorageResult<Vec<RuleEntry>> {
        let Some(code) = &q.code else {
            return Ok(Vec::new());
        };
        let time = |unix: i64| DateTime::from_timestamp(unix, 0).unwrap_or_default();
        let (from, to) = (time(q.from), time(q.to));
        let audience = if q.include_bots {
            ""
        } else {
            " AND audience = 'human'"
        };
        let query = |visits: &str| {
            statement(
                &format!(
                    "SELECT rule, COUNT(*) AS clicks, COUNT(DISTINCT visitor) AS visitors \
                     FROM {visits} AS v \
                     WHERE code = ? AND visited_at >= ? AND visited_at < ?{audience} GROUP BY rule"
                ),
                [
                    Value::Text(code.clone()),
                    V::visit_time(from),
                    V::visit_time(to),
                ],
            )
        };
        // The last instant before `to` PostgreSQL stores (microseconds): which days are read.
        let last = to - chrono::Duration::microseconds(1);
        let columns = "code, visited_at, audience, rule, visitor";
        let rows = self.rows_between(from, last, columns, query).await?;
        let mut entries = (rows.iter())
            .map(|row| {
                Ok(RuleEntry {
                    rule: V::Sql::read_opt_text(row, "rule")?,
                    clicks: Db::<V>::int(row, "clicks")?,
                    unique_visitors: Db::<V>::int(row, "visitors")?,
                })
            })
            .collect::<StorageResult<Vec<_>>>()?;
        // The own target first, then rules in their order (backends sort NULL differently).
        entries.sort_by_key(|entry| {
            let chosen = entry
                .rule
                .as_deref()
                .and_then(|text| shortlink_wire::event::parse_chosen(text.as_bytes()));
            chosen.map(|c| (c.rule, c.variant))
        });
        Ok(entries)
    }

    fn conversions(&self) -> &dyn ConversionStore {
        self
    }
    fn deliveries(&self) -> &dyn DeliveryStore {
        self
    }
    fn funnels(&self) -> &dyn FunnelStore {
        self
    }
    fn message_states(&self) -> &dyn MessageStateStore {
        self
    }
    fn gateways(&self) -> &dyn GatewayStore {
        self
    }
    fn send_queue(&self) -> &dyn SendQueueStore {
        self
    }
    fn callback_tokens(&self) -> &dyn CallbackTokenStore {
        self
    }
    fn retention(&self) -> &dyn RetentionStore {
        self
    }
    fn domain_charts(&self) -> &dyn DomainChartStore {
        self
    }
    fn orphans(&self) -> &dyn OrphanStore {
        self
    }
    fn subjects(&self) -> &dyn SubjectStore {
        self
    }
    fn day_partitions(&self) -> Option<&dyn DayPartitions> {
        V::day_partitions(self)
    }

    async fn visit_rows(&self) -> StorageResult<i64> {
        let query = Statement::new("SELECT COUNT(*) AS n FROM visits");
        let rows = self.rows(&self.reader, query).await?;
        match rows.first() {
            Some(row) => Ok(Db::<V>::int(row, "n")?),
            None => Ok(0),
        }
    }
}

/// The start of the minute holding `at`, in Unix seconds: the key of `domain_clicks`.
fn minute_of(at: DateTime<Utc>) -> i64 {
    let seconds = at.timestamp();
    seconds - seconds.rem_euclid(60)
}
