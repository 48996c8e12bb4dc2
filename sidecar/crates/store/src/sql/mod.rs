//! What the SQL backends share: one [`Storage`](super::Storage) and one
//! [`LinkTx`](super::LinkTx) written once over a [`Dialect`], which holds only what differs
//! between SQLite, PostgreSQL and MariaDB/MySQL (how times are stored, the tag filter, locking,
//! the bulk insert). Statements are written once with `?` for each value ([`statement`]); sqlx's
//! query builder turns them into each database's placeholders (`?`, `$1`) when it runs.

mod access;
pub mod batch;
mod driver;
mod imported;
pub mod rows;
mod store;
mod tx;

pub use driver::{Driver, Value};
pub use store::SqlStorage;
pub use tx::SqlTx;

use super::api::{Backend, EncodedRows, StorageError, StorageResult};
use super::model::NewRow;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Pool, Transaction};

/// What one backend does its own way.
#[async_trait]
pub trait Dialect: Send + Sync + Sized + 'static {
    type DB: Driver;

    const BACKEND: Backend;

    /// A link column as selected, under the name [`rows::link`] reads: as it is, unless the
    /// backend must widen it for the shared row mapping.
    fn select_column(column: &rows::Column) -> std::borrow::Cow<'static, str> {
        column.name.into()
    }

    /// The expression the live-link lookup's index holds (the URL hash's first 16 digits): a
    /// column unless the backend says otherwise.
    const URL_PREFIX: &'static str = "url_prefix";

    /// Whether inserts and updates write the `url_prefix` column themselves (SQLite: a plain
    /// column; PostgreSQL indexes an expression, MariaDB computes a virtual column).
    const WRITES_URL_PREFIX: bool;

    /// The tags parameter as written in an insert or update (PostgreSQL: cast to jsonb).
    const TAGS_PARAM: &'static str = "?";

    /// The type a sum is cast to so every backend returns a 64-bit integer.
    const BIGINT: &'static str;

    /// What `SELECT ... FOR UPDATE` is on this backend (SQLite: nothing, the write lock is held).
    const FOR_UPDATE: &'static str = " FOR UPDATE";

    /// The time as this backend stores it.
    fn time(at: DateTime<Utc>) -> Value {
        Value::Time(at)
    }

    fn opt_time(at: Option<DateTime<Utc>>) -> Value {
        match at {
            Some(at) => Self::time(at),
            None => Value::OptTime(None),
        }
    }

    fn read_text(row: &<Self::DB as sqlx::Database>::Row, column: &str) -> StorageResult<String> {
        Ok(<Self::DB as Driver>::text(row, column)?)
    }

    fn read_opt_text(
        row: &<Self::DB as sqlx::Database>::Row,
        column: &str,
    ) -> StorageResult<Option<String>> {
        Ok(<Self::DB as Driver>::opt_text(row, column)?)
    }

    fn read_time(
        row: &<Self::DB as sqlx::Database>::Row,
        column: &str,
    ) -> StorageResult<DateTime<Utc>> {
        Ok(<Self::DB as Driver>::time(row, column)?)
    }

    fn read_opt_time(
        row: &<Self::DB as sqlx::Database>::Row,
        column: &str,
    ) -> StorageResult<Option<DateTime<Utc>>> {
        Ok(<Self::DB as Driver>::opt_time(row, column)?)
    }

    /// Appends ` AND <the link carries tag>`.
    fn push_tag(query: &mut Statement, tag: String);

    /// Starts a write transaction.
    async fn begin(pool: &Pool<Self::DB>) -> StorageResult<Transaction<'static, Self::DB>> {
        pool.begin().await.map_err(StorageError::classify)
    }

    /// Starts a transaction in which no link write is in flight (see
    /// [`Storage::begin_quiesced`](super::Storage::begin_quiesced)); returns it and whether its
    /// reads of codes must lock ([`Dialect::QUIESCE_READ`]).
    async fn begin_quiesced(pool: &Pool<Self::DB>)
        -> StorageResult<Transaction<'static, Self::DB>>;

    /// Appended to the reads of codes inside a quiesced transaction (MariaDB: a locking read,
    /// which waits for writers of those codes and keeps new ones out).
    const QUIESCE_READ: &'static str = "";

    /// Makes `rows` ready for [`Dialect::insert_links`] (no I/O).
    fn encode_rows(&self, rows: &[NewRow]) -> StorageResult<EncodedRows>;

    /// Inserts many links in bulk, skipping those whose code or slot is taken; returns the codes
    /// inserted.
    async fn insert_links(
        tx: &mut Transaction<'static, Self::DB>,
        rows: &[NewRow],
        encoded: EncodedRows,
    ) -> StorageResult<Vec<String>>;
}

/// A statement and its values, for any backend: text pieces with a value between each two.
/// Rendered with the database's own placeholders when it runs ([`Driver`]).
#[derive(Debug, Clone, Default)]
pub struct Statement {
    pieces: Vec<String>,
    values: Vec<Value>,
}

impl Statement {
    pub fn new(sql: impl Into<String>) -> Self {
        Self {
            pieces: vec![sql.into()],
            values: Vec::new(),
        }
    }

    pub fn push(&mut self, sql: &str) -> &mut Self {
        if let Some(last) = self.pieces.last_mut() {
            last.push_str(sql);
        }
        self
    }

    pub fn bind(&mut self, value: Value) -> &mut Self {
        self.values.push(value);
        self.pieces.push(String::new());
        self
    }
}

/// `template` with each `?` replaced by the next of `values`.
pub fn statement(template: &str, values: impl IntoIterator<Item = Value>) -> Statement {
    let mut values = values.into_iter();
    let mut parts = template.split('?');
    let mut query = Statement::new(parts.next().unwrap_or_default());
    for part in parts {
        query
            .bind(values.next().expect("a value for every ?"))
            .push(part);
    }
    debug_assert!(values.next().is_none(), "more values than ? in {template}");
    query
}

/// Most values bound in one statement by the shared code (IN lists): well under every backend's
/// limit (SQLite 32,766, PostgreSQL and MySQL 65,535).
pub const IN_LIST: usize = 1000;
