//! How this process opens a SQLite database file: one set of connection settings, and one write
//! connection per file shared by everything that writes to it (the link API and the visit
//! consumer).
//!
//! SQLite has one writer per file. Two write connections in one process would meet on SQLite's
//! busy handler, which polls with sleeps of up to 100 ms: a create waiting behind the visit
//! consumer, which starts its next transaction the moment it commits the last, would rarely find
//! the lock free and fail with "database is locked" after the busy timeout (the 30-minute soak lost
//! 33 of 2,756 creates that way). A single connection handed out by the pool in arrival order
//! makes a writer wait behind at most the transactions queued before it. A writer in another
//! process (a CLI import, a consumer run on its own) still meets this one on the busy timeout.

use super::api::{SqliteCache, StorageError, StorageResult};
use sqlx::sqlite::SqliteSynchronous;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection};
use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;
use tokio::sync::Mutex;

/// The settings of every connection to a database file, writer or reader.
pub fn connect_options(
    url: &str,
    busy_timeout: Duration,
    cache: SqliteCache,
) -> StorageResult<SqliteConnectOptions> {
    Ok(SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // With WAL, NORMAL survives a process crash; only an OS crash or power loss can undo the
        // last commits.
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(busy_timeout)
        .foreign_keys(true)
        // Codes are a keyed permutation, so inserts land all over the primary-key B-tree: a
        // writer's cache of 32 MiB (SQLite's default is 2 MiB) keeps batch inserts from
        // re-reading pages. Readers take theirs in [`reader`].
        .pragma("cache_size", cache_pragma(cache.writer_mib))
        // A multi-row INSERT ... ON CONFLICT keeps a statement journal; in a file that costs a
        // filesystem write (and block zeroing) per page it touches.
        .pragma("temp_store", "memory")
        // Checkpoint every 64 MiB of WAL instead of 4 MiB: a batch rewrites the same index pages
        // commit after commit, and a checkpoint copies each page once however often it changed
        // since the last one. This process's shared writer turns it off and leaves checkpoints
        // to its checkpointer (below); other connections (a CLI import) keep it.
        .pragma("wal_autocheckpoint", "16384")
        // The visit store writes seven tables in ten statement sizes each, beside the link
        // statements; all stay prepared.
        .statement_cache_capacity(256))
}

/// The write pools open in this process, by database file. Weak, so a pool closes when the last
/// store using it is dropped (tests open many databases in one process).
static WRITERS: LazyLock<Mutex<HashMap<PathBuf, Weak<SqlitePool>>>> = LazyLock::new(Mutex::default);

/// The one write connection (a pool of one) to the file `connect` names, opened on first use.
pub async fn shared_writer(
    connect: &SqliteConnectOptions,
    acquire_timeout: Duration,
) -> StorageResult<Arc<SqlitePool>> {
    let file = identity(connect)?;
    let mut writers = WRITERS.lock().await;
    writers.retain(|_, pool| pool.strong_count() > 0);
    if let Some(pool) = writers.get(&file).and_then(Weak::upgrade) {
        return Ok(pool);
    }
    // Each release of the writer tells the checkpointer there may be pages to copy. A full
    // channel already says so; the sender goes with the pool, which ends the checkpointer.
    let (released, written) = tokio::sync::mpsc::channel::<()>(1);
    // And the search indexer whether the writer is busy (`sqlite_search`).
    let releases = Arc::new(crate::sqlite_search::Releases::default());
    let counted = Arc::clone(&releases);
    // And the other processes on the file whose turn it is (`sqlite_turn`).
    let turns = crate::sqlite_turn::Turns::open(&file).map(Arc::new);
    let after = turns.clone();
    let pool = Arc::new(
        SqlitePoolOptions::new()
            .test_before_acquire(false)
            .before_acquire(move |connection, metadata| {
                let turns = turns.clone();
                Box::pin(async move {
                    if let Some(turns) = turns {
                        turns.before_write().await;
                    }
                    crate::pool::ping_if_idle(connection, metadata).await
                })
            })
            .max_connections(1)
            .acquire_timeout(acquire_timeout)
            .after_release(move |_, _| {
                if let Some(turns) = &after {
                    turns.after_write();
                }
                let _ = released.try_send(());
                counted.released();
                Box::pin(async { Ok(true) })
            })
            .connect_with(connect.clone().pragma("wal_autocheckpoint", "0"))
            .await
            .map_err(StorageError::classify)?,
    );
    let checkpointer = connect.connect().await.map_err(StorageError::classify)?;
    tokio::spawn(checkpoint_while_open(
        checkpointer,
        Arc::downgrade(&pool),
        written,
    ));
    tokio::spawn(crate::sqlite_search::index_while_open(
        Arc::downgrade(&pool),
        releases,
    ));
    writers.insert(file, Arc::downgrade(&pool));
    Ok(pool)
}

/// How often the checkpointer looks at the WAL while the writer is in use.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(50);

/// WAL frames (pages) past which the checkpointer stops the writer to catch up: 64 MiB at 4 KiB
/// pages, the point where the writer used to checkpoint itself.
const WAL_BOUND: i64 = 16384;

/// Copies the WAL into the database on its own connection while the shared writer goes on.
///
/// With auto-checkpoint the committing connection copies the pages right after its commit, and
/// the next transaction waits: a third of the write thread's time in batch issuance. A PASSIVE
/// checkpoint here never blocks the writer, and the writer starts the WAL over on its next
/// transaction once everything in it has been copied. Under non-stop writing that moment does
/// not come (a 1M-link batch grew the WAL to 400 MB), so past [`WAL_BOUND`] frames this takes
/// the write connection from the pool, in turn with the other writers, and runs a RESTART
/// checkpoint on it: what is left to copy, then the next write starts the WAL over.
///
/// It looks only when there may be something to copy: after the writer was used (`written`, a
/// message per release), and again while a reader's snapshot kept pages from being copied. An
/// idle sidecar's checkpointer sleeps; a look every 50 ms whatever happened was most of an idle
/// sidecar's CPU (issue 82). Ends when the pool is dropped.
async fn checkpoint_while_open(
    mut connection: sqlx::SqliteConnection,
    pool: Weak<SqlitePool>,
    mut written: tokio::sync::mpsc::Receiver<()>,
) {
    let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The WAL length at the last RESTART that went through: the WAL is only started over by the
    // next write, so an idle WAL past the bound is not restarted again and again.
    let mut restarted_at = None;
    let mut behind = false;
    while pool.strong_count() > 0 {
        if !behind {
            match tokio::time::timeout(OPEN_CHECK_EVERY, written.recv()).await {
                Ok(Some(())) => {}
                Ok(None) => break,
                Err(_) => continue,
            }
        }
        tick.tick().await;
        let (log, copied) = match checkpoint(&mut connection, "PASSIVE").await {
            Ok((_, log, copied)) => (log, copied),
            Err(e) => {
                tracing::warn!(error = %e, "WAL checkpoint failed");
                continue;
            }
        };
        behind = copied < log;
        let Some(pool) = pool.upgrade() else { break };
        if log < WAL_BOUND || restarted_at == Some(log) {
            continue;
        }
        // On the writer itself: a RESTART from this connection would wait on the busy handler
        // for a writer that starts its next transaction the moment it commits, and never get in.
        let restart = match pool.acquire().await {
            Ok(mut writer) => checkpoint(&mut writer, "RESTART").await,
            Err(e) => Err(e),
        };
        match restart {
            Ok((0, log, _)) => restarted_at = Some(log),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint failed"),
        }
    }
    let _ = connection.close().await;
}

/// How often an idle checkpointer looks whether its pool is still open.
const OPEN_CHECK_EVERY: Duration = Duration::from_secs(10);

/// Runs one checkpoint; SQLite answers (busy, frames in the WAL, frames copied).
async fn checkpoint(
    connection: &mut sqlx::SqliteConnection,
    mode: &str,
) -> sqlx::Result<(i64, i64, i64)> {
    sqlx::query_as(&format!("PRAGMA wal_checkpoint({mode})"))
        .fetch_one(connection)
        .await
}

/// `PRAGMA cache_size` of `mib` MiB (a negative size is in KiB).
fn cache_pragma(mib: u32) -> String {
    format!("-{}", u64::from(mib) * 1024)
}

/// A read pool on the same file; in WAL mode readers never wait for the writer. Each connection
/// has its own page cache of `cache.reader_mib` (point reads and stats need little, and the
/// kernel's page cache holds the file for all of them), and one idle for a minute is closed,
/// cache and all, so that memory taken by a burst of reads is given back.
pub async fn reader(
    connect: &SqliteConnectOptions,
    max_connections: u32,
    acquire_timeout: Duration,
    cache: SqliteCache,
) -> StorageResult<SqlitePool> {
    crate::pool::ping_after_idle(SqlitePoolOptions::new())
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .idle_timeout(Some(Duration::from_secs(60)))
        .connect_with(
            connect
                .clone()
                .read_only(true)
                .pragma("cache_size", cache_pragma(cache.reader_mib)),
        )
        .await
        .map_err(StorageError::classify)
}

/// The file behind the options, the same whichever relative or linked path named it. The
/// directory must exist; the file itself may not yet.
fn identity(connect: &SqliteConnectOptions) -> StorageResult<PathBuf> {
    let path = connect.get_filename();
    let io = |e| StorageError::Other(sqlx::Error::Io(e));
    if let Ok(file) = path.canonicalize() {
        return Ok(file);
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.canonicalize().map_err(io)?,
        _ => std::env::current_dir().map_err(io)?,
    };
    Ok(dir.join(path.file_name().unwrap_or(path.as_os_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn writer(url: &str) -> Arc<SqlitePool> {
        let connect = connect_options(url, Duration::from_secs(5), SqliteCache::default()).unwrap();
        shared_writer(&connect, Duration::from_secs(5))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn one_writer_per_file_however_it_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.db");
        let first = writer(&format!("sqlite://{}", file.display())).await;
        let dotted = dir.path().join(".").join("a.db");
        let same = writer(&format!("sqlite://{}", dotted.display())).await;
        assert!(Arc::ptr_eq(&first, &same));
        let other = writer(&format!("sqlite://{}", dir.path().join("b.db").display())).await;
        assert!(!Arc::ptr_eq(&first, &other));
    }

    #[tokio::test]
    async fn a_writer_closes_with_its_last_user() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("a.db").display());
        let first = writer(&url).await;
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none());
        let reopened = writer(&url).await;
        assert!(!reopened.is_closed());
    }

    #[tokio::test]
    async fn the_writer_and_each_reader_have_the_page_cache_they_are_given() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("a.db").display());
        let cache = SqliteCache {
            writer_mib: 48,
            reader_mib: 3,
        };
        let connect = connect_options(&url, Duration::from_secs(5), cache).unwrap();
        let writer = shared_writer(&connect, Duration::from_secs(5))
            .await
            .unwrap();
        let reader = reader(&connect, 2, Duration::from_secs(5), cache)
            .await
            .unwrap();
        let cache_size = |pool: SqlitePool| async move {
            let (kib,): (i64,) = sqlx::query_as("PRAGMA cache_size")
                .fetch_one(&pool)
                .await
                .unwrap();
            kib
        };
        assert_eq!(cache_size((*writer).clone()).await, -48 * 1024);
        assert_eq!(cache_size(reader).await, -3 * 1024);
    }
}
