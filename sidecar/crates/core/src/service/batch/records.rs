//! A group's Redis records: sent chunk by chunk while the group is written, and taken back when
//! it fails or gives way ([`super::super::turn`]), or when Redis already held a code.

use super::super::LinkService;
use crate::projection::{self, written_value, ProjectionError, RecordWrite};
use std::collections::{HashMap, HashSet};

impl LinkService {
    /// After a group failed: deletes every record it sent, each only if it still holds the value
    /// sent (a write's outcome may be unknown), and never a key its `SET NX` found `taken`. Best
    /// effort; what is left behind is an orphan `resync` removes.
    pub(super) async fn unpublish(
        &self,
        sent: &[Vec<RecordWrite>],
        taken: &HashMap<String, Vec<u8>>,
    ) {
        let written = unpublished(sent, taken);
        if let Err(redis) = self.projection.delete_if_unchanged(&written).await {
            tracing::error!(
                %redis,
                keys = written.len(),
                "a failed batch could not remove its redis records: run `shortlink-sidecar resync`"
            );
        }
    }

    /// The cards sent for rows refused because Redis held their code: removed (if unchanged),
    /// since the record they would go with is another's.
    pub(super) async fn unpublish_cards(
        &self,
        sent: &[Vec<RecordWrite>],
        taken: &HashMap<String, Vec<u8>>,
        codes: &[String],
    ) {
        let cards: HashSet<String> = codes
            .iter()
            .map(|code| projection::preview_key(code))
            .collect();
        let written: Vec<(&str, &[u8])> = sent
            .iter()
            .flatten()
            .filter(|write| cards.contains(write.key()) && !taken.contains_key(write.key()))
            .filter_map(|write| Some((write.key(), written_value(write)?)))
            .collect();
        if let Err(redis) = self.projection.delete_if_unchanged(&written).await {
            tracing::warn!(%redis, "the cards of refused codes could not be removed");
        }
    }
}

/// What a failed group takes back: every record it sent, but never a key its `SET NX` found
/// `taken` (another's record).
pub(super) fn unpublished<'a>(
    sent: &'a [Vec<RecordWrite>],
    taken: &HashMap<String, Vec<u8>>,
) -> Vec<(&'a str, &'a [u8])> {
    sent.iter()
        .flatten()
        .filter(|write| !taken.contains_key(write.key()))
        .filter_map(|write| Some((write.key(), written_value(write)?)))
        .collect()
}

/// Waits for a group's Redis writes: the records each chunk sent, the keys `SET NX` found taken
/// (with their values), and whether any write failed. A write task that panicked took its
/// records with it: any it wrote are orphans for `resync`.
pub(super) async fn join_writes(in_flight: Vec<ChunkWrite>) -> Published {
    let mut sent = Vec::with_capacity(in_flight.len());
    let mut taken = HashMap::new();
    let mut failed = false;
    for write in in_flight {
        match write.await {
            Ok((writes, Ok(refused))) => {
                taken.extend(refused);
                sent.push(writes);
            }
            Ok((writes, Err(error))) => {
                tracing::warn!(%error, "redis write failed; rolling back the chunk");
                failed = true;
                sent.push(writes);
            }
            Err(error) => {
                tracing::error!(%error, "redis write task failed");
                failed = true;
            }
        }
    }
    Published {
        sent,
        taken,
        failed,
    }
}

/// What a group's Redis writes did: see [`join_writes`].
pub(super) struct Published {
    /// The records each chunk sent.
    pub(super) sent: Vec<Vec<RecordWrite>>,
    /// The keys `SET NX` found taken, with their values.
    pub(super) taken: HashMap<String, Vec<u8>>,
    /// Whether any write failed.
    pub(super) failed: bool,
}

/// A chunk's Redis write in flight: gives back its records, and the keys its `SET NX` found
/// taken, with their values.
pub(super) type ChunkWrite = tokio::task::JoinHandle<(
    Vec<RecordWrite>,
    Result<Vec<(String, Vec<u8>)>, ProjectionError>,
)>;
