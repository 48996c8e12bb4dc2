//! The visit feed's writing side: every visit transaction records the visits it inserted as one
//! row of `visit_feed` (read by `webhooks/feed.rs` for `GET /api/v1/visits` and the click
//! webhooks). Here, below the backends' batch writes, so the visit stores need nothing from the
//! webhooks, which read what is written here.

use shortlink_store::sql::{statement, Dialect, Driver, Statement, Value};
use shortlink_store::{StorageError, StorageResult};
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
/// takes its place in the same order. `within`: the first and last time (Unix ms) of the
/// row's visits, so a reader of its ids looks only at those days of a table partitioned by
/// day (PostgreSQL); none for a row of conversions.
pub(crate) async fn append_ids<D: Dialect>(
    connection: &mut <D::DB as Database>::Connection,
    inserted: &[&str],
    within: Option<(i64, i64)>,
) -> StorageResult<()> {
    if inserted.is_empty() {
        return Ok(());
    }
    let db = StorageError::classify;
    let tick = Statement::new("UPDATE visit_feed_clock SET seq = seq + 1 WHERE id = 1");
    D::DB::execute(connection, tick).await.map_err(db)?;
    let read = Statement::new("SELECT seq FROM visit_feed_clock WHERE id = 1");
    let row = D::DB::fetch_optional(connection, read)
        .await
        .map_err(db)?
        .ok_or_else(|| StorageError::Corrupt("visit_feed_clock has no row".into()))?;
    let seq = D::DB::int(&row, "seq")?;
    let ids = inserted.join("\n");
    let row = statement(
        "INSERT INTO visit_feed (seq, committed_ms, event_ids, first_visit_ms, last_visit_ms) \
         VALUES (?, ?, ?, ?, ?)",
        [
            Value::Int(seq),
            Value::Int(chrono::Utc::now().timestamp_millis()),
            Value::Text(ids),
            Value::OptInt(within.map(|(first, _)| first)),
            Value::OptInt(within.map(|(_, last)| last)),
        ],
    );
    D::DB::execute(connection, row).await.map_err(db)?;
    Ok(())
}
