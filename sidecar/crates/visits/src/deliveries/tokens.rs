//! Callback tokens: the credential a gateway's callback URL carries in its path, made, listed and
//! revoked by a workspace's admin ([`CallbackTokenStore`]). Only the token's SHA-256 is stored.

use super::model::Gateway;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::{StorageError, StorageResult};

/// A stored callback token (its hash, never the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackToken {
    /// `cbt_` and 16 hex digits.
    pub id: String,
    pub workspace: WorkspaceId,
    pub name: String,
    pub gateway: Gateway,
    pub token_hash: String,
    /// Twilio's auth token, when given, as stored: sealed (`v1:…`, the API's
    /// `shortlink_messaging::sealed`), or in plain text in a row written before sealing.
    /// `X-Twilio-Signature` is checked with it.
    pub twilio_auth_token: Option<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait CallbackTokenStore: Send + Sync {
    async fn insert_token(&self, token: &CallbackToken) -> StorageResult<()>;

    /// The workspace's tokens, oldest first, revoked ones included.
    async fn tokens(&self, workspace: WorkspaceId) -> StorageResult<Vec<CallbackToken>>;

    /// What a callback checks, in one query: the token with this hash (in any workspace,
    /// revoked or not) and whether its workspace is suspended.
    async fn token_for_callback(&self, hash: &str) -> StorageResult<Option<(CallbackToken, bool)>>;

    /// Revokes the workspace's token `id` (a revoked one stays as it was); `None`: no such
    /// token in this workspace.
    async fn revoke_token(
        &self,
        workspace: WorkspaceId,
        id: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<CallbackToken>>;

    /// The tokens (of every workspace) whose Twilio auth token is still stored in plain text
    /// (not starting with `v1:`).
    async fn unsealed_secrets(&self) -> StorageResult<Vec<CallbackToken>>;

    /// Replaces token `id`'s stored auth token `old` by `sealed`, unless it changed meanwhile
    /// (two sidecars starting at once seal it once): whether it did.
    async fn reseal_secret(&self, id: &str, old: &str, sealed: &str) -> StorageResult<bool>;
}

/// A new token id: `cbt_` and 64 random bits in hex.
pub fn new_token_id() -> StorageResult<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|error| StorageError::Corrupt(format!("no randomness: {error}")))?;
    Ok(format!("cbt_{:016x}", u64::from_be_bytes(bytes)))
}
