//! Scheduled jobs, both off by default:
//!
//! - `--expire-idle-after D`: links with no (counted) visit for `D` — by `last_visit_at`, or
//!   `created_at` if never visited — get `expires_at = now` through the link write path
//!   ([`LinkService::update`]: SQL and the Redis record together), so nginx answers 410 at once and
//!   404 after `--expired-grace`. Revoked and already expired links are left alone. A visit still
//!   in the stream when the job runs does not save a link (the job reads SQL).
//! - `--visit-retention D`: raw visits older than `D` are deleted in chunks; rollups, and with them
//!   every stat, stay.
//! - Retention policies of workspaces and campaigns ([`crate::retention`]): their raw visits,
//!   conversions and webhook failures past their own retention; the flag above then covers only
//!   the links no policy rules. Checked at every run, so the job runs even without the flags.
//! - PostgreSQL's visits are partitioned by day (`store/postgres/partitions.rs`): each run
//!   creates the coming days, and the days every retention in force has let go are dropped
//!   whole before the row deletes above take what is left.

use super::retention;
use super::store::VisitStore;
use shortlink_core::background::{self, Shutdown};
use shortlink_core::service::{LinkPatch, LinkService, ServiceError};
use shortlink_store::audit::{Actor, Origin};
use shortlink_store::{self as storage, StorageError};
use std::sync::Arc;
use std::time::Duration;

/// Links looked at per page.
const PAGE: u32 = 500;
/// Visits deleted per statement (short write locks on SQLite).
const DELETE_CHUNK: u32 = 10_000;

#[derive(Debug, Clone, Default)]
pub struct CleanupSettings {
    pub expire_idle_after: Option<Duration>,
    pub visit_retention: Option<Duration>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanupReport {
    pub links_expired: u64,
    pub visits_deleted: u64,
    /// By workspace and campaign policies.
    pub conversions_deleted: u64,
    pub webhook_failures_deleted: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error("duration out of range")]
    Range,
}

fn ago(duration: Duration) -> Result<chrono::DateTime<chrono::Utc>, CleanupError> {
    let delta = chrono::Duration::from_std(duration).map_err(|_| CleanupError::Range)?;
    storage::now()
        .checked_sub_signed(delta)
        .ok_or(CleanupError::Range)
}

/// Expires every live link idle for `idle`; returns how many.
pub async fn expire_idle_links(
    links: &LinkService,
    store: &dyn VisitStore,
    idle: Duration,
) -> Result<u64, CleanupError> {
    let idle_since = ago(idle)?;
    let mut after: Option<String> = None;
    let mut expired = 0;
    loop {
        let now = storage::now();
        let page = store
            .idle_links(now, idle_since, after.as_deref(), PAGE)
            .await?;
        let Some(last) = page.last() else { break };
        after = Some(last.code.clone());
        for link in &page {
            let patch = LinkPatch::expire_now();
            // The job's change, in the link's workspace's chain.
            let mut origin = Origin::new(Actor::system("idle-expiry"));
            origin.workspace_id = link.workspace.get();
            match links
                .update(link.workspace, &link.code, patch, &origin)
                .await
            {
                Ok(_) => expired += 1,
                // Revoked or deleted since the page was read.
                Err(ServiceError::NotFound | ServiceError::Revoked) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    if expired > 0 {
        tracing::info!(expired, idle = %humantime::format_duration(idle), "expired idle links");
    }
    Ok(expired)
}

/// Deletes raw visits older than `retention` (`None`: kept) of the links no policy rules, and
/// what each workspace's and campaign's policy lets go (visits, conversions, webhook failures).
pub async fn delete_old_visits(
    store: &dyn VisitStore,
    retention: Option<Duration>,
) -> Result<retention::Deleted, CleanupError> {
    let policies = store.retention().policies().await?;
    let longest = retention::longest_visits(retention, &policies);
    let mut dropped = 0;
    if let Some(days) = store.day_partitions() {
        days.prepare_days(storage::now()).await?;
        if let Some(longest) = longest {
            // A day past the longest retention in force is past every visit's own.
            dropped = days.drop_days_before(ago(longest)?).await?;
        }
        days.settle_days(storage::now()).await?;
    }
    let mut deleted = retention::apply(store, &policies, storage::now()).await?;
    deleted.visits += dropped;
    if let Some(retention) = retention {
        let before = ago(retention)?;
        let ruled = retention::ruled(&policies);
        if ruled == retention::ruled(&[]) {
            // No policy: every visit is the flag's, deleted by time alone.
            loop {
                let n = store.delete_visits_before(before, DELETE_CHUNK).await?;
                deleted.visits += n;
                if n < u64::from(DELETE_CHUNK) {
                    break;
                }
                tokio::task::yield_now().await;
            }
        } else {
            deleted.visits += retention::delete_visits(store, &ruled, before).await?;
        }
        // Delivery receipts go with the raw visits of their links.
        deleted.receipts += (store.retention())
            .delete_scoped_receipts(&ruled, before.timestamp_millis())
            .await?;
        delete_old_orphans(store, before).await?;
    }
    // The feed's rows of those visits: a reader skips ids whose visit is gone, so they may go
    // after the visits (one row per visit transaction, few to delete); while a policy keeps
    // visits longer than the flag, at the longest.
    if let Some(longest) = longest {
        store.prune_feed(ago(longest)?.timestamp_millis()).await?;
    }
    if deleted != retention::Deleted::default() {
        tracing::info!(
            visits = deleted.visits,
            conversions = deleted.conversions,
            receipts = deleted.receipts,
            webhook_failures = deleted.webhook_failures,
            "deleted past retention"
        );
    }
    Ok(deleted)
}

/// Deletes raw orphan visits (crate::orphans) made before `before`: the flag's retention, as
/// no policy names a host (their per-domain counts stay).
async fn delete_old_orphans(
    store: &dyn VisitStore,
    before: chrono::DateTime<chrono::Utc>,
) -> Result<(), CleanupError> {
    let mut deleted = 0;
    loop {
        let n = (store.orphans())
            .delete_orphans_before(before, u64::from(DELETE_CHUNK))
            .await?;
        deleted += n;
        if n < u64::from(DELETE_CHUNK) {
            break;
        }
        tokio::task::yield_now().await;
    }
    if deleted > 0 {
        tracing::info!(orphan_visits = deleted, "deleted past retention");
    }
    Ok(())
}

/// Runs the enabled jobs once.
pub async fn run_once(
    settings: &CleanupSettings,
    links: &LinkService,
    store: &dyn VisitStore,
) -> Result<CleanupReport, CleanupError> {
    let mut report = CleanupReport::default();
    if let Some(idle) = settings.expire_idle_after {
        report.links_expired = expire_idle_links(links, store, idle).await?;
    }
    let deleted = delete_old_visits(store, settings.visit_retention).await?;
    report.visits_deleted = deleted.visits;
    report.conversions_deleted = deleted.conversions;
    report.webhook_failures_deleted = deleted.webhook_failures;
    Ok(report)
}

/// Runs the enabled jobs every `every` until `shutdown` (a [`shortlink_core::background::Tasks`] job): a
/// run in progress finishes first; failures are logged and the next run tries again.
pub async fn run(
    settings: CleanupSettings,
    every: Duration,
    links: Arc<LinkService>,
    store: Arc<dyn VisitStore>,
    mut shutdown: Shutdown,
) {
    loop {
        if let Err(error) = run_once(&settings, &links, store.as_ref()).await {
            tracing::warn!(%error, "cleanup job failed; retrying at the next run");
        }
        if !background::pause(&mut shutdown, every).await {
            return;
        }
    }
}
