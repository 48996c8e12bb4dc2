//! The receipt side of domain health (issue 68): final delivery receipts counted per second, per
//! workspace, carrier and short domain, and the findings "blocked on this carrier" (drained at
//! once, [`crate::receipt_drain`]) and "dead route" (the carrier fails every domain: reported,
//! nothing drained). Pure: the counts and the rule, with the time given, so that the bench's
//! simulation and the unit tests run the very rule the sidecar runs.
//!
//! **The rule.** Over the window (`--domain-receipts-window`, 60 s by default) and its last third
//! and twelfth (20 s and 5 s), a domain is *blocked* on a carrier when, in one of them:
//! - it has at least `--domain-receipts-min` final receipts (20 by default) there, at least half
//!   of them `failed`, `rejected` or `expired`;
//! - the same workspace's other domains have at least as many final receipts on the same carrier
//!   over the same time, and their failure share is at most a third of the domain's.
//!
//! A clear ratio with a minimum count rather than a significance test: with a carrier's usual
//! failure rate p, a healthy domain reaches half failed on 20 receipts with the binomial chance
//! P(X ≥ 10 | n = 20, p): 2·10⁻¹² at p = 2%, 7·10⁻⁶ at p = 10%, and far less on more receipts;
//! a blocked domain (every message rejected) meets it on its first 20 rejections whatever its
//! peers carry. The peers' bound tells a domain's block from a carrier's trouble: when the peers
//! fail at half or more too the carrier fails everything, a *dead route*, and no domain is to
//! blame; between a third and a half, nothing is judged. The short parts exist because a
//! 60 s window still holds the minute of deliveries before a block: over it alone the
//! rejections outnumber them only ~30 s after the block starts; over its last 5 s, within
//! seconds (bench/failover/receipts-drain).
//!
//! Receipts are counted at arrival, not at the gateway's time: a late batch of old reports
//! says what it says now, and a clock far off cannot hide a block.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

/// Failure share from which a domain (or a carrier on every domain) counts as failing.
pub const FAILING_SHARE: f64 = 0.5;
/// A blocked domain's peers fail at most this fraction of its own share.
pub const PEERS_AT_MOST: f64 = 1.0 / 3.0;
/// The parts of the window judged besides the whole: its last third and twelfth.
const RECENT_PARTS: [u64; 2] = [3, 12];
/// Distinct error codes counted per second and series; the rest count as `other`: a gateway
/// sending a new code per message must not grow memory.
const ERROR_CODES_KEPT: usize = 8;
/// Series (workspace × carrier × domain) kept at most; receipts of new ones beyond are not
/// counted (and said so in the log).
pub const MAX_SERIES: usize = 10_000;
/// Error codes named in a finding's reason.
const TOP_ERRORS: usize = 3;

/// How the rule is tuned (module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiptRule {
    pub window: Duration,
    /// Final receipts a domain (and its peers together) needs within a part to be judged: of
    /// distinct links, as the drain counts them (`receipt_links`).
    pub min_final: u64,
}

impl Default for ReceiptRule {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(60),
            min_final: 20,
        }
    }
}

impl ReceiptRule {
    /// The lengths judged, in seconds: the window, then its recent parts (at least 1 s each).
    pub fn parts(&self) -> Vec<u64> {
        let window = self.window.as_secs().max(1);
        let mut parts = vec![window];
        for divisor in RECENT_PARTS {
            let part = (window / divisor).max(1);
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
        parts
    }
}

/// Whose receipts, through which carrier (`""`: the receipts named none), on which domain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Series {
    pub workspace: String,
    pub carrier: String,
    pub domain: String,
}

/// One second's final receipts of a series.
#[derive(Debug, Clone, Default)]
struct Second {
    at: u64,
    finals: u64,
    failures: u64,
    errors: Vec<(String, u64)>,
}

impl Second {
    /// `n` failures with error `code`, past [`ERROR_CODES_KEPT`] codes as `other`.
    fn count_error(&mut self, code: &str, n: u64) {
        let known =
            |errors: &[(String, u64)], code: &str| errors.iter().position(|(c, _)| c == code);
        let code = match known(&self.errors, code) {
            None if self.errors.len() >= ERROR_CODES_KEPT => "other",
            _ => code,
        };
        match known(&self.errors, code) {
            Some(at) => self.errors[at].1 += n,
            None => self.errors.push((code.to_owned(), n)),
        }
    }
}

/// Counts over some seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub finals: u64,
    pub failures: u64,
    /// The failures by error code (`""`: none given).
    pub errors: BTreeMap<String, u64>,
}

impl Counts {
    pub fn share(&self) -> f64 {
        match self.finals {
            0 => 0.0,
            n => self.failures as f64 / n as f64,
        }
    }

    fn add(&mut self, other: &Counts) {
        self.finals += other.finals;
        self.failures += other.failures;
        for (code, n) in &other.errors {
            *self.errors.entry(code.clone()).or_default() += n;
        }
    }

    /// The most frequent error codes, most first, as `code: n` (`none` for failures without).
    pub fn top_errors(&self) -> Vec<String> {
        let mut codes: Vec<(&String, &u64)> = self.errors.iter().collect();
        codes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        (codes.into_iter().take(TOP_ERRORS))
            .map(|(code, n)| match code.as_str() {
                "" => format!("none: {n}"),
                code => format!("{code}: {n}"),
            })
            .collect()
    }
}

/// A domain its receipts show blocked on one carrier, with what they showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocked {
    pub series: Series,
    /// The part judged, in seconds.
    pub over_secs: u64,
    pub counts: Counts,
    /// The workspace's other domains on the same carrier over the same part.
    pub peers: Counts,
}

impl Blocked {
    /// The drain's reason: counts, top error codes and the carrier.
    pub fn reason(&self) -> String {
        let errors = self.counts.top_errors();
        format!(
            "receipts: {} of {} messages failed or rejected on {} in the last {} s (error codes {}), \
             against {} of {} on the workspace's other domains",
            self.counts.failures,
            self.counts.finals,
            carrier_name(&self.series.carrier),
            self.over_secs,
            match errors.is_empty() {
                true => "none".to_owned(),
                false => errors.join(", "),
            },
            self.peers.failures,
            self.peers.finals,
        )
    }
}

/// A carrier failing every domain of a workspace that has receipts on it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadRoute {
    pub workspace: String,
    pub carrier: String,
    /// The domains with receipts on it, each failing.
    pub domains: Vec<String>,
    pub counts: Counts,
    pub over_secs: u64,
}

impl DeadRoute {
    pub fn reason(&self) -> String {
        let alone = match self.domains.len() {
            1 => " (no other domain has receipts on it to compare: a dead route or a block)",
            _ => "",
        };
        format!(
            "receipts: dead route: {} failed or rejected {} of {} messages on every domain in the \
             last {} s (error codes {}){alone}; no domain drained",
            carrier_name(&self.carrier),
            self.counts.failures,
            self.counts.finals,
            self.over_secs,
            self.counts.top_errors().join(", "),
        )
    }
}

fn carrier_name(carrier: &str) -> String {
    match carrier {
        "" => "receipts naming no carrier".to_owned(),
        carrier => format!("carrier {carrier}"),
    }
}

/// What the receipts say as of one time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    pub blocked: Vec<Blocked>,
    pub dead_routes: Vec<DeadRoute>,
}

/// A series with its seconds, as the judgement groups them.
type Member<'a> = (&'a Series, &'a VecDeque<Second>);

/// The per-second counts of every series within the window.
#[derive(Debug, Default)]
pub struct ReceiptWindows {
    rule: ReceiptRule,
    series: HashMap<Series, VecDeque<Second>>,
    /// Whether a receipt was left uncounted for [`MAX_SERIES`] since the last forget (logged once).
    pub overflowed: bool,
}

impl ReceiptWindows {
    pub fn new(rule: ReceiptRule) -> Self {
        Self {
            rule,
            ..Self::default()
        }
    }

    pub fn rule(&self) -> ReceiptRule {
        self.rule
    }

    /// The seconds of `series`, made on its first count while there is room for it (else
    /// `None`, and the windows are marked as overflowed).
    fn seconds_of(&mut self, series: &Series) -> Option<&mut VecDeque<Second>> {
        if !self.series.contains_key(series) {
            if self.series.len() >= MAX_SERIES {
                self.overflowed = true;
                return None;
            }
            self.series.insert(series.clone(), VecDeque::new());
        }
        self.series.get_mut(series)
    }

    /// Counts one final receipt of `series` at second `now` (Unix seconds).
    pub fn record(&mut self, series: &Series, failed: bool, error_code: Option<&str>, now: u64) {
        let Some(seconds) = self.seconds_of(series) else {
            return;
        };
        if seconds.back().is_none_or(|last| last.at < now) {
            seconds.push_back(Second {
                at: now,
                ..Second::default()
            });
        }
        let second = seconds.back_mut().expect("pushed");
        second.finals += 1;
        if failed {
            second.failures += 1;
            second.count_error(error_code.unwrap_or_default(), 1);
        }
    }

    /// Adds `counts` of `series` at second `at`: the shared counts of every sidecar, read back
    /// (`receipt_share`), bounded as [`Self::record`] is.
    pub fn add(&mut self, series: &Series, at: u64, counts: &Counts) {
        let Some(seconds) = self.seconds_of(series) else {
            return;
        };
        // Seconds stay in order: the judgement reads them newest first.
        let index = seconds.partition_point(|s| s.at < at);
        if seconds.get(index).is_none_or(|s| s.at != at) {
            let new = Second {
                at,
                ..Second::default()
            };
            seconds.insert(index, new);
        }
        let second = &mut seconds[index];
        second.finals += counts.finals;
        second.failures += counts.failures;
        for (code, n) in &counts.errors {
            second.count_error(code, *n);
        }
    }

    /// Drops the seconds older than the window as of `now`, and the series left empty.
    pub fn forget(&mut self, now: u64) {
        let oldest = now.saturating_sub(self.rule.window.as_secs().max(1));
        self.series.retain(|_, seconds| {
            while seconds.front().is_some_and(|s| s.at <= oldest) {
                seconds.pop_front();
            }
            !seconds.is_empty()
        });
        self.overflowed = false;
    }

    /// A series' counts over the last `secs` seconds as of `now`.
    fn counts(seconds: &VecDeque<Second>, now: u64, secs: u64) -> Counts {
        let from = now.saturating_sub(secs);
        let mut counts = Counts::default();
        for second in seconds.iter().rev().take_while(|s| s.at > from) {
            counts.finals += second.finals;
            counts.failures += second.failures;
            for (code, n) in &second.errors {
                *counts.errors.entry(code.clone()).or_default() += n;
            }
        }
        counts
    }

    /// The rule applied as of `now`: each (workspace, carrier) judged on its own.
    pub fn judge(&self, now: u64) -> Findings {
        let mut groups: BTreeMap<(&str, &str), Vec<Member<'_>>> = BTreeMap::new();
        for (series, seconds) in &self.series {
            (groups
                .entry((&series.workspace, &series.carrier))
                .or_default())
            .push((series, seconds));
        }
        let mut findings = Findings::default();
        for ((workspace, carrier), members) in groups {
            let blocked_before = findings.blocked.len();
            let mut judged: Vec<&str> = Vec::new();
            for secs in self.rule.parts() {
                let counted: Vec<(&Series, Counts)> = (members.iter())
                    .map(|(series, seconds)| (*series, Self::counts(seconds, now, secs)))
                    .collect();
                let mut all = Counts::default();
                for (_, counts) in &counted {
                    all.add(counts);
                }
                for (series, counts) in &counted {
                    if judged.contains(&series.domain.as_str()) {
                        continue;
                    }
                    let peers = Counts {
                        finals: all.finals - counts.finals,
                        failures: all.failures - counts.failures,
                        errors: BTreeMap::new(),
                    };
                    if self.blocked(counts, &peers) {
                        judged.push(&series.domain);
                        findings.blocked.push(Blocked {
                            series: (*series).clone(),
                            over_secs: secs,
                            counts: counts.clone(),
                            peers,
                        });
                    }
                }
            }
            // A dead route over the whole window, where no domain stood out.
            let window = self.rule.parts()[0];
            let counted: Vec<(&Series, Counts)> = (members.iter())
                .map(|(series, seconds)| (*series, Self::counts(seconds, now, window)))
                .filter(|(_, counts)| counts.finals > 0)
                .collect();
            let mut all = Counts::default();
            for (_, counts) in &counted {
                all.add(counts);
            }
            let every_domain_failing = (counted.iter())
                .all(|(_, counts)| counts.share() >= FAILING_SHARE || counts.finals < 2);
            if findings.blocked.len() == blocked_before
                && all.finals >= self.rule.min_final
                && all.share() >= FAILING_SHARE
                && every_domain_failing
            {
                let mut domains: Vec<String> =
                    (counted.iter()).map(|(s, _)| s.domain.clone()).collect();
                domains.sort();
                findings.dead_routes.push(DeadRoute {
                    workspace: workspace.to_owned(),
                    carrier: carrier.to_owned(),
                    domains,
                    counts: all,
                    over_secs: window,
                });
            }
        }
        findings
    }

    /// The rule for one domain against its peers (module documentation).
    fn blocked(&self, counts: &Counts, peers: &Counts) -> bool {
        let min = self.rule.min_final;
        counts.finals >= min
            && counts.share() >= FAILING_SHARE
            && peers.finals >= min
            && peers.share() <= counts.share() * PEERS_AT_MOST
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(workspace: &str, carrier: &str, domain: &str) -> Series {
        Series {
            workspace: workspace.into(),
            carrier: carrier.into(),
            domain: domain.into(),
        }
    }

    /// `n` receipts a second on `series` from `from` to `to` (exclusive), every `fail_every`th
    /// failed (0: none).
    fn send(windows: &mut ReceiptWindows, series: &Series, seconds: (u64, u64), n: u64, fail: u64) {
        let mut i = 0;
        for at in seconds.0..seconds.1 {
            for _ in 0..n {
                i += 1;
                let failed = fail > 0 && i % fail == 0;
                windows.record(series, failed, failed.then_some("0x0b"), at);
            }
        }
    }

    #[test]
    fn a_domain_rejected_on_one_carrier_is_blocked_within_seconds() {
        let mut windows = ReceiptWindows::new(ReceiptRule::default());
        let (x, y) = (
            on("w", "310260", "x.example"),
            on("w", "310260", "y.example"),
        );
        send(&mut windows, &x, (1000, 1060), 8, 50);
        send(&mut windows, &y, (1000, 1060), 8, 50);
        assert_eq!(windows.judge(1060), Findings::default());
        // From 1060 every message on x is rejected.
        send(&mut windows, &y, (1060, 1064), 8, 50);
        send(&mut windows, &x, (1060, 1064), 8, 1);
        let found = windows.judge(1064);
        assert_eq!(found.blocked.len(), 1, "{found:?}");
        let blocked = &found.blocked[0];
        assert_eq!(blocked.series, x);
        assert_eq!(blocked.over_secs, 5);
        assert!(
            blocked.reason().contains("carrier 310260"),
            "{}",
            blocked.reason()
        );
        assert!(blocked.reason().contains("0x0b: "), "{}", blocked.reason());
        assert!(found.dead_routes.is_empty());
        // Another workspace's receipts on the same carrier are no peers of x.
        let mut alone = ReceiptWindows::new(ReceiptRule::default());
        send(
            &mut alone,
            &on("other", "310260", "y.example"),
            (1000, 1064),
            8,
            50,
        );
        send(&mut alone, &x, (1060, 1064), 8, 1);
        let found = alone.judge(1064);
        assert!(found.blocked.is_empty(), "{found:?}");
        assert_eq!(found.dead_routes.len(), 1, "alone on its carrier: reported");
        assert!(found.dead_routes[0].reason().contains("no other domain"));
    }

    #[test]
    fn a_usual_failure_rate_drains_nothing_and_a_dead_route_is_told_apart() {
        let mut windows = ReceiptWindows::new(ReceiptRule::default());
        let (x, y) = (on("w", "a", "x.example"), on("w", "a", "y.example"));
        send(&mut windows, &x, (0, 120), 10, 50);
        send(&mut windows, &y, (0, 120), 10, 50);
        for now in 1..=120 {
            assert_eq!(windows.judge(now), Findings::default(), "at {now}");
        }
        // Then the carrier fails everything.
        send(&mut windows, &x, (120, 200), 10, 1);
        send(&mut windows, &y, (120, 200), 10, 1);
        let found = windows.judge(200);
        assert!(found.blocked.is_empty(), "{found:?}");
        assert_eq!(found.dead_routes.len(), 1);
        assert_eq!(found.dead_routes[0].domains, ["x.example", "y.example"]);
        assert!(found.dead_routes[0]
            .reason()
            .contains("dead route: carrier a"));
        // Gone once the window has passed.
        windows.forget(400);
        assert_eq!(windows.judge(400), Findings::default());
        assert!(windows.series.is_empty());
    }

    /// Two sidecars' counts, each half of a block too few to judge, added together (as read
    /// back from Redis, seconds in any order) judge as one sidecar's of all of them.
    #[test]
    fn counts_added_from_two_sidecars_judge_as_one_sidecars_of_them_all() {
        let rule = ReceiptRule {
            min_final: 30,
            ..ReceiptRule::default()
        };
        let (x, y) = (on("w", "a", "x.example"), on("w", "a", "y.example"));
        let mut halves = [ReceiptWindows::new(rule), ReceiptWindows::new(rule)];
        let mut whole = ReceiptWindows::new(rule);
        for (i, at) in (100..104).flat_map(|at| [at; 10]).enumerate() {
            let half = &mut halves[i % 2];
            half.record(&x, true, Some("0x0b"), at);
            half.record(&y, false, None, at);
            whole.record(&x, true, Some("0x0b"), at);
            whole.record(&y, false, None, at);
        }
        for half in &halves {
            assert_eq!(half.judge(104), Findings::default());
        }
        let mut added = ReceiptWindows::new(rule);
        for half in &halves {
            for (series, seconds) in &half.series {
                for second in seconds.iter().rev() {
                    let counts = Counts {
                        finals: second.finals,
                        failures: second.failures,
                        errors: second.errors.iter().cloned().collect(),
                    };
                    added.add(series, second.at, &counts);
                }
            }
        }
        let found = added.judge(104);
        assert_eq!(found, whole.judge(104));
        assert_eq!(found.blocked.len(), 1, "{found:?}");
        assert_eq!(found.blocked[0].counts.finals, 40);
        assert_eq!(found.blocked[0].counts.errors["0x0b"], 40);
    }

    #[test]
    fn few_receipts_judge_nothing_and_memory_is_bounded() {
        let mut windows = ReceiptWindows::new(ReceiptRule::default());
        send(&mut windows, &on("w", "a", "x.example"), (0, 1), 19, 1);
        send(&mut windows, &on("w", "a", "y.example"), (0, 1), 100, 0);
        assert!(windows.judge(1).blocked.is_empty());
        let series = on("w", "a", "z.example");
        for code in 0..100 {
            windows.record(&series, true, Some(&format!("e{code}")), 5);
        }
        let second = &windows.series[&series][0];
        assert_eq!(second.errors.len(), ERROR_CODES_KEPT + 1);
        for n in 0..MAX_SERIES + 5 {
            windows.record(&on("w", "a", &format!("d{n}")), false, None, 5);
        }
        assert_eq!(windows.series.len(), MAX_SERIES);
        assert!(windows.overflowed);
    }
}
