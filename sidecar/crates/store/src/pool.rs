//! How every pool of the store checks a connection before a request takes it.

use sqlx::pool::{PoolConnectionMetadata, PoolOptions};
use sqlx::{Connection, Database};
use std::time::Duration;

/// A connection idle at least this long is pinged before a request takes it.
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// `options` pinging a connection before use only when it sat idle for [`PING_AFTER_IDLE`].
///
/// sqlx's default pings before every acquire: a round trip to the server (to SQLite's worker
/// thread) in front of each request's first statement, two per single create (its key lookup and
/// its transaction). sqlx already pings every connection as it goes back to the pool, so one taken
/// again within the second was answering a moment ago; the ping that stays is for one idle long
/// enough for a database restart or a dropped socket to have gone unnoticed. A server that dies
/// within that second fails the statement instead, answered 503 like a server dying mid-request.
pub(crate) fn ping_after_idle<DB: Database>(options: PoolOptions<DB>) -> PoolOptions<DB> {
    options
        .test_before_acquire(false)
        .before_acquire(|connection, metadata| Box::pin(ping_if_idle(connection, metadata)))
}

/// The check of [`ping_after_idle`], for a pool that does more before a request takes a
/// connection (SQLite's shared writer: [`crate::sqlite_file`]).
pub(crate) async fn ping_if_idle<C: Connection>(
    connection: &mut C,
    metadata: PoolConnectionMetadata,
) -> Result<bool, sqlx::Error> {
    if metadata.idle_for >= PING_AFTER_IDLE {
        connection.ping().await?;
    }
    Ok(true)
}
