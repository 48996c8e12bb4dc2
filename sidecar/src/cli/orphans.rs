//! Orphan link keys: `sl:c:<code>` in Redis for a code SQL does not have.
//!
//! The write path writes Redis before it commits SQL (docs/ARCHITECTURE.md, "Write-through"), so a
//! process killed between the two, or a failed batch whose clean-up could not reach Redis, leaves
//! a record nginx redirects although no link exists. `resync` removes them after rewriting the
//! links: it walks the link keys with `SCAN` (resumable from a cursor), asks SQL which codes it has,
//! and deletes the others.
//!
//! Why it cannot delete a link being created: a code SQL lacks may belong to a write between its
//! Redis write and its commit. Candidates are therefore checked again inside
//! [`Storage::begin_quiesced`], which waits for every link write in flight to finish and holds new
//! ones back, and deleted while it is held: at that moment a code SQL lacks has no write in flight.

use super::error::BoxError;
use shortlink_core::projection::{Projection, ProjectionError};
use shortlink_store::{Storage, StorageError};
use shortlink_wire::keys::LINK_PREFIX;
use std::collections::HashSet;

/// Keys per `SCAN` step (a hint to Redis) and per SQL lookup.
const SCAN_COUNT: u32 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum OrphanError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Redis(#[from] ProjectionError),
}

/// An interrupted scan: resume it from `cursor`.
#[derive(Debug)]
pub struct Interrupted {
    pub cursor: u64,
    pub error: OrphanError,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrphanCounts {
    /// Link keys looked at.
    pub scanned: u64,
    /// Orphans deleted.
    pub removed: u64,
}

/// Deletes every orphan link key, from SCAN cursor `cursor` (0: from the start). `progress` gets
/// the number of keys each step looked at.
pub async fn remove_orphans(
    storage: &dyn Storage,
    projection: &Projection,
    mut cursor: u64,
    mut progress: impl FnMut(u64),
) -> Result<OrphanCounts, Interrupted> {
    let mut counts = OrphanCounts::default();
    loop {
        let step = async {
            let (next, keys) = projection.scan_link_keys(cursor, SCAN_COUNT).await?;
            let removed = remove_step(storage, projection, &keys).await?;
            Ok::<_, OrphanError>((next, keys.len() as u64, removed))
        };
        let (next, scanned, removed) = step.await.map_err(|error| Interrupted { cursor, error })?;
        counts.scanned += scanned;
        counts.removed += removed;
        progress(scanned);
        if next == 0 {
            return Ok(counts);
        }
        cursor = next;
    }
}

/// Deletes the orphans among `keys`; returns how many.
async fn remove_step(
    storage: &dyn Storage,
    projection: &Projection,
    keys: &[String],
) -> Result<u64, OrphanError> {
    let codes: Vec<String> = keys
        .iter()
        .filter_map(|key| key.strip_prefix(LINK_PREFIX))
        .map(str::to_owned)
        .collect();
    if codes.is_empty() {
        return Ok(0);
    }
    // Cheap first look, outside any lock: normally every code is there and nothing is locked.
    let present: HashSet<String> = storage.existing_codes(&codes).await?.into_iter().collect();
    let candidates: Vec<String> = codes
        .into_iter()
        .filter(|code| !present.contains(code))
        .collect();
    if candidates.is_empty() {
        return Ok(0);
    }
    let mut tx = storage.begin_quiesced().await?;
    let result = async {
        let committed: HashSet<String> =
            tx.existing_codes(&candidates).await?.into_iter().collect();
        let orphans: Vec<String> = candidates
            .iter()
            .filter(|code| !committed.contains(*code))
            .map(|code| format!("{LINK_PREFIX}{code}"))
            .collect();
        for orphan in &orphans {
            tracing::info!(key = %orphan, "removing orphan redis key (no such link in SQL)");
        }
        Ok::<_, OrphanError>(projection.delete_keys(&orphans).await?)
    }
    .await;
    // Read-only: ending it releases the lock.
    if let Err(error) = tx.rollback().await {
        tracing::warn!(%error, "ending the orphan check transaction failed");
    }
    result
}

/// `resync`'s last step: removes orphan keys from SCAN cursor `from`, with a progress bar; an
/// interruption names the cursor to resume from (`resync --orphans-from CURSOR`).
pub(super) async fn resync_step(
    storage: &dyn Storage,
    projection: &Projection,
    from: u64,
) -> Result<(), BoxError> {
    let bar = super::progress::progress_bar(projection.key_count().await?, "redis keys");
    let counts = remove_orphans(storage, projection, from, |n| bar.inc(n))
        .await
        .map_err(|stopped| {
            bar.abandon();
            format!(
                "{} (resume with `resync --orphans-from {}`)",
                stopped.error, stopped.cursor
            )
        })?;
    bar.finish_and_clear();
    println!(
        "resync: {} redis link keys checked, {} orphans removed (no link in SQL)",
        counts.scanned, counts.removed
    );
    Ok(())
}
