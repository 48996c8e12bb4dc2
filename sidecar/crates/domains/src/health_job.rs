//! The domain health job: each check's traffic figures, probes and verdicts, the drain states
//! they move, and the webhooks they send ([`crate::health`] says what is judged and why; the
//! state the API reads lives there).

use super::drain::{self, Drain, Event, Evidence, Mode};
use super::health::{DomainHealth, DomainStatus, HealthSettings};
use super::state::State;
use super::traffic::{judged_windows, Totals};
use super::webhook::{Alerts, ALERT_DRAIN};
use super::{dns, http1};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use shortlink_core::background::{self, Shutdown};
use shortlink_core::sync::LockOrRecover;
use shortlink_store::audit::{Actor, Origin, INSTALLATION_CHAIN};
use shortlink_store::Storage;
use shortlink_visits::store::VisitStore;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Domains probed at the same time.
const PROBES_AT_ONCE: usize = 16;

/// The per-minute domain counts are kept this long (or the window, if longer): a day of each
/// domain's traffic for an operator's own queries, at most 1,440 rows per domain.
const CLICK_MINUTES_KEPT: Duration = Duration::from_secs(86_400);

/// With the checks off, the per-minute counts are still written and are forgotten this often.
const FORGET_EVERY_WITHOUT_CHECKS: Duration = Duration::from_secs(3600);

/// Runs the checks every `settings.every` until `shutdown` (a check in progress is dropped: its
/// probes have nothing to save), then waits for the webhook alerts in flight up to
/// [`ALERT_DRAIN`] (those still undelivered then are logged as not sent).
pub async fn run(
    health: Arc<DomainHealth>,
    settings: HealthSettings,
    visits: Arc<dyn VisitStore>,
    storage: Arc<dyn Storage>,
    mut shutdown: Shutdown,
) {
    let mut alerts = Alerts::default();
    let lag = u64::try_from(settings.every.as_millis()).unwrap_or(u64::MAX);
    (health.snapshot_lag_ms).store(lag, std::sync::atomic::Ordering::Relaxed);
    let mut tick = tokio::time::interval(settings.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            // A domain's first check right after the request that named it, not up to a whole
            // interval later.
            () = health.new_domain.notified() => {}
            // A request's drain change: its webhook now, no check needed.
            () = health.outbox_ready.notified() => {
                send_outbox(&health, &settings, &mut alerts);
                continue;
            }
            () = background::fired(&mut shutdown) => break,
        }
        tokio::select! {
            () = check_all(&health, &settings, visits.as_ref(), storage.as_ref(), &mut alerts) => {}
            () = background::fired(&mut shutdown) => break,
        }
    }
    send_outbox(&health, &settings, &mut alerts);
    alerts.drain(ALERT_DRAIN).await;
}

/// Forgets the per-minute domain counts every hour until `shutdown`: what [`run`] does at each
/// check, for a sidecar whose checks are off.
pub async fn forget_old_clicks_hourly(visits: Arc<dyn VisitStore>, mut shutdown: Shutdown) {
    let mut tick = tokio::time::interval(FORGET_EVERY_WITHOUT_CHECKS);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = background::fired(&mut shutdown) => return,
        }
        forget_old_clicks(visits.as_ref(), Duration::ZERO).await;
    }
}

async fn forget_old_clicks(visits: &dyn VisitStore, window: Duration) {
    let kept = chrono::Duration::from_std(window.max(CLICK_MINUTES_KEPT)).unwrap_or_default();
    if let Err(error) = visits.forget_domain_clicks_before(Utc::now() - kept).await {
        tracing::warn!(%error, "domain health: cannot forget old per-minute clicks");
    }
}

fn send_outbox(health: &DomainHealth, settings: &HealthSettings, alerts: &mut Alerts) {
    let bodies = std::mem::take(&mut *health.outbox.lock_or_recover());
    if let Some(webhook) = &settings.webhook {
        for body in bodies {
            alerts.send(webhook, body);
        }
    }
}

/// Per domain: the links issued within the click curve's horizon, and their weight.
type Issued = HashMap<String, (u64, f64)>;
/// Per domain: the clicks of a window.
type Clicks = HashMap<String, i64>;
/// A recent part of the window, with its own weights and clicks.
type Part = (Duration, Issued, Clicks);

async fn check_all(
    health: &DomainHealth,
    settings: &HealthSettings,
    visits: &dyn VisitStore,
    storage: &dyn Storage,
    alerts: &mut Alerts,
) {
    let Some((issued, clicks, parts)) = read_traffic(health, settings, visits).await else {
        return;
    };
    forget_old_clicks(visits, settings.window).await;
    let domains = domains_to_check(health, settings, &issued);
    // Each domain against its own workspace's traffic only.
    let owners = (health.owners.lock_or_recover().by_domain).clone();
    let totals = Totals::new(&owners, &issued, &clicks);
    let parts: Vec<_> = (parts.iter())
        .map(|(part, issued, clicks)| (*part, issued, clicks, Totals::new(&owners, issued, clicks)))
        .collect();
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
    let mut found_now: Vec<(String, Evidence)> = Vec::with_capacity(domains.len());
    let mut state_changes: Vec<(String, serde_json::Value)> = Vec::new();
    for domain in domains {
        let probes = probed.remove(&domain).unwrap_or_default();
        let seen = Seen {
            issued: &issued,
            clicks: &clicks,
            totals: &totals,
            parts: &parts,
        };
        let (evidence, change) = judge(health, settings, &domain, &seen, probes);
        found_now.push((domain.clone(), evidence));
        state_changes.extend(change.map(|body| (domain, body)));
    }
    let drained = apply_drains(health, settings, storage, alerts, found_now).await;
    send_changes(health, settings, alerts, state_changes, drained);
}

/// The window's issued links and clicks per domain, and each of its recent parts' (one query
/// each); `None` when the clicks cannot be read.
async fn read_traffic(
    health: &DomainHealth,
    settings: &HealthSettings,
    visits: &dyn VisitStore,
) -> Option<(Issued, Clicks, Vec<Part>)> {
    let issued =
        health
            .issued
            .lock_or_recover()
            .weighed(Instant::now(), settings.window, &settings.curve);
    let since = Utc::now() - chrono::Duration::from_std(settings.window).unwrap_or_default();
    let clicks: HashMap<String, i64> = match visits.clicks_by_domain(since).await {
        Ok(rows) => rows.into_iter().collect(),
        Err(error) => {
            tracing::warn!(%error, "domain health: cannot read clicks");
            return None;
        }
    };
    // The window's recent parts, each with its own weights and clicks (one query each).
    let mut parts = Vec::new();
    for part in judged_windows(settings.window).into_iter().skip(1) {
        let issued_part =
            (health.issued.lock_or_recover()).weighed(Instant::now(), part, &settings.curve);
        let since = Utc::now() - chrono::Duration::from_std(part).unwrap_or_default();
        match visits.clicks_by_domain(since).await {
            Ok(rows) => parts.push((
                part,
                issued_part,
                rows.into_iter().collect::<HashMap<_, _>>(),
            )),
            Err(error) => {
                tracing::warn!(%error, "domain health: cannot read clicks");
                return None;
            }
        }
    }
    Some((issued, clicks, parts))
}

/// The domains this check judges: those requests still name, the configured ones and those
/// links were issued on. The statuses of the others are dropped.
fn domains_to_check(
    health: &DomainHealth,
    settings: &HealthSettings,
    issued: &Issued,
) -> BTreeSet<String> {
    let mut domains = health.forget_unnamed(Instant::now());
    domains.extend(settings.static_domains.iter().cloned());
    domains.extend(issued.keys().cloned());
    // A forgotten domain leaves the list too, and its state series drop to 0 (the exporter keeps
    // a series once written: a stale 1 would say it is still healthy or down).
    (health.statuses.lock_or_recover()).retain(|domain, _| {
        let kept = domains.contains(domain);
        if !kept {
            for s in State::CHECKED {
                metrics::gauge!("shortlink_domain_health", "domain" => domain.clone(), "state" => s.as_str())
                    .set(0.0);
            }
        }
        kept
    });
    domains
}

/// What the check saw of every domain's traffic: the window's and its recent parts'.
struct Seen<'a> {
    issued: &'a Issued,
    clicks: &'a Clicks,
    totals: &'a Totals<'a>,
    parts: &'a [(Duration, &'a Issued, &'a Clicks, Totals<'a>)],
}

/// One domain's verdict from its traffic and probes: stored as its status and in its metrics,
/// with the evidence for its drain state and, if its state changed, the change's webhook body.
fn judge(
    health: &DomainHealth,
    settings: &HealthSettings,
    domain: &str,
    seen: &Seen<'_>,
    (probe_findings, certificate_expires_at): Probes,
) -> (Evidence, Option<serde_json::Value>) {
    let domain = domain.to_owned();
    let (issued_here, weight) = seen.issued.get(&domain).copied().unwrap_or((0, 0.0));
    let clicks_here = seen.clicks.get(&domain).copied().unwrap_or(0);
    let mut traffic = seen
        .totals
        .traffic(&domain, issued_here, weight, clicks_here);
    // Traffic: far below this domain's share while its workspace's others keep theirs, over
    // the window or, failing that, one of its recent parts (the evidence is that part's).
    let mut finding = traffic.finding(settings.min_issued, settings.window);
    for (part, issued, clicks, totals) in seen.parts {
        if finding.is_some() {
            break;
        }
        let (links, weight) = issued.get(&domain).copied().unwrap_or((0, 0.0));
        let clicked = clicks.get(&domain).copied().unwrap_or(0);
        let recent = totals.traffic(&domain, links, weight, clicked);
        finding = recent.finding_in_part(settings.min_issued, *part);
        if finding.is_some() {
            traffic = recent;
        }
    }
    let mut found: Vec<(State, String)> = finding.into_iter().collect();
    found.extend(probe_findings);
    let state = found
        .iter()
        .map(|(s, _)| *s)
        .max()
        .unwrap_or(State::Healthy);
    let checked_at = Utc::now();
    let expected_clicks = match traffic.weight_total > 0.0 {
        true => traffic.clicks_total as f64 * traffic.weight / traffic.weight_total,
        false => 0.0,
    };
    let evidence = Evidence {
        state: Some(state),
        reasons: found.iter().map(|(_, r)| r.clone()).collect(),
        expected_clicks,
        clicks: traffic.clicks,
        issued: issued_here,
        traffic_judged: traffic.judged(settings.min_issued),
        receipts: None,
    };
    let status = DomainStatus {
        domain: domain.clone(),
        workspace: seen.totals.workspace_of(&domain).to_owned(),
        state,
        reasons: found.into_iter().map(|(_, r)| r).collect(),
        last_probe: Some(checked_at),
        issued: issued_here,
        clicks: clicks_here,
        certificate_expires_at,
        drain: Drain::default(),
        receipt_notes: Vec::new(),
    };
    let previous = health
        .statuses
        .lock_or_recover()
        .insert(domain.clone(), status.clone())
        .map(|s| s.state);
    for s in State::CHECKED {
        metrics::gauge!("shortlink_domain_health", "domain" => domain.clone(), "state" => s.as_str())
            .set(f64::from(u8::from(s == state)));
    }
    let changed = match previous {
        Some(previous) => previous != state,
        None => state != State::Healthy,
    };
    if !changed {
        return (evidence, None);
    }
    tracing::warn!(domain, state = state.as_str(), reasons = ?status.reasons, "domain state changed");
    let body = serde_json::json!({
        "event": "state",
        "domain": domain,
        "workspace": status.workspace,
        "state": state,
        "previous": previous,
        "reasons": status.reasons,
        "at": checked_at,
    });
    (evidence, Some(body))
}

/// The check's webhooks: each change of state, and each drain or restore.
fn send_changes(
    health: &DomainHealth,
    settings: &HealthSettings,
    alerts: &mut Alerts,
    state_changes: Vec<(String, serde_json::Value)>,
    mut drained: HashMap<String, drain::Applied>,
) {
    let Some(webhook) = &settings.webhook else {
        return;
    };
    // A drain the change caused goes in the change's own webhook (one per change, as before
    // drains); a drain or restore with no change of state (the Nth healthy check) in its own.
    for (domain, mut body) in state_changes {
        if let Some(applied) = drained.remove(&domain) {
            body["drain"] = applied.webhook_fields();
        }
        alerts.send(webhook, body.to_string());
    }
    for (domain, applied) in drained {
        alerts.send(
            webhook,
            applied.webhook_body(&domain, &health.workspace_of(&domain)),
        );
    }
}

/// The check's findings applied to each domain's shared drain state, every domain's state read
/// back into the snapshot, and the `degraded-issuing` alert raised or cleared per workspace.
/// Returns the transitions this sidecar made (audited and counted; for the caller to send).
async fn apply_drains(
    health: &DomainHealth,
    settings: &HealthSettings,
    storage: &dyn Storage,
    alerts: &mut Alerts,
    found: Vec<(String, Evidence)>,
) -> HashMap<String, drain::Applied> {
    let mut made = HashMap::new();
    let job = Origin {
        workspace_id: INSTALLATION_CHAIN,
        ..Origin::new(Actor::system("domain health"))
    };
    let mut states = Vec::with_capacity(found.len());
    for (domain, evidence) in found {
        let state = evidence.state.unwrap_or(State::Unknown);
        let event = Event::Checked { evidence };
        match drain::apply(storage, &domain, &event, settings.healthy_checks).await {
            Ok(Some(applied)) if applied.transition() => {
                let after = &applied.after;
                tracing::warn!(
                    domain,
                    mode = after.mode.as_str(),
                    reason = after.reason,
                    "domain drain changed"
                );
                if let Err(error) = storage
                    .append_audit(&applied.audit_entry(&job, &domain))
                    .await
                {
                    tracing::warn!(domain, %error, "domain drain: audit row not written");
                }
                applied.count(&domain);
                made.insert(domain.clone(), applied);
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(domain, %error, "domain drain: state not written"),
        }
        states.push((domain, state));
    }
    let snapshot = match health.drains.refresh(storage, states.iter().cloned()).await {
        Ok(snapshot) => snapshot,
        Err(error) => {
            // The last snapshot stays: issuing goes on as the last good read said.
            tracing::warn!(%error, "domain drain: states not read");
            return made;
        }
    };
    for (domain, _) in &states {
        let drained = snapshot.drain(domain).mode == Mode::Drained;
        metrics::gauge!("shortlink_domain_drained", "domain" => domain.clone())
            .set(f64::from(u8::from(drained)));
    }
    raise_degraded(health, settings, alerts, &snapshot);
    made
}

/// The `degraded-issuing` alert raised or cleared for each workspace, as `snapshot` says.
fn raise_degraded(
    health: &DomainHealth,
    settings: &HealthSettings,
    alerts: &mut Alerts,
    snapshot: &drain::Snapshot,
) {
    // A workspace whose every base (standbys included) is drained issues on the healthiest.
    let lists = health.owners.lock_or_recover().lists.clone();
    let degraded: BTreeSet<String> = match &lists {
        Some(lists) => (lists.iter())
            .filter(|(_, bases)| {
                use super::issuing::DrainView;
                (bases.bases.iter())
                    .filter(|b| !b.draining)
                    .all(|b| snapshot.is_drained(&b.host))
            })
            .map(|(slug, _)| slug.to_owned())
            .collect(),
        None => BTreeSet::new(),
    };
    let before = std::mem::replace(&mut *health.degraded.lock_or_recover(), degraded.clone());
    // Every workspace's series at every check, 0 too: the alert and the dashboards need the
    // family on the page before the first degraded check, not only after a transition.
    for (slug, _) in lists.iter().flat_map(|lists| lists.iter()) {
        metrics::gauge!("shortlink_domain_degraded_issuing", "workspace" => slug.to_owned())
            .set(f64::from(u8::from(degraded.contains(slug))));
    }
    for (slug, now_degraded) in (degraded.difference(&before).map(|s| (s, true)))
        .chain(before.difference(&degraded).map(|s| (s, false)))
    {
        match now_degraded {
            true => tracing::error!(
                workspace = slug,
                "every issuing domain is drained: issuing on the healthiest"
            ),
            false => tracing::warn!(
                workspace = slug,
                "a domain issues again: degraded issuing over"
            ),
        }
        if let Some(webhook) = &settings.webhook {
            let body = serde_json::json!({
                "event": "degraded-issuing",
                "workspace": slug,
                "degraded_issuing": now_degraded,
                "at": Utc::now(),
            });
            alerts.send(webhook, body.to_string());
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
