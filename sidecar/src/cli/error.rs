//! The error every subcommand and the importer's sources return: any error, said as it is. A
//! leaf of its own, so the subcommands and the sources need nothing of `cli/mod.rs`.

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `error`, with what to do when it is SQLite's "database is locked": another process held the
/// file's one write lock for all of `--db-timeout`, a running sidecar most likely (a batch, a
/// compose or a reissue writes group after group, its visit consumer every moment). SQLite keeps
/// no queue of writers: a command beside it polls for a free moment and may not find one.
pub fn explain_locked(error: BoxError, db_timeout: std::time::Duration) -> BoxError {
    if !is_locked(error.as_ref()) {
        return error;
    }
    let waited = humantime::format_duration(db_timeout);
    format!(
        "{error}\n  another process held the SQLite database's write lock for the {waited} this \
         command waits (--db-timeout): a running sidecar writing a batch, a compose, a reissue \
         or visits. Run the command again with a longer wait (--db-timeout 60s) or once the \
         batch is over, or make the change through the running sidecar's API"
    )
    .into()
}

/// Whether SQLite answered SQLITE_BUSY or SQLITE_LOCKED somewhere in `error`'s chain.
fn is_locked(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(sqlx::Error::Database(db)) = error.downcast_ref::<sqlx::Error>() {
            let code = db.code().unwrap_or_default();
            if code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6)) {
                return true;
            }
        }
        cause = error.source();
    }
    false
}
