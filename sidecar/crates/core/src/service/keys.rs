//! API keys (issue 53): created and revoked by a workspace's admin, the operator or the command
//! line, each change recorded in the audit log of the key's workspace (an operator key's in the
//! installation's), so a workspace's admin sees who handed out its keys.
//!
//! The key itself is the caller's to make and show once: only its SHA-256 reaches this layer, and
//! no audit row ever holds either. Free functions over the storage, not service methods: the
//! command line manages keys without Redis.

use shortlink_store::audit::{Changes, Origin, INSTALLATION_CHAIN};
use shortlink_store::{
    self as storage, ApiKey, KeyRate, Role, Storage, StorageResult, WorkspaceId,
};

/// A key to store: its name, role, workspace (`None` only for an operator key) and own rate.
#[derive(Debug, Clone)]
pub struct NewKey<'a> {
    pub name: &'a str,
    pub role: Role,
    pub workspace: Option<WorkspaceId>,
    pub rate: Option<KeyRate>,
}

/// The audit chain a key's changes belong to.
fn chain_of(workspace: Option<WorkspaceId>) -> i64 {
    workspace.map_or(INSTALLATION_CHAIN, WorkspaceId::get)
}

/// Stores the key whose SHA-256 is `key_hash` and records who made it.
pub async fn create(
    storage: &dyn Storage,
    key: NewKey<'_>,
    key_hash: &str,
    origin: &Origin,
) -> StorageResult<ApiKey> {
    let mut created = storage
        .create_api_key(key.name, key.role, key.workspace, key_hash, storage::now())
        .await?;
    if key.rate.is_some() {
        storage.set_api_key_rate(created.id, key.rate).await?;
        created.rate = key.rate;
    }
    // The name, role and rate: never the key, nor its hash.
    let mut changes = Changes::new()
        .set("name", created.name.clone())
        .set("role", created.role.as_str());
    if let Some(rate) = key.rate {
        changes = changes
            .set("rate_per_second", rate.per_second)
            .set("rate_burst", rate.burst);
    }
    let object = created.id.to_string();
    let entry = origin.entry_in(chain_of(key.workspace), "key.create", object, changes);
    storage.append_audit(&entry).await?;
    Ok(created)
}

/// Revokes key `id` of `workspace` (`None`: any key, the operator's or the command line's
/// reach); `None` when there is no such key there. Revoking a revoked key answers it as it is.
pub async fn revoke(
    storage: &dyn Storage,
    workspace: Option<WorkspaceId>,
    id: i64,
    origin: &Origin,
) -> StorageResult<Option<ApiKey>> {
    let now = storage::now();
    let revoked = storage.revoke_api_key(workspace, id, now).await?;
    // A key revoked before keeps its time: a repeated revoke changes nothing, records nothing.
    if let Some(key) = revoked.as_ref().filter(|key| key.revoked_at == Some(now)) {
        let chain = chain_of(key.workspace.as_ref().map(|workspace| workspace.id));
        let changes = Changes::new().set("name", key.name.clone());
        let entry = origin.entry_in(chain, "key.revoke", key.id.to_string(), changes);
        storage.append_audit(&entry).await?;
    }
    Ok(revoked)
}
