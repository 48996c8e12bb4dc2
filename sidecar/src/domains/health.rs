//! The domain health job: per short domain, its traffic against its expected share, a DNS probe,
//! a certificate probe and a canary probe through the edge; the result in `GET /api/v1/domains`,
//! in metrics, and a signed webhook on every change of state.
//!
//! Traffic: the human clicks of the last window on each domain against its expected share of all
//! of them. Links issued are counted in memory per domain and per minute (only the minutes with
//! links, and only as far back as the click curve's horizon: memory does not grow with the
//! number of links). Each minute's links weigh what the [`ClickCurve`] expects of their clicks
//! to fall in the window: links issued just now have had no time to be clicked, links issued
//! many half-lives ago are hardly clicked any more. A domain's expected clicks are the window's
//! clicks × its weight / the sum of the weights of all domains; far below that (at least 5
//! clicks expected, and at least `min_issued` links issued within the horizon) while other
//! domains get clicks is "suspected blocked". The curve is a fixed exponential decay with a
//! configurable half-life (`--domain-health-click-half-life`), not learned: the visits table has
//! no link creation time to learn it from without a join with the links per check.
//!
//! The domains are the pool as nginx last sent it (`X-Shortlink-Pool`), `--short-domains`, and
//! the domains links were issued on. State lives in memory: after a restart the first check
//! sets it again (and reports a domain that is not healthy, as a change from unknown).

use super::certificate::CertificateProbe;
pub use super::webhook::signature;
use super::webhook::Webhook;
use super::{dns, http1};
use crate::config::{Config, ConfigError};
use crate::visits::store::VisitStore;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A domain's clicks below this fraction of its expected share count as "far below".
const FAR_BELOW: f64 = 0.1;
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Domains probed at the same time.
const PROBES_AT_ONCE: usize = 16;
/// Fewer expected clicks than this judge nothing: none of them coming is no sign of a block
/// (the chance of no click at all where 5 are expected is under 1%). Without it, a domain whose
/// links are all old, expected a click or two, would be suspected whenever it got none.
const MIN_EXPECTED_CLICKS: f64 = 5.0;
/// Links older than the window plus this many half-lives are forgotten: less than 1/256 of
/// their clicks is left to come.
const HORIZON_HALF_LIVES: u32 = 8;
/// Issued links are counted per minute.
const BUCKET_SECONDS: u64 = 60;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Healthy,
    Degraded,
    SuspectedBlocked,
    Unreachable,
}

impl State {
    pub const ALL: [State; 4] = [
        State::Healthy,
        State::Degraded,
        State::SuspectedBlocked,
        State::Unreachable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Healthy => "healthy",
            State::Degraded => "degraded",
            State::SuspectedBlocked => "suspected-blocked",
            State::Unreachable => "unreachable",
        }
    }
}

/// A domain's last check, as `GET /api/v1/domains` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DomainStatus {
    pub domain: String,
    pub state: State,
    /// Why it is not healthy (empty when healthy).
    pub reasons: Vec<String>,
    pub last_probe: DateTime<Utc>,
    /// Links issued on it within the click curve's horizon (the window plus 8 half-lives).
    pub issued: u64,
    /// Human clicks on it within the window.
    pub clicks: i64,
    /// notAfter of the certificate the edge presents for the domain (null when the certificate
    /// probe is off or no certificate was read).
    pub certificate_expires_at: Option<DateTime<Utc>>,
}

pub struct HealthSettings {
    pub every: Duration,
    pub window: Duration,
    pub curve: ClickCurve,
    pub min_issued: u64,
    pub resolver: Option<SocketAddr>,
    pub edge_addresses: Vec<Ipv4Addr>,
    pub canary: Option<(SocketAddr, String, String)>,
    pub certificate: Option<CertificateProbe>,
    pub webhook: Option<Webhook>,
    pub static_domains: Vec<String>,
}

impl HealthSettings {
    pub fn from_config(config: &Config, static_domains: Vec<String>) -> Result<Self, ConfigError> {
        let webhook = Webhook::from_config(config)?;
        let canary = match (
            &config.canary_edge,
            &config.canary_code,
            &config.canary_target,
        ) {
            (Some(edge), Some(code), Some(target)) => Some((*edge, code.clone(), target.clone())),
            (None, None, None) => None,
            _ => {
                return Err(ConfigError::Webhook(
                    "--canary-edge, --canary-code and --canary-target go together".into(),
                ))
            }
        };
        if config.domain_health_click_half_life.is_zero() {
            return Err(ConfigError::Webhook(
                "--domain-health-click-half-life must be more than 0".into(),
            ));
        }
        if config.domain_health_resolver.is_some() && config.edge_addresses.is_empty() {
            return Err(ConfigError::Webhook(
                "--domain-health-resolver needs --edge-addresses".into(),
            ));
        }
        // Roots are read at startup, so that a bad --certificate-ca stops the start.
        let certificate = match config.certificate_edge {
            Some(edge) => Some(
                CertificateProbe::new(
                    edge,
                    config.certificate_ca.as_deref(),
                    config.certificate_min_days,
                )
                .map_err(ConfigError::Webhook)?,
            ),
            None if config.certificate_ca.is_some() => {
                return Err(ConfigError::Webhook(
                    "--certificate-ca needs --certificate-edge".into(),
                ))
            }
            None => None,
        };
        Ok(Self {
            every: config.domain_health_every,
            window: config.domain_health_window,
            curve: ClickCurve::new(config.domain_health_click_half_life),
            min_issued: config.domain_health_min_issued,
            resolver: config.domain_health_resolver,
            edge_addresses: config.edge_addresses.clone(),
            canary,
            certificate,
            webhook,
            static_domains,
        })
    }
}

/// Links issued per domain and per minute since `origin`: (minute, links) for the minutes that
/// had any, oldest first, none older than `keep` minutes.
#[derive(Debug)]
struct IssuedBuckets {
    origin: Instant,
    keep: u64,
    domains: HashMap<String, VecDeque<(u64, u64)>>,
}

impl IssuedBuckets {
    fn minute(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_secs() / BUCKET_SECONDS
    }

    fn record(&mut self, domain: &str, links: u64, at: Instant) {
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
    fn weighed(
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

/// Shared between the API (which records issued links and the pool) and the job.
#[derive(Debug)]
pub struct DomainHealth {
    pool: Mutex<BTreeSet<String>>,
    issued: Mutex<IssuedBuckets>,
    statuses: Mutex<BTreeMap<String, DomainStatus>>,
}

impl Default for DomainHealth {
    /// Keeps issued links as far back as the default window (30m) and half-life (1h) need.
    fn default() -> Self {
        Self::new(ClickCurve::new(Duration::from_secs(3600)).horizon(Duration::from_secs(1800)))
    }
}

impl DomainHealth {
    /// Remembers issued links for `horizon` (see [`ClickCurve::horizon`]).
    pub fn new(horizon: Duration) -> Self {
        Self {
            pool: Mutex::default(),
            issued: Mutex::new(IssuedBuckets {
                origin: Instant::now(),
                keep: horizon.as_secs().div_ceil(BUCKET_SECONDS),
                domains: HashMap::new(),
            }),
            statuses: Mutex::default(),
        }
    }

    pub fn saw_pool(&self, hosts: &[String]) {
        let mut pool = self.pool.lock().expect("not poisoned");
        for host in hosts {
            if !pool.contains(host) {
                pool.insert(host.clone());
            }
        }
    }

    pub fn issued_on(&self, domain: &str) {
        self.issued_on_many(domain, 1);
    }

    /// Counts `links` issued on `domain` now, under one lock.
    pub fn issued_on_many(&self, domain: &str, links: u64) {
        let mut issued = self.issued.lock().expect("not poisoned");
        issued.record(domain, links, Instant::now());
    }

    pub fn statuses(&self) -> Vec<DomainStatus> {
        let statuses = self.statuses.lock().expect("not poisoned");
        statuses.values().cloned().collect()
    }

    pub fn status(&self, domain: &str) -> Option<DomainStatus> {
        let statuses = self.statuses.lock().expect("not poisoned");
        statuses.get(domain).cloned()
    }
}

/// Runs the checks every `settings.every` until the task is dropped.
pub async fn run(health: Arc<DomainHealth>, settings: HealthSettings, visits: Arc<dyn VisitStore>) {
    let mut tick = tokio::time::interval(settings.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        check_all(&health, &settings, visits.as_ref()).await;
    }
}

/// The traffic side of one domain's check.
struct Traffic {
    /// Links issued on the domain within the curve's horizon, and their weight.
    issued: u64,
    weight: f64,
    /// The sum of the weights of all domains.
    weight_total: f64,
    clicks: i64,
    clicks_total: i64,
}

impl Traffic {
    /// "Suspected blocked" with its reason when the domain's clicks are far below its expected
    /// share of the window's clicks while other domains get theirs.
    fn finding(&self, min_issued: u64, window: Duration) -> Option<(State, String)> {
        if self.issued < min_issued || self.clicks_total <= self.clicks || self.weight_total <= 0.0
        {
            return None;
        }
        let expected = self.clicks_total as f64 * self.weight / self.weight_total;
        if expected < MIN_EXPECTED_CLICKS || self.clicks as f64 >= expected * FAR_BELOW {
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

async fn check_all(health: &DomainHealth, settings: &HealthSettings, visits: &dyn VisitStore) {
    let issued = health.issued.lock().expect("not poisoned").weighed(
        Instant::now(),
        settings.window,
        &settings.curve,
    );
    let since = Utc::now() - chrono::Duration::from_std(settings.window).unwrap_or_default();
    let clicks: HashMap<String, i64> = match visits.clicks_by_domain(since).await {
        Ok(rows) => rows.into_iter().collect(),
        Err(error) => {
            tracing::warn!(%error, "domain health: cannot read clicks");
            return;
        }
    };
    let mut domains: BTreeSet<String> = health.pool.lock().expect("not poisoned").clone();
    domains.extend(settings.static_domains.iter().cloned());
    domains.extend(issued.keys().cloned());
    let weight_total: f64 = issued.values().map(|(_, weight)| weight).sum();
    let clicks_total: i64 = clicks.values().sum();
    // Probes of different domains at once: one unreachable domain costs its timeouts, which
    // must not push every other domain's check (and its webhook) back by as much.
    let mut probed: HashMap<String, Probes> = futures_util::stream::iter(domains.iter().cloned())
        .map(|domain| async move {
            let found = probe(&domain, settings).await;
            (domain, found)
        })
        .buffer_unordered(PROBES_AT_ONCE)
        .collect()
        .await;
    for domain in domains {
        let (issued_here, weight) = issued.get(&domain).copied().unwrap_or((0, 0.0));
        let clicks_here = clicks.get(&domain).copied().unwrap_or(0);
        let traffic = Traffic {
            issued: issued_here,
            weight,
            weight_total,
            clicks: clicks_here,
            clicks_total,
        };
        // Traffic: far below this domain's share while the others keep theirs.
        let mut found: Vec<(State, String)> = traffic
            .finding(settings.min_issued, settings.window)
            .into_iter()
            .collect();
        let (probe_findings, certificate_expires_at) = probed.remove(&domain).unwrap_or_default();
        found.extend(probe_findings);
        let state = found
            .iter()
            .map(|(s, _)| *s)
            .max()
            .unwrap_or(State::Healthy);
        let status = DomainStatus {
            domain: domain.clone(),
            state,
            reasons: found.into_iter().map(|(_, r)| r).collect(),
            last_probe: Utc::now(),
            issued: issued_here,
            clicks: clicks_here,
            certificate_expires_at,
        };
        let previous = health
            .statuses
            .lock()
            .expect("not poisoned")
            .insert(domain.clone(), status.clone())
            .map(|s| s.state);
        for s in State::ALL {
            metrics::gauge!("shortlink_domain_health", "domain" => domain.clone(), "state" => s.as_str())
                .set(f64::from(u8::from(s == state)));
        }
        let changed = match previous {
            Some(previous) => previous != state,
            None => state != State::Healthy,
        };
        if changed {
            tracing::warn!(domain, state = state.as_str(), reasons = ?status.reasons, "domain state changed");
            if let Some(webhook) = &settings.webhook {
                let body = serde_json::json!({
                    "domain": domain,
                    "state": state,
                    "previous": previous,
                    "reasons": status.reasons,
                    "at": status.last_probe,
                });
                webhook.send(body.to_string());
            }
        }
    }
}

/// What the probes found for one domain (DNS, certificate, canary, in that order of reasons),
/// and the certificate's expiry.
type Probes = (Vec<(State, String)>, Option<DateTime<Utc>>);

async fn probe(domain: &str, settings: &HealthSettings) -> Probes {
    let mut found: Vec<(State, String)> = Vec::new();
    if let Some(resolver) = settings.resolver {
        match dns::resolve_a(resolver, domain, PROBE_TIMEOUT).await {
            Ok(addresses)
                if addresses
                    .iter()
                    .any(|a| settings.edge_addresses.contains(a)) => {}
            Ok(addresses) => found.push((
                State::Unreachable,
                format!("dns: resolves to {addresses:?}, not to the edge"),
            )),
            Err(e) => found.push((State::Unreachable, format!("dns: {e}"))),
        }
    }
    let mut certificate_expires_at = None;
    if let Some(probe) = &settings.certificate {
        let probed = probe.check(domain, PROBE_TIMEOUT).await;
        certificate_expires_at = probed.expires_at;
        found.extend(probed.problem);
        let gauge = metrics::gauge!("shortlink_domain_certificate_expiry_timestamp_seconds", "domain" => domain.to_owned());
        match probed.expires_at {
            Some(at) => gauge.set(at.timestamp() as f64),
            // NaN, not the last date read: no alert may fire (or stay quiet) on a stale date;
            // the failure itself shows in shortlink_domain_health.
            None => gauge.set(f64::NAN),
        }
    }
    if let Some((edge, code, target)) = &settings.canary {
        let head = format!("GET /{code} HTTP/1.1\r\nHost: {domain}");
        match http1::exchange(*edge, None, &head, b"", PROBE_TIMEOUT).await {
            Ok(a) if (301..=308).contains(&a.status) && a.location.as_deref() == Some(target) => {}
            Ok(a) => found.push((
                State::Degraded,
                format!(
                    "canary: answered {} to {}",
                    a.status,
                    a.location.as_deref().unwrap_or("nowhere")
                ),
            )),
            Err(e) => found.push((State::Unreachable, format!("canary: {e}"))),
        }
    }
    (found, certificate_expires_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);
    const MINUTE: Duration = Duration::from_secs(60);

    fn buckets(origin: Instant, horizon: Duration) -> IssuedBuckets {
        IssuedBuckets {
            origin,
            keep: horizon.as_secs().div_ceil(BUCKET_SECONDS),
            domains: HashMap::new(),
        }
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

    /// Findings per domain at `now` given the window's clicks per domain.
    fn judge(
        issued: &mut IssuedBuckets,
        now: Instant,
        clicks: &[(&str, i64)],
    ) -> BTreeMap<String, Option<State>> {
        let weighed = buckets_weighed(issued, now, &ClickCurve::new(HOUR));
        let weight_total = weighed.values().map(|(_, w)| w).sum();
        let clicks_total = clicks.iter().map(|(_, c)| c).sum();
        weighed
            .into_iter()
            .map(|(domain, (links, weight))| {
                let traffic = Traffic {
                    issued: links,
                    weight,
                    weight_total,
                    clicks: clicks
                        .iter()
                        .find(|(d, _)| *d == domain)
                        .map_or(0, |(_, c)| *c),
                    clicks_total,
                };
                let found = traffic.finding(50, 30 * MINUTE).map(|(state, _)| state);
                (domain, found)
            })
            .collect()
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
}
