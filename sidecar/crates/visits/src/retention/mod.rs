//! Retention per workspace and per campaign (issue 56, docs/PRIVACY.md "Retention"): how long raw
//! visits, conversions and webhook failures are kept. Delivery receipts (issue 68) are kept as
//! long as the raw visits of their links: the same policy deletes both. A campaign's policy overrides its
//! workspace's for that campaign's links; a workspace's overrides the installation's flag
//! (`--visit-retention`, the default for raw visits; conversions and webhook failures are kept
//! until a policy says otherwise). Run by the cleanup job ([`crate::cleanup`]).

mod model;
mod store;

pub use model::{CampaignRetention, RetentionPolicy, VisitScope, WorkspaceRetention};
pub use store::RetentionStore;

use crate::store::VisitStore;
use chrono::{DateTime, Duration, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;

/// What one run deleted by policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deleted {
    pub visits: u64,
    pub conversions: u64,
    /// Delivery receipts, with the message states last reported before the same time.
    pub receipts: u64,
    pub webhook_failures: u64,
}

/// Visits deleted per round trip.
const CHUNK: u32 = 10_000;

fn days_before(now: DateTime<Utc>, days: i64) -> DateTime<Utc> {
    now - Duration::days(days)
}

/// Deletes every visit of `scope` from before `before`, a chunk at a time.
pub async fn delete_visits(
    store: &dyn VisitStore,
    scope: &VisitScope,
    before: DateTime<Utc>,
) -> StorageResult<u64> {
    let mut deleted = 0;
    loop {
        let n = store
            .retention()
            .delete_scoped_visits(scope, before, CHUNK)
            .await?;
        deleted += n;
        if n < u64::from(CHUNK) {
            return Ok(deleted);
        }
        tokio::task::yield_now().await;
    }
}

/// The links whose visits a policy, not the installation's flag, decides.
pub fn ruled(policies: &[(WorkspaceId, RetentionPolicy)]) -> VisitScope {
    let mut workspaces = Vec::new();
    let mut campaigns = Vec::new();
    for (workspace, policy) in policies {
        if policy.workspace.visits_days.is_some() {
            workspaces.push(*workspace);
        }
        for c in &policy.campaigns {
            if c.visits_days.is_some() {
                campaigns.push((*workspace, c.campaign.clone()));
            }
        }
    }
    VisitScope::Rest {
        workspaces,
        campaigns,
    }
}

/// Applies every policy once at `now`: each campaign's, then each workspace's for its other
/// links. The installation's default is the caller's ([`crate::cleanup`]), outside [`ruled`].
pub async fn apply(
    store: &dyn VisitStore,
    policies: &[(WorkspaceId, RetentionPolicy)],
    now: DateTime<Utc>,
) -> StorageResult<Deleted> {
    let mut deleted = Deleted::default();
    for (workspace, policy) in policies {
        let workspace = *workspace;
        let own = |pick: fn(&CampaignRetention) -> Option<i64>| -> Vec<String> {
            (policy.campaigns.iter())
                .filter(|c| pick(c).is_some())
                .map(|c| c.campaign.clone())
                .collect()
        };
        for c in &policy.campaigns {
            if let Some(days) = c.visits_days {
                let scope = VisitScope::Campaign {
                    workspace,
                    campaign: c.campaign.clone(),
                };
                let before = days_before(now, days);
                deleted.visits += delete_visits(store, &scope, before).await?;
                deleted.receipts += (store.retention())
                    .delete_scoped_receipts(&scope, before.timestamp_millis())
                    .await?;
            }
            if let Some(days) = c.conversions_days {
                let before = days_before(now, days).timestamp_millis();
                deleted.conversions += (store.retention())
                    .delete_conversions(workspace, Some(&c.campaign), &[], before)
                    .await?;
            }
        }
        let w = &policy.workspace;
        if let Some(days) = w.visits_days {
            let scope = VisitScope::Workspace {
                workspace,
                except: own(|c| c.visits_days),
            };
            let before = days_before(now, days);
            deleted.visits += delete_visits(store, &scope, before).await?;
            deleted.receipts += (store.retention())
                .delete_scoped_receipts(&scope, before.timestamp_millis())
                .await?;
        }
        if let Some(days) = w.conversions_days {
            let before = days_before(now, days).timestamp_millis();
            deleted.conversions += (store.retention())
                .delete_conversions(workspace, None, &own(|c| c.conversions_days), before)
                .await?;
        }
        if let Some(days) = w.webhook_failures_days {
            let before = days_before(now, days).timestamp_millis();
            deleted.webhook_failures += (store.retention())
                .delete_webhook_failures(workspace, before)
                .await?;
        }
    }
    Ok(deleted)
}

/// The longest raw-visit retention in force (the feed keeps its rows that long), or `None`
/// while any visit is kept forever.
pub fn longest_visits(
    default: Option<std::time::Duration>,
    policies: &[(WorkspaceId, RetentionPolicy)],
) -> Option<std::time::Duration> {
    let days = (policies.iter())
        .flat_map(|(_, p)| {
            std::iter::once(p.workspace.visits_days)
                .chain(p.campaigns.iter().map(|c| c.visits_days))
        })
        .flatten()
        .max()
        .map(|days| std::time::Duration::from_secs(u64::try_from(days).unwrap_or(0) * 86_400));
    Some(default?.max(days.unwrap_or_default()))
}
