//! What the receipts keep: the [`DeliveryStore`] trait, idempotent per workspace, gateway message
//! id and state; `shortlink-visits-sql` writes it for every backend, nothing half-written.

use super::model::{NewReceipt, Receipt, Recorded, Refusal};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;

#[async_trait]
pub trait DeliveryStore: Send + Sync {
    /// Records receipts in `workspace`, answered in order: each what recording it alone would
    /// have given (a repeat within the batch answers as a duplicate of the first).
    async fn record_receipts(
        &self,
        workspace: WorkspaceId,
        receipts: &[NewReceipt],
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>>;

    /// The workspace's receipts of `codes`, by gateway time (a subject's export).
    async fn receipts_of(
        &self,
        workspace: WorkspaceId,
        codes: &[String],
    ) -> StorageResult<Vec<Receipt>>;
}
