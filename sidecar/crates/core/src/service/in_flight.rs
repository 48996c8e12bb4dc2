//! The links this sidecar is writing, per workspace: what a workspace's delete waits for, and
//! holds back while it runs ([`super::authority`] says why).

use crate::sync::LockOrRecover;
use shortlink_model::WorkspaceId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// The groups this sidecar is writing, per workspace (see [`super::authority`]). A gate
/// is made the first time a workspace writes a group and dropped when it is deleted.
#[derive(Debug, Default)]
pub(super) struct InFlight(Mutex<HashMap<WorkspaceId, Arc<RwLock<()>>>>);

impl InFlight {
    fn gate(&self, workspace: WorkspaceId) -> Arc<RwLock<()>> {
        let mut gates = self.0.lock_or_recover();
        Arc::clone(gates.entry(workspace).or_default())
    }

    /// Held while a link of `workspace` is written (a group, a create, an update).
    pub(super) async fn enter(&self, workspace: WorkspaceId) -> OwnedRwLockReadGuard<()> {
        self.gate(workspace).read_owned().await
    }

    /// Waits until no link of `workspace` is being written, and keeps every later write waiting
    /// while the guard lives (a delete's scan and row delete).
    pub(super) async fn close(&self, workspace: WorkspaceId) -> OwnedRwLockWriteGuard<()> {
        self.gate(workspace).write_owned().await
    }

    pub(super) fn forget(&self, workspace: WorkspaceId) {
        let mut gates = self.0.lock_or_recover();
        gates.remove(&workspace);
    }
}
