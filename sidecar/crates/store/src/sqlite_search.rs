//! The console's search index on SQLite, kept off the write path (issue 80; migration 85 has the
//! tables). A create writes nothing for it: this indexer, one per shared writer, adds new links
//! to the FTS5 trigram index in steps of [`STEP`] links while the writer is otherwise idle, and
//! writes again the entries of links whose indexed fields changed (noted by a trigger in
//! `link_search_dirty`). The search ([`push_search`]) reads the index for the links it holds and
//! `LIKE`s the few it does not yet, so an answer never depends on how far the indexer is.
//!
//! Why wait for quiet: FTS5's trigram entries cost about 50 µs a link to write (a 100,000-link
//! insert took 6.0 s with them against 1.0 s), and a 1M-link batch must not pay that on its way.
//! A step holds the one writer for a few tens of milliseconds, so a create arriving meanwhile
//! waits at most that long.

use crate::sql::{Statement, Value};
use sqlx::sqlite::SqlitePool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// Links indexed (or re-indexed) in one transaction.
pub const STEP: i64 = 1_000;

/// How long the writer must have been free of other work before a step.
const QUIET: Duration = Duration::from_millis(500);

/// How often an idle indexer looks whether its pool is still open.
const OPEN_CHECK_EVERY: Duration = Duration::from_secs(10);

/// The indexed text of a link: every field the search matches, as `LIKE` reads them.
const TEXT: &str = "lower(code || ' ' || target || ' ' || coalesce(recipient_ref, '') || ' ' || \
     coalesce(campaign, '') || ' ' || coalesce(tags, ''))";

/// Releases of a shared writer, anyone's: how the indexer tells whether the writer is busy.
#[derive(Debug, Default)]
pub struct Releases {
    count: AtomicU64,
    notify: Notify,
}

impl Releases {
    /// Called by the pool on each release of the writer.
    pub(crate) fn released(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.notify.notify_one();
    }

    fn seen(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// Indexes while the pool is open.
pub(crate) async fn index_while_open(pool: Weak<SqlitePool>, releases: Arc<Releases>) {
    loop {
        // Something was written (or the sidecar started: links a CLI import wrote meanwhile).
        if !quiet_after_writes(&pool, &releases).await {
            return;
        }
        loop {
            let Some(open) = pool.upgrade() else { return };
            let before = releases.seen();
            let indexed = match step(&open).await {
                Ok(indexed) => indexed,
                Err(error) => {
                    // Before migration 85 ran, or the file went read-only: nothing to do now.
                    tracing::debug!(%error, "search index step failed");
                    0
                }
            };
            drop(open);
            if indexed < STEP {
                break;
            }
            tokio::time::sleep(QUIET / 10).await;
            // More releases than this step's own: someone else is writing.
            if releases.seen() > before + 1 {
                break;
            }
        }
    }
}

/// Waits for a write, then until [`QUIET`] passes without one; false once the pool is gone.
async fn quiet_after_writes(pool: &Weak<SqlitePool>, releases: &Releases) -> bool {
    while tokio::time::timeout(OPEN_CHECK_EVERY, releases.notify.notified())
        .await
        .is_err()
    {
        if pool.strong_count() == 0 {
            return false;
        }
    }
    loop {
        let seen = releases.seen();
        tokio::time::sleep(QUIET).await;
        if pool.strong_count() == 0 {
            return false;
        }
        if releases.seen() == seen {
            return true;
        }
    }
}

/// One transaction: up to [`STEP`] noted links written again, then up to [`STEP`] new ones.
/// The number of links indexed.
async fn step(pool: &SqlitePool) -> sqlx::Result<i64> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let last: i64 = sqlx::query_scalar("SELECT last_rowid FROM link_search_progress")
        .fetch_one(&mut *tx)
        .await?;
    let noted: Vec<i64> =
        sqlx::query_scalar("SELECT link_rowid FROM link_search_dirty ORDER BY link_rowid LIMIT ?")
            .bind(STEP)
            .fetch_all(&mut *tx)
            .await?;
    for rowid in &noted {
        sqlx::query("DELETE FROM link_search WHERE rowid = ?")
            .bind(rowid)
            .execute(&mut *tx)
            .await?;
        // A link past the mark is indexed with the new ones below; a deleted one has no row.
        index_range(&mut tx, rowid - 1, (*rowid).min(last)).await?;
        sqlx::query("DELETE FROM link_search_dirty WHERE link_rowid = ?")
            .bind(rowid)
            .execute(&mut *tx)
            .await?;
    }
    let upto: Option<i64> = sqlx::query_scalar(
        "SELECT max(rowid) FROM (SELECT rowid FROM links WHERE rowid > ? ORDER BY rowid LIMIT ?)",
    )
    .bind(last)
    .bind(STEP)
    .fetch_one(&mut *tx)
    .await?;
    let mut indexed = noted.len() as i64;
    if let Some(upto) = upto {
        let added = index_range(&mut tx, last, upto).await?;
        sqlx::query("UPDATE link_search_progress SET last_rowid = ?")
            .bind(upto)
            .execute(&mut *tx)
            .await?;
        indexed += added as i64;
    }
    tx.commit().await?;
    Ok(indexed)
}

/// Indexes the links whose rowid is in `(after, upto]`: how many.
async fn index_range(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    after: i64,
    upto: i64,
) -> sqlx::Result<u64> {
    let done = sqlx::query(&format!(
        "INSERT INTO link_search (rowid, text) SELECT rowid, {TEXT} FROM links \
         WHERE rowid > ? AND rowid <= ?"
    ))
    .bind(after)
    .bind(upto)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected())
}

/// The search condition on `links`: the index answers for the links it holds, `LIKE` for the
/// ones past its mark or noted as changed. `text` is lowercased, 3 characters or more.
pub(crate) fn push_search(query: &mut Statement, text: &str) {
    // A phrase of the whole text: the trigram tokenizer matches it as a substring. One OR over
    // rowid (past the mark, or noted) lets SQLite search both by the rowid key; a JOIN from the
    // notes made it walk every indexed link instead (a million links: 560 ms against 130).
    let phrase = format!("\"{}\"", text.replace('"', "\"\""));
    query
        .push(" AND links.rowid IN (SELECT rowid FROM link_search WHERE link_search MATCH ")
        .bind(Value::Text(phrase))
        .push(
            " AND rowid NOT IN (SELECT link_rowid FROM link_search_dirty) \
             UNION ALL SELECT rowid FROM links WHERE (rowid > \
             (SELECT last_rowid FROM link_search_progress) \
             OR rowid IN (SELECT link_rowid FROM link_search_dirty)) AND ",
        )
        .push(TEXT)
        .push(" LIKE ")
        .bind(Value::Text(crate::sql::rows::like_anywhere(text)))
        .push(" ESCAPE '!')");
}
