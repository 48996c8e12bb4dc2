//! API keys (issue 53): created and revoked by a workspace's admin, the operator or the command
//! line, each change recorded in the audit log of the key's workspace (an operator key's in the
//! installation's), so a workspace's admin sees who handed out its keys.
//!
//! The key itself is the caller's to make and show once: only its SHA-256 reaches this layer, and
//! no audit row ever holds either. Free functions over the storage, not service methods: the
//! command line manages keys without Redis.

use shortlink_model::WorkspaceId;
use shortlink_store::audit::{Changes, Origin, INSTALLATION_CHAIN};
use shortlink_store::{
    self as storage, ApiKey, KeyRate, Quotas, Role, Storage, StorageError, StorageResult,
};

/// The largest rate and burst any key may be given.
pub const MAX_RATE: u64 = 1_000_000;

/// Why a key was not made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Rate(#[from] RateRefused),
    #[error("{}", shortlink_store::NAME_RULE)]
    BadName,
    /// Its workspace is gone (deleted meanwhile).
    #[error("no such workspace")]
    NoWorkspace,
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A key's own rate that its workspace's ceilings do not admit; `field` is `per_second` or
/// `burst`, as the request names it under `rate`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateRefused {
    #[error(
        "rate.{field} must be at least 1: a key cannot be given no limit (leave `rate` out for \
         the installation's)"
    )]
    BelowOne { field: &'static str },
    #[error(
        "rate.{field} is {value}, above the workspace's ceiling of {ceiling} (the operator's)"
    )]
    AboveCeiling {
        field: &'static str,
        value: u64,
        ceiling: u64,
    },
    #[error("rate.{field} is {value}: at most {MAX_RATE}")]
    AboveMax { field: &'static str, value: u64 },
}

/// Whether `rate` is one a key of a workspace with these `ceilings` may be given: each of its
/// numbers at least 1 (0 was "no limit", which would lift what the operator set) and at most
/// the workspace's ceiling, else [`MAX_RATE`].
pub fn check_rate(rate: KeyRate, ceilings: &Quotas) -> Result<(), RateRefused> {
    let fields = [
        ("per_second", rate.per_second, ceilings.key_rate_per_second),
        ("burst", rate.burst, ceilings.key_rate_burst),
    ];
    for (field, value, ceiling) in fields {
        match ceiling {
            _ if value < 1 => return Err(RateRefused::BelowOne { field }),
            Some(ceiling) if value > ceiling => {
                return Err(RateRefused::AboveCeiling {
                    field,
                    value,
                    ceiling,
                })
            }
            _ if value > MAX_RATE => return Err(RateRefused::AboveMax { field, value }),
            _ => {}
        }
    }
    Ok(())
}

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

/// Stores the key whose SHA-256 is `key_hash` and records who made it. Its own rate must be
/// within its workspace's ceilings ([`check_rate`]): every way to make a key (the API, the
/// console, the command line) comes through here, so none can hand out more.
pub async fn create(
    storage: &dyn Storage,
    key: NewKey<'_>,
    key_hash: &str,
    origin: &Origin,
) -> Result<ApiKey, KeyError> {
    let key = NewKey {
        name: storage::display_name(key.name).ok_or(KeyError::BadName)?,
        ..key
    };
    if let Some(rate) = key.rate {
        let ceilings = match key.workspace {
            Some(workspace) => {
                (storage.workspace(workspace).await?)
                    .ok_or(KeyError::NoWorkspace)?
                    .quotas
            }
            None => Quotas::default(),
        };
        check_rate(rate, &ceilings)?;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_rate_is_at_least_one_and_within_the_ceilings() {
        let rate = |per_second, burst| KeyRate { per_second, burst };
        let none = Quotas::default();
        assert_eq!(
            check_rate(rate(0, 5), &none),
            Err(RateRefused::BelowOne {
                field: "per_second"
            })
        );
        assert!(check_rate(rate(MAX_RATE, MAX_RATE), &none).is_ok());
        assert!(matches!(
            check_rate(rate(MAX_RATE + 1, 1), &none),
            Err(RateRefused::AboveMax { .. })
        ));
        let ceilings = Quotas {
            key_rate_per_second: Some(10),
            key_rate_burst: Some(20),
            ..Quotas::default()
        };
        assert!(check_rate(rate(10, 20), &ceilings).is_ok());
        let over = check_rate(rate(5, 21), &ceilings).unwrap_err();
        assert_eq!(
            over.to_string(),
            "rate.burst is 21, above the workspace's ceiling of 20 (the operator's)"
        );
        assert!(check_rate(rate(0, 1), &ceilings)
            .unwrap_err()
            .to_string()
            .starts_with("rate.per_second must be at least 1"));
    }
}
