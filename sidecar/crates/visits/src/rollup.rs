//! Rollups: what a batch of visits adds to the per-link aggregates, computed in memory so that a
//! batch costs one upsert per distinct key instead of one per visit.
//!
//! Tables (migrations `20261122000003_visits.sql`):
//! - `visit_buckets (code, span, bucket)`: humans, bots, previews, scanners and new visitors per
//!   link per hour (span 3600) and per day (span 86400), plus the same under code `*` for all
//!   links;
//! - `visit_agents (code, day, browser, os, device, agent)`, `visit_places (code, day, country,
//!   region, city)`, `visit_sources (code, day, referrer_host, short_domain)`: daily breakdowns.
//!   Dimensions that vary together share a table (a city implies its region and country; a browser
//!   mostly implies its OS and device), so a visit costs three upserts rather than nine, and the rows
//!   per link per day stay about as many as the largest single dimension has values.
//! - `link_visitors (code, visitor)`: every human visitor hash ever seen per link.
//!
//! **Unique visitors** are exact, without HyperLogLog: a visitor (SHA-256 of IP and user agent) is
//! counted once per link, in the hour and day of its first visit (`new_visitors`). Summing a range
//! therefore gives the distinct visitors whose first visit falls in it, which is the number of
//! distinct visitors of the range whenever the range starts before the link's first visit (the
//! default, from the link's creation). Cost: one 16-byte key per (link, visitor), no scan at query
//! time. For all links, unique visitors are the sum over links (a person on two links counts twice).
//! Only people count: bots and previews never enter the visitor set.
//!
//! Stats read only these tables, never `visits`: a link with 10 million visits over a month is a
//! few hundred bucket rows and some thousands of breakdown rows.

use foldhash::{HashMap, HashSet};
use shortlink_model::WorkspaceId;
use shortlink_visit_enrich::{Audience, Visit};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hash::Hash;

/// Series granularity.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Interval {
    Hour,
    Day,
}

impl Interval {
    pub fn seconds(self) -> i64 {
        match self {
            Interval::Hour => 3600,
            Interval::Day => 86_400,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Interval::Hour => "hour",
            Interval::Day => "day",
        }
    }

    /// The start of the bucket holding `unix_seconds`.
    pub fn floor(self, unix_seconds: i64) -> i64 {
        unix_seconds.div_euclid(self.seconds()) * self.seconds()
    }

    /// The end of the bucket holding `unix_seconds - 1` (`unix_seconds` itself when aligned).
    pub fn ceil(self, unix_seconds: i64) -> i64 {
        self.floor(unix_seconds + self.seconds() - 1)
    }
}

/// Humans, bots, previews and scanners of one breakdown row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Audiences {
    pub humans: i64,
    pub bots: i64,
    pub previews: i64,
    pub scanners: i64,
}

impl Audiences {
    fn add(&mut self, audience: Audience) {
        self.add_n(audience, 1);
    }

    /// `n` visits of `audience` (-1: one taken back, `crate::hindsight`).
    pub(crate) fn add_n(&mut self, audience: Audience, n: i64) {
        match audience {
            Audience::Human => self.humans += n,
            Audience::Bot => self.bots += n,
            Audience::Preview => self.previews += n,
            Audience::Scanner => self.scanners += n,
        }
    }

    fn merge(&mut self, other: &Audiences) {
        self.humans += other.humans;
        self.bots += other.bots;
        self.previews += other.previews;
        self.scanners += other.scanners;
    }
}

pub type AgentKey<'a> = (&'a str, i64, &'a str, &'a str, &'static str, &'a str);
pub type PlaceKey<'a> = (&'a str, i64, &'a str, &'a str, &'a str);
pub type SourceKey<'a> = (&'a str, i64, &'a str, &'a str);

/// What a batch adds, with keys borrowed from its visits: folding allocates map nodes only, not a
/// string per key (this runs on the consumer's one write path, once per visit). Made by
/// [`Folding::finish`] (or [`fold`]), each link's rows with their all-links sums. Ordered maps:
/// every backend writes keys in the same order, so concurrent consumers lock rows in the same
/// order and cannot deadlock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deltas<'a> {
    /// (code, span, bucket start) → counts.
    pub buckets: BTreeMap<(&'a str, i64, i64), Counts>,
    pub agents: BTreeMap<AgentKey<'a>, Audiences>,
    pub places: BTreeMap<PlaceKey<'a>, Audiences>,
    pub sources: BTreeMap<SourceKey<'a>, Audiences>,
    /// (minute start, short domain) → visits: what the domain health check reads.
    pub domain_minutes: BTreeMap<(i64, &'a str), Audiences>,
    /// code → (visits to add to `visit_count`, latest such visit in Unix ms).
    pub links: BTreeMap<&'a str, (i64, i64)>,
    /// (code, rule or "" for the link's own target) → human clicks and new visitors: the A/B
    /// arms (`ab_arms`, read by the conversions' results). A new visitor counts in the arm of
    /// its first human visit to the link, so a link's arms add up to its visitors.
    pub arms: BTreeMap<(&'a str, &'a str), ArmDelta>,
}

/// What a batch adds to one A/B arm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArmDelta {
    pub humans: i64,
    pub visitors: i64,
}

/// The (code, visitor bytes) pairs a batch added to the visitor set, by code.
pub type NewVisitors = HashMap<String, HashSet<Vec<u8>>>;

/// What a key holds for an unknown value (no geo data, no referrer, no bot label): an empty
/// string that points into this binary's read-only data.
///
/// An empty literal or `String` points at address 1, and comparing two strings calls `memcmp`
/// even when they are empty. glibc's AVX-512 `memcmp` loads under a mask, and a masked load from
/// an unmapped page costs a microcode assist, about 100 ns per compare: with SMS traffic (no
/// referrer, no label) or no geo database, most of the fold went to comparing empty keys.
pub(crate) fn unknown() -> &'static str {
    &"-"[..0]
}

pub(crate) fn text(value: &Option<String>) -> &str {
    match value.as_deref() {
        Some(known) if !known.is_empty() => known,
        _ => unknown(),
    }
}

/// Folds inserted visits into deltas. `new_visitors` holds the (code, visitor bytes) pairs the
/// visitor set did not have before this batch; each is credited once, to its first visit here.
/// `count_bots`: whether bots and previews also count in `links.visit_count` / `last_visit_at`.
pub fn fold<'a>(
    visits: &[&'a Visit],
    all_links: &'a AllLinks,
    new_visitors: NewVisitors,
    count_bots: bool,
) -> Deltas<'a> {
    let mut folding = Folding::new(all_links, count_bots);
    folding.add(visits, new_visitors);
    folding.finish()
}

/// A batch's deltas while they are added up: hash maps (one lookup per visit and table), each
/// sorted once by [`Folding::finish`] (a B-tree insert per visit compared whole keys a dozen
/// times over), and only the links' own rows: the all-links rows are their sums, made there
/// too. The store adds the batch's visits, then what it learns while writing them (new
/// visitors, `crate::hindsight`'s corrections) before finishing: each a hash lookup per row,
/// where the sorted B-trees of string keys cost a corrected visit ~2 µs of the consumer's CPU
/// on PostgreSQL (bench/results/system-cost-reclassified-2026-11-29-5.md).
#[derive(Debug)]
pub struct Folding<'a> {
    all_links: &'a AllLinks,
    pub(crate) count_bots: bool,
    pub(crate) buckets: HashMap<(&'a str, i64, i64), Counts>,
    pub(crate) agents: HashMap<AgentKey<'a>, Audiences>,
    pub(crate) places: HashMap<PlaceKey<'a>, Audiences>,
    pub(crate) sources: HashMap<SourceKey<'a>, Audiences>,
    pub(crate) domain_minutes: HashMap<(i64, &'a str), Audiences>,
    pub(crate) links: HashMap<&'a str, (i64, i64)>,
    pub(crate) arms: HashMap<(&'a str, &'a str), ArmDelta>,
}

impl<'a> Folding<'a> {
    /// Nothing added yet. `count_bots`: whether bots and previews also count in
    /// `links.visit_count` / `last_visit_at`.
    pub fn new(all_links: &'a AllLinks, count_bots: bool) -> Self {
        Folding {
            all_links,
            count_bots,
            buckets: HashMap::default(),
            agents: HashMap::default(),
            places: HashMap::default(),
            sources: HashMap::default(),
            domain_minutes: HashMap::default(),
            links: HashMap::default(),
            arms: HashMap::default(),
        }
    }

    /// Adds inserted visits; `new_visitors` as [`fold`] takes it.
    pub fn add(&mut self, visits: &[&'a Visit], mut new_visitors: NewVisitors) {
        for visit in visits {
            let seconds = visit.time_ms.div_euclid(1000);
            let day = Interval::Day.floor(seconds);
            let code = visit.code.as_str();
            let audience = visit.agent.audience;
            // Removed once credited, so a visitor's later visits in the batch are not new again.
            let is_new = audience == Audience::Human
                && new_visitors
                    .get_mut(code)
                    .is_some_and(|visitors| visitors.remove(visit.visitor.as_slice()));
            for span in [Interval::Hour, Interval::Day] {
                let key = (code, span.seconds(), span.floor(seconds));
                self.buckets.entry(key).or_default().count(audience, is_new);
            }
            let agent = &visit.agent;
            let (browser, os) = (text(&agent.browser), text(&agent.os));
            let label = agent.agent_label.unwrap_or(unknown());
            let key = (code, day, browser, os, agent.device.as_str(), label);
            self.agents.entry(key).or_default().add(audience);
            let (country, region, city) = (&visit.country, &visit.region, &visit.city);
            let place = (code, day, text(country), text(region), text(city));
            self.places.entry(place).or_default().add(audience);
            let source = (
                code,
                day,
                text(&visit.referrer_host),
                text(&visit.short_domain),
            );
            self.sources.entry(source).or_default().add(audience);
            if let Some(domain) = &visit.short_domain {
                let minute = seconds - seconds.rem_euclid(60);
                (self.domain_minutes.entry((minute, domain)).or_default()).add(audience);
            }
            if audience == Audience::Human {
                let rule = visit.rule.as_deref().unwrap_or(unknown());
                let arm = self.arms.entry((code, rule)).or_default();
                arm.humans += 1;
                arm.visitors += i64::from(is_new);
            }
            if self.count_bots || audience == Audience::Human {
                let link = self.links.entry(code).or_insert((0, i64::MIN));
                link.0 += 1;
                link.1 = link.1.max(visit.time_ms);
            }
        }
    }

    /// Credits a new visitor of `code`, first seen in the batch at `time_ms`, to the hour and day
    /// buckets of the link (and so of all links). Adding visits with no new visitors and
    /// crediting each one to its first (human) visit afterwards gives what [`fold`] gives with
    /// them (a test checks): the PostgreSQL store folds while the server inserts the visits,
    /// before it knows which visitors are new.
    /// `rule`: that visit's rule ("" for the own target), the arm the visitor counts in.
    pub fn credit_new_visitor(&mut self, code: &'a str, rule: &'a str, time_ms: i64) {
        self.arms.entry((code, rule)).or_default().visitors += 1;
        let seconds = time_ms.div_euclid(1000);
        for span in [Interval::Hour, Interval::Day] {
            let key = (code, span.seconds(), span.floor(seconds));
            self.buckets.entry(key).or_default().new_visitors += 1;
        }
    }

    /// The deltas to write: the all-links rows added (each link's rows summed under its
    /// [`AllLinks::key`]), every table in key order.
    pub fn finish(self) -> Deltas<'a> {
        let all_links = self.all_links;
        let all = |code: &'a str| all_links.key(code);
        Deltas {
            buckets: with_all_links(self.buckets, |k| (all(k.0), k.1, k.2), Counts::add),
            agents: with_all_links(
                self.agents,
                |k| (all(k.0), k.1, k.2, k.3, k.4, k.5),
                Audiences::merge,
            ),
            places: with_all_links(
                self.places,
                |k| (all(k.0), k.1, k.2, k.3, k.4),
                Audiences::merge,
            ),
            sources: with_all_links(
                self.sources,
                |k| (all(k.0), k.1, k.2, k.3),
                Audiences::merge,
            ),
            domain_minutes: self.domain_minutes.into_iter().collect(),
            links: self.links.into_iter().collect(),
            arms: self.arms.into_iter().collect(),
        }
    }
}

/// `rows` with the sum of its rows under each key's all-links form (`all`) added, in key order.
fn with_all_links<K: Ord + Hash + Copy, V: Default>(
    mut rows: HashMap<K, V>,
    all: impl Fn(K) -> K,
    add: impl Fn(&mut V, &V),
) -> BTreeMap<K, V> {
    let mut sums: HashMap<K, V> = HashMap::default();
    for (key, value) in rows.iter() {
        add(sums.entry(all(*key)).or_default(), value);
    }
    for (key, value) in sums {
        add(rows.entry(key).or_default(), &value);
    }
    rows.into_iter().collect()
}

/// Rollup rows under this code count every link of the default workspace together (codes never
/// contain `*`).
pub const ALL_LINKS: &str = "*";

/// The code under which rollup rows count every link of `workspace` together: [`ALL_LINKS`] for
/// the default workspace (the rows it had before workspaces), `*<id>` for another (issue 53).
pub fn all_links_code(workspace: WorkspaceId) -> Cow<'static, str> {
    match workspace {
        WorkspaceId::DEFAULT => Cow::Borrowed(ALL_LINKS),
        other => Cow::Owned(format!("{ALL_LINKS}{other}")),
    }
}

/// Where a batch's links are summed for all links: each link of another workspace than the
/// default under its workspace's [`all_links_code`], every other one under [`ALL_LINKS`]. Made
/// before folding, from the links' owners (which never change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllLinks {
    elsewhere: HashMap<String, String>,
}

impl AllLinks {
    /// `code` is a link of `workspace`.
    pub fn insert(&mut self, code: String, workspace: WorkspaceId) {
        if workspace != WorkspaceId::DEFAULT {
            self.elsewhere
                .insert(code, all_links_code(workspace).into_owned());
        }
    }

    pub fn key(&self, code: &str) -> &str {
        self.elsewhere.get(code).map_or(ALL_LINKS, String::as_str)
    }
}

/// Counts of one bucket, or of a whole range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub humans: i64,
    pub bots: i64,
    pub previews: i64,
    pub scanners: i64,
    /// Human visitors seen for the first time (for this link; summed over links for `*`).
    pub new_visitors: i64,
}

impl Counts {
    /// One visit of `audience`, by a visitor new to the link or not.
    pub(crate) fn count(&mut self, audience: Audience, is_new: bool) {
        match audience {
            Audience::Human => self.humans += 1,
            Audience::Bot => self.bots += 1,
            Audience::Preview => self.previews += 1,
            Audience::Scanner => self.scanners += 1,
        }
        self.new_visitors += i64::from(is_new);
    }

    pub fn add(&mut self, other: &Counts) {
        self.humans += other.humans;
        self.bots += other.bots;
        self.previews += other.previews;
        self.scanners += other.scanners;
        self.new_visitors += other.new_visitors;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every link of the default workspace.
    fn no_workspaces() -> &'static AllLinks {
        static NONE: std::sync::OnceLock<AllLinks> = std::sync::OnceLock::new();
        NONE.get_or_init(AllLinks::default)
    }
    use shortlink_visit_enrich::{Device, Enricher, GeoDb, VisitEvent};

    fn visit(id: &str, code: &str, t: i64, ip: &str, ua: &str) -> Visit {
        let event = VisitEvent::from_fields(
            id,
            [
                ("c", code.to_owned()),
                ("t", t.to_string()),
                ("ip", ip.to_owned()),
                ("ua", ua.to_owned()),
            ],
        )
        .unwrap();
        Enricher::new(GeoDb::disabled(), false).enrich(&event)
    }

    const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";

    #[test]
    fn each_workspace_sums_its_own_links() {
        let hour = 1_700_000_000_000 / 3_600_000 * 3_600_000;
        let ours = visit("1-0", "ours", hour + 10, "203.0.113.1", CHROME);
        let theirs = visit("1-1", "theirs", hour + 20, "203.0.113.2", CHROME);
        let mut all_links = AllLinks::default();
        all_links.insert("theirs".into(), WorkspaceId::from_db(7));
        all_links.insert("ours".into(), WorkspaceId::DEFAULT);
        let visitors = [theirs.visitor.to_vec()].into_iter().collect();
        let new: NewVisitors = [("theirs".to_owned(), visitors)].into_iter().collect();
        let mut d = Folding::new(&all_links, false);
        d.add(&[&ours, &theirs], new);
        d.credit_new_visitor("ours", "", hour + 10);
        let d = d.finish();
        let h = hour / 1000;
        let at = |code: &str| d.buckets[&(code, 3600, h)];
        assert_eq!(all_links_code(WorkspaceId::from_db(7)), "*7");
        assert_eq!((at("*").humans, at("*").new_visitors), (1, 1));
        assert_eq!((at("*7").humans, at("*7").new_visitors), (1, 1));
        let day = Interval::Day.floor(h);
        let places = |code: &str| {
            (d.places.keys())
                .filter(|k| k.0 == code && k.1 == day)
                .count()
        };
        assert_eq!((places("*"), places("*7")), (1, 1));
    }

    #[test]
    fn folds_counts_buckets_and_links() {
        let hour = 1_700_000_000_000 / 3_600_000 * 3_600_000;
        let a = visit("1-0", "abc", hour + 10, "203.0.113.1", CHROME);
        let b = visit("1-1", "abc", hour + 20, "203.0.113.1", CHROME);
        let c = visit("1-2", "abc", hour + 3_600_000, "203.0.113.2", "curl/8");
        let new: NewVisitors = [("abc".to_owned(), [a.visitor.to_vec()].into_iter().collect())]
            .into_iter()
            .collect();
        let d = fold(&[&a, &b, &c], no_workspaces(), new.clone(), false);
        let h = hour / 1000;
        let at = |code, span, bucket| d.buckets[&(code, span, bucket)];
        assert_eq!(
            at("abc", 3600, h),
            Counts {
                humans: 2,
                bots: 0,
                previews: 0,
                scanners: 0,
                new_visitors: 1
            }
        );
        assert_eq!(at("abc", 3600, h + 3600).bots, 1);
        assert_eq!(at(ALL_LINKS, 86_400, Interval::Day.floor(h)).humans, 2);
        // Bots stay out of visit_count unless asked.
        assert_eq!(d.links["abc"], (2, hour + 20));
        assert_eq!(
            fold(&[&a, &b, &c], no_workspaces(), new, true).links["abc"],
            (3, hour + 3_600_000)
        );
        let bot_rows: i64 = d
            .agents
            .iter()
            .filter(|(k, _)| k.0 == "abc" && k.4 == Device::Bot.as_str() && k.5 == "curl")
            .map(|(_, v)| v.bots)
            .sum();
        assert_eq!(bot_rows, 1);
    }

    #[test]
    fn all_links_rows_are_the_sums_of_the_links_rows() {
        let hour = 1_700_000_000_000 / 3_600_000 * 3_600_000;
        let visits = [
            visit("1-0", "abc", hour, "203.0.113.1", CHROME),
            visit("1-1", "xyz", hour + 1, "203.0.113.1", CHROME),
            visit("1-2", "xyz", hour + 2, "203.0.113.2", "curl/8"),
            visit("1-3", "abc", hour + 3_600_000, "203.0.113.3", CHROME),
        ];
        let refs: Vec<&Visit> = visits.iter().collect();
        let new: NewVisitors = [
            (
                "abc".to_owned(),
                [visits[0].visitor.to_vec()].into_iter().collect(),
            ),
            (
                "xyz".to_owned(),
                [visits[1].visitor.to_vec()].into_iter().collect(),
            ),
        ]
        .into_iter()
        .collect();
        let d = fold(&refs, no_workspaces(), new, false);
        let star_hour = d.buckets[&(ALL_LINKS, 3600, hour / 1000)];
        assert_eq!(
            star_hour,
            Counts {
                humans: 2,
                bots: 1,
                previews: 0,
                scanners: 0,
                new_visitors: 2
            }
        );
        for (k, v) in &d.agents {
            if k.0 == ALL_LINKS {
                let sum = d
                    .agents
                    .iter()
                    .filter(|(o, _)| {
                        o.0 != ALL_LINKS && (o.1, o.2, o.3, o.4, o.5) == (k.1, k.2, k.3, k.4, k.5)
                    })
                    .fold(Audiences::default(), |mut a, (_, b)| {
                        a.merge(b);
                        a
                    });
                assert_eq!(*v, sum);
            }
        }
        let star_places: i64 = d
            .places
            .iter()
            .filter(|(k, _)| k.0 == ALL_LINKS)
            .map(|(_, a)| a.humans + a.bots)
            .sum();
        let star_sources: i64 = d
            .sources
            .iter()
            .filter(|(k, _)| k.0 == ALL_LINKS)
            .map(|(_, a)| a.humans + a.bots)
            .sum();
        assert_eq!((star_places, star_sources), (4, 4));
        assert_eq!(d.links[&"xyz"], (1, hour + 1));
    }

    #[test]
    fn crediting_new_visitors_afterwards_folds_the_same() {
        let hour = 1_700_000_000_000 / 3_600_000 * 3_600_000;
        let visits = [
            visit("1-0", "abc", hour, "203.0.113.1", CHROME),
            visit("1-1", "abc", hour + 5, "203.0.113.1", CHROME),
            visit("1-2", "xyz", hour + 3_600_000, "203.0.113.1", CHROME),
            visit("1-3", "xyz", hour + 86_400_000, "203.0.113.2", CHROME),
            visit("1-4", "xyz", hour + 7, "203.0.113.9", "curl/8"),
        ];
        let refs: Vec<&Visit> = visits.iter().collect();
        let bytes = |i: usize| visits[i].visitor.to_vec();
        let new: NewVisitors = [
            ("abc".to_owned(), [bytes(0)].into_iter().collect()),
            ("xyz".to_owned(), [bytes(2), bytes(3)].into_iter().collect()),
        ]
        .into_iter()
        .collect();
        let expected = fold(&refs, no_workspaces(), new, false);
        let mut d = Folding::new(no_workspaces(), false);
        d.add(&refs, NewVisitors::default());
        for i in [0, 2, 3] {
            d.credit_new_visitor(&visits[i].code, "", visits[i].time_ms);
        }
        assert_eq!(d.finish(), expected);
    }

    #[test]
    fn a_visitor_counts_in_the_arm_of_its_first_human_visit() {
        let on = |id: &str, t: i64, ip: &str, ua: &str, rule: Option<&str>| {
            let mut fields = vec![
                ("c", "abc".to_owned()),
                ("t", t.to_string()),
                ("ip", ip.to_owned()),
                ("ua", ua.to_owned()),
            ];
            fields.extend(rule.map(|r| ("rule", r.to_owned())));
            Enricher::new(GeoDb::disabled(), false)
                .enrich(&VisitEvent::from_fields(id, fields).unwrap())
        };
        let visits = [
            on("1-0", 10, "203.0.113.1", CHROME, Some("0.1")),
            on("1-1", 20, "203.0.113.1", CHROME, Some("0.0")),
            on("1-2", 30, "203.0.113.2", CHROME, Some("0.0")),
            on("1-3", 40, "203.0.113.3", CHROME, None),
            on("1-4", 50, "203.0.113.4", "curl/8", Some("0.0")),
        ];
        let refs: Vec<&Visit> = visits.iter().collect();
        let new: NewVisitors = [(
            "abc".to_owned(),
            [0, 2, 3]
                .map(|i| visits[i].visitor.to_vec())
                .into_iter()
                .collect(),
        )]
        .into_iter()
        .collect();
        let d = fold(&refs, no_workspaces(), new, false);
        let arm = |rule| d.arms[&("abc", rule)];
        let counts = |a: ArmDelta| (a.humans, a.visitors);
        // The first visitor's second click, on the other variant, is a click there, not a
        // visitor; the bot is neither.
        assert_eq!(counts(arm("0.1")), (1, 1));
        assert_eq!(counts(arm("0.0")), (2, 1));
        assert_eq!(counts(arm("")), (1, 1));
        assert_eq!(d.arms.len(), 3);
        // Credited afterwards (PostgreSQL), the same.
        let mut later = Folding::new(no_workspaces(), false);
        later.add(&refs, NewVisitors::default());
        for (i, rule) in [(0, "0.1"), (2, "0.0"), (3, "")] {
            later.credit_new_visitor("abc", rule, visits[i].time_ms);
        }
        assert_eq!(later.finish(), d);
    }

    #[test]
    fn unknown_values_are_keyed_by_an_empty_string_on_a_mapped_page() {
        // The first page is never mapped: a pointer into it is a dangling one.
        let mapped = |text: &str| text.is_empty() && text.as_ptr() as usize >= 4096;
        assert!(mapped(unknown()));
        let v = visit("1-0", "abc", 0, "203.0.113.1", CHROME);
        let d = fold(&[&v], no_workspaces(), NewVisitors::default(), false);
        let (place, _) = d.places.first_key_value().unwrap();
        let (source, _) = d.sources.first_key_value().unwrap();
        let (agent, _) = d.agents.first_key_value().unwrap();
        for unknown in [place.2, place.3, place.4, source.2, agent.5] {
            assert!(mapped(unknown), "{:p}", unknown.as_ptr());
        }
    }

    #[test]
    fn interval_alignment() {
        assert_eq!(Interval::Hour.floor(7201), 7200);
        assert_eq!(Interval::Hour.ceil(7201), 10_800);
        assert_eq!(Interval::Hour.ceil(7200), 7200);
        assert_eq!(Interval::Day.floor(-1), -86_400);
    }
}
