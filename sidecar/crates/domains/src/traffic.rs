//! The traffic side of domain health: links issued per domain counted per minute, weighed by the
//! usual click curve of a link, and the finding "suspected blocked" when a domain's clicks fall
//! far below its expected share of the window's clicks while other domains get theirs.

use super::state::State;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// A domain's clicks below this fraction of its expected share count as "far below".
const FAR_BELOW: f64 = 0.1;
/// Fewer expected clicks than this judge nothing: none of them coming is no sign of a block
/// (the chance of no click at all where 5 are expected is under 1%). Without it, a domain whose
/// links are all old, expected a click or two, would be suspected whenever it got none.
const MIN_EXPECTED_CLICKS: f64 = 5.0;
/// Links older than the window plus this many half-lives are forgotten: less than 1/256 of
/// their clicks is left to come.
const HORIZON_HALF_LIVES: u32 = 8;
/// Issued links are counted per minute.
const BUCKET_SECONDS: u64 = 60;
/// Clicks expected within a recent part of the window before it judges anything. More than the
/// whole window's 5: each check judges up to five windows, and at 5 a healthy domain's chance
/// silence drained one of two healthy domains in about 4% of simulated 2-hour campaigns of
/// 1,000-3,000 links a domain (0.2% and 0% with the whole window alone); at 15, 0.2% and 0.03%
/// (`bench/failover/false-drains`, 3,000 campaigns a cell).
const MIN_EXPECTED_RECENT: f64 = 15.0;
/// The recent parts of the window judged besides the whole: its last 15th, sixth, third and half.
const RECENT_PARTS: [u32; 4] = [15, 6, 3, 2];
/// No recent part is shorter: clicks are counted per minute, and the part read is from the
/// start of its first minute, a minute more at most.
const SHORTEST_PART: Duration = Duration::from_secs(2 * BUCKET_SECONDS);

/// The windows a domain's clicks are judged over at each check: the configured window, then its
/// last half, third, sixth and 15th (none under two minutes). Over the whole window alone, a domain
/// blocked in the middle of a campaign kept the clicks it had before the block for as long as the
/// window (30 minutes by default) and was found only when they had slid out, whatever the
/// volume; a recent part with enough clicks expected (at least [`MIN_EXPECTED_RECENT`], under a
/// tenth of them seen) finds it as soon as the part after the block holds them.
pub(super) fn judged_windows(window: Duration) -> Vec<Duration> {
    let mut windows = vec![window];
    for part in RECENT_PARTS.iter().rev() {
        let recent = window / *part;
        if recent >= SHORTEST_PART {
            windows.push(recent);
        }
    }
    windows
}

/// The usual click curve of a link: the share of its human clicks made by age `a` is
/// `1 - 2^(-a / half_life)` (an exponential decay of the click rate, as SMS links are clicked
/// mostly within minutes to hours of sending).
#[derive(Debug, Clone, Copy)]
pub struct ClickCurve {
    /// Decay rate λ, per second.
    rate: f64,
    half_life: Duration,
}

impl ClickCurve {
    pub fn new(half_life: Duration) -> Self {
        // Zero is refused by the configuration check; a millisecond keeps the arithmetic sane.
        let half_life = half_life.max(Duration::from_millis(1));
        Self {
            rate: std::f64::consts::LN_2 / half_life.as_secs_f64(),
            half_life,
        }
    }

    /// How far back issued links still count: the window plus 8 half-lives.
    pub fn horizon(&self, window: Duration) -> Duration {
        window.saturating_add(self.half_life.saturating_mul(HORIZON_HALF_LIVES))
    }

    /// The share of a link's clicks that fall within the last `window` seconds when the link is
    /// `age` seconds old.
    fn in_window(&self, age: f64, window: f64) -> f64 {
        let before = (age - window).max(0.0);
        (-self.rate * before).exp() - (-self.rate * age).exp()
    }

    /// The integral of [`Self::in_window`] over ages 0 to `age`.
    fn integral(&self, age: f64, window: f64) -> f64 {
        let rising = |a: f64| a + (-self.rate * a).exp_m1() / self.rate;
        if age <= window {
            rising(age)
        } else {
            rising(window)
                + (-(-self.rate * window).exp_m1() - (-self.rate * (age - window)).exp_m1()
                    + (-self.rate * age).exp_m1())
                    / self.rate
        }
    }

    /// The share of their clicks expected within the last `window` seconds of links issued evenly
    /// at ages `young` to `old` seconds.
    pub fn weight(&self, young: f64, old: f64, window: f64) -> f64 {
        if old - young < 1e-6 {
            return self.in_window(old, window);
        }
        ((self.integral(old, window) - self.integral(young, window)) / (old - young)).max(0.0)
    }
}

/// Links issued per domain and per minute since `origin`: (minute, links) for the minutes that
/// had any, oldest first, none older than `keep` minutes.
#[derive(Debug)]
pub(super) struct IssuedBuckets {
    origin: Instant,
    keep: u64,
    domains: HashMap<String, VecDeque<(u64, u64)>>,
}

impl IssuedBuckets {
    /// Counts from `origin` on, keeping minutes as far back as `horizon` (see
    /// [`ClickCurve::horizon`]).
    pub(super) fn new(origin: Instant, horizon: Duration) -> Self {
        Self {
            origin,
            keep: horizon.as_secs().div_ceil(BUCKET_SECONDS),
            domains: HashMap::new(),
        }
    }

    fn minute(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_secs() / BUCKET_SECONDS
    }

    pub(super) fn record(&mut self, domain: &str, links: u64, at: Instant) {
        let minute = self.minute(at);
        let keep = self.keep;
        let buckets = match self.domains.get_mut(domain) {
            Some(buckets) => buckets,
            None => self.domains.entry(domain.to_owned()).or_default(),
        };
        match buckets.back_mut() {
            Some((last, count)) if *last == minute => *count += links,
            _ => buckets.push_back((minute, links)),
        }
        while buckets.front().is_some_and(|(m, _)| m + keep < minute) {
            buckets.pop_front();
        }
    }

    /// Per domain at `now`: (links issued within the horizon, their weight by `curve` for the
    /// last `window`), forgetting older minutes.
    pub(super) fn weighed(
        &mut self,
        now: Instant,
        window: Duration,
        curve: &ClickCurve,
    ) -> HashMap<String, (u64, f64)> {
        let minute = self.minute(now);
        let since_origin = now.saturating_duration_since(self.origin).as_secs_f64();
        let window = window.as_secs_f64();
        let keep = self.keep;
        self.domains
            .iter_mut()
            .map(|(domain, buckets)| {
                while buckets.front().is_some_and(|(m, _)| m + keep < minute) {
                    buckets.pop_front();
                }
                let (mut links, mut weight) = (0, 0.0);
                for &(m, count) in buckets.iter() {
                    let start = (m * BUCKET_SECONDS) as f64;
                    let young = (since_origin - start - BUCKET_SECONDS as f64).max(0.0);
                    let old = (since_origin - start).max(0.0);
                    links += count;
                    weight += count as f64 * curve.weight(young, old, window);
                }
                (domain.clone(), (links, weight))
            })
            .collect()
    }
}

/// The window's totals per workspace. A domain's expected share is of its own workspace's
/// clicks, by the weights of its own workspace's domains: one brand's big campaign (or its links
/// nobody clicks yet) never sets what another brand's domain is expected to get.
pub(super) struct Totals<'a> {
    /// Each domain's workspace ([`crate::WorkspaceBases::owners`]); a domain missing here is the
    /// default workspace's.
    owners: &'a HashMap<String, String>,
    /// Per workspace: the sum of its domains' weights, and of their clicks.
    by_workspace: HashMap<&'a str, (f64, i64)>,
}

impl<'a> Totals<'a> {
    pub(super) fn new(
        owners: &'a HashMap<String, String>,
        issued: &HashMap<String, (u64, f64)>,
        clicks: &HashMap<String, i64>,
    ) -> Self {
        let mut totals = Self {
            owners,
            by_workspace: HashMap::new(),
        };
        for (domain, (_, weight)) in issued {
            totals.entry(domain).0 += weight;
        }
        // Clicks on a host no list names (one in the pool only) count where the pool's
        // unnamed domains belong: the default workspace.
        for (domain, clicks) in clicks {
            totals.entry(domain).1 += clicks;
        }
        totals
    }

    fn entry(&mut self, domain: &str) -> &mut (f64, i64) {
        let workspace = self.workspace_of(domain);
        self.by_workspace.entry(workspace).or_default()
    }

    /// The workspace `domain` is grouped under.
    pub(super) fn workspace_of(&self, domain: &str) -> &'a str {
        let owners: &'a HashMap<String, String> = self.owners;
        owners
            .get(domain)
            .map_or(crate::issuing::DEFAULT_WORKSPACE, String::as_str)
    }

    /// The traffic side of `domain`'s check, against its workspace's totals.
    pub(super) fn traffic(&self, domain: &str, issued: u64, weight: f64, clicks: i64) -> Traffic {
        let (weight_total, clicks_total) = (self.by_workspace)
            .get(self.workspace_of(domain))
            .copied()
            .unwrap_or_default();
        Traffic {
            issued,
            weight,
            weight_total,
            clicks,
            clicks_total,
        }
    }
}

/// The traffic side of one domain's check.
pub(super) struct Traffic {
    /// Links issued on the domain within the curve's horizon, and their weight.
    pub issued: u64,
    pub weight: f64,
    /// The sum of the weights of its workspace's domains.
    pub weight_total: f64,
    pub clicks: i64,
    /// The window's clicks on its workspace's domains.
    pub clicks_total: i64,
}

impl Traffic {
    /// Whether the window's clicks say anything about the domain: enough links issued on it
    /// (on this sidecar) and enough clicks expected of them. A check that cannot judge is no
    /// evidence that a blocked domain is healthy again (a sidecar that issued nothing on it
    /// must not restore it).
    pub(super) fn judged(&self, min_issued: u64) -> bool {
        self.issued >= min_issued
            && self.weight_total > 0.0
            && self.clicks_total as f64 * self.weight / self.weight_total >= MIN_EXPECTED_CLICKS
    }

    /// "Suspected blocked" with its reason when the domain's clicks are far below its expected
    /// share of the window's clicks while other domains get theirs.
    pub(super) fn finding(&self, min_issued: u64, window: Duration) -> Option<(State, String)> {
        self.finding_with(min_issued, window, MIN_EXPECTED_CLICKS)
    }

    /// [`Self::finding`] over a recent part of the window ([`judged_windows`]), which needs
    /// [`MIN_EXPECTED_RECENT`] clicks expected.
    pub(super) fn finding_in_part(
        &self,
        min_issued: u64,
        part: Duration,
    ) -> Option<(State, String)> {
        self.finding_with(min_issued, part, MIN_EXPECTED_RECENT)
    }

    fn finding_with(
        &self,
        min_issued: u64,
        window: Duration,
        min_expected: f64,
    ) -> Option<(State, String)> {
        if self.issued < min_issued || self.clicks_total <= self.clicks || self.weight_total <= 0.0
        {
            return None;
        }
        let expected = self.clicks_total as f64 * self.weight / self.weight_total;
        if expected < min_expected || self.clicks as f64 >= expected * FAR_BELOW {
            return None;
        }
        let reason = format!(
            "{} clicks in {} for {} links issued recently (expected about {expected:.0})",
            self.clicks,
            humantime::format_duration(window),
            self.issued,
        );
        Some((State::SuspectedBlocked, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const HOUR: Duration = Duration::from_secs(3600);
    const MINUTE: Duration = Duration::from_secs(60);

    fn buckets(origin: Instant, horizon: Duration) -> IssuedBuckets {
        IssuedBuckets::new(origin, horizon)
    }

    #[test]
    fn the_curve_integral_matches_a_sum_of_its_values() {
        let curve = ClickCurve::new(HOUR);
        let window = 1800.0;
        for age in [10.0, 900.0, 1800.0, 5000.0, 30_000.0] {
            let steps = 100_000;
            let step = age / steps as f64;
            let sum: f64 = (0..steps)
                .map(|i| curve.in_window((i as f64 + 0.5) * step, window) * step)
                .sum();
            let exact = curve.integral(age, window);
            assert!(
                (sum - exact).abs() < 1e-6 * age,
                "age {age}: {sum} vs {exact}"
            );
        }
    }

    #[test]
    fn the_weight_is_what_the_curve_leaves_for_the_window() {
        let curve = ClickCurve::new(HOUR);
        let window = 1800.0;
        // Issued right now: no time to be clicked yet.
        assert_eq!(curve.weight(0.0, 0.0, window), 0.0);
        // Issued exactly a window ago: all the clicks of their first half hour, 1 - 2^-0.5.
        let fresh = curve.weight(1800.0, 1800.0, window);
        assert!((fresh - (1.0 - 0.5f64.sqrt())).abs() < 1e-9, "{fresh}");
        // Issued 8 h ago: 2^-7.5 - 2^-8 of their clicks are left for this half hour.
        let old = curve.weight(8.0 * 3600.0, 8.0 * 3600.0, window);
        assert!(
            (old - (2f64.powf(-7.5) - 2f64.powf(-8.0))).abs() < 1e-9,
            "{old}"
        );
        // A minute's links: between the weights of its two edges.
        let minute = curve.weight(1740.0, 1800.0, window);
        assert!(minute > curve.weight(1740.0, 1740.0, window) && minute < fresh);
    }

    #[test]
    fn issued_links_are_counted_per_minute_and_forgotten_after_the_horizon() {
        let t0 = Instant::now();
        let mut issued = buckets(t0, 2 * HOUR);
        for _ in 0..1000 {
            issued.record("s1.example", 1, t0 + Duration::from_secs(5));
        }
        issued.record("s1.example", 1_000_000, t0 + Duration::from_secs(59));
        issued.record("s1.example", 7, t0 + MINUTE);
        issued.record("s2.example", 3, t0 + HOUR);
        // A million links in a minute are one bucket.
        assert_eq!(
            issued.domains["s1.example"],
            VecDeque::from([(0, 1_001_000), (1, 7)])
        );
        let curve = ClickCurve::new(HOUR);
        let at = |issued: &mut IssuedBuckets, t| {
            buckets_weighed(issued, t, &curve)
                .into_iter()
                .map(|(domain, (links, _))| (domain, links))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            at(&mut issued, t0 + 2 * HOUR),
            BTreeMap::from([("s1.example".into(), 1_001_007), ("s2.example".into(), 3)])
        );
        // The first minute is past the horizon, then the second; the domain stays, with none.
        assert_eq!(at(&mut issued, t0 + 2 * HOUR + MINUTE)["s1.example"], 7);
        assert_eq!(at(&mut issued, t0 + 2 * HOUR + 2 * MINUTE)["s1.example"], 0);
        assert!(issued.domains["s1.example"].is_empty());
        // Recording prunes too: memory stays bounded when nobody checks.
        issued.record("s2.example", 1, t0 + 4 * HOUR);
        assert_eq!(issued.domains["s2.example"], VecDeque::from([(240, 1)]));
    }

    fn buckets_weighed(
        issued: &mut IssuedBuckets,
        now: Instant,
        curve: &ClickCurve,
    ) -> HashMap<String, (u64, f64)> {
        issued.weighed(now, 30 * MINUTE, curve)
    }

    /// Findings per domain at `now` given the window's clicks per domain, all of one workspace.
    fn judge(
        issued: &mut IssuedBuckets,
        now: Instant,
        clicks: &[(&str, i64)],
    ) -> BTreeMap<String, Option<State>> {
        judge_in(issued, now, clicks, &[])
    }

    /// [`judge`] with `owners`' domains in their workspaces (the others in the default).
    fn judge_in(
        issued: &mut IssuedBuckets,
        now: Instant,
        clicks: &[(&str, i64)],
        owners: &[(&str, &str)],
    ) -> BTreeMap<String, Option<State>> {
        let weighed = buckets_weighed(issued, now, &ClickCurve::new(HOUR));
        let owners: HashMap<String, String> = (owners.iter())
            .map(|(domain, slug)| (domain.to_string(), slug.to_string()))
            .collect();
        let clicks: HashMap<String, i64> = (clicks.iter())
            .map(|(domain, n)| (domain.to_string(), *n))
            .collect();
        let totals = Totals::new(&owners, &weighed, &clicks);
        weighed
            .iter()
            .map(|(domain, (links, weight))| {
                let here = clicks.get(domain).copied().unwrap_or(0);
                let traffic = totals.traffic(domain, *links, *weight, here);
                let found = traffic.finding(50, 30 * MINUTE).map(|(state, _)| state);
                (domain.clone(), found)
            })
            .collect()
    }

    #[test]
    fn one_workspaces_traffic_never_flags_or_hides_another_workspaces_domain() {
        let t0 = Instant::now();
        let now = t0 + 30 * MINUTE;
        let mut issued = buckets(t0, ClickCurve::new(HOUR).horizon(30 * MINUTE));
        // Brand A's campaign is clicked five times as much as brand B's quieter one: B's only
        // domain gets its own clicks, far under half of everyone's.
        issued.record("a1.example", 1000, t0);
        issued.record("b1.example", 1000, t0);
        let owners = [("a1.example", "brand-a"), ("b1.example", "brand-b")];
        let clicks = [("a1.example", 2000), ("b1.example", 100)];
        let found = judge_in(&mut issued, now, &clicks, &owners);
        assert_eq!(found["b1.example"], None, "{found:?}");
        assert_eq!(found["a1.example"], None, "{found:?}");
        // Mixed (one workspace), B's domain looked blocked: what grouping fixes.
        let mixed = judge(&mut issued, now, &clicks);
        assert_eq!(mixed["b1.example"], Some(State::SuspectedBlocked));

        // Brand A issues a lot nobody clicks yet; brand B's blocked domain is still found
        // against its own workspace's clicks, where the mix would have hidden it (A's weight
        // making B's expected clicks too few to judge).
        let mut issued = buckets(t0, ClickCurve::new(HOUR).horizon(30 * MINUTE));
        issued.record("a1.example", 100_000, t0);
        issued.record("b1.example", 1000, t0);
        issued.record("b2.example", 1000, t0);
        let owners = [
            ("a1.example", "brand-a"),
            ("b1.example", "brand-b"),
            ("b2.example", "brand-b"),
        ];
        let clicks = [("b1.example", 100)];
        let found = judge_in(&mut issued, now, &clicks, &owners);
        assert_eq!(found["b2.example"], Some(State::SuspectedBlocked));
        assert_eq!(
            found["a1.example"], None,
            "no clicks in A: nothing to compare"
        );
        assert_eq!(judge(&mut issued, now, &clicks)["b2.example"], None);
    }

    #[test]
    fn a_domain_with_fresh_links_and_no_clicks_is_suspected_blocked() {
        let t0 = Instant::now();
        let mut issued = buckets(t0, ClickCurve::new(HOUR).horizon(30 * MINUTE));
        issued.record("fresh.example", 1000, t0);
        issued.record("blocked.example", 1000, t0);
        let found = judge(&mut issued, t0 + 30 * MINUTE, &[("fresh.example", 200)]);
        assert_eq!(found["fresh.example"], None);
        assert_eq!(found["blocked.example"], Some(State::SuspectedBlocked));
        // Some clicks, but under a tenth of its half (8 of 208): still suspected; a fair part: not.
        let found = judge(
            &mut issued,
            t0 + 30 * MINUTE,
            &[("fresh.example", 200), ("blocked.example", 8)],
        );
        assert_eq!(found["blocked.example"], Some(State::SuspectedBlocked));
        let found = judge(
            &mut issued,
            t0 + 30 * MINUTE,
            &[("fresh.example", 200), ("blocked.example", 60)],
        );
        assert_eq!(found["blocked.example"], None);
    }

    #[test]
    fn a_domain_whose_links_are_old_is_not_expected_to_get_clicks_now() {
        let t0 = Instant::now();
        let mut issued = buckets(t0, ClickCurve::new(HOUR).horizon(30 * MINUTE));
        issued.record("old.example", 1000, t0);
        issued.record("fresh.example", 1000, t0 + 7 * HOUR + 30 * MINUTE);
        let now = t0 + 8 * HOUR;
        // Both within the horizon (8.5 h): the same raw count, over min_issued...
        let weighed = buckets_weighed(&mut issued, now, &ClickCurve::new(HOUR));
        assert_eq!(weighed["old.example"].0, 1000);
        assert_eq!(weighed["fresh.example"].0, 1000);
        // ...but the old links are expected about 0.5% of the clicks, not half of them.
        let share =
            weighed["old.example"].1 / (weighed["old.example"].1 + weighed["fresh.example"].1);
        assert!(share < 0.01, "{share}");
        let found = judge(&mut issued, now, &[("fresh.example", 200)]);
        assert_eq!(found["old.example"], None);
        assert_eq!(found["fresh.example"], None);
    }

    #[test]
    fn links_issued_this_minute_are_not_expected_to_have_been_clicked_yet() {
        let t0 = Instant::now();
        let mut issued = buckets(t0, ClickCurve::new(HOUR).horizon(30 * MINUTE));
        issued.record("earlier.example", 1000, t0);
        issued.record("just-now.example", 1000, t0 + 30 * MINUTE);
        let found = judge(
            &mut issued,
            t0 + 30 * MINUTE + Duration::from_secs(20),
            &[("earlier.example", 200)],
        );
        assert_eq!(found["just-now.example"], None);
    }

    /// Minutes from a campaign's send to the first check (one a minute; the defaults: 30 min
    /// window, 1 h half-life, 50 links) that finds its blocked domain over any of the
    /// [`judged_windows`]: `links` sent on each of `domains` equal domains at once, one of them
    /// blocked from `blocked_at` minutes after the send (clicked like the others until then), the
    /// others clicked as the curve says at a 10% click rate (each window's clicks rounded down).
    /// Minutes counted from the block.
    fn minutes_to_detection(links: u64, domains: usize, blocked_at: u64) -> Option<u64> {
        const CLICK_RATE: f64 = 0.1;
        let curve = ClickCurve::new(HOUR);
        let t0 = Instant::now();
        let mut issued = buckets(t0, curve.horizon(30 * MINUTE));
        let names: Vec<String> = (0..domains).map(|d| format!("s{d}.example")).collect();
        for name in &names {
            issued.record(name, links, t0);
        }
        // The share of a link's clicks made by age `a` seconds.
        let made = |a: f64| 1.0 - 0.5f64.powf(a.max(0.0) / HOUR.as_secs_f64());
        let clicks = |from: f64, to: f64| {
            (links as f64 * CLICK_RATE * (made(to) - made(from)).max(0.0)).floor() as i64
        };
        let owners = HashMap::new();
        (blocked_at + 1..=blocked_at + 120)
            .find(|&minute| {
                let now = t0 + minute as u32 * MINUTE;
                let age = (minute * 60) as f64;
                judged_windows(30 * MINUTE).into_iter().any(|window| {
                    let weighed = issued.weighed(now, window, &curve);
                    let from = age - window.as_secs_f64();
                    let mut clicked: HashMap<String, i64> = (names[1..].iter())
                        .map(|name| (name.clone(), clicks(from, age)))
                        .collect();
                    let blocked = clicks(from, age.min((blocked_at * 60) as f64));
                    clicked.insert(names[0].clone(), blocked);
                    let totals = Totals::new(&owners, &weighed, &clicked);
                    let found = |name: &String| {
                        let (links, weight) = weighed[name];
                        let traffic = totals.traffic(name, links, weight, clicked[name]);
                        match window == 30 * MINUTE {
                            true => traffic.finding(50, window),
                            false => traffic.finding_in_part(50, window),
                        }
                        .map(|(state, _)| state)
                    };
                    assert!(names[1..].iter().all(|name| found(name).is_none()));
                    found(&names[0]) == Some(State::SuspectedBlocked)
                })
            })
            .map(|minute| minute - blocked_at)
    }

    /// Issue 55: a domain whose clicks stop dead while the others go on is found within minutes
    /// at 1,000 links a domain blocked from the send, and within minutes at 10,000 and more when
    /// blocked in the middle of the campaign; the table docs/DEPLOYMENT.md gives.
    #[test]
    fn a_blocked_domain_is_found_within_minutes_at_campaign_volumes() {
        let mut table = Vec::new();
        for links in [100, 1_000, 10_000, 100_000] {
            for (domains, blocked_at) in [(2, 0), (3, 0), (2, 20), (2, 60)] {
                let minutes = minutes_to_detection(links, domains, blocked_at);
                table.push(((links, domains, blocked_at), minutes));
            }
        }
        println!("(links a domain, domains, blocked at minute) -> minutes to detection: {table:?}");
        let at = |key: (u64, usize, u64)| {
            (table.iter())
                .find(|(k, _)| *k == key)
                .and_then(|(_, minutes)| *minutes)
        };
        assert_eq!(at((1_000, 2, 0)), Some(10));
        assert_eq!(at((1_000, 3, 0)), Some(8));
        // Blocked mid-campaign: the window alone took 29 minutes at any volume.
        assert!(at((10_000, 2, 20)).is_some_and(|m| m <= 5), "{table:?}");
        assert!(at((10_000, 2, 60)).is_some_and(|m| m <= 10), "{table:?}");
        assert!(at((100_000, 2, 20)).is_some_and(|m| m <= 2), "{table:?}");
        // At 1,000 links a domain the clicks after a block 20 minutes in are too few for a part
        // (a click a minute): the whole window finds it once the earlier ones have left it.
        assert!(at((1_000, 2, 20)).is_some_and(|m| m <= 30), "{table:?}");
        // 100 links a domain expect 10 clicks in all: found after the hour, if ever.
        assert!(at((100, 2, 0)).is_none_or(|m| m > 60), "{table:?}");
    }
}
