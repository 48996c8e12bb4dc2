//! What the MariaDB store and its corrections both turn into each other: sqlx's errors into the
//! store's, a visit's Unix milliseconds into the `DATETIME` bound for it.

use chrono::{DateTime, Utc};
use shortlink_store::StorageError;

pub(super) fn db(error: sqlx::Error) -> StorageError {
    StorageError::classify(error)
}

pub(super) fn at_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}
