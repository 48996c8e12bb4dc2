//! The visit feed's writing side: every visit transaction records the visits it inserted as one
//! row of `visit_feed` (read by `webhooks/feed.rs` for `GET /api/v1/visits` and the click
//! webhooks). Here, below the backends' batch writes, so the visit stores need nothing from the
//! webhooks, which read what is written here.

use shortlink_store::sql::Dialect;
use shortlink_store::StorageResult;
use shortlink_visit_enrich::Visit;
use shortlink_visits::hindsight::reclassified_id;
use sqlx::Database;

/// Records the visits a transaction inserted, then the stored visits it reclassified (each
/// as it was before: `shortlink_visits::hindsight::reclassified_id`), as the next feed row.
/// Called last, just before the commit: the clock row's lock is then held only for this insert
/// and the commit, and a writer that took a later seq cannot commit before this one does (it
/// waits for the lock), so a reader never sees seq `n + 1` without `n`.
pub(crate) async fn append<D: Dialect>(
    connection: &mut <D::DB as Database>::Connection,
    inserted: &[&Visit],
    reclassified: &[&Visit],
) -> StorageResult<()> {
    let corrected = reclassified
        .iter()
        .map(|before| reclassified_id(before.agent.audience, &before.event_id));
    let ids: Vec<String> = (inserted.iter().map(|visit| visit.event_id.clone()))
        .chain(corrected)
        .collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    // The reader looks a reclassified visit up by its own time, as an inserted one.
    let times = inserted
        .iter()
        .chain(reclassified)
        .map(|visit| visit.time_ms);
    let within = times.clone().min().zip(times.max());
    append_ids::<D>(connection, &ids, within).await
}

/// [`append`] of any ids: a visit's, or a conversion's (`cv_…`, `crate::conversions`), which
/// takes its place in the same order. The one writer of feed rows is the store's
/// ([`shortlink_store::sql::feed::append_ids`]): a link's transaction appends its quarantine
/// events there too.
pub(crate) async fn append_ids<D: Dialect>(
    connection: &mut <D::DB as Database>::Connection,
    inserted: &[&str],
    within: Option<(i64, i64)>,
) -> StorageResult<()> {
    shortlink_store::sql::feed::append_ids::<D>(connection, inserted, within).await
}
