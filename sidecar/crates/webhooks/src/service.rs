//! What the API and the console do with subscriptions and the feed: checks, then one store call.

use super::audit;
use super::cursor::Cursor;
use super::event::Privacy;
use super::feed::{FeedFilter, FeedReader, Page};
use super::link_visits::{LinkVisits, NameSystem, VisitQuery};
use super::store::Failure;
use super::store::Stores;
use super::subscription::{Checks, Subscription, SubscriptionRequest, SubscriptionView};
use super::WebhookSettings;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_core::limits::{Budget, QuotaError};
use shortlink_model::link::Invalid;
use shortlink_model::validate::UrlPolicy;
use shortlink_model::WorkspaceId;
use shortlink_store::audit::Origin;
use shortlink_store::{Storage, StorageError};
use std::sync::Arc;
use utoipa::ToSchema;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("no such webhook")]
    NotFound,
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The workspace has as many subscriptions as its quota allows.
    #[error(transparent)]
    Quota(#[from] QuotaError),
}

pub type WebhookResult<T> = Result<T, WebhookError>;

/// Events given up on after the retry window, as the API shows them.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FailureView {
    pub id: i64,
    /// The feed positions of the first event given up on and of the one after the last.
    pub from: String,
    pub to: String,
    pub events: i64,
    pub failed_at: DateTime<Utc>,
    pub error: String,
}

impl From<Failure> for FailureView {
    fn from(f: Failure) -> Self {
        FailureView {
            id: f.id,
            from: f.from.to_string(),
            to: f.to.to_string(),
            events: f.events,
            failed_at: DateTime::from_timestamp_millis(f.failed_ms).unwrap_or_default(),
            error: f.error,
        }
    }
}

/// Where a replay starts: at a time, or at a failure. Delivery goes on from there through every
/// later event (receivers de-duplicate by id).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// The visits stored at or after this time (RFC 3339).
    #[serde(default)]
    pub from: Option<DateTime<Utc>>,
    /// The first event of this failure (`GET .../failures`).
    #[serde(default)]
    pub failure: Option<i64>,
}

pub struct WebhookService {
    stores: Stores,
    /// Where changes are recorded (the audit log is the links' storage's). Subscriptions live
    /// in the visit store, so a change's row is appended just after it, not in its transaction.
    audit: Arc<dyn Storage>,
    policy: UrlPolicy,
    own_domains: Vec<String>,
    allow_private: bool,
    privacy: Privacy,
}

/// Failures listed at most.
const FAILURES_SHOWN: u32 = 100;

impl WebhookService {
    /// The stores it reads and writes (the deliverer shares them).
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    pub fn new(
        stores: Stores,
        audit: Arc<dyn Storage>,
        policy: UrlPolicy,
        own_domains: Vec<String>,
        settings: &WebhookSettings,
    ) -> Self {
        Self {
            stores,
            audit,
            policy,
            own_domains,
            allow_private: settings.allow_private,
            privacy: settings.privacy,
        }
    }

    fn checks(&self) -> Checks<'_> {
        Checks {
            policy: &self.policy,
            own_domains: &self.own_domains,
            allow_private: self.allow_private,
        }
    }

    /// A new subscription, delivering the visits stored from now on.
    /// Subscribes `budget`'s workspace, within its quota of subscriptions (checked here, so
    /// every caller, API or console, is held to it).
    pub async fn create(
        &self,
        budget: &Budget,
        request: SubscriptionRequest,
        origin: &Origin,
    ) -> WebhookResult<SubscriptionView> {
        let workspace = budget.workspace();
        budget.admits_webhook(self.count(workspace).await?)?;
        let (spec, secret) = request.check(&self.checks())?;
        let webhooks = &self.stores.webhooks;
        let subscription = Subscription {
            id: new_id()?,
            workspace,
            spec,
            secret,
            created_ms: Utc::now().timestamp_millis(),
            revision: 1,
            cursor: Cursor::after_row(webhooks.feed_head().await?),
            lease_owner: None,
            lease_until_ms: 0,
            delivered: 0,
            failing_since_ms: None,
            attempts: 0,
            last_error: None,
        };
        webhooks.insert_subscription(&subscription).await?;
        let changes = audit::changes(None, Some((&subscription.spec, &subscription.secret)));
        let entry = origin.entry("webhook.create", &subscription.id, changes);
        self.audit.append_audit(&entry).await?;
        Ok(SubscriptionView::from(&subscription))
    }

    /// `workspace`'s subscriptions (each workspace has a few: read whole, kept by owner).
    pub async fn list(&self, workspace: WorkspaceId) -> WebhookResult<Vec<SubscriptionView>> {
        let all = self.stores.webhooks.subscriptions().await?;
        let theirs = all.iter().filter(|s| s.workspace == workspace);
        Ok(theirs.map(SubscriptionView::from).collect())
    }

    /// How many subscriptions `workspace` has (its quota).
    pub async fn count(&self, workspace: WorkspaceId) -> WebhookResult<u64> {
        Ok(self.list(workspace).await?.len() as u64)
    }

    pub async fn get(&self, workspace: WorkspaceId, id: &str) -> WebhookResult<SubscriptionView> {
        Ok(SubscriptionView::from(&self.owned(workspace, id).await?))
    }

    /// The subscription `id` if `workspace` owns it; another workspace's is not found, as a
    /// missing one.
    async fn owned(&self, workspace: WorkspaceId, id: &str) -> WebhookResult<Subscription> {
        match self.stores.webhooks.subscription(id).await? {
            Some(s) if s.workspace == workspace => Ok(s),
            _ => Err(WebhookError::NotFound),
        }
    }

    /// Replaces what the subscription is, secret included; its place in the feed stays.
    pub async fn replace(
        &self,
        workspace: WorkspaceId,
        id: &str,
        request: SubscriptionRequest,
        origin: &Origin,
    ) -> WebhookResult<SubscriptionView> {
        let before = Some(self.owned(workspace, id).await?);
        let (spec, secret) = request.check(&self.checks())?;
        let webhooks = &self.stores.webhooks;
        if !webhooks.update_subscription(id, &spec, &secret).await? {
            return Err(WebhookError::NotFound);
        }
        let before = before.as_ref().map(|b| (&b.spec, b.secret.as_str()));
        let changes = audit::changes(before, Some((&spec, &secret)));
        let entry = origin.entry("webhook.update", id, changes);
        self.audit.append_audit(&entry).await?;
        self.get(workspace, id).await
    }

    pub async fn delete(
        &self,
        workspace: WorkspaceId,
        id: &str,
        origin: &Origin,
    ) -> WebhookResult<()> {
        let before = Some(self.owned(workspace, id).await?);
        let webhooks = &self.stores.webhooks;
        if !webhooks.delete_subscription(id).await? {
            return Err(WebhookError::NotFound);
        }
        let before = before.as_ref().map(|b| (&b.spec, b.secret.as_str()));
        let entry = origin.entry("webhook.delete", id, audit::changes(before, None));
        self.audit.append_audit(&entry).await?;
        Ok(())
    }

    pub async fn failures(
        &self,
        workspace: WorkspaceId,
        id: &str,
    ) -> WebhookResult<Vec<FailureView>> {
        self.owned(workspace, id).await?;
        let failures = self.stores.webhooks.failures(id, FAILURES_SHOWN).await?;
        Ok(failures.into_iter().map(FailureView::from).collect())
    }

    pub async fn replay(
        &self,
        workspace: WorkspaceId,
        id: &str,
        request: ReplayRequest,
    ) -> WebhookResult<SubscriptionView> {
        self.owned(workspace, id).await?;
        let webhooks = &self.stores.webhooks;
        let cursor = match (request.from, request.failure) {
            (Some(from), None) => {
                match webhooks.feed_seq_since(from.timestamp_millis()).await? {
                    Some(seq) => Cursor { seq, index: 0 },
                    // Nothing stored since: from the end.
                    None => Cursor::after_row(webhooks.feed_head().await?),
                }
            }
            (None, Some(failure)) => match webhooks.failure(id, failure).await? {
                Some(failure) => failure.from,
                None => {
                    return Err(
                        Invalid::new("unknown_failure", "this webhook has no such failure").into(),
                    )
                }
            },
            _ => {
                return Err(Invalid::new(
                    "invalid_replay",
                    "give either `from` (a time) or `failure` (an id)",
                )
                .into())
            }
        };
        if !webhooks.rewind(id, cursor).await? {
            return Err(WebhookError::NotFound);
        }
        self.get(workspace, id).await
    }

    /// The page of `workspace`'s link `code`'s visits `query` asks for, newest first: each as
    /// the feed gives it away, its reasons in words ([`super::link_visits`]; `system` names a
    /// hosting visit's autonomous system).
    pub async fn link_visits(
        &self,
        workspace: WorkspaceId,
        code: &str,
        query: &VisitQuery,
        system: NameSystem<'_>,
    ) -> WebhookResult<LinkVisits> {
        let store = self.stores.webhooks.as_ref();
        let page = super::link_visits::read(store, self.privacy, workspace, code, query, system);
        Ok(page.await?)
    }

    /// A page of the feed (`GET /api/v1/visits`).
    pub async fn feed(
        &self,
        after: Cursor,
        filter: &FeedFilter,
        limit: usize,
    ) -> WebhookResult<Page> {
        let mut reader = FeedReader::new(self.stores.clone(), self.privacy);
        Ok(reader.read(after, filter, limit).await?)
    }
}

/// `wh_` and 16 random hex digits.
fn new_id() -> WebhookResult<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| StorageError::Corrupt(format!("no randomness for an id: {e}")))?;
    Ok(format!("wh_{}", shortlink_model::validate::hex(&bytes)))
}
