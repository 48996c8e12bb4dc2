//! A workspace's budget: what a request may use of its quotas (issue 53), and the one way to a
//! [`Reservation`] of links per day. The service's writes of new links take one
//! (`LinkService::create` a budget, `create_chunks` a reservation), and webhook subscriptions
//! are made with one, so an API handler, a console form or a job cannot issue outside the
//! quotas by forgetting them (issue 66, "Limits that hold").
//!
//! A budget comes from its workspace's stored quotas ([`super::Limits::budget`]), the settings
//! filling what the workspace leaves unset; only the operator's command line, run on the server,
//! goes without ([`Budget::command_line`], named for it at every call).

use super::quota::{check_recipients, check_webhooks, QuotaError, Quotas, Reservation};
use super::settings::LimitSettings;
use shortlink_model::WorkspaceId;

/// What a request may use of its workspace's quotas. Cheap to clone.
#[derive(Clone)]
pub struct Budget {
    workspace: WorkspaceId,
    /// 0: unlimited.
    links_per_day: u64,
    compose_recipients: u64,
    webhooks: u64,
    /// Where the day's links are counted; `None` for the command line's (nothing counted).
    counter: Option<Quotas>,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("workspace", &self.workspace)
            .field("links_per_day", &self.links_per_day)
            .field("compose_recipients", &self.compose_recipients)
            .field("webhooks", &self.webhooks)
            .field("counted", &self.counter.is_some())
            .finish()
    }
}

impl Budget {
    /// `workspace`'s budget from its stored quotas (`own`), the settings filling what it
    /// leaves unset.
    pub(super) fn new(
        counter: Quotas,
        settings: &LimitSettings,
        workspace: WorkspaceId,
        own: shortlink_store::Quotas,
    ) -> Self {
        Budget {
            workspace,
            links_per_day: own.links_per_day.unwrap_or(settings.links_per_day),
            compose_recipients: own
                .compose_recipients
                .unwrap_or(settings.compose_recipients),
            webhooks: own.webhooks.unwrap_or(settings.webhooks),
            counter: Some(counter),
        }
    }

    /// No quota: the operator's command line on the server (`import`, `compose`), which acts
    /// for the installation. Never for a request of a workspace's key or console session.
    pub fn command_line(workspace: WorkspaceId) -> Self {
        Budget {
            workspace,
            links_per_day: 0,
            compose_recipients: 0,
            webhooks: 0,
            counter: None,
        }
    }

    pub fn workspace(&self) -> WorkspaceId {
        self.workspace
    }

    /// Links per UTC day (0: unlimited).
    pub fn links_per_day(&self) -> u64 {
        self.links_per_day
    }

    /// Reserves `n` of today's links, all or none.
    pub async fn reserve_links(&self, n: u64) -> Result<Reservation, QuotaError> {
        match &self.counter {
            Some(counter) => {
                (counter.reserve_links(self.workspace.get(), n, self.links_per_day)).await
            }
            None => Ok(Reservation::uncounted(n)),
        }
    }

    /// Whether a compose's recipient number `index` (from 0) is within the quota.
    pub fn admits_recipient(&self, index: i64) -> Result<(), QuotaError> {
        check_recipients(
            u64::try_from(index).unwrap_or(0) + 1,
            self.compose_recipients,
        )
    }

    /// Whether the workspace may add a webhook subscription to its `existing` ones.
    pub fn admits_webhook(&self, existing: u64) -> Result<(), QuotaError> {
        check_webhooks(existing, self.webhooks)
    }
}
