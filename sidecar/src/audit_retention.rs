//! The audit log's retention job (`--audit-retention`): every `--cleanup-every`, the rows past
//! retention are deleted from the start of each chain and the chain's anchor moved to the last
//! one deleted, so `audit verify` still proves every row left (shortlink_store::audit).

use shortlink_core::background::{self, Shutdown};
use shortlink_store::Storage;
use std::sync::Arc;
use std::time::Duration;

/// Prunes once: the rows older than `retention`; returns how many were deleted.
pub async fn prune_once(
    storage: &dyn Storage,
    retention: Duration,
) -> Result<u64, shortlink_store::StorageError> {
    let retention = chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let before = chrono::Utc::now()
        .checked_sub_signed(retention)
        .map_or(i64::MIN, |at| at.timestamp_millis());
    storage.prune_audit(before).await
}

pub async fn prune_every(
    storage: Arc<dyn Storage>,
    retention: Duration,
    every: Duration,
    mut shutdown: Shutdown,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = background::fired(&mut shutdown) => return,
        }
        let pruned = tokio::select! {
            pruned = prune_once(storage.as_ref(), retention) => pruned,
            () = background::fired(&mut shutdown) => return,
        };
        match pruned {
            Ok(0) => {}
            Ok(pruned) => tracing::info!(pruned, "audit rows past retention pruned"),
            Err(error) => tracing::warn!(%error, "pruning the audit log failed"),
        }
    }
}
