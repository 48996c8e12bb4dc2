//! The slugs of the workspaces this process has met, by id, as link records name them
//! (issue 53).
//!
//! A link record names its workspace by slug (nginx's host map does), and records are encoded
//! where no query can run ([`super::RecordWrite::for_link`]). Slugs never change and ids are
//! never reused, so every process keeps what it learnt: filled at start-up, by the requests'
//! authentication (which reads the key's workspace anyway), by every write of the link service
//! and before every job that writes the records of many workspaces (refill, resync, repairs).

use shortlink_store::{Storage, StorageError, Workspace, WorkspaceId};
use shortlink_wire::record::WorkspaceName;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// What a record names when its workspace's slug is unknown here, which the loading below
/// should make impossible: a name no workspace can take (`is_valid_slug` refuses `--`), so
/// the link answers on no host rather than on `default`'s.
const UNKNOWN: &[u8] = b"unknown--workspace";

fn table() -> &'static RwLock<HashMap<WorkspaceId, WorkspaceName>> {
    static TABLE: OnceLock<RwLock<HashMap<WorkspaceId, WorkspaceName>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        RwLock::new(HashMap::from([(
            WorkspaceId::DEFAULT,
            WorkspaceName::DEFAULT,
        )]))
    })
}

/// The slug of `id`, if this process has met it.
pub fn get(id: WorkspaceId) -> Option<WorkspaceName> {
    let table = table()
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    table.get(&id).copied()
}

/// What the record of a link of `id` names: nothing for `default`, so its records keep the
/// bytes they had before workspaces.
pub fn in_record(id: WorkspaceId) -> Option<WorkspaceName> {
    if id == WorkspaceId::DEFAULT {
        return None;
    }
    Some(get(id).unwrap_or_else(|| {
        tracing::error!(workspace = %id, "workspace slug not loaded; its record names none");
        WorkspaceName::parse(UNKNOWN).unwrap_or(WorkspaceName::DEFAULT)
    }))
}

/// Remembers the slug of `id` (it never changes).
pub fn remember_slug(id: WorkspaceId, slug: &str) {
    let Some(name) = WorkspaceName::parse(slug.as_bytes()) else {
        tracing::error!(workspace = %id, slug, "a stored workspace slug is not a record name");
        return;
    };
    if get(id).is_none() {
        let mut table = table()
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        table.insert(id, name);
    }
}

/// Remembers a workspace's slug.
pub fn remember(workspace: &Workspace) {
    remember_slug(workspace.id, &workspace.slug);
}

/// Reads every workspace's slug: at start-up and before a job that writes the records of
/// many workspaces (refill, resync).
pub async fn load(storage: &dyn Storage) -> Result<(), StorageError> {
    for workspace in storage.workspaces().await? {
        remember(&workspace);
    }
    Ok(())
}

/// The slug of `id`, read from the database if this process has not met it yet.
pub async fn of(storage: &dyn Storage, id: WorkspaceId) -> Result<WorkspaceName, StorageError> {
    if let Some(name) = get(id) {
        return Ok(name);
    }
    let workspace = storage
        .workspace(id)
        .await?
        .ok_or_else(|| StorageError::Corrupt(format!("workspace {id} does not exist")))?;
    remember(&workspace);
    get(id).ok_or_else(|| StorageError::Corrupt(format!("workspace {id}'s slug")))
}
