//! A data subject's erasure (issue 56), the link side: the link keeps working, its `ref` becomes
//! a tombstone that names nobody, and its record is written again, since the record's recipient
//! number (`f`, a hash of code and ref that sticky splits read) could be matched against a
//! guessed ref. No audit row per link: `link_changes` would write the ref being erased into
//! the log; the request's one row (`subject.erase`, counts only) is written by the caller.

use super::commit::Scope;
use super::{LinkService, ServiceError};
use crate::projection::RecordWrite;
use shortlink_model::WorkspaceId;
use shortlink_store as storage;

impl LinkService {
    /// Replaces the `ref` of the workspace's link `code` by `tombstone` and re-projects its
    /// record. Whether the link was changed: `false` for a link that is gone or already holds
    /// the tombstone (a resumed request).
    pub async fn tombstone_ref(
        &self,
        workspace: WorkspaceId,
        code: &str,
        tombstone: &str,
    ) -> Result<bool, ServiceError> {
        let mut tx = self.storage.begin().await?;
        let Some(current) = tx.lock_link(workspace, code).await? else {
            let _ = tx.rollback().await;
            return Ok(false);
        };
        if current.recipient_ref.as_deref() == Some(tombstone) {
            let _ = tx.rollback().await;
            return Ok(false);
        }
        let mut next = current.clone();
        next.recipient_ref = Some(tombstone.to_owned());
        next.updated_at = storage::now().max(current.updated_at);
        tx.update_link(&next).await?;
        let workspace = self.record_workspace(next.workspace).await?;
        let now = storage::now();
        let writes = RecordWrite::for_link_and_card(&next, workspace, now, self.grace);
        let restore = || {
            let restore =
                RecordWrite::restore_with_card(code, Some(&current), workspace, now, self.grace);
            async move { self.projection.apply(&restore).await }
        };
        let scope = Scope::Link(&next);
        if let Err(error) = self.projection.apply(&writes).await {
            self.roll_back_after_redis(tx, scope, &error, restore())
                .await;
            return Err(error.into());
        }
        self.commit_or_undo(tx, scope, None, restore()).await?;
        Ok(true)
    }
}
