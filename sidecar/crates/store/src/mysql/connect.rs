//! Connections to MariaDB/MySQL: every session strict, in UTC, utf8mb4.

use crate::api::{StorageError, StorageResult};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::Executor;
use std::str::FromStr;
use std::time::Duration;

/// Every connection's `sql_mode`. Strict: a value that does not fit its column (too long, out of
/// range, a bad date) is an error, never truncated or zeroed with a warning, so nothing
/// half-written is stored. ANSI_QUOTES: `"key"` names a column, as in the other backends' SQL;
/// strings are single-quoted everywhere. PIPES_AS_CONCAT: `||` concatenates, as elsewhere.
const SQL_MODE: &str = "STRICT_ALL_TABLES,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,\
ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO,ANSI_QUOTES,PIPES_AS_CONCAT";

/// A pool on `url` (`mysql://` or `mariadb://`) whose sessions all run in [`SQL_MODE`], UTC and
/// utf8mb4, with a lock wait bounded by `acquire_timeout` (a request waiting on a row lock is
/// answered 503 instead of hanging).
pub async fn pool(
    url: &str,
    max_connections: u32,
    acquire_timeout: Duration,
) -> StorageResult<MySqlPool> {
    let url = match url.strip_prefix("mariadb://") {
        Some(rest) => format!("mysql://{rest}"),
        None => url.to_owned(),
    };
    let connect = MySqlConnectOptions::from_str(&url)?
        .charset("utf8mb4")
        .collation("utf8mb4_bin")
        .timezone(Some("+00:00".to_owned()));
    let lock_wait = acquire_timeout.as_secs().max(1);
    crate::pool::ping_after_idle(MySqlPoolOptions::new())
        .max_connections(max_connections.max(1))
        .acquire_timeout(acquire_timeout)
        .idle_timeout(Some(Duration::from_secs(600)))
        .after_connect(move |connection, _| {
            Box::pin(async move {
                connection
                    .execute(
                        format!(
                            "SET SESSION sql_mode = '{SQL_MODE}', \
                             SESSION innodb_lock_wait_timeout = {lock_wait}"
                        )
                        .as_str(),
                    )
                    .await?;
                Ok(())
            })
        })
        .connect_with(connect)
        .await
        .map_err(StorageError::classify)
}
