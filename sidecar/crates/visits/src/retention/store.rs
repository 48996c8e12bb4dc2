//! Retention policies and the deletes they ask for: the [`RetentionStore`] trait, implemented for
//! every backend by `shortlink-visits-sql`.

use super::model::{RetentionPolicy, VisitScope};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;

#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// The workspace's policy (all `None` when it has none).
    async fn policy(&self, workspace: WorkspaceId) -> StorageResult<RetentionPolicy>;

    /// Replaces the workspace's policy whole.
    async fn set_policy(
        &self,
        workspace: WorkspaceId,
        policy: &RetentionPolicy,
    ) -> StorageResult<()>;

    /// Every workspace's policy that sets anything.
    async fn policies(&self) -> StorageResult<Vec<(WorkspaceId, RetentionPolicy)>>;

    /// Deletes at most `limit` raw visits of `scope` from before `before`; how many went.
    async fn delete_scoped_visits(
        &self,
        scope: &VisitScope,
        before: DateTime<Utc>,
        limit: u32,
    ) -> StorageResult<u64>;

    /// Deletes the delivery receipts of `scope`'s links received before `before_ms`, and the
    /// message states last reported before it; how many receipts went.
    async fn delete_scoped_receipts(
        &self,
        scope: &VisitScope,
        before_ms: i64,
    ) -> StorageResult<u64>;

    /// Deletes the workspace's conversions from before `before_ms`: of `campaign`, or (`None`)
    /// of every link but those of `except`'s campaigns.
    async fn delete_conversions(
        &self,
        workspace: WorkspaceId,
        campaign: Option<&str>,
        except: &[String],
        before_ms: i64,
    ) -> StorageResult<u64>;

    /// Deletes the workspace's webhook failures recorded before `before_ms`.
    async fn delete_webhook_failures(
        &self,
        workspace: WorkspaceId,
        before_ms: i64,
    ) -> StorageResult<u64>;
}
