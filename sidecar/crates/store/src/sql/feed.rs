//! The visit feed's clock and rows (`visit_feed_clock`, `visit_feed`), written here once for
//! every writer: the visit stores (`shortlink-visits-sql`: visits, conversions) and the links'
//! own transactions (a quarantine's or a release's [`LinkEvent`]). The webhooks read it.

use super::dialect::Dialect;
use super::driver::Driver;
use super::statement::{statement, Statement, Value};
use crate::api::{StorageError, StorageResult};
use crate::quarantine::LinkEvent;
use sqlx::Database;

/// Records `inserted` (event ids: a visit's, a conversion's `cv_…`, a link event's `le_…`) as
/// the next feed row. Called last, just before the commit: the clock row's lock is then held
/// only for this insert and the commit, and a writer that took a later seq cannot commit before
/// this one does (it waits for the lock), so a reader never sees seq `n + 1` without `n`.
/// `within`: the first and last time (Unix ms) of the row's visits, so a reader of its ids
/// looks only at those days of a table partitioned by day (PostgreSQL); none for other ids.
pub async fn append_ids<D: Dialect>(
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

/// Stores `events` and appends their ids as one feed row: last in a link transaction.
pub(super) async fn append_link_events<D: Dialect>(
    connection: &mut <D::DB as Database>::Connection,
    events: &[LinkEvent],
) -> StorageResult<()> {
    for event in events {
        let insert = statement(
            "INSERT INTO link_events (id, workspace_id, code, kind, feed, entry, reason, at_ms) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                Value::Text(event.id.clone()),
                Value::Int(event.workspace.get()),
                Value::Text(event.code.clone()),
                Value::Text(event.kind.as_str().to_owned()),
                Value::Text(event.feed.clone()),
                Value::Text(event.entry.clone()),
                Value::Text(event.reason.as_str().to_owned()),
                Value::Int(event.at.timestamp_millis()),
            ],
        );
        D::DB::execute(&mut *connection, insert)
            .await
            .map_err(StorageError::classify)?;
    }
    let ids: Vec<&str> = events.iter().map(|event| event.id.as_str()).collect();
    append_ids::<D>(connection, &ids, None).await
}
