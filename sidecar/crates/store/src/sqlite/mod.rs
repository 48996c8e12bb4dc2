//! SQLite backend: an embedded file, created on first run.
//!
//! SQLite allows one writer at a time, so writes go through a pool of a single connection, shared
//! with the visit store (writers queue in the pool instead of failing with SQLITE_BUSY; see
//! [`super::sqlite_file`]) and start with `BEGIN IMMEDIATE`, which takes the write lock up front
//! so a transaction that read first never fails to upgrade. Reads use their own pool and, in WAL
//! mode, never wait for the writer. What else it does its own way: times stored as text, the
//! URL-hash prefix a plain column (migration 7), and batch inserts with `OR IGNORE`.

use super::api::{Backend, ConnectOptions, EncodedRows, StorageError, StorageResult};
use super::model::NewRow;
use super::sql::batch::{EncodedInsert, Limits};
use super::sql::{Dialect, Driver, SqlStorage, Statement, Value};
use super::sqlite_file;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Pool, Sqlite, Transaction};
use std::sync::Arc;

/// The SQLite dialect. It holds the file's one writer open while the storage lives: that writer
/// is kept by handle count, and once the last handle goes the visit store would open a second
/// writer on the file, which meets this one on SQLITE_BUSY ([`sqlite_file::shared_writer`]).
#[derive(Clone)]
pub struct Lite {
    _writer: Arc<SqlitePool>,
}

pub(crate) type SqliteStorage = SqlStorage<Lite>;

/// Rows per multi-row INSERT: 17 binds each, well under SQLite's 32,766 variables.
const INSERT_ROWS: usize = 1000;

#[async_trait]
impl Dialect for Lite {
    type DB = Sqlite;

    const BACKEND: Backend = Backend::Sqlite;

    const WRITES_URL_PREFIX: bool = true;

    const BIGINT: &'static str = "INTEGER";

    // BEGIN IMMEDIATE already holds the database's write lock.
    const FOR_UPDATE: &'static str = "";
    const FOR_SHARE: &'static str = "";

    fn time(at: DateTime<Utc>) -> Value {
        Value::Text(ts(at))
    }

    fn read_time(row: &SqliteRow, column: &str) -> StorageResult<DateTime<Utc>> {
        parse_ts(&Sqlite::text(row, column)?)
    }

    fn read_opt_time(row: &SqliteRow, column: &str) -> StorageResult<Option<DateTime<Utc>>> {
        Sqlite::opt_text(row, column)?
            .as_deref()
            .map(parse_ts)
            .transpose()
    }

    fn push_tag(query: &mut Statement, tag: String) {
        query
            .push(" AND EXISTS (SELECT 1 FROM json_each(links.tags) WHERE json_each.value = ")
            .bind(Value::Text(tag))
            .push(")");
    }

    fn push_search(query: &mut Statement, text: &str) {
        // The index kept off the write path, and `LIKE` for what it does not hold yet.
        crate::sqlite_search::push_search(query, text);
    }

    async fn begin(pool: &Pool<Sqlite>) -> StorageResult<Transaction<'static, Sqlite>> {
        (crate::patience::begin(pool, Some("BEGIN IMMEDIATE")).await)
            .map_err(StorageError::classify)
    }

    async fn begin_quiesced(pool: &Pool<Sqlite>) -> StorageResult<Transaction<'static, Sqlite>> {
        // BEGIN IMMEDIATE takes the one write lock: no other writer is mid-transaction. A writer
        // in another process waits for it (busy timeout) like for any write.
        Self::begin(pool).await
    }

    fn encode_rows(&self, rows: &[NewRow]) -> StorageResult<EncodedRows> {
        Ok(EncodedRows::new(encode(rows)?))
    }

    async fn insert_links(
        tx: &mut Transaction<'static, Sqlite>,
        rows: &[NewRow],
        encoded: EncodedRows,
    ) -> StorageResult<Vec<String>> {
        let encoded = match encoded.into_inner::<EncodedInsert<Sqlite>>() {
            Some(encoded) => encoded,
            None => encode(rows)?,
        };
        let mut inserted = Vec::with_capacity(rows.len());
        for statement in encoded.statements {
            let done = sqlx::query_with(&statement.sql, statement.arguments)
                .execute(&mut **tx)
                .await
                .map_err(StorageError::classify)?;
            let affected = usize::try_from(done.rows_affected()).unwrap_or(usize::MAX);
            if affected >= statement.rows.len() {
                inserted.extend(statement.rows.iter().map(|&at| rows[at].link.code.clone()));
            } else if affected > 0 {
                // Some were skipped. The rows this statement inserted are the table's newest:
                // SQLite gives each new row the largest rowid so far plus one, and this
                // transaction holds the only write lock.
                let codes: Vec<String> =
                    sqlx::query_scalar("SELECT code FROM links ORDER BY rowid DESC LIMIT ?1")
                        .bind(i64::try_from(affected).unwrap_or(i64::MAX))
                        .fetch_all(&mut **tx)
                        .await
                        .map_err(StorageError::classify)?;
                inserted.extend(codes);
            }
        }
        Ok(inserted)
    }
}

/// OR IGNORE, and no function in any index expression (migration 7): then no row can abort the
/// statement halfway (every constraint resolves by skipping the row), and SQLite keeps no
/// statement journal, a copy of every page the statement changes (~8% of the write thread's
/// time, perf). Rows are validated before, so only unique conflicts (code, slot) skip one; a
/// skipped row is reported as not inserted. No RETURNING: handing a row per link back through
/// the driver cost more than the insert's own table write; the count tells whether every row
/// went in, which is the rule.
fn encode(rows: &[NewRow]) -> StorageResult<EncodedInsert<Sqlite>> {
    let limits = Limits {
        rows: INSERT_ROWS,
        bytes: usize::MAX,
    };
    EncodedInsert::new::<Lite>(rows, "INSERT OR IGNORE INTO", limits)
}

impl SqliteStorage {
    pub(crate) async fn connect(options: &ConnectOptions) -> StorageResult<Self> {
        let connect = sqlite_file::connect_options(
            &options.url,
            options.acquire_timeout,
            options.sqlite_cache,
        )?;
        if let Some(dir) = connect.get_filename().parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StorageError::Other(sqlx::Error::Io(e)))?;
            }
        }
        let writer = sqlite_file::shared_writer(&connect, options.acquire_timeout).await?;
        migrate(&writer).await?;
        let reader = sqlite_file::reader(
            &connect,
            options.max_connections.max(1),
            options.acquire_timeout,
            options.sqlite_cache,
        )
        .await?;
        Ok(Self {
            // Shared with the visit store on the same file ([`sqlite_file::shared_writer`]).
            writer: (*writer).clone(),
            dialect: Lite { _writer: writer },
            reader,
            audit_heads: Default::default(),
        })
    }
}

/// Applies the migrations. SQLite's migrator takes no lock: two processes opening a new file at
/// the same moment (a CLI command beside a starting sidecar) each apply the migrations the other
/// has not committed yet, and the second to commit one fails on the first's row
/// (`UNIQUE constraint failed: _sqlx_migrations.version`), its own transaction rolled back. Run
/// again, it finds that migration applied and goes on; each failure means the other process
/// committed one more, so as many runs as there are migrations settle it, and a migration that
/// fails on its own fails every time.
async fn migrate(writer: &SqlitePool) -> StorageResult<()> {
    let migrator = sqlx_macros::migrate!("../../../migrations/sqlite");
    let mut runs = migrator.iter().count() + 1;
    loop {
        runs -= 1;
        match migrator.run(writer).await {
            Ok(()) => return Ok(()),
            Err(error) if runs > 0 => {
                tracing::info!(%error, "a migration failed, another process applying it too: run again");
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Fixed-width UTC text, so that text order is time order.
pub(super) fn ts(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

pub(super) fn parse_ts(text: &str) -> StorageResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| StorageError::Corrupt(format!("timestamp {text:?} in the database")))
}

#[cfg(test)]
mod tests;
