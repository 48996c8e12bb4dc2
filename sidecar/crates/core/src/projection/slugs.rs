//! How a link record names its workspace, resolved with the link before anything is written.
//!
//! A record names its workspace by slug (nginx's host map does), and records are encoded where
//! no query can run ([`super::RecordWrite::for_link`]), so every record write takes a
//! [`RecordWorkspace`], and the only way to make one is to look the slug up ([`Slugs`]). A
//! workspace that cannot be named (deleted, or a slug that is no record name) is an error before
//! anything is written, never a record that answers on no host or on the wrong one.

use crate::sync::ReadWriteOrRecover;
use shortlink_model::WorkspaceId;
use shortlink_store::{Storage, StorageError};
use shortlink_wire::record::WorkspaceName;
use std::collections::HashMap;
use std::sync::RwLock;

/// What a record names as its link's workspace: nothing for `default` (its records keep the
/// bytes they had before workspaces), else its slug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordWorkspace(Option<WorkspaceName>);

impl RecordWorkspace {
    /// The name of `default`'s records (none).
    pub const DEFAULT: RecordWorkspace = RecordWorkspace(None);

    /// What the record carries.
    pub fn name(self) -> Option<WorkspaceName> {
        self.0
    }

    /// The slug nginx's host map gives this workspace's hosts.
    pub fn slug(self) -> WorkspaceName {
        self.0.unwrap_or(WorkspaceName::DEFAULT)
    }
}

/// The slugs of the workspaces met so far, by id: a cache of the database, owned by whoever
/// writes records (the link service, a refill, a resync). Slugs never change and ids are never
/// reused, so an entry never goes stale; a deleted workspace's entry only names links that no
/// longer exist.
#[derive(Debug)]
pub struct Slugs {
    known: RwLock<HashMap<WorkspaceId, WorkspaceName>>,
}

impl Default for Slugs {
    fn default() -> Self {
        Self {
            known: RwLock::new(HashMap::from([(
                WorkspaceId::DEFAULT,
                WorkspaceName::DEFAULT,
            )])),
        }
    }
}

impl Slugs {
    /// Every workspace's slug, read at once: for a job that writes the records of many.
    pub async fn load(storage: &dyn Storage) -> Result<Self, StorageError> {
        let slugs = Self::default();
        for workspace in storage.workspaces().await? {
            slugs.remember(workspace.id, &workspace.slug)?;
        }
        Ok(slugs)
    }

    /// The slug of `id`, if met already.
    pub fn get(&self, id: WorkspaceId) -> Option<WorkspaceName> {
        let known = self.known.read_or_recover();
        known.get(&id).copied()
    }

    /// What the records of `id`'s links name, from what was met or loaded already (a job that
    /// [`Self::load`]ed every workspace); `None` for a workspace never met.
    pub fn known_record_workspace(&self, id: WorkspaceId) -> Option<RecordWorkspace> {
        match id == WorkspaceId::DEFAULT {
            true => Some(RecordWorkspace::DEFAULT),
            false => self.get(id).map(|name| RecordWorkspace(Some(name))),
        }
    }

    /// Remembers a workspace's slug read from the database (an authenticated key's, say).
    pub fn remember(&self, id: WorkspaceId, slug: &str) -> Result<WorkspaceName, StorageError> {
        let name = WorkspaceName::parse(slug.as_bytes()).ok_or_else(|| {
            StorageError::Corrupt(format!(
                "workspace {id}'s slug {slug:?} is not a record name"
            ))
        })?;
        let mut known = self.known.write_or_recover();
        known.insert(id, name);
        Ok(name)
    }

    /// Forgets a deleted workspace: a write of its links still in flight here names none.
    pub fn forget(&self, id: WorkspaceId) {
        let mut known = self.known.write_or_recover();
        known.remove(&id);
    }

    /// What the records of `id`'s links name, read from the database the first time. A
    /// workspace that does not exist is an error: its link must not be written at all.
    pub async fn record_workspace(
        &self,
        storage: &dyn Storage,
        id: WorkspaceId,
    ) -> Result<RecordWorkspace, StorageError> {
        if id == WorkspaceId::DEFAULT {
            return Ok(RecordWorkspace::DEFAULT);
        }
        if let Some(name) = self.get(id) {
            return Ok(RecordWorkspace(Some(name)));
        }
        let workspace = (storage.workspace(id).await?)
            .ok_or_else(|| StorageError::Corrupt(format!("workspace {id} does not exist")))?;
        Ok(RecordWorkspace(Some(
            self.remember(workspace.id, &workspace.slug)?,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_records_name_no_workspace() {
        let slugs = Slugs::default();
        assert_eq!(RecordWorkspace::DEFAULT.name(), None);
        assert_eq!(RecordWorkspace::DEFAULT.slug(), WorkspaceName::DEFAULT);
        assert_eq!(
            slugs.get(WorkspaceId::DEFAULT),
            Some(WorkspaceName::DEFAULT)
        );
    }
}
