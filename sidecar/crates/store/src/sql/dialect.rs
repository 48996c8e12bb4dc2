//! What one SQL backend does its own way; everything else is written once over it.

use super::columns::Column;
use super::driver::Driver;
use super::statement::{Statement, Value};
use crate::api::{Backend, EncodedRows, StorageError, StorageResult};
use crate::model::NewRow;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Pool, Transaction};

/// What one backend does its own way.
#[async_trait]
pub trait Dialect: Send + Sync + Sized + 'static {
    type DB: Driver;

    const BACKEND: Backend;

    /// A link column as selected, under the name [`super::rows::link`] reads: as it is, unless the
    /// backend must widen it for the shared row mapping.
    fn select_column(column: &Column) -> std::borrow::Cow<'static, str> {
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

    /// What `SELECT ... FOR SHARE` is on this backend (MariaDB: `LOCK IN SHARE MODE`; SQLite:
    /// nothing, the write lock is held).
    const FOR_SHARE: &'static str = " FOR SHARE";

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

    /// Appends ` AND <text, lowercase and of 3 characters or more, is in the link's code, target,
    /// recipient reference, campaign or tags>`, read from the backend's search index.
    fn push_search(query: &mut Statement, text: &str);

    /// Starts a write transaction (waiting out a busy pool in a bulk write: [`crate::patience`]).
    async fn begin(pool: &Pool<Self::DB>) -> StorageResult<Transaction<'static, Self::DB>> {
        (crate::patience::begin(pool, None).await).map_err(StorageError::classify)
    }

    /// Starts a batch group's write transaction ([`Storage::begin_batch`](crate::Storage::begin_batch)).
    async fn begin_batch(
        &self,
        pool: &Pool<Self::DB>,
    ) -> StorageResult<Transaction<'static, Self::DB>> {
        Self::begin(pool).await
    }

    /// Starts a transaction in which no link write is in flight (see
    /// [`Storage::begin_quiesced`](crate::Storage::begin_quiesced)); returns it and whether its
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
