//! Reading and writing a workspace's block and allow lists ([`super::host_lists`]): a row of
//! the settings table per workspace, audited, and each sidecar's copy kept for
//! [`CACHE_FOR`].

pub use super::host_lists::{TargetLists, ALLOW_LIST, BLOCK_LIST, CACHE_FOR, MAX_HOSTS};
use super::{LinkService, ServiceError};
use shortlink_model::WorkspaceId;
use shortlink_store::audit::{Changes, Origin};
use std::sync::Arc;

fn setting(workspace: WorkspaceId) -> String {
    format!("target_lists:{workspace}")
}

impl LinkService {
    /// `workspace`'s lists, from this sidecar's copy if it is younger than [`CACHE_FOR`].
    pub async fn target_lists(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Arc<TargetLists>, ServiceError> {
        if let Some(lists) = self.target_lists.fresh(workspace) {
            return Ok(lists);
        }
        let stored = self.storage.setting(&setting(workspace)).await?;
        let lists = Arc::new(
            (stored.as_deref())
                .and_then(|text| serde_json::from_str::<TargetLists>(text).ok())
                .unwrap_or_default(),
        );
        self.target_lists.remember(workspace, &lists);
        Ok(lists)
    }

    /// Replaces `workspace`'s lists (already [`TargetLists::normalized`]), audited.
    pub async fn set_target_lists(
        &self,
        workspace: WorkspaceId,
        lists: TargetLists,
        origin: &Origin,
    ) -> Result<Arc<TargetLists>, ServiceError> {
        let before = self.target_lists(workspace).await?;
        let text = serde_json::to_string(&lists).expect("plain data");
        let now = shortlink_store::now();
        (self.storage.set_setting(&setting(workspace), &text, now)).await?;
        let hosts = |list: &[String]| serde_json::Value::from(list.to_vec());
        let changes = Changes::new()
            .diff("block", hosts(&before.block), hosts(&lists.block))
            .diff("allow", hosts(&before.allow), hosts(&lists.allow))
            .diff(
                "hold_for_review",
                before.hold_for_review,
                lists.hold_for_review,
            );
        let entry = origin.entry("target_lists.set", workspace.to_string(), changes);
        self.storage.append_audit(&entry).await?;
        let lists = Arc::new(lists);
        self.target_lists.remember(workspace, &lists);
        // Its links already sent to a host it now blocks are quarantined as a feed's are; a
        // host it no longer blocks ends theirs.
        self.follow_block_list(workspace, &before.block, &lists.block)
            .await?;
        Ok(lists)
    }
}
