//! `GET /api/v1/links/{code}/stats` and `GET /api/v1/stats`: visit statistics from the rollups
//! (never from raw visits), so a link with millions of visits answers in milliseconds.

use super::{AppState, Error, ErrorBody, InWorkspace, Path, Query, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use shortlink_model::WorkspaceId;
use shortlink_store as storage;
use shortlink_visits::rollup::Interval;
use shortlink_visits::store::{Counts, Dimension, Entry, RuleEntry, Stats, StatsQuery};
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/links/{code}/stats", get(link_stats))
        .route("/stats", get(global_stats))
}

/// Most buckets one series may have (417 days by the hour).
pub const MAX_POINTS: i64 = 10_000;

/// Names [`MAX_POINTS`] on the stats operations as `x-max-intervals`: a bound between two query
/// values (the range over the interval) that no schema keyword can state, read from here by the
/// contract test's hooks rather than copied into them.
pub(crate) struct RangeBound;

impl utoipa::Modify for RangeBound {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::extensions::ExtensionsBuilder;
        for path in ["/api/v1/stats", "/api/v1/links/{code}/stats"] {
            let item = openapi.paths.paths.get_mut(path);
            if let Some(operation) = item.and_then(|item| item.get.as_mut()) {
                let bound = ExtensionsBuilder::new().add("x-max-intervals", MAX_POINTS);
                (operation.extensions.get_or_insert_with(Default::default)).merge(bound.build());
            }
        }
    }
}
pub const DEFAULT_TOP: u32 = 10;
pub const MAX_TOP: u32 = 100;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatsParams {
    /// RFC 3339, rounded down to the interval (UTC). Default: the link's creation (all links:
    /// 30 days before `to`); by the hour, at most 48 hours before `to`.
    pub from: Option<DateTime<Utc>>,
    /// RFC 3339, exclusive, rounded up to the interval (UTC). Default: now.
    pub to: Option<DateTime<Utc>>,
    /// `hour` or `day` (default).
    #[param(value_type = Option<String>, pattern = "^(hour|day)$")]
    pub interval: Option<Interval>,
    /// Count bots and link previews as clicks (default false, or true with `--count-bots`).
    pub include_bots: Option<bool>,
    /// Entries per breakdown and top links, 1..=100 (default 10).
    #[param(minimum = 1, maximum = 100)]
    pub top: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StatsView {
    /// The link, or `null` for all links.
    pub code: Option<String>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    #[schema(value_type = String, example = "day")]
    pub interval: Interval,
    pub include_bots: bool,
    pub totals: CountsView,
    /// One point per interval from `from` to `to`, zeros included.
    pub series: Vec<PointView>,
    /// Breakdowns cover whole UTC days: from `breakdown_from` to `breakdown_to`.
    pub breakdown_from: DateTime<Utc>,
    pub breakdown_to: DateTime<Utc>,
    pub breakdowns: BreakdownsView,
    /// All-links stats only: links with the most clicks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_links: Option<Vec<TopLinkView>>,
    /// Link stats only: clicks per click-time rule and split variant over the range (the A/B
    /// result), from the raw visits; an entry with `rule` `null` is the link's own target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleView>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RuleView {
    /// `<rule>` or `<rule>.<variant>` (indexes from 0, in the link's `rules`); `null`: the
    /// link's own target.
    pub rule: Option<String>,
    /// The rule's index; `null` for the own target.
    pub rule_index: Option<u8>,
    /// The split variant's index, for a split.
    pub variant: Option<u8>,
    pub clicks: i64,
    pub unique_visitors: i64,
}

impl RuleView {
    fn new(entry: RuleEntry) -> Self {
        let chosen = entry
            .rule
            .as_deref()
            .and_then(|text| shortlink_wire::event::parse_chosen(text.as_bytes()));
        RuleView {
            rule_index: chosen.map(|c| c.rule),
            variant: chosen.and_then(|c| c.variant),
            rule: entry.rule,
            clicks: entry.clicks,
            unique_visitors: entry.unique_visitors,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CountsView {
    /// Human visits (plus bots, previews and scanners with `include_bots`).
    pub clicks: i64,
    /// Distinct people (hash of IP and user agent) whose first visit to the link is in the range:
    /// the distinct visitors of the range when it starts before the link's first visit. Summed
    /// over links for all-links stats.
    pub unique_visitors: i64,
    pub humans: i64,
    /// Crawlers, scripts, monitoring.
    pub bots: i64,
    /// Link previews (messaging apps drawing a card).
    pub previews: i64,
    /// URL scanners: carriers' SMS firewalls and security services judging the target, told
    /// by their agent, the request or hindsight (docs/BOTS.md). Counted under `previews`
    /// before scanners were told apart.
    pub scanners: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PointView {
    pub start: DateTime<Utc>,
    #[serde(flatten)]
    pub counts: CountsView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EntryView {
    /// `null`: unknown.
    pub value: Option<String>,
    pub clicks: i64,
    pub humans: i64,
    pub bots: i64,
    pub previews: i64,
    pub scanners: i64,
}

/// Top entries by clicks; `agent` (which bot or preview fetcher) by machine visits.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct BreakdownsView {
    pub browser: Vec<EntryView>,
    pub os: Vec<EntryView>,
    /// `desktop`, `mobile`, `tablet`, `bot`, `unknown`.
    pub device: Vec<EntryView>,
    pub country: Vec<EntryView>,
    pub region: Vec<EntryView>,
    pub city: Vec<EntryView>,
    pub referrer_host: Vec<EntryView>,
    pub short_domain: Vec<EntryView>,
    pub agent: Vec<EntryView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TopLinkView {
    pub code: String,
    #[serde(flatten)]
    pub counts: CountsView,
}

impl CountsView {
    pub(crate) fn new(c: &Counts, include_bots: bool) -> Self {
        CountsView {
            clicks: clicks(c.humans, [c.bots, c.previews, c.scanners], include_bots),
            unique_visitors: c.new_visitors,
            humans: c.humans,
            bots: c.bots,
            previews: c.previews,
            scanners: c.scanners,
        }
    }
}

/// What `clicks` counts: people's, and with `include_bots` the bots', previews' and scanners'.
fn clicks(humans: i64, others: [i64; 3], include_bots: bool) -> i64 {
    humans + if include_bots { others.iter().sum() } else { 0 }
}

pub(crate) fn at(unix_seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(unix_seconds, 0).unwrap_or_default()
}

fn entry(e: Entry, include_bots: bool) -> EntryView {
    EntryView {
        clicks: clicks(e.humans, [e.bots, e.previews, e.scanners], include_bots),
        value: e.value,
        humans: e.humans,
        bots: e.bots,
        previews: e.previews,
        scanners: e.scanners,
    }
}

/// Validates the parameters into an aligned query. `created`: the link's creation time.
pub fn query(
    workspace: WorkspaceId,
    code: Option<String>,
    params: StatsParams,
    created: Option<DateTime<Utc>>,
    count_bots: bool,
) -> Result<StatsQuery> {
    let interval = params.interval.unwrap_or(Interval::Day);
    let to = params.to.unwrap_or_else(storage::now);
    let from = params.from.unwrap_or_else(|| {
        let window = match (interval, created) {
            (Interval::Hour, _) => Duration::hours(48),
            (Interval::Day, None) => Duration::days(30),
            (Interval::Day, Some(_)) => Duration::MAX,
        };
        let earliest = to
            .checked_sub_signed(window)
            .unwrap_or(DateTime::UNIX_EPOCH);
        created.map_or(earliest, |c| c.max(earliest))
    });
    let top = params.top.unwrap_or(DEFAULT_TOP);
    // A bound of one parameter, documented as such: 400 like every malformed query. 422 is for
    // what the parameters say together (`from` after `to`, too many points).
    if !(1..=MAX_TOP).contains(&top) {
        return Err(Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_top",
            message: format!("top must be between 1 and {MAX_TOP}"),
        });
    }
    let from = interval.floor(from.timestamp());
    let to = interval.ceil(to.timestamp());
    if from >= to {
        return Err(Error::invalid("invalid_range", "from must be before to"));
    }
    if (to - from) / interval.seconds() > MAX_POINTS {
        return Err(Error::invalid(
            "range_too_large",
            format!(
                "at most {MAX_POINTS} {}s per query: narrow the range or use a longer interval",
                interval.as_str()
            ),
        ));
    }
    Ok(StatsQuery {
        workspace,
        code,
        from,
        to,
        interval,
        include_bots: params.include_bots.unwrap_or(count_bots),
        top,
    })
}

pub fn view(q: &StatsQuery, stats: Stats) -> StatsView {
    let include_bots = q.include_bots;
    let (breakdown_from, breakdown_to) = shortlink_visits::store::breakdown_days(q);
    let mut breakdowns = BreakdownsView::default();
    for (dimension, entries) in stats.breakdowns {
        let entries = entries
            .into_iter()
            .map(|e| entry(e, include_bots))
            .collect();
        match dimension {
            Dimension::Browser => breakdowns.browser = entries,
            Dimension::Os => breakdowns.os = entries,
            Dimension::Device => breakdowns.device = entries,
            Dimension::Agent => breakdowns.agent = entries,
            Dimension::Country => breakdowns.country = entries,
            Dimension::Region => breakdowns.region = entries,
            Dimension::City => breakdowns.city = entries,
            Dimension::ReferrerHost => breakdowns.referrer_host = entries,
            Dimension::ShortDomain => breakdowns.short_domain = entries,
        }
    }
    StatsView {
        code: q.code.clone(),
        from: at(q.from),
        to: at(q.to),
        interval: q.interval,
        include_bots,
        totals: CountsView::new(&stats.totals, include_bots),
        series: stats
            .series
            .iter()
            .map(|(start, c)| PointView {
                start: at(*start),
                counts: CountsView::new(c, include_bots),
            })
            .collect(),
        rules: None,
        breakdown_from: at(breakdown_from),
        breakdown_to: at(breakdown_to),
        breakdowns,
        top_links: q.code.is_none().then(|| {
            stats
                .top_links
                .into_iter()
                .map(|(code, c)| TopLinkView {
                    code,
                    counts: CountsView::new(&c, include_bots),
                })
                .collect()
        }),
    }
}

/// Visit statistics of one link.
#[utoipa::path(get, path = "/api/v1/links/{code}/stats", tag = "stats",
    params(("code" = String, Path), StatsParams),
    responses(
        (status = 200, body = StatsView),
        (status = 400, description = "a malformed or out-of-bounds parameter (`invalid_query`, `invalid_top`)", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "what no schema can say of the range: `invalid_range` (`from` \
            not before `to` once both are aligned to `interval`), `range_too_large` (more than 10,000 \
            intervals)", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn link_stats(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(code): Path<String>,
    Query(params): Query<StatsParams>,
) -> Result<Json<StatsView>> {
    let link = state.links.get(workspace, &code).await?;
    let q = query(
        workspace,
        Some(link.code),
        params,
        Some(link.created_at),
        state.analytics.count_bots,
    )?;
    let (stats, rules) = tokio::try_join!(
        state.analytics.store.stats(&q),
        state.analytics.store.rule_breakdown(&q)
    )?;
    let mut view = view(&q, stats);
    view.rules = Some(rules.into_iter().map(RuleView::new).collect());
    Ok(Json(view))
}

/// Visit statistics of all links together, with the top links.
#[utoipa::path(get, path = "/api/v1/stats", tag = "stats",
    params(StatsParams),
    responses(
        (status = 200, body = StatsView),
        (status = 400, description = "a malformed or out-of-bounds parameter (`invalid_query`, `invalid_top`)", body = ErrorBody),
        (status = 422, description = "what no schema can say of the range: `invalid_range` (`from` \
            not before `to` once both are aligned to `interval`), `range_too_large` (more than 10,000 \
            intervals)", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn global_stats(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Query(params): Query<StatsParams>,
) -> Result<Json<StatsView>> {
    let q = query(workspace, None, params, None, state.analytics.count_bots)?;
    let stats = state.analytics.store.stats(&q).await?;
    Ok(Json(view(&q, stats)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(from: Option<&str>, to: Option<&str>, interval: Option<Interval>) -> StatsParams {
        StatsParams {
            from: from.map(|s| s.parse().unwrap()),
            to: to.map(|s| s.parse().unwrap()),
            interval,
            include_bots: None,
            top: None,
        }
    }

    #[test]
    fn ranges_align_and_are_bounded() {
        let q = query(
            WorkspaceId::DEFAULT,
            None,
            params(
                Some("2026-01-01T10:30:00Z"),
                Some("2026-01-01T12:00:01Z"),
                Some(Interval::Hour),
            ),
            None,
            false,
        )
        .unwrap();
        assert_eq!(at(q.from).to_rfc3339(), "2026-01-01T10:00:00+00:00");
        assert_eq!(at(q.to).to_rfc3339(), "2026-01-01T13:00:00+00:00");
        assert!(!q.include_bots);
        assert!(query(
            WorkspaceId::DEFAULT,
            None,
            params(
                Some("2026-01-02T00:00:00Z"),
                Some("2026-01-01T00:00:00Z"),
                None
            ),
            None,
            false
        )
        .is_err());
        assert!(query(
            WorkspaceId::DEFAULT,
            None,
            params(
                Some("2020-01-01T00:00:00Z"),
                Some("2026-01-01T00:00:00Z"),
                Some(Interval::Hour)
            ),
            None,
            false
        )
        .is_err());
        // A link's default range starts at its creation.
        let created: DateTime<Utc> = "2026-01-01T05:00:00Z".parse().unwrap();
        let q = query(
            WorkspaceId::DEFAULT,
            Some("abc".into()),
            params(None, Some("2026-01-03T00:00:00Z"), None),
            Some(created),
            true,
        )
        .unwrap();
        assert_eq!(at(q.from).to_rfc3339(), "2026-01-01T00:00:00+00:00");
        assert!(q.include_bots);
    }
}
