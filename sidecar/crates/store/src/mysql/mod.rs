//! MariaDB / MySQL backend: several sidecar processes may share one database. What it does its
//! own way: strict, UTC sessions ([`connect`]), the URL-hash prefix a virtual column, locking
//! reads to quiesce writers, and batch inserts as multi-row `INSERT`s sized to the server's
//! `max_allowed_packet` ([`insert`]).

mod connect;
mod insert;
mod marker;
mod search;

pub use connect::pool;
pub use marker::My;

use super::api::{Backend, ConnectOptions, EncodedRows, StorageError, StorageResult};
use super::model::NewRow;
use super::sql::batch::{EncodedInsert, Limits};
use super::sql::{Dialect, SqlStorage, Statement, Value};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::mysql::MySqlRow;
use sqlx::{MySql, Pool, Row, Transaction};
use std::time::Duration;

pub(crate) type MysqlStorage = SqlStorage<My>;

/// Rows per multi-row INSERT (16 values each, under a prepared statement's 65,535). Measured
/// (bench/batch-throughput, 100k links): 4,000-row statements ran at a third of the speed of
/// 1,000-row ones, 500-row ones no faster.
const INSERT_ROWS: usize = 1000;

#[async_trait]
impl Dialect for My {
    type DB = MySql;

    const BACKEND: Backend = Backend::Mysql;

    // URL_PREFIX is a virtual column (migrations/mysql): NULL for revoked and recipient links.

    const WRITES_URL_PREFIX: bool = false;

    const BIGINT: &'static str = "SIGNED";

    // A locking read sees the newest committed row, waits for a writer of it, and (with its gap
    // lock) keeps any other transaction from inserting the code until this one ends.
    const QUIESCE_READ: &'static str = " LOCK IN SHARE MODE";
    // MariaDB has no `FOR SHARE`.
    const FOR_SHARE: &'static str = " LOCK IN SHARE MODE";

    // As DATETIME text: sqlx binds a DateTime<Utc> as a TIMESTAMP, which MariaDB turns into NULL
    // past 2038 (an expiry in 2999 was stored as none).
    fn time(at: DateTime<Utc>) -> Value {
        Value::Text(at.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
    }

    // Text in a binary collation (codes, keys) comes with MySQL's BINARY flag, which sqlx will
    // not decode as a String: read the bytes and check they are UTF-8.
    fn read_text(row: &MySqlRow, column: &str) -> StorageResult<String> {
        utf8(row.try_get(column)?)
    }

    fn read_opt_text(row: &MySqlRow, column: &str) -> StorageResult<Option<String>> {
        row.try_get::<Option<Vec<u8>>, _>(column)?
            .map(utf8)
            .transpose()
    }

    fn push_tag(query: &mut Statement, tag: String) {
        query
            .push(" AND JSON_CONTAINS(tags, JSON_QUOTE(")
            .bind(Value::Text(tag))
            .push("))");
    }

    fn push_search(query: &mut Statement, text: &str) {
        // The FULLTEXT index finds the links holding words that begin like the text's words;
        // LIKE keeps those holding the text itself. Without a word it could use, LIKE alone.
        let words = search::required_words(text);
        if !words.is_empty() {
            query
                .push(" AND MATCH (search_text) AGAINST (")
                .bind(Value::Text(words))
                .push(" IN BOOLEAN MODE)");
        }
        query
            .push(" AND search_text LIKE ")
            .bind(Value::Text(crate::sql::rows::like_anywhere(text)))
            .push(" ESCAPE '!'");
    }

    // READ COMMITTED: a batch group's duplicate checks (`insert.rs`) lock the rows they find and
    // no gap, so the other groups of the job, written at once, never wait on them for their
    // inserts. At REPEATABLE READ a check held a thousand gaps to the commit, anywhere in the
    // code space: two groups that had both checked deadlocked inserting into each other's, and
    // the next group's inserts ran out of lock wait behind a slow commit, 503 per line (see
    // bench/results/mariadb-batch-locks-2026-11-29.md). Nothing a group does relies on gap
    // locks: its other reads are of rows it locks.
    async fn begin_batch(&self, pool: &Pool<MySql>) -> StorageResult<Transaction<'static, MySql>> {
        let begin = (self.batch_read_committed)
            .then_some("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION");
        (crate::patience::begin(pool, begin).await).map_err(StorageError::classify)
    }

    async fn begin_quiesced(pool: &Pool<MySql>) -> StorageResult<Transaction<'static, MySql>> {
        // No table lock: InnoDB's LOCK TABLES ends the transaction. The transaction's reads of
        // codes lock instead (QUIESCE_READ): a code it finds absent cannot be inserted before it
        // ends, one being inserted is waited for.
        Self::begin(pool).await
    }

    fn encode_rows(&self, rows: &[NewRow]) -> StorageResult<EncodedRows> {
        Ok(EncodedRows::new(self.encode(rows)?))
    }

    async fn insert_links(
        tx: &mut Transaction<'static, MySql>,
        rows: &[NewRow],
        encoded: EncodedRows,
    ) -> StorageResult<Vec<String>> {
        let encoded = match encoded.into_inner::<EncodedInsert<MySql>>() {
            Some(encoded) => encoded,
            // Another backend's encoding cannot reach here; encode with the smallest packet.
            None => My {
                insert_bytes: 512 * 1024,
                batch_read_committed: false,
            }
            .encode(rows)?,
        };
        insert::run(tx, rows, encoded).await
    }
}

fn utf8(bytes: Vec<u8>) -> StorageResult<String> {
    String::from_utf8(bytes)
        .map_err(|e| StorageError::Corrupt(format!("text that is not UTF-8: {e}")))
}

impl My {
    fn encode(&self, rows: &[NewRow]) -> StorageResult<EncodedInsert<MySql>> {
        let limits = Limits {
            rows: INSERT_ROWS,
            bytes: self.insert_bytes,
        };
        EncodedInsert::new::<My>(rows, "INSERT INTO", limits)
    }
}

/// The named lock sidecars starting together take around the migrations.
const MIGRATION_LOCK: &str = "shortlink:migrations";

/// Applies the migrations once however many sidecars start together. sqlx's migrator asks for a
/// named lock with `GET_LOCK(name, -1)` and ignores the answer; MariaDB does not read -1 as "wait
/// for ever", so two migrators ran the same DDL (MySQL's DDL is not transactional) and left the
/// migration marked as partially applied. So the lock is taken here, on the connection that then
/// migrates, with a real timeout and its answer checked (the migrator's own `GET_LOCK` on the same
/// connection then nests).
async fn migrate(pool: &sqlx::MySqlPool, acquire_timeout: Duration) -> StorageResult<()> {
    let mut conn = pool.acquire().await.map_err(StorageError::classify)?;
    let wait = acquire_timeout.as_secs().max(60);
    let locked: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, ?)")
        .bind(MIGRATION_LOCK)
        .bind(wait)
        .fetch_one(&mut *conn)
        .await
        .map_err(StorageError::classify)?;
    if locked != Some(1) {
        return Err(StorageError::Migrate(sqlx::migrate::MigrateError::Execute(
            sqlx::Error::Protocol(format!(
                "another sidecar held the migration lock for {wait} s"
            )),
        )));
    }
    let migrated = sqlx_macros::migrate!("../../../migrations/mysql")
        .run(&mut *conn)
        .await;
    // Released with the session anyway; releasing it now lets the others go on at once.
    let _ = sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *conn)
        .await;
    Ok(migrated?)
}

impl MysqlStorage {
    pub(crate) async fn connect(options: &ConnectOptions) -> StorageResult<Self> {
        let pool = pool(
            &options.url,
            options.max_connections,
            options.acquire_timeout,
        )
        .await?;
        migrate(&pool, options.acquire_timeout).await?;
        let (packet, statement_binlog): (i64, i64) = sqlx::query_as(
            "SELECT CAST(@@max_allowed_packet AS SIGNED), \
             CAST(@@log_bin = 1 AND @@binlog_format = 'STATEMENT' AS SIGNED)",
        )
        .fetch_one(&pool)
        .await
        .map_err(StorageError::classify)?;
        Ok(Self {
            dialect: My {
                insert_bytes: usize::try_from(packet / 2).unwrap_or(512 * 1024),
                batch_read_committed: statement_binlog == 0,
            },
            writer: pool.clone(),
            reader: pool,
            audit_heads: Default::default(),
        })
    }
}
