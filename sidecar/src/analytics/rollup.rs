//! Rollups: what a batch of visits adds to the per-link aggregates, computed in memory so that a
//! batch costs one upsert per distinct key instead of one per visit.
//!
//! Tables (migrations `20261122000003_visits.sql`):
//! - `visit_buckets (code, span, bucket)`: humans, bots, previews and new visitors per link per
//!   hour (span 3600) and per day (span 86400), plus the same under code `*` for all links;
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

use super::store::{Counts, ALL_LINKS};
use shortlink_analytics::{Audience, Visit};
use std::collections::{BTreeMap, HashSet};

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

/// Humans, bots and previews of one breakdown row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Audiences {
    pub humans: i64,
    pub bots: i64,
    pub previews: i64,
}

impl Audiences {
    fn add(&mut self, audience: Audience) {
        match audience {
            Audience::Human => self.humans += 1,
            Audience::Bot => self.bots += 1,
            Audience::Preview => self.previews += 1,
        }
    }
}

pub type AgentKey = (String, i64, String, String, String, String);
pub type PlaceKey = (String, i64, String, String, String);
pub type SourceKey = (String, i64, String, String);

/// What a batch adds. Ordered maps: every backend writes keys in the same order, so concurrent
/// consumers lock rows in the same order and cannot deadlock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deltas {
    /// (code, span, bucket start) → counts.
    pub buckets: BTreeMap<(String, i64, i64), Counts>,
    pub agents: BTreeMap<AgentKey, Audiences>,
    pub places: BTreeMap<PlaceKey, Audiences>,
    pub sources: BTreeMap<SourceKey, Audiences>,
    /// code → (visits to add to `visit_count`, latest such visit in Unix ms).
    pub links: BTreeMap<String, (i64, i64)>,
}

fn text(value: &Option<String>) -> String {
    value.clone().unwrap_or_default()
}

/// Folds inserted visits into deltas. `new_visitors` holds the (code, visitor bytes) pairs the
/// visitor set did not have before this batch; each is credited once, to its first visit here.
/// `count_bots`: whether bots and previews also count in `links.visit_count` / `last_visit_at`.
pub fn fold(
    visits: &[&Visit],
    new_visitors: &HashSet<(String, Vec<u8>)>,
    count_bots: bool,
) -> Deltas {
    let mut d = Deltas::default();
    let mut credited: HashSet<(&str, Vec<u8>)> = HashSet::new();
    for visit in visits {
        let seconds = visit.time_ms.div_euclid(1000);
        let hour = Interval::Hour.floor(seconds);
        let day = Interval::Day.floor(seconds);
        let is_new = visit.audience == Audience::Human && {
            let bytes = super::store::visitor_bytes(&visit.visitor);
            new_visitors.contains(&(visit.code.clone(), bytes.clone()))
                && credited.insert((visit.code.as_str(), bytes))
        };
        for code in [visit.code.as_str(), ALL_LINKS] {
            for (span, bucket) in [(3600, hour), (86_400, day)] {
                let c = d
                    .buckets
                    .entry((code.to_owned(), span, bucket))
                    .or_default();
                match visit.audience {
                    Audience::Human => c.humans += 1,
                    Audience::Bot => c.bots += 1,
                    Audience::Preview => c.previews += 1,
                }
                c.new_visitors += i64::from(is_new);
            }
            d.agents
                .entry((
                    code.to_owned(),
                    day,
                    text(&visit.browser),
                    text(&visit.os),
                    visit.device.as_str().to_owned(),
                    text(&visit.agent_label),
                ))
                .or_default()
                .add(visit.audience);
            d.places
                .entry((
                    code.to_owned(),
                    day,
                    text(&visit.country),
                    text(&visit.region),
                    text(&visit.city),
                ))
                .or_default()
                .add(visit.audience);
            d.sources
                .entry((
                    code.to_owned(),
                    day,
                    text(&visit.referrer_host),
                    text(&visit.short_domain),
                ))
                .or_default()
                .add(visit.audience);
        }
        if count_bots || visit.audience == Audience::Human {
            let link = d.links.entry(visit.code.clone()).or_insert((0, i64::MIN));
            link.0 += 1;
            link.1 = link.1.max(visit.time_ms);
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_analytics::{Device, Enricher, GeoDb, VisitEvent};

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
    fn folds_counts_buckets_and_links() {
        let hour = 1_700_000_000_000 / 3_600_000 * 3_600_000;
        let a = visit("1-0", "abc", hour + 10, "203.0.113.1", CHROME);
        let b = visit("1-1", "abc", hour + 20, "203.0.113.1", CHROME);
        let c = visit("1-2", "abc", hour + 3_600_000, "203.0.113.2", "curl/8");
        let new: HashSet<_> = [(
            "abc".to_owned(),
            super::super::store::visitor_bytes(&a.visitor),
        )]
        .into_iter()
        .collect();
        let d = fold(&[&a, &b, &c], &new, false);
        let h = hour / 1000;
        let at = |code: &str, span, bucket| d.buckets[&(code.to_owned(), span, bucket)];
        assert_eq!(
            at("abc", 3600, h),
            Counts {
                humans: 2,
                bots: 0,
                previews: 0,
                new_visitors: 1
            }
        );
        assert_eq!(at("abc", 3600, h + 3600).bots, 1);
        assert_eq!(at(ALL_LINKS, 86_400, Interval::Day.floor(h)).humans, 2);
        // Bots stay out of visit_count unless asked.
        assert_eq!(d.links["abc"], (2, hour + 20));
        assert_eq!(
            fold(&[&a, &b, &c], &new, true).links["abc"],
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
    fn interval_alignment() {
        assert_eq!(Interval::Hour.floor(7201), 7200);
        assert_eq!(Interval::Hour.ceil(7201), 10_800);
        assert_eq!(Interval::Hour.ceil(7200), 7200);
        assert_eq!(Interval::Day.floor(-1), -86_400);
    }
}
