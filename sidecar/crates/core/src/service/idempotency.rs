//! `Idempotency-Key` claims, and the pruning of old keys.

use super::error::ServiceError;
use super::links::LinkService;
use super::model::{Claim, IdempotencyKey};
use crate::background::{self, Shutdown};
use chrono::{DateTime, Utc};
use shortlink_store as storage;
use std::sync::Arc;
use std::time::Duration;

/// Idempotency keys deleted per statement.
const PRUNE_CHUNK: u32 = 10_000;

/// How often `serve` prunes idempotency keys.
pub const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Prunes idempotency keys older than `retention` now and every [`PRUNE_EVERY`], until
/// `shutdown` (a [`crate::background::Tasks`] job; a prune in progress is dropped, its deletes
/// being a chunk per statement).
pub async fn prune_idempotency_keys_every(
    links: Arc<LinkService>,
    retention: Duration,
    mut shutdown: Shutdown,
) {
    let mut every = tokio::time::interval(PRUNE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = background::fired(&mut shutdown) => return,
        }
        let pruned = tokio::select! {
            pruned = links.prune_idempotency_keys(retention) => pruned,
            () = background::fired(&mut shutdown) => return,
        };
        match pruned {
            Ok(0) => {}
            Ok(pruned) => tracing::info!(pruned, "idempotency keys past retention pruned"),
            Err(error) => tracing::warn!(%error, "pruning idempotency keys failed"),
        }
    }
}

impl LinkService {
    /// Claims `key` for a request identified by `request_hash`: refused if the key was used
    /// with another request.
    pub async fn claim(
        &self,
        key: &IdempotencyKey,
        request_hash: &str,
    ) -> Result<Claim, ServiceError> {
        let record = self
            .storage
            .claim_idempotency_key(key.api_key_id, &key.key, request_hash, storage::now())
            .await?;
        if record.request_hash != request_hash {
            return Err(ServiceError::IdempotencyKeyReused);
        }
        Ok(Claim {
            batch_id: record.id,
            fresh: record.fresh,
        })
    }

    /// Forgets idempotency keys older than `retention`, a chunk at a time (short write locks on
    /// SQLite); returns how many. A retry with a forgotten key is a new request.
    pub async fn prune_idempotency_keys(&self, retention: Duration) -> Result<u64, ServiceError> {
        let before = chrono::Duration::from_std(retention)
            .ok()
            .and_then(|retention| storage::now().checked_sub_signed(retention))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let mut pruned = 0;
        loop {
            let deleted = self
                .storage
                .prune_idempotency_keys(before, PRUNE_CHUNK)
                .await?;
            pruned += deleted;
            if deleted < u64::from(PRUNE_CHUNK) {
                return Ok(pruned);
            }
        }
    }
}
