//! What the feed and the webhooks keep in SQL: the [`WebhookStore`] trait, implemented for every
//! backend by `shortlink-visits-sql` (same statements everywhere; times are Unix milliseconds in
//! integer columns, so no backend stores them its own way).

use super::cursor::Cursor;
use super::event::StoredLinkEvent;
pub use super::row::FeedRow;
use super::subscription::{Subscription, SubscriptionSpec};
use async_trait::async_trait;
use shortlink_store::StorageResult;
use shortlink_visits::store::VisitStore;
use std::sync::Arc;

/// One database as the webhooks read it: the visit store (the visits and conversions the feed
/// hands out) and the webhooks' own tables. The binary opens both on the same pools
/// (`shortlink-visits-sql`), so that this crate depends on the traits alone.
#[derive(Clone)]
pub struct Stores {
    pub visits: Arc<dyn VisitStore>,
    pub webhooks: Arc<dyn WebhookStore>,
}

/// One row of `visit_feed`: the visits one transaction stored, in the order it wrote them.
#[derive(Debug, Clone)]
pub struct FeedBatch {
    pub seq: i64,
    pub committed_ms: i64,
    pub event_ids: Vec<String>,
    /// The first and last time (Unix ms) of its visits: rows written before migration 58, and
    /// rows of conversions, have none.
    pub visits_within: Option<(i64, i64)>,
}

/// What a deliverer writes back after an attempt: where the subscription stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub cursor: Cursor,
    /// Events delivered by this attempt (added to the total).
    pub delivered: i64,
    pub failing_since_ms: Option<i64>,
    pub attempts: i64,
    pub last_error: Option<String>,
}

/// A deliverer's hold on a subscription: writes under it are refused once another sidecar took
/// the lease or the subscription changed (`revision`).
#[derive(Debug, Clone)]
pub struct Lease {
    pub id: String,
    pub owner: String,
    pub revision: i64,
    pub until_ms: i64,
}

/// Events given up on after the retry window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub id: i64,
    pub from: Cursor,
    pub to: Cursor,
    pub events: i64,
    pub failed_ms: i64,
    pub error: String,
}

#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Up to `limit` feed rows from `from_seq` on, in order.
    async fn feed_batches(&self, from_seq: i64, limit: u32) -> StorageResult<Vec<FeedBatch>>;
    /// The visits of `ids` still stored (retention may have removed some), in no order; all
    /// made `within` these times (Unix ms, inclusive) if given.
    async fn feed_rows(
        &self,
        ids: &[String],
        within: Option<(i64, i64)>,
    ) -> StorageResult<Vec<FeedRow>>;
    /// The link events (`le_…`) of `ids` still stored, in no order.
    async fn link_events(&self, ids: &[String]) -> StorageResult<Vec<StoredLinkEvent>>;
    /// Up to `limit` stored visits of `workspace`'s link `code`, newest first (by time, then
    /// id), older than `before` and with the verdict `audience` if given: the rows
    /// [`Self::feed_rows`] reads, by link.
    async fn link_visits(
        &self,
        workspace: shortlink_model::WorkspaceId,
        code: &str,
        before: Option<&super::link_visits::VisitKey>,
        audience: Option<shortlink_wire::agent::Audience>,
        limit: u32,
    ) -> StorageResult<Vec<FeedRow>>;
    /// A link's tags column (JSON) as stored now; `None` without tags or link.
    async fn link_tags(&self, code: &str) -> StorageResult<Option<String>>;
    /// The last feed row's seq (0 for none).
    async fn feed_head(&self) -> StorageResult<i64>;
    /// The first feed row committed at or after `at_ms`.
    async fn feed_seq_since(&self, at_ms: i64) -> StorageResult<Option<i64>>;

    async fn insert_subscription(&self, subscription: &Subscription) -> StorageResult<()>;
    async fn subscriptions(&self) -> StorageResult<Vec<Subscription>>;
    async fn subscription(&self, id: &str) -> StorageResult<Option<Subscription>>;
    /// Changes what a subscription is; `false` when there is none.
    async fn update_subscription(
        &self,
        id: &str,
        spec: &SubscriptionSpec,
        secret: &str,
    ) -> StorageResult<bool>;
    async fn delete_subscription(&self, id: &str) -> StorageResult<bool>;
    /// Sends the subscription back to `cursor` (a replay) and clears its retry state.
    async fn rewind(&self, id: &str, cursor: Cursor) -> StorageResult<bool>;

    /// Takes or renews the lease when it is free, expired or already `lease.owner`'s.
    async fn claim(&self, lease: &Lease, now_ms: i64) -> StorageResult<bool>;
    /// Saves `progress` (and renews the lease) unless the lease or revision is no longer current.
    async fn advance(&self, lease: &Lease, progress: &Progress) -> StorageResult<bool>;
    /// [`WebhookStore::advance`] past events given up on, recording them, in one transaction.
    async fn give_up(
        &self,
        lease: &Lease,
        progress: &Progress,
        failure: &Failure,
    ) -> StorageResult<bool>;
    /// The subscription's failures, newest first.
    async fn failures(&self, id: &str, limit: u32) -> StorageResult<Vec<Failure>>;
    async fn failure(&self, id: &str, failure: i64) -> StorageResult<Option<Failure>>;
}
