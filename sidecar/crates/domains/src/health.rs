//! The domain health job: per short domain, its traffic against its expected share, a DNS probe,
//! a certificate probe and a canary probe through the edge; the result in `GET /api/v1/domains`,
//! in metrics, and a signed webhook on every change of state.
//!
//! Traffic: the human clicks of the last window on each domain against its expected share of
//! its workspace's (issue 53: one brand's campaign must not flag, or hide, another's domain).
//! Links issued are counted in memory per domain and per minute (only the minutes with links,
//! and only as far back as the click curve's horizon: memory does not grow with the number of
//! links). Each minute's links weigh what the [`ClickCurve`] expects of their clicks to fall in
//! the window: links issued just now have had no time to be clicked, links issued many
//! half-lives ago are hardly clicked any more. A domain's expected clicks are its workspace's
//! window clicks × its weight / the sum of the weights of its workspace's domains; far below
//! that (at least 5 clicks expected, and at least `min_issued` links issued within the horizon)
//! while its workspace's other domains get clicks is "suspected blocked", judged over the window
//! and over its recent parts (its last half, third, sixth and 15th: a domain blocked in the
//! middle of a campaign is found once the clicks after the block say so, not when the clicks
//! before it have left the window; [`super::traffic::judged_windows`]). The curve is a fixed
//! exponential decay with a configurable half-life (`--domain-health-click-half-life`), not
//! learned: the visits table has no link creation time to learn it from without a join with the
//! links per check.
//!
//! A domain's workspace is the one whose part of the issuing list names it (draining ones
//! included), as nginx last sent the list; a domain no part names is the default workspace's,
//! as nginx's host map gives unnamed hosts to `default`. With no `[<slug>]` parts every domain
//! is the default's and the check is the one it was before workspaces.
//!
//! The domains are the pool as nginx last sent it (`X-Shortlink-Pool`), the issuing list
//! (`X-Shortlink-Public-Base`), `--short-domains`, and the domains links were issued on; the
//! headers count only on requests that came through nginx (the API's `proxy_secret`), so a
//! name nobody configured is never probed. Names from requests are at most [`MAX_NAMED`], and
//! one no request has named for [`FORGET_UNNAMED`] is dropped (a domain taken out of nginx's
//! pool stops being checked; the configured ones never drop). A domain
//! is listed, as `unknown`, from the first request that names it, and a request naming a domain
//! not seen before wakes the job at once: without that, after a start the list stays empty until
//! the second tick (the first finds no pool yet, no request having come), a whole
//! `--domain-health-every` later. State lives in memory: after a restart the first check sets it
//! again (and reports a domain that is not healthy, as a change from unknown).
//!
//! After each check the job applies its findings to each domain's drain state (issue 55,
//! [`crate::drain`]), shared through SQL, and reads every domain's state back into the
//! in-process snapshot the issuing path reads; a list whose every domain is drained raises the
//! `degraded-issuing` alert.

use super::certificate::CertificateProbe;
use super::drain::{self, Drain, Event, Snapshots};
pub use super::state::State;
pub use super::traffic::ClickCurve;
use super::traffic::IssuedBuckets;
use super::webhook::Webhook;
use super::WorkspaceBases;
use chrono::{DateTime, Utc};
use serde::Serialize;
use shortlink_config::{Config, ConfigError};
use shortlink_core::sync::LockOrRecover;
use shortlink_store::audit::Origin;
use shortlink_store::Storage;
use shortlink_visits::deliveries::{NewReceipt, Recorded};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most domains requests may name: a pool is a few dozen; beyond this, new names are ignored.
pub const MAX_NAMED: usize = 1000;
/// A name no request has named for this long is forgotten. Long: a deployment may go a weekend
/// without an API request, and its pool must stay checked meanwhile.
pub const FORGET_UNNAMED: Duration = Duration::from_secs(7 * 86_400);
/// A domain's last check, as `GET /api/v1/domains` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DomainStatus {
    pub domain: String,
    /// The workspace whose part of the issuing list names the domain (draining included);
    /// `default` for a domain no part names (a pool domain, `--short-domains`).
    pub workspace: String,
    /// `unknown` until the domain's first check.
    pub state: State,
    /// Why it is not healthy (empty when healthy or unknown).
    pub reasons: Vec<String>,
    /// When it was last checked; null until its first check.
    pub last_probe: Option<DateTime<Utc>>,
    /// Links issued on it within the click curve's horizon (the window plus 8 half-lives), as of
    /// the last check (0 before the first).
    pub issued: u64,
    /// Human clicks on it within the window, as of the last check (0 before the first).
    pub clicks: i64,
    /// notAfter of the certificate the edge presents for the domain (null when the certificate
    /// probe is off or no certificate was read).
    pub certificate_expires_at: Option<DateTime<Utc>>,
    /// Whether it takes new links (issue 55): `active`, `drained` (by the health job or by
    /// hand) or `pinned`, with why, since when and what the check saw.
    pub drain: Drain,
    /// What the delivery receipts say that is not the domain's fault (issue 68): a dead route,
    /// a carrier failing every domain of the workspace (nothing drained for it).
    pub receipt_notes: Vec<String>,
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
    /// Healthy checks in a row that restore a domain the job drained.
    pub healthy_checks: u32,
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
            healthy_checks: config.domain_drain_healthy_checks,
        })
    }
}

/// Shared between the API (which records issued links and the domains requests name) and the job.
#[derive(Debug)]
pub struct DomainHealth {
    /// Every domain a request has named (pool, issuing list, `--short-domains`), with when it
    /// was last named.
    pub(crate) known: Mutex<HashMap<String, Instant>>,
    pub(crate) issued: Mutex<IssuedBuckets>,
    pub(crate) statuses: Mutex<BTreeMap<String, DomainStatus>>,
    /// Each domain's workspace, as the last issuing list from nginx says.
    pub(crate) owners: Mutex<Owners>,
    /// Wakes the job when a request names a domain not seen before. A permit given while a check
    /// runs is kept, so a domain named during a check still gets one right after it, and many
    /// new domains at once cost one check, not one each.
    pub(crate) new_domain: tokio::sync::Notify,
    /// Every domain's drain state as last read from SQL: what the issuing path reads.
    pub drains: Snapshots,
    /// Domain webhooks of changes made by requests (an operator's restore, pin, drain), for
    /// the job to deliver with its own alerts.
    pub(crate) outbox: Mutex<Vec<String>>,
    pub(crate) outbox_ready: tokio::sync::Notify,
    /// The workspaces whose every issuing domain is drained, as of the last check.
    pub(crate) degraded: Mutex<BTreeSet<String>>,
    /// How late this sidecar may learn of another's drain (its check interval, in ms; 0 with
    /// the checks off).
    pub(crate) snapshot_lag_ms: std::sync::atomic::AtomicU64,
    /// The delivery receipts' counts and dead routes ([`crate::receipt_drain`]).
    pub receipts: super::receipt_watch::ReceiptWatch,
}

impl Default for DomainHealth {
    /// Keeps issued links as far back as the default window (30m) and half-life (1h) need.
    fn default() -> Self {
        Self::new(ClickCurve::new(Duration::from_secs(3600)).horizon(Duration::from_secs(1800)))
    }
}

impl DomainHealth {
    /// Counts the final receipts just stored in workspace `slug` for the drain on rejections
    /// ([`crate::receipt_drain`]): a receipt is about one of the workspace's issuing domains or
    /// none, so a workspace without an issuing list of its own counts nothing.
    pub fn receipts_stored<'a>(
        &self,
        slug: &str,
        stored: impl IntoIterator<Item = (&'a NewReceipt, &'a Recorded)>,
    ) {
        let lists = self.issuing_lists();
        if let Some(list) = lists.as_ref().and_then(|lists| lists.of(slug)) {
            self.receipts.stored(list, slug, stored);
        }
    }

    /// Remembers issued links for `horizon` (see [`ClickCurve::horizon`]).
    pub fn new(horizon: Duration) -> Self {
        Self {
            known: Mutex::default(),
            issued: Mutex::new(IssuedBuckets::new(Instant::now(), horizon)),
            statuses: Mutex::default(),
            owners: Mutex::default(),
            new_domain: tokio::sync::Notify::new(),
            drains: Snapshots::default(),
            outbox: Mutex::default(),
            outbox_ready: tokio::sync::Notify::new(),
            degraded: Mutex::default(),
            snapshot_lag_ms: std::sync::atomic::AtomicU64::new(0),
            receipts: Default::default(),
        }
    }

    /// How long after a drain another sidecar made this one may still have issued on the
    /// domain: its check interval (the re-send list looks that far back).
    pub fn snapshot_lag(&self) -> Duration {
        Duration::from_millis(
            self.snapshot_lag_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Queues a domain webhook for the job to deliver (none is sent without a webhook URL).
    pub fn send_later(&self, body: String) {
        self.outbox.lock_or_recover().push(body);
        self.outbox_ready.notify_one();
    }

    /// Records a drain change this sidecar made for a request: in the snapshot at once (this
    /// sidecar issues accordingly from the next link; the others at their next check), on
    /// the webhook and in metrics. The caller writes the audit row.
    pub fn changed_by_request(&self, domain: &str, applied: &drain::Applied) {
        self.drains.put(domain, applied.after.clone());
        if applied.transition() {
            applied.count(domain);
            self.send_later(applied.webhook_body(domain, &self.workspace_of(domain)));
        }
    }

    /// An operator's restore, pin or drain of `domain` (the API's and the console's): stored for
    /// every sidecar, audited in `origin`'s chain, in this sidecar's snapshot at once, on the
    /// webhook. A repeat (restoring an active domain) changes nothing.
    pub async fn change_by_hand(
        &self,
        storage: &dyn Storage,
        origin: &Origin,
        domain: &str,
        event: Event,
    ) -> shortlink_store::StorageResult<()> {
        // No healthy-check threshold: an operator's change has none.
        if let Some(applied) = drain::apply(storage, domain, &event, u32::MAX).await? {
            if applied.transition() {
                storage
                    .append_audit(&applied.audit_entry(origin, domain))
                    .await?;
            }
            self.changed_by_request(domain, &applied);
        }
        Ok(())
    }

    /// Workspaces issuing on the healthiest of their drained domains, as of the last check.
    pub fn degraded_workspaces(&self) -> Vec<String> {
        self.degraded.lock_or_recover().iter().cloned().collect()
    }

    /// Records the domains a request names (normalised host names); one not seen before is
    /// listed as `unknown` at once and wakes the job for its first check.
    pub fn saw<S: AsRef<str>>(&self, domains: impl IntoIterator<Item = S>) {
        let mut new = false;
        let now = Instant::now();
        {
            let mut known = self.known.lock_or_recover();
            for domain in domains {
                let domain = domain.as_ref();
                if domain.is_empty() {
                    continue;
                }
                let room = known.len() < MAX_NAMED;
                match known.get_mut(domain) {
                    Some(seen) => *seen = now,
                    None if room => {
                        known.insert(domain.to_owned(), now);
                        new = true;
                    }
                    None => tracing::warn!(
                        domain,
                        "domain health: {MAX_NAMED} domains named already; not checked"
                    ),
                }
            }
        }
        if new {
            self.new_domain.notify_one();
        }
    }

    /// Drops the names no request has named for [`FORGET_UNNAMED`] as of `now`; the rest.
    pub(crate) fn forget_unnamed(&self, now: Instant) -> BTreeSet<String> {
        let mut known = self.known.lock_or_recover();
        known.retain(|_, seen| now.saturating_duration_since(*seen) < FORGET_UNNAMED);
        known.keys().cloned().collect()
    }

    /// Takes each domain's workspace from the issuing list nginx sent (its configuration, so
    /// only from a request that came through nginx): the domains a workspace's part names are
    /// its own, every other the default's. A list equal to the last costs a comparison. Whether
    /// the list differs from the last this process took (the first one always does): a domain
    /// may have moved between workspaces.
    pub fn sections(&self, lists: &WorkspaceBases) -> bool {
        let mut owners = self.owners.lock_or_recover();
        if owners.lists.as_ref() == Some(lists) {
            return false;
        }
        owners.by_domain = (lists.owners())
            .map(|(domain, slug)| (domain, slug.to_owned()))
            .collect();
        owners.lists = Some(lists.clone());
        true
    }

    /// Every workspace's issuing list, as nginx last sent it.
    pub(crate) fn issuing_lists(&self) -> Option<WorkspaceBases> {
        self.owners.lock_or_recover().lists.clone()
    }

    /// Whether `domain` is one the issuing list nginx sent names in workspace `slug`'s part
    /// (`None`: no list was sent since this sidecar started).
    pub fn names_in(&self, slug: &str, domain: &str) -> Option<bool> {
        let owners = self.owners.lock_or_recover();
        owners.lists.as_ref()?;
        Some(
            owners
                .by_domain
                .get(domain)
                .is_some_and(|owner| owner == slug),
        )
    }

    /// The domains the issuing list nginx sent names in workspace `slug`'s part (none before
    /// a list was sent).
    pub fn domains_of(&self, slug: &str) -> Vec<String> {
        let owners = self.owners.lock_or_recover();
        (owners.by_domain.iter())
            .filter(|(_, owner)| *owner == slug)
            .map(|(domain, _)| domain.clone())
            .collect()
    }

    /// The workspace `domain` is grouped under.
    pub fn workspace_of(&self, domain: &str) -> String {
        let owners = self.owners.lock_or_recover();
        (owners.by_domain.get(domain).cloned())
            .unwrap_or_else(|| super::issuing::DEFAULT_WORKSPACE.to_owned())
    }

    /// The workspace `domain` is known to belong to, if any (no default for an unknown one).
    pub fn owner_of(&self, domain: &str) -> Option<String> {
        self.owners.lock_or_recover().by_domain.get(domain).cloned()
    }

    pub fn issued_on(&self, domain: &str) {
        self.issued_on_many(domain, 1);
    }

    /// Counts `links` issued on `domain` now, under one lock.
    pub fn issued_on_many(&self, domain: &str, links: u64) {
        let mut issued = self.issued.lock_or_recover();
        issued.record(domain, links, Instant::now());
    }

    /// Every domain checked or named so far, by workspace and name; those not checked yet as
    /// `unknown`. The workspace is the list's as of now, not of the last check: a domain moved
    /// to another part of the list is grouped there at once.
    pub fn statuses(&self) -> Vec<DomainStatus> {
        let known: Vec<String> = self.known.lock_or_recover().keys().cloned().collect();
        let mut all = self.statuses.lock_or_recover().clone();
        for domain in known {
            all.entry(domain)
                .or_insert_with_key(|domain| DomainStatus::unknown(domain));
        }
        let owners = self.owners.lock_or_recover();
        let drains = self.drains.current();
        let mut all: Vec<DomainStatus> = (all.into_values())
            .map(|status| owners.label(status))
            .map(|mut status| {
                status.drain = drains.drain(&status.domain);
                status.receipt_notes = self.receipts.notes(&status.workspace, &status.domain);
                status
            })
            .collect();
        all.sort_by(|a, b| (&a.workspace, &a.domain).cmp(&(&b.workspace, &b.domain)));
        all
    }

    /// The statuses of `workspace`'s domains only.
    pub fn statuses_of(&self, workspace: &str) -> Vec<DomainStatus> {
        let mut all = self.statuses();
        all.retain(|status| status.workspace == workspace);
        all
    }

    pub fn status(&self, domain: &str) -> Option<DomainStatus> {
        let checked = self.statuses.lock_or_recover().get(domain).cloned();
        let status = checked.or_else(|| {
            let known = self.known.lock_or_recover();
            known
                .contains_key(domain)
                .then(|| DomainStatus::unknown(domain))
        })?;
        let mut status = self.owners.lock_or_recover().label(status);
        status.drain = self.drains.current().drain(domain);
        status.receipt_notes = self.receipts.notes(&status.workspace, domain);
        Some(status)
    }
}

/// Which workspace each domain is: the domains each part of the issuing list names (see
/// [`WorkspaceBases::owners`]), from the last list nginx sent.
#[derive(Debug, Default)]
pub(crate) struct Owners {
    pub(crate) lists: Option<WorkspaceBases>,
    pub(crate) by_domain: HashMap<String, String>,
}

impl Owners {
    fn label(&self, mut status: DomainStatus) -> DomainStatus {
        status.workspace = (self.by_domain.get(&status.domain).cloned())
            .unwrap_or_else(|| super::issuing::DEFAULT_WORKSPACE.to_owned());
        status
    }
}

impl DomainStatus {
    fn unknown(domain: &str) -> Self {
        Self {
            domain: domain.to_owned(),
            workspace: super::issuing::DEFAULT_WORKSPACE.to_owned(),
            state: State::Unknown,
            reasons: Vec::new(),
            last_probe: None,
            issued: 0,
            clicks: 0,
            certificate_expires_at: None,
            drain: Drain::default(),
            receipt_notes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_grouped_by_the_part_of_the_list_naming_them() {
        let health = DomainHealth::default();
        health.saw([
            "s1.example",
            "pool-only.example",
            "a1.example",
            "a0.example",
        ]);
        let lists = WorkspaceBases::parse(
            "https://s1.example [brand-a] https://a1.example https://a0.example draining",
        )
        .unwrap();
        health.sections(&lists);
        let grouped: Vec<(String, String)> = (health.statuses().into_iter())
            .map(|status| (status.workspace, status.domain))
            .collect();
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            (list.iter())
                .map(|(w, d)| (w.to_string(), d.to_string()))
                .collect()
        };
        assert_eq!(
            grouped,
            pairs(&[
                ("brand-a", "a0.example"),
                ("brand-a", "a1.example"),
                ("default", "pool-only.example"),
                ("default", "s1.example"),
            ])
        );
        assert_eq!(health.statuses_of("brand-a").len(), 2);
        assert_eq!(health.status("a0.example").unwrap().workspace, "brand-a");
        // The next list moves a domain: grouped there at once.
        health.sections(
            &WorkspaceBases::parse("https://s1.example [brand-b] https://a1.example").unwrap(),
        );
        assert_eq!(health.workspace_of("a1.example"), "brand-b");
        assert_eq!(health.workspace_of("a0.example"), "default");
        assert!(health.statuses_of("brand-a").is_empty());
    }

    #[test]
    fn named_domains_are_bounded_and_forgotten() {
        let health = DomainHealth::default();
        health.saw((0..MAX_NAMED + 50).map(|n| format!("d{n}.example")));
        assert_eq!(health.statuses().len(), MAX_NAMED, "at most MAX_NAMED");
        assert!(health.status("d0.example").is_some());
        assert!(health.status(&format!("d{MAX_NAMED}.example")).is_none());
        let later = Instant::now() + FORGET_UNNAMED / 2;
        assert_eq!(health.forget_unnamed(later).len(), MAX_NAMED);
        let much_later = Instant::now() + FORGET_UNNAMED + Duration::from_secs(1);
        assert!(health.forget_unnamed(much_later).is_empty());
        assert!(health.status("d0.example").is_none());
    }
}
