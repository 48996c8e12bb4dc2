//! A workspace's quotas as they apply to a request (issue 53): its own where the operator set
//! them, else the settings'. Links per day are counted in Redis, shared by every sidecar
//! (`shortlink_core::limits::Quotas`); recipients and webhooks are checked against counts.
//!
//! Where a request is cut: a single create is refused whole (429 `quota_exceeded`); a batch or a
//! compose reserves each group of chunks (up to 8,000 links) before issuing it, in order, so a
//! JSON array (at most 10,000 items) of up to a group is refused whole before anything is issued,
//! and a longer one is cut at the first group that does not fit: that group's items and every
//! later one are answered `quota_exceeded`, nothing of them issued, what came before stays.

use super::{AppState, InWorkspace, Result};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use shortlink_core::limits::{check_recipients, check_webhooks, QuotaError, Reservation};
use shortlink_store::{Quotas, WorkspaceId};

/// What a request may use of its workspace's quotas.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub workspace: WorkspaceId,
    /// 0: unlimited.
    pub links_per_day: u64,
    pub compose_recipients: u64,
    pub webhooks: u64,
}

impl Budget {
    /// `workspace`'s budget from its stored quotas, the settings filling what it leaves unset.
    pub fn of(state: &AppState, workspace: WorkspaceId, own: Quotas) -> Self {
        let settings = state.limits.settings;
        Budget {
            workspace,
            links_per_day: own.links_per_day.unwrap_or(settings.links_per_day),
            compose_recipients: own
                .compose_recipients
                .unwrap_or(settings.compose_recipients),
            webhooks: own.webhooks.unwrap_or(settings.webhooks),
        }
    }

    /// No limit: the console and the command line, run by the workspace's own people.
    pub fn unmetered(workspace: WorkspaceId) -> Self {
        Budget {
            workspace,
            links_per_day: 0,
            compose_recipients: 0,
            webhooks: 0,
        }
    }

    /// Reserves `n` of today's links, all or none.
    pub async fn reserve_links(
        &self,
        state: &AppState,
        n: u64,
    ) -> std::result::Result<Reservation, QuotaError> {
        (state.limits.quotas)
            .reserve_links(self.workspace.get(), n, self.links_per_day)
            .await
    }

    /// Whether a compose's recipient number `index` (from 0) is within the quota.
    pub fn admits_recipient(&self, index: i64) -> std::result::Result<(), QuotaError> {
        check_recipients(
            u64::try_from(index).unwrap_or(0) + 1,
            self.compose_recipients,
        )
    }

    /// Whether the workspace may add a webhook subscription to its `existing` ones.
    pub fn admits_webhook(&self, existing: u64) -> Result<()> {
        Ok(check_webhooks(existing, self.webhooks)?)
    }
}

impl FromRequestParts<AppState> for Budget {
    type Rejection = super::Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        let InWorkspace(workspace) = InWorkspace::from_request_parts(parts, state).await?;
        let own = parts
            .extensions
            .get::<Quotas>()
            .copied()
            .unwrap_or_default();
        Ok(Budget::of(state, workspace, own))
    }
}
