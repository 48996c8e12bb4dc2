//! MariaDB / MySQL backend: several sidecar processes may share one database. What it does its
//! own way: strict, UTC sessions ([`connect`]), the URL-hash prefix a virtual column, locking
//! reads to quiesce writers, and batch inserts as multi-row `INSERT`s sized to the server's
//! `max_allowed_packet` ([`insert`]).

mod connect;
mod insert;

pub use connect::{pool, SQL_MODE};

use super::sql::batch::{EncodedInsert, Limits};
use super::sql::{Dialect, SqlStorage, Statement, Value};
use super::{Backend, ConnectOptions, EncodedRows, NewRow, StorageError, StorageResult};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::mysql::MySqlRow;
use sqlx::{MySql, Pool, Row, Transaction};

/// The MariaDB/MySQL dialect, with the limits of the server it is connected to.
#[derive(Clone)]
pub(crate) struct My {
    /// Bytes of values per multi-row INSERT: half the server's `max_allowed_packet`, leaving
    /// room for the statement text and the protocol's framing.
    insert_bytes: usize,
}

pub(crate) type MysqlStorage = SqlStorage<My>;

/// Rows per multi-row INSERT: a prepared statement takes at most 65,535 values, 16 per row.
const INSERT_ROWS: usize = 4000;

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

impl MysqlStorage {
    pub async fn connect(options: &ConnectOptions) -> StorageResult<Self> {
        let pool = pool(
            &options.url,
            options.max_connections,
            options.acquire_timeout,
        )
        .await?;
        // The migrator takes a named lock (GET_LOCK), so sidecars starting together apply it once.
        sqlx::migrate!("../migrations/mysql").run(&pool).await?;
        let packet: i64 = sqlx::query_scalar("SELECT CAST(@@max_allowed_packet AS SIGNED)")
            .fetch_one(&pool)
            .await
            .map_err(StorageError::classify)?;
        Ok(Self {
            dialect: My {
                insert_bytes: usize::try_from(packet / 2).unwrap_or(512 * 1024),
            },
            writer: pool.clone(),
            reader: pool,
        })
    }
}
