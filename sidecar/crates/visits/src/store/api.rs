//! What a visit store is, whatever the backend: the [`VisitStore`] trait, the queries and answers
//! it speaks, and the helpers every backend of `shortlink-visits-sql` shares.

use crate::conversions::ConversionStore;
use crate::deliveries::{
    CallbackTokenStore, DeliveryStore, FunnelStore, GatewayStore, MessageStateStore, SendQueueStore,
};
use crate::domain_chart::DomainChartStore;
use crate::hindsight::{Correction, LinkFacts};
use crate::orphans::OrphanStore;
use crate::retention::RetentionStore;
use crate::rollup::{AllLinks, Audiences, Counts, Folding, Interval, NewVisitors};
use crate::subjects::SubjectStore;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::{Backend, StorageResult};
use shortlink_visit_enrich::Visit;

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Visits inserted (and counted).
    pub inserted: u64,
    /// Visits already stored by an earlier delivery: skipped, not counted again.
    pub duplicates: u64,
    /// Visits of codes no link holds (a deleted workspace's late clicks): dropped, counted
    /// nowhere (issue 66).
    pub unowned: u64,
    /// Stored visits whose verdict a correction changed (and whose counts moved).
    pub reclassified: u64,
}

/// A stats question, with its range already aligned to `interval`.
#[derive(Debug, Clone)]
pub struct StatsQuery {
    /// Whose links: a link's code must be one of its (the caller checked), and "all links" are
    /// its links.
    pub workspace: WorkspaceId,
    /// A link's code, or `None` for all links.
    pub code: Option<String>,
    /// Unix seconds, inclusive; a multiple of the interval.
    pub from: i64,
    /// Unix seconds, exclusive; a multiple of the interval.
    pub to: i64,
    pub interval: Interval,
    /// Count bots, previews and scanners as clicks (in `clicks`, series and breakdowns).
    pub include_bots: bool,
    /// Entries per breakdown (and top links).
    pub top: u32,
}

/// One value of a breakdown with its counts. `value` is `None` for "unknown".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub value: Option<String>,
    pub humans: i64,
    pub bots: i64,
    pub previews: i64,
    pub scanners: i64,
}

/// The dimensions of a breakdown, and where each lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    Browser,
    Os,
    Device,
    /// Which bot or preview fetcher (machines only).
    Agent,
    Country,
    Region,
    City,
    ReferrerHost,
    ShortDomain,
}

impl Dimension {
    pub const ALL: [Dimension; 9] = [
        Dimension::Browser,
        Dimension::Os,
        Dimension::Device,
        Dimension::Agent,
        Dimension::Country,
        Dimension::Region,
        Dimension::City,
        Dimension::ReferrerHost,
        Dimension::ShortDomain,
    ];

    /// (table, column): fixed strings, safe to format into SQL.
    pub fn source(self) -> (&'static str, &'static str) {
        match self {
            Dimension::Browser => ("visit_agents", "browser"),
            Dimension::Os => ("visit_agents", "os"),
            Dimension::Device => ("visit_agents", "device"),
            Dimension::Agent => ("visit_agents", "agent"),
            Dimension::Country => ("visit_places", "country"),
            Dimension::Region => ("visit_places", "region"),
            Dimension::City => ("visit_places", "city"),
            Dimension::ReferrerHost => ("visit_sources", "referrer_host"),
            Dimension::ShortDomain => ("visit_sources", "short_domain"),
        }
    }

    /// How entries of this breakdown are ranked: clicks as the query counts them, except the agent
    /// breakdown, which is about machines and counts everyone whatever `include_bots` says.
    fn rank(self, include_bots: bool, a: &Audiences) -> i64 {
        if self == Dimension::Agent || include_bots {
            a.humans + a.bots + a.previews + a.scanners
        } else {
            a.humans
        }
    }
}

/// The daily breakdown tables and the dimensions each holds. Stats read each table once, grouped
/// by all its dimension columns over the range, and rank every dimension from those rows
/// ([`rank_breakdowns`]): three scans instead of nine, and the rows are few (distinct value
/// combinations in the range: a few hundred for a link with millions of visits).
pub const BREAKDOWN_TABLES: [(&str, &[Dimension]); 3] = [
    (
        "visit_agents",
        &[
            Dimension::Browser,
            Dimension::Os,
            Dimension::Device,
            Dimension::Agent,
        ],
    ),
    (
        "visit_places",
        &[Dimension::Country, Dimension::Region, Dimension::City],
    ),
    (
        "visit_sources",
        &[Dimension::ReferrerHost, Dimension::ShortDomain],
    ),
];

/// One row of a breakdown table summed over a range: its dimension values in the table's column
/// order ('' = unknown), then the counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRow {
    pub values: Vec<String>,
    pub humans: i64,
    pub bots: i64,
    pub previews: i64,
    pub scanners: i64,
}

/// Each dimension's top `top` entries from the grouped rows of its table: summed per value,
/// ranked by [`Dimension::rank`] (entries ranking 0 left out), ties by value with unknown last.
/// The agent breakdown lists machines only (humans have no agent label).
pub fn rank_breakdowns(
    dimensions: &[Dimension],
    rows: &[GroupRow],
    include_bots: bool,
    top: u32,
) -> Vec<(Dimension, Vec<Entry>)> {
    let mut out = Vec::with_capacity(dimensions.len());
    for (column, &dimension) in dimensions.iter().enumerate() {
        let mut sums: std::collections::HashMap<&str, Audiences> = Default::default();
        for row in rows {
            let value = row.values.get(column).map_or("", String::as_str);
            if dimension == Dimension::Agent && value.is_empty() {
                continue;
            }
            let sum = sums.entry(value).or_default();
            sum.humans += row.humans;
            sum.bots += row.bots;
            sum.previews += row.previews;
            sum.scanners += row.scanners;
        }
        let mut ranked: Vec<(i64, &str, Audiences)> = sums
            .into_iter()
            .map(|(value, a)| (dimension.rank(include_bots, &a), value, a))
            .filter(|(rank, _, _)| *rank > 0)
            .collect();
        ranked.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(a.1.is_empty().cmp(&b.1.is_empty()))
                .then(a.1.cmp(b.1))
        });
        ranked.truncate(usize::try_from(top).unwrap_or(usize::MAX));
        let entries = ranked
            .into_iter()
            .map(|(_, value, a)| Entry {
                value: (!value.is_empty()).then(|| value.to_owned()),
                humans: a.humans,
                bots: a.bots,
                previews: a.previews,
                scanners: a.scanners,
            })
            .collect();
        out.push((dimension, entries));
    }
    out
}

/// Answers of one stats query. Series are dense: one entry per bucket of the range, zeros included.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub totals: Counts,
    /// (bucket start in Unix seconds, counts).
    pub series: Vec<(i64, Counts)>,
    pub breakdowns: Vec<(Dimension, Vec<Entry>)>,
    /// All-links queries only: (code, counts), by clicks.
    pub top_links: Vec<(String, Counts)>,
}

/// The clicks a link's click-time rule (or variant) answered over a range, from the raw visits
/// (which carry the rule): the A/B result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleEntry {
    /// `<rule>` or `<rule>.<variant>`; `None` for the link's own target.
    pub rule: Option<String>,
    pub clicks: i64,
    /// Distinct visitors (hash of IP and user agent) among those clicks.
    pub unique_visitors: i64,
}

/// An idle link found by the expiry job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleLink {
    pub code: String,
    pub workspace: shortlink_model::WorkspaceId,
}

#[async_trait]
pub trait VisitStore: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Stores a batch in one transaction: raw visits (insert-or-ignore by event id), then rollups,
    /// visitor sets and link counters for the visits actually inserted. Once the installation
    /// has (or had) a workspace besides the default, visits of codes no link holds are dropped
    /// first ([`BatchOutcome::unowned`]).
    async fn store_batch(&self, visits: &[Visit], count_bots: bool) -> StorageResult<BatchOutcome> {
        self.store_corrected(visits, &[], count_bots).await
    }

    /// [`VisitStore::store_batch`], applying `corrections` to visits stored before in the same
    /// transaction: each moves its visit's counts (rollups, `visit_count`, the A/B arms, the
    /// visitor set) only if the stored visit still has the verdict the correction starts from,
    /// so a correction applied twice (a retried batch, two consumers) moves them once
    /// ([`BatchOutcome::reclassified`]).
    async fn store_corrected(
        &self,
        visits: &[Visit],
        corrections: &[Correction],
        count_bots: bool,
    ) -> StorageResult<BatchOutcome>;

    /// What hindsight reads of `codes` (their campaigns, their messages' hand-offs and
    /// delivery receipts): [`crate::hindsight::Hindsight::judge`].
    async fn link_facts(&self, codes: &[&str]) -> StorageResult<LinkFacts>;

    /// The query's non-empty buckets, in order.
    async fn buckets(&self, query: &StatsQuery) -> StorageResult<Vec<(i64, Counts)>>;

    /// One breakdown table read once over the query's days, grouped by all of `dimensions` and
    /// ranked per dimension.
    async fn breakdowns(
        &self,
        query: &StatsQuery,
        table: &str,
        dimensions: &[Dimension],
    ) -> StorageResult<Vec<(Dimension, Vec<Entry>)>>;

    /// All-links queries: the links with the most clicks in the range.
    async fn top_links(&self, query: &StatsQuery) -> StorageResult<Vec<(String, Counts)>>;

    /// Every visit of `campaign`'s links in `workspace` by verdict (people, previews, scanners,
    /// bots) and their new visitors summed over the links, from the daily rollups, all time:
    /// hindsight's corrections move them as they move a link's.
    async fn campaign_counts(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
    ) -> StorageResult<Counts>;

    /// Rollups of one range: totals, dense series, breakdowns (whole UTC days covering the range)
    /// and, for all links, the top links.
    async fn stats(&self, q: &StatsQuery) -> StorageResult<Stats> {
        // The series, the three breakdown tables and the top links are independent reads of small
        // rollup tables: run them at once on several pool connections, so the answer takes about
        // as long as the slowest query rather than the sum of five.
        let breakdowns = futures_util::future::try_join_all(
            BREAKDOWN_TABLES.map(|(table, dimensions)| self.breakdowns(q, table, dimensions)),
        );
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
        stats.breakdowns = breakdowns.into_iter().flatten().collect();
        stats
            .breakdowns
            .sort_by_key(|(d, _)| Dimension::ALL.iter().position(|all| all == d));
        stats.top_links = top_links;
        Ok(stats)
    }

    /// Live links (not revoked, not expired at `now`) whose last visit, or creation if never
    /// visited, is before `idle_since`; in code order after `after`, at most `limit`.
    async fn idle_links(
        &self,
        now: DateTime<Utc>,
        idle_since: DateTime<Utc>,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<IdleLink>>;

    /// Deletes at most `limit` raw visits older than `before` (and visitor-set rows are kept:
    /// unique counts need them); returns how many went.
    async fn delete_visits_before(&self, before: DateTime<Utc>, limit: u32) -> StorageResult<u64>;

    /// Removes the feed rows committed before `before_ms` (their visits' retention is over).
    async fn prune_feed(&self, before_ms: i64) -> StorageResult<u64>;

    /// The first human visit to each of `codes` that has one (the console's per-recipient "first
    /// click"): from the visitor set, one primary-key range per code.
    async fn first_visits(&self, codes: &[String]) -> StorageResult<Vec<(String, DateTime<Utc>)>>;

    /// Human visits per short domain from the start of the minute holding `since` (the domain
    /// health job's traffic signal), read from the per-minute counts the batch writes keep: a few
    /// rows per domain, whatever the traffic.
    async fn clicks_by_domain(&self, since: DateTime<Utc>) -> StorageResult<Vec<(String, i64)>>;

    /// Drops the per-minute domain counts of the minutes before the one holding `before`.
    async fn forget_domain_clicks_before(&self, before: DateTime<Utc>) -> StorageResult<u64>;

    /// A link's clicks per answering rule (and variant) in the query's range, from the raw
    /// visits: humans only unless the query includes bots. Visits deleted by the retention job
    /// are no longer counted here.
    async fn rule_breakdown(&self, query: &StatsQuery) -> StorageResult<Vec<RuleEntry>>;

    /// Raw visits stored (tests and benchmarks).
    async fn visit_rows(&self) -> StorageResult<i64>;

    // The same database seen through each concern's store. The traits live here, beside the
    // models; their one SQL implementation (`shortlink-visits-sql`) is wired by the binary
    // alone, so an edit to a statement rebuilds that crate and the binary, not the crates that
    // only call these traits (API, webhooks, domain health).

    /// The conversions and their per-arm counts.
    fn conversions(&self) -> &dyn ConversionStore;
    /// The delivery receipts and their messages.
    fn deliveries(&self) -> &dyn DeliveryStore;
    /// The receipts' funnel per campaign, domain and carrier.
    fn funnels(&self) -> &dyn FunnelStore;
    /// The latest state of each message.
    fn message_states(&self) -> &dyn MessageStateStore;
    /// The SMS gateways' settings and send jobs.
    fn gateways(&self) -> &dyn GatewayStore;
    /// The send queue of compose's jobs.
    fn send_queue(&self) -> &dyn SendQueueStore;
    /// The tokens that sign the gateways' callbacks.
    fn callback_tokens(&self) -> &dyn CallbackTokenStore;
    /// The retention policies and what they delete.
    fn retention(&self) -> &dyn RetentionStore;
    /// Clicks and delivered rates per domain over time.
    fn domain_charts(&self) -> &dyn DomainChartStore;
    /// Visits to no link's code.
    fn orphans(&self) -> &dyn OrphanStore;
    /// Data-subject export and erasure requests.
    fn subjects(&self) -> &dyn SubjectStore;
    /// The raw visits' day partitions, on a backend that partitions them (PostgreSQL).
    fn day_partitions(&self) -> Option<&dyn DayPartitions>;
}

/// The raw visits kept in one table per UTC day (PostgreSQL): made ahead of time, dropped whole
/// once past every retention, and vacuumed once when the day has ended.
#[async_trait]
pub trait DayPartitions: Send + Sync {
    /// Creates the days around `now` not made yet; answers how many it made.
    async fn prepare_days(&self, now: DateTime<Utc>) -> StorageResult<u32>;
    /// Vacuums the days that ended since the last call; answers how many.
    async fn settle_days(&self, now: DateTime<Utc>) -> StorageResult<u32>;
    /// Drops the days wholly before `before`; answers the visits they held.
    async fn drop_days_before(&self, before: DateTime<Utc>) -> StorageResult<u64>;
}

/// Fills the gaps of a sparse series with zero buckets, from `from` to `to` by the interval.
pub fn dense_series(query: &StatsQuery, sparse: Vec<(i64, Counts)>) -> Vec<(i64, Counts)> {
    let step = query.interval.seconds();
    let mut sparse = sparse.into_iter().peekable();
    let mut out = Vec::with_capacity(usize::try_from((query.to - query.from) / step).unwrap_or(0));
    let mut at = query.from;
    while at < query.to {
        let mut counts = Counts::default();
        while let Some((bucket, c)) = sparse.peek() {
            if *bucket > at {
                break;
            }
            if *bucket == at {
                counts.add(c);
            }
            sparse.next();
        }
        out.push((at, counts));
        at += step;
    }
    out
}

/// Shared by both backends: which days the breakdowns cover for a query.
pub fn breakdown_days(query: &StatsQuery) -> (i64, i64) {
    let day = Interval::Day.seconds();
    (
        query.from.div_euclid(day) * day,
        (query.to + day - 1).div_euclid(day) * day,
    )
}

/// The rollup deltas of the inserted visits, given which (code, visitor) pairs were new, still
/// being added up: the store folds the batch's corrections in before finishing them.
pub fn folding<'a>(
    inserted: &[&'a Visit],
    all_links: &'a AllLinks,
    new_visitors: NewVisitors,
    count_bots: bool,
) -> Folding<'a> {
    let mut folding = Folding::new(all_links, count_bots);
    folding.add(inserted, new_visitors);
    folding
}
