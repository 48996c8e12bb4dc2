//! The error every subcommand and the importer's sources return: any error, said as it is. A
//! leaf of its own, so the subcommands and the sources need nothing of `cli/mod.rs`.

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `error`, with what to do when it is SQLite's "database is locked": another process held the
/// file's one write lock for all of `--db-timeout`. A running sidecar gives way to a waiting
/// command between its transactions (`shortlink_store::sqlite_turn`), so what held it is one
/// transaction that long (a batch, compose or reissue group on a very busy machine) or another
/// command (an import), which does not give way.
pub fn explain_locked(error: BoxError, db_timeout: std::time::Duration) -> BoxError {
    if !is_locked(error.as_ref()) {
        return error;
    }
    let waited = humantime::format_duration(db_timeout);
    format!(
        "{error}\n  another process held the SQLite database's write lock for the {waited} this \
         command waits (--db-timeout): a running sidecar lets a waiting command in between its \
         transactions, so either one of them took that long (a batch, compose or reissue group \
         on a very busy machine) or another command (an import) held it. Run the command again \
         with a longer wait (--db-timeout 60s) or once the batch or import is over, or make the \
         change through the running sidecar's API"
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
