//! Orphan visits as stored: the [`OrphanStore`] trait, implemented for every backend by
//! `shortlink-visits-sql`. Times are Unix ms.

use super::model::{OrphanCounts, OrphanQuery, OrphanScope, OrphanVisit};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_store::StorageResult;
use shortlink_visit_enrich::Visit;
use std::collections::BTreeMap;

#[async_trait]
pub trait OrphanStore: Send + Sync {
    /// Stores the orphan visits among `visits` ([`orphan_of`], under [`workspace_of`]) and adds
    /// the ones not stored before to their workspace's and host's counts, in one transaction;
    /// how many were new.
    async fn store_orphans(&self, visits: &[Visit]) -> StorageResult<u64>;

    /// A page of orphan visits, oldest first.
    async fn orphan_visits(&self, query: &OrphanQuery) -> StorageResult<Vec<OrphanVisit>>;

    /// Every host's counts in `scope`, by host (the operator's: every workspace's added up).
    async fn orphan_counts(
        &self,
        scope: &OrphanScope,
    ) -> StorageResult<BTreeMap<String, OrphanCounts>>;

    /// Deletes at most `limit` raw orphan visits made before `before` (the counts stay).
    async fn delete_orphans_before(&self, before: DateTime<Utc>, limit: u64) -> StorageResult<u64>;

    /// Deletes every orphan visit and count of the workspace `name` (a deleted workspace).
    async fn delete_orphans_of(&self, name: &str) -> StorageResult<u64>;
}
