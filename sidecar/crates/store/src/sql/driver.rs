//! What the shared SQL needs of a sqlx driver, gathered in one trait so generic code names one
//! bound instead of a dozen.

use super::statement::{Statement, Value};
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sqlx::{Arguments, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

/// A sqlx database whose connections run queries built by [`QueryBuilder`] and that encodes and
/// decodes the few Rust types the storage uses. Every sqlx driver the sidecar builds qualifies
/// (blanket implementation below).
pub trait Driver: Database + Sized {
    fn add<'q>(arguments: &mut Self::Arguments<'q>, value: Value) -> Result<(), sqlx::Error>;

    fn fetch_all(
        connection: &mut Self::Connection,
        statement: Statement,
    ) -> BoxFuture<'_, Result<Vec<Self::Row>, sqlx::Error>>;

    fn fetch_optional(
        connection: &mut Self::Connection,
        statement: Statement,
    ) -> BoxFuture<'_, Result<Option<Self::Row>, sqlx::Error>>;

    /// Runs the statement; returns the rows it affected (MySQL: matched).
    fn execute(
        connection: &mut Self::Connection,
        statement: Statement,
    ) -> BoxFuture<'_, Result<u64, sqlx::Error>>;

    fn text(row: &Self::Row, column: &str) -> Result<String, sqlx::Error>;
    fn opt_text(row: &Self::Row, column: &str) -> Result<Option<String>, sqlx::Error>;
    fn int(row: &Self::Row, column: &str) -> Result<i64, sqlx::Error>;
    fn opt_int(row: &Self::Row, column: &str) -> Result<Option<i64>, sqlx::Error>;
    fn time(row: &Self::Row, column: &str) -> Result<DateTime<Utc>, sqlx::Error>;
    fn opt_time(row: &Self::Row, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error>;
}

impl<DB> Driver for DB
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> String: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> DateTime<Utc>: Encode<'q, DB> + Decode<'q, DB> + Type<DB>,
    for<'q> Option<String>: Encode<'q, DB>,
    for<'q> Option<i64>: Encode<'q, DB>,
    for<'q> Option<DateTime<Utc>>: Encode<'q, DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    DB::Connection: Send,
    for<'a> &'a str: ColumnIndex<DB::Row>,
    DB::QueryResult: RowsAffected,
{
    fn add<'q>(arguments: &mut Self::Arguments<'q>, value: Value) -> Result<(), sqlx::Error> {
        match value {
            Value::Text(v) => arguments.add(v),
            Value::OptText(v) => arguments.add(v),
            Value::Int(v) => arguments.add(v),
            Value::OptInt(v) => arguments.add(v),
            Value::Time(v) => arguments.add(v),
            Value::OptTime(v) => arguments.add(v),
        }
        .map_err(sqlx::Error::Encode)
    }

    fn fetch_all(
        connection: &mut Self::Connection,
        statement: Statement,
    ) -> BoxFuture<'_, Result<Vec<Self::Row>, sqlx::Error>> {
        Box::pin(async move {
            let (sql, arguments) = render::<Self>(statement)?;
            connection
                .fetch_all(sqlx::query_with(&sql, arguments))
                .await
        })
    }

    fn fetch_optional(
        connection: &mut Self::Connection,
        statement: Statement,
    ) -> BoxFuture<'_, Result<Option<Self::Row>, sqlx::Error>> {
        Box::pin(async move {
            let (sql, arguments) = render::<Self>(statement)?;
            connection
                .fetch_optional(sqlx::query_with(&sql, arguments))
                .await
        })
    }

    fn execute(
        connection: &mut Self::Connection,
        statement: Statement,
    ) -> BoxFuture<'_, Result<u64, sqlx::Error>> {
        Box::pin(async move {
            let (sql, arguments) = render::<Self>(statement)?;
            let done = connection
                .execute(sqlx::query_with(&sql, arguments))
                .await?;
            Ok(done.rows_affected())
        })
    }

    fn text(row: &Self::Row, column: &str) -> Result<String, sqlx::Error> {
        row.try_get(column)
    }

    fn opt_text(row: &Self::Row, column: &str) -> Result<Option<String>, sqlx::Error> {
        row.try_get(column)
    }

    fn int(row: &Self::Row, column: &str) -> Result<i64, sqlx::Error> {
        row.try_get(column)
    }

    fn opt_int(row: &Self::Row, column: &str) -> Result<Option<i64>, sqlx::Error> {
        row.try_get(column)
    }

    fn time(row: &Self::Row, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        row.try_get(column)
    }

    fn opt_time(row: &Self::Row, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        row.try_get(column)
    }
}

/// The count every driver's query result has, as a trait (sqlx has it only as inherent methods).
pub(crate) trait RowsAffected {
    fn rows_affected(&self) -> u64;
}

impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

impl RowsAffected for sqlx::mysql::MySqlQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

/// The statement's text with this database's placeholders (`?`, `$1`), and its values bound.
fn render<'q, DB: Driver>(
    statement: Statement,
) -> Result<(String, DB::Arguments<'q>), sqlx::Error> {
    let mut arguments = DB::Arguments::default();
    let mut pieces = statement.pieces.into_iter();
    let mut sql = pieces.next().unwrap_or_default();
    for (value, piece) in statement.values.into_iter().zip(pieces) {
        DB::add(&mut arguments, value)?;
        arguments
            .format_placeholder(&mut sql)
            .map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
        sql.push_str(&piece);
    }
    Ok((sql, arguments))
}
