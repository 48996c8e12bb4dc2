//! Drain on rejections, in seconds (issue 68): the receipts the API stores are counted in memory
//! as they arrive ([`crate::receipt_watch`], through [`DomainHealth::receipts_stored`]: a lock and a few additions per batch, no
//! query), and a job judges the counts every second ([`run`], the rule in [`crate::receipts`]).
//! A domain found blocked on a carrier is drained through the same path as the health check's
//! drains ([`drain::apply`]: one transition across sidecars, one audit row, the domain webhook's
//! `drain` event, the metric), with the receipts' counts, top error codes and carrier as its
//! reason and evidence. A dead route (the carrier failing every domain) drains nothing: it is
//! the `shortlink_carrier_dead_route` gauge, a `dead-route` webhook on each change, and a note on
//! each of its domains in `GET /api/v1/domains` (`receipt_notes`).
//!
//! Which domain a receipt is about: the host of the `short_url` it named (Kannel's `dlr-url` and
//! compose's hand-off name it; the API refuses a host that is not one of the workspace's, and a
//! job's callbacks carry it signed), else the pick of the workspace's issuing list for the link's
//! code with nothing drained (links do not store their domain; under `spread=campaign` the pick
//! needs the campaign, which a receipt does not carry, so such a receipt counts nowhere). Only
//! the receipt's own workspace's domains count, so another workspace's receipts never judge them.
//! A link counts once per window ([`crate::receipt_links`]): the minimum is of distinct links.
//!
//! A workspace that sends no receipts has no series: its domains are judged on clicks alone,
//! exactly as before. Each sidecar counts the receipts it took, adds them to the counts every
//! sidecar shares in Redis each second and judges those ([`crate::receipt_share`]): behind N
//! sidecars a block is found as soon as behind one. Without Redis it judges its own counts.
//! The drain state they write is the installation's.

use super::drain::{self, Event, Evidence, Mode, ReceiptEvidence};
use super::health::DomainHealth;
use super::receipt_share::SharedCounts;
use super::receipt_watch::unix_now;
use super::receipts::{Blocked, DeadRoute, ReceiptRule};
use super::state::State;
use chrono::Utc;
use shortlink_config::Config;
use shortlink_core::background::{self, Shutdown};
use shortlink_core::sync::LockOrRecover;
use shortlink_store::audit::{Actor, Origin, INSTALLATION_CHAIN};
use shortlink_store::Storage;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// How often the counts are judged: the drain follows the receipts within about this much.
const EVERY: Duration = Duration::from_secs(1);

/// Longest window kept: the counts are per second and series, so memory grows with it; a
/// block is found in seconds, and a longer window only dilutes it.
const LONGEST_WINDOW: Duration = Duration::from_secs(600);

/// The rule from the configuration; `None` with `--domain-receipts-window 0` (no drain on
/// receipts).
pub fn rule_from_config(config: &Config) -> Option<ReceiptRule> {
    (!config.domain_receipts_window.is_zero()).then_some(ReceiptRule {
        window: config.domain_receipts_window.min(LONGEST_WINDOW),
        min_final: config.domain_receipts_min,
    })
}

/// Judges the receipts every second until `shutdown`: every sidecar's, through `shared`.
pub async fn run(
    health: Arc<DomainHealth>,
    storage: Arc<dyn Storage>,
    rule: ReceiptRule,
    mut shared: SharedCounts,
    mut shutdown: Shutdown,
) {
    health.receipts.configure(rule);
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = background::fired(&mut shutdown) => return,
        }
        check(&health, storage.as_ref(), &mut shared, rule).await;
    }
}

async fn check(
    health: &DomainHealth,
    storage: &dyn Storage,
    shared: &mut SharedCounts,
    rule: ReceiptRule,
) {
    let now = unix_now();
    (health.receipts.links.lock_or_recover()).forget(now, rule.window.as_secs());
    let pending = std::mem::take(&mut *health.receipts.pending.lock_or_recover());
    let everyone = shared.exchange(&pending, rule, now).await;
    let findings = {
        let mut windows = health.receipts.windows.lock_or_recover();
        windows.forget(now);
        let judged = match &everyone {
            Ok(everyone) => {
                if shared.recovered() {
                    tracing::info!("domain receipts: shared counts back; judging every sidecar's");
                }
                everyone
            }
            Err(error) => {
                // Said once per outage, not every second.
                if shared.failed() {
                    tracing::warn!(%error, "domain receipts: shared counts unreachable; judging this sidecar's own");
                }
                &*windows
            }
        };
        if judged.overflowed {
            tracing::warn!(
                "domain receipts: {} series counted already; receipts of new ones not counted",
                super::receipts::MAX_SERIES
            );
        }
        judged.judge(now)
    };
    report_dead_routes(health, findings.dead_routes);
    for blocked in findings.blocked {
        let domain = &blocked.series.domain;
        // The list may have moved the domain to another workspace since the receipts came.
        if health.workspace_of(domain) != blocked.series.workspace {
            continue;
        }
        // Drained already (by clicks, by hand, by another sidecar) or pinned: nothing to do.
        if health.drains.current().drain(domain).mode != Mode::Active {
            continue;
        }
        if let Err(error) = drain_blocked(health, storage, &blocked).await {
            tracing::warn!(domain, %error, "domain receipts: drain not written");
        }
    }
}

/// Drains the domain the receipts found blocked, as the health check's drains are made.
async fn drain_blocked(
    health: &DomainHealth,
    storage: &dyn Storage,
    blocked: &Blocked,
) -> shortlink_store::StorageResult<()> {
    let domain = &blocked.series.domain;
    let reason = blocked.reason();
    let evidence = Evidence {
        state: Some(State::SuspectedBlocked),
        reasons: vec![reason.clone()],
        receipts: Some(ReceiptEvidence {
            carrier: blocked.series.carrier.clone(),
            over_secs: blocked.over_secs,
            finals: blocked.counts.finals,
            failures: blocked.counts.failures,
            top_errors: blocked.counts.top_errors(),
            peer_finals: blocked.peers.finals,
            peer_failures: blocked.peers.failures,
        }),
        ..Evidence::default()
    };
    // A finding of a block never restores: the healthy-check count does not matter.
    let event = Event::Checked { evidence };
    let Some(applied) = drain::apply(storage, domain, &event, u32::MAX).await? else {
        return Ok(());
    };
    if applied.transition() {
        tracing::warn!(domain, reason, "domain drained on its delivery receipts");
        let job = Origin {
            workspace_id: INSTALLATION_CHAIN,
            ..Origin::new(Actor::system("domain health"))
        };
        storage
            .append_audit(&applied.audit_entry(&job, domain))
            .await?;
        metrics::counter!("shortlink_domain_receipt_drains_total", "domain" => domain.clone())
            .increment(1);
    }
    health.changed_by_request(domain, &applied);
    Ok(())
}

/// Keeps the dead routes found for the domains' notes, and reports each change (gauge, log,
/// webhook).
fn report_dead_routes(health: &DomainHealth, found: Vec<DeadRoute>) {
    let key = |dead: &DeadRoute| (dead.workspace.clone(), dead.carrier.clone());
    let before: BTreeSet<(String, String)> = {
        let mut kept = health.receipts.dead_routes.lock_or_recover();
        let before = kept.iter().map(key).collect();
        *kept = found.clone();
        before
    };
    let now: BTreeSet<(String, String)> = found.iter().map(key).collect();
    for dead in found.iter().filter(|dead| !before.contains(&key(dead))) {
        tracing::error!(
            workspace = dead.workspace,
            carrier = dead.carrier,
            reason = dead.reason(),
            "a carrier fails every domain: dead route, nothing drained"
        );
        metrics::gauge!("shortlink_carrier_dead_route", "workspace" => dead.workspace.clone(), "carrier" => dead.carrier.clone())
            .set(1.0);
        let body = serde_json::json!({
            "event": "dead-route",
            "workspace": dead.workspace,
            "carrier": dead.carrier,
            "dead_route": true,
            "domains": dead.domains,
            "finals": dead.counts.finals,
            "failures": dead.counts.failures,
            "top_errors": dead.counts.top_errors(),
            "reason": dead.reason(),
            "at": Utc::now(),
        });
        health.send_later(body.to_string());
    }
    for (workspace, carrier) in before.difference(&now) {
        tracing::warn!(
            workspace,
            carrier,
            "dead route over: the carrier delivers again"
        );
        metrics::gauge!("shortlink_carrier_dead_route", "workspace" => workspace.clone(), "carrier" => carrier.clone())
            .set(0.0);
        let body = serde_json::json!({
            "event": "dead-route",
            "workspace": workspace,
            "carrier": carrier,
            "dead_route": false,
            "at": Utc::now(),
        });
        health.send_later(body.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::Drain;

    /// Clicks from other carriers' messages on a domain drained for its receipts must not bring
    /// it back to be rejected again: only an operator restores it.
    #[test]
    fn a_drain_on_receipts_is_not_undone_by_healthy_clicks() {
        let now = Utc::now();
        let on_receipts = Event::Checked {
            evidence: Evidence {
                state: Some(State::SuspectedBlocked),
                reasons: vec!["receipts: 40 of 40".into()],
                receipts: Some(ReceiptEvidence::default()),
                ..Evidence::default()
            },
        };
        let drained = Drain::default().next(&on_receipts, 2, now).unwrap();
        assert_eq!(drained.mode, Mode::Drained);
        assert!(drained
            .reason
            .starts_with("suspected-blocked: receipts: 40 of 40"));
        let clicks_healthy = Event::Checked {
            evidence: Evidence {
                state: Some(State::Healthy),
                traffic_judged: true,
                ..Evidence::default()
            },
        };
        assert!(drained.next(&clicks_healthy, 1, now).is_none());
        let restored = drained.next(&Event::Restore, 2, now).unwrap();
        assert_eq!(restored.mode, Mode::Active);
    }
}
