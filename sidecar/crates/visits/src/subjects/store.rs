//! What a subject request reads and deletes: the [`SubjectStore`] trait, implemented for every
//! backend by `shortlink-visits-sql` (the links, visits, rollups and conversions live in one
//! database).

use super::model::{Selector, SubjectRequest, SubjectVisit};
use async_trait::async_trait;
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;

#[async_trait]
pub trait SubjectStore: Send + Sync {
    /// The codes of the workspace's links the selector names, in code order.
    async fn subject_codes(
        &self,
        workspace: WorkspaceId,
        selector: &Selector,
    ) -> StorageResult<Vec<String>>;

    /// The raw visits of `codes`, oldest first.
    async fn subject_visits(&self, codes: &[String]) -> StorageResult<Vec<SubjectVisit>>;

    /// The ids of the workspace's conversions of `codes`.
    async fn subject_conversion_ids(
        &self,
        workspace: WorkspaceId,
        codes: &[String],
    ) -> StorageResult<Vec<String>>;

    /// Deletes the visits, visitor-set rows, per-link rollups, conversions and delivery receipts
    /// (with their messages' states) of `code` in one transaction, adding what went to request
    /// `request`'s counts; returns (visits, conversions) deleted.
    async fn erase_code(
        &self,
        workspace: WorkspaceId,
        code: &str,
        request: &str,
    ) -> StorageResult<(u64, u64)>;

    /// Stores a new request; `false` if one with its key was there (a concurrent repeat).
    async fn insert_request(&self, request: &SubjectRequest) -> StorageResult<bool>;

    async fn request(
        &self,
        workspace: WorkspaceId,
        key: &str,
    ) -> StorageResult<Option<SubjectRequest>>;

    /// The workspace's requests, newest first.
    async fn requests(
        &self,
        workspace: WorkspaceId,
        limit: u32,
    ) -> StorageResult<Vec<SubjectRequest>>;

    /// Marks a request done with `links` tombstoned.
    async fn finish_request(&self, id: &str, links: i64, finished_ms: i64) -> StorageResult<()>;
}
