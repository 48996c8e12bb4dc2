//! The storage's one error type, sorted so callers can tell a taken code and a database worth
//! retrying from the rest. Below both the model (whose checked conversions return it) and the
//! traits in `api.rs`.

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A unique constraint refused the write (a taken code).
    #[error("unique constraint violated")]
    Conflict,
    /// The database cannot be reached or is overloaded: worth retrying later.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    #[error("database error: {0}")]
    Other(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(
        "unsupported database URL {0:?}: use sqlite://..., postgres://... or mysql://... (mariadb://...)"
    )]
    UnsupportedUrl(String),
    /// A backend that does not do this yet.
    #[error("not supported yet: {0}")]
    NotYet(&'static str),
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
}

impl StorageError {
    /// Sorts a driver error: unique violations, connectivity problems, the rest.
    pub fn classify(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => StorageError::Conflict,
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or_default();
                let unavailable = if db
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some()
                {
                    // Class 08 connection exception, 53 insufficient resources, 28 authorization
                    // refused, 57P0x operator intervention (shutdown, crash recovery, cannot
                    // connect now), 55000 "database is not currently accepting connections",
                    // 55P03 lock timeout, 57014 statement timeout, 3D000 no such database.
                    code.starts_with("08")
                        || code.starts_with("53")
                        || code.starts_with("28")
                        || code.starts_with("57P0")
                        || matches!(code.as_ref(), "55000" | "55P03" | "57014" | "3D000")
                } else if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                    mysql_unavailable(my.number())
                } else {
                    // SQLite: SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
                    code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
                };
                if unavailable {
                    StorageError::Unavailable(error)
                } else {
                    StorageError::Other(error)
                }
            }
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => StorageError::Unavailable(error),
            _ => StorageError::Other(error),
        }
    }

    /// A lock wait that ran out (`--db-timeout`) or a deadlock the database broke: the database
    /// answers, and the statement changed nothing. A batch group writes again rather than shed
    /// its lines (MariaDB 1205 and 1213, PostgreSQL 55P03 and 40P01).
    pub fn lock_ran_out(&self) -> bool {
        let (StorageError::Unavailable(sqlx::Error::Database(db))
        | StorageError::Other(sqlx::Error::Database(db))) = self
        else {
            return false;
        };
        match db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
            Some(my) => matches!(my.number(), 1205 | 1213),
            None => {
                db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some()
                    && matches!(db.code().as_deref(), Some("55P03" | "40P01"))
            }
        }
    }
}

/// MariaDB/MySQL server errors worth retrying: the server is going away, out of connections or
/// resources, or a lock wait ran out.
fn mysql_unavailable(number: u16) -> bool {
    matches!(
        number,
        // ER_CON_COUNT_ERROR, ER_OUT_OF_RESOURCES, ER_SERVER_SHUTDOWN, ER_NORMAL_SHUTDOWN,
        // ER_TOO_MANY_USER_CONNECTIONS, ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK,
        // ER_QUERY_INTERRUPTED, ER_CONNECTION_KILLED, ER_BAD_DB_ERROR, ER_ACCESS_DENIED_ERROR
        1040 | 1041 | 1053 | 1077 | 1203 | 1205 | 1213 | 1317 | 1927 | 1049 | 1045
            // ER_STATEMENT_TIMEOUT (MariaDB max_statement_time), ER_QUERY_TIMEOUT (MySQL)
            | 1969 | 3024
            // CR_SERVER_GONE_ERROR, CR_SERVER_LOST (as the server reports them to some clients)
            | 2006 | 2013
    )
}

pub type StorageResult<T> = Result<T, StorageError>;
