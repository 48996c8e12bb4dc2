//! The refill: every link's record written from SQL where Redis lacks it, the walk the keeper and
//! a restore run. A leaf beside [`super::cluster`], which refills only the slots a failover lost.

use super::handle::ProjectionMarker;
use crate::projection::{ProjectionError, RecordWorkspace, RecordWrite, Slugs};
use shortlink_model::Link;
use shortlink_store::{self as storage, LinkFilter, Storage, StorageError};
use shortlink_wire::cluster::key_slot;
use std::time::Duration;

/// Links read per SQL page and written per Redis pipeline.
const PAGE: u32 = 1000;

/// What a refill found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RefillCounts {
    /// Records written where the key was missing (`SET NX`; an existing key is left alone).
    pub offered: u64,
    /// Links past their grace period: no record, nothing deleted.
    pub past_grace: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RefillError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Redis(#[from] ProjectionError),
}

/// Writes every link's record from SQL to Redis where the key is missing, in code order, a page
/// at a time: the `resync` command's walk (`scan_links`, `RecordWrite::for_link`), with `SET NX`
/// instead of `SET` and no deletes. Why: it runs beside the API. A create, update or revoke
/// writes its record through while the refill is under way, and that record is newer than the
/// SQL page the refill read a moment earlier; it must never be overwritten (a revoked link would
/// redirect again). After a data loss the missing keys are exactly the ones to fill.
pub async fn refill(
    storage: &dyn Storage,
    marker: &ProjectionMarker,
    grace: Duration,
) -> Result<RefillCounts, RefillError> {
    refill_slots(storage, marker, grace, None).await
}

/// [`refill`], on a cluster only for the links of `slots` when given (`slots[slot]` true).
pub(super) async fn refill_slots(
    storage: &dyn Storage,
    marker: &ProjectionMarker,
    grace: Duration,
    slots: Option<&[bool]>,
) -> Result<RefillCounts, RefillError> {
    // The records of every workspace name its slug.
    let slugs = Slugs::load(storage).await?;
    let filter = LinkFilter::all_workspaces();
    let mut counts = RefillCounts::default();
    let mut after: Option<String> = None;
    loop {
        let page = storage.scan_links(&filter, after.as_deref(), PAGE).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.code.clone());
        let now = storage::now();
        // Each record with its card, each kept if its own key is in `slots` (on a cluster the
        // card may live in another slot than its record).
        let writes: Vec<RecordWrite> = page
            .iter()
            .filter_map(|link| named(&slugs, link))
            .flat_map(|(link, workspace)| {
                let record = RecordWrite::for_link(link, workspace, now, grace);
                let card = RecordWrite::new_card(link, &record);
                std::iter::once(record).chain(card)
            })
            .filter(|write| slots.is_none_or(|slots| in_slots(slots, write.key())))
            .collect();
        let records = writes
            .iter()
            .filter(|w| shortlink_wire::keys::code_of(w.key()).is_some());
        counts.past_grace += records
            .clone()
            .filter(|w| matches!(w, RecordWrite::Delete { .. }))
            .count() as u64;
        counts.offered += records.count() as u64;
        marker.fill_missing(&writes).await?;
    }
    counts.offered -= counts.past_grace;
    Ok(counts)
}

/// Whether `key`'s slot is one of `slots` (`slots[slot]`).
pub(super) fn in_slots(slots: &[bool], key: &str) -> bool {
    slots
        .get(usize::from(key_slot(key.as_bytes())))
        .copied()
        .unwrap_or(false)
}

/// `link` with what its record names, or `None` (logged) for a link whose workspace was not
/// loaded: it did not exist when the refill began, so its link is left for the next refill
/// rather than written naming no workspace.
fn named<'a>(slugs: &Slugs, link: &'a Link) -> Option<(&'a Link, RecordWorkspace)> {
    let workspace = slugs.known_record_workspace(link.workspace);
    if workspace.is_none() {
        tracing::error!(code = %link.code, workspace = %link.workspace, "refill: the link's workspace is unknown; its record is not written");
    }
    Some((link, workspace?))
}
