//! The rollup upserts on PostgreSQL: the tables, keys and rows that [`write::rollups`] describes
//! for every backend, each table as one statement over `UNNEST` of one array per column (where
//! the other backends write multi-row `VALUES`).

use crate::write::{self, Rollup};
use shortlink_store::sql::Value;
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::rollup::Deltas;
use sqlx::{Postgres, Transaction};

/// One column's values, as an array parameter.
enum Column {
    Text(Vec<String>),
    Int(Vec<i64>),
}

impl Column {
    /// An empty column of `value`'s type.
    fn like(value: &Value) -> Self {
        match value {
            Value::Text(_) => Column::Text(Vec::new()),
            _ => Column::Int(Vec::new()),
        }
    }

    fn push(&mut self, value: Value) {
        match (self, value) {
            (Column::Text(column), Value::Text(text)) => column.push(text),
            (Column::Int(column), Value::Int(n)) => column.push(n),
            // Rollup rows are text keys and integer keys and counters (write::rollups).
            (_, other) => unreachable!("rollup value {other:?}"),
        }
    }

    fn array_type(&self) -> &'static str {
        match self {
            Column::Text(_) => "text[]",
            Column::Int(_) => "int8[]",
        }
    }
}

/// Adds every rollup row of `d` to its table, in key order (so concurrent writers take the
/// rows' locks in the same order).
pub(super) async fn upsert(
    tx: &mut Transaction<'_, Postgres>,
    d: &Deltas<'_>,
) -> StorageResult<()> {
    for rollup in write::rollups(d) {
        let Some(first) = rollup.rows.first() else {
            continue;
        };
        let mut columns: Vec<Column> = first.iter().map(Column::like).collect();
        let sql = statement(&rollup, &columns);
        for row in rollup.rows {
            for (column, value) in columns.iter_mut().zip(row) {
                column.push(value);
            }
        }
        let mut query = sqlx::query(&sql);
        for column in columns {
            query = match column {
                Column::Text(values) => query.bind(values),
                Column::Int(values) => query.bind(values),
            };
        }
        query
            .execute(&mut **tx)
            .await
            .map_err(StorageError::classify)?;
    }
    Ok(())
}

/// `INSERT INTO t (keys, counters) SELECT * FROM UNNEST($1::text[], ...) ON CONFLICT (keys)
/// DO UPDATE SET c = t.c + EXCLUDED.c, ...`. An integer key narrower than `int8` in the table
/// (`span`) takes the insert's assignment cast.
fn statement(rollup: &Rollup, columns: &[Column]) -> String {
    let table = rollup.table;
    let arrays: Vec<String> = (columns.iter().enumerate())
        .map(|(i, column)| format!("${}::{}", i + 1, column.array_type()))
        .collect();
    let updates: Vec<String> = (rollup.counters.iter())
        .map(|c| format!("{c} = {table}.{c} + EXCLUDED.{c}"))
        .collect();
    format!(
        "INSERT INTO {table} ({}, {}) SELECT * FROM UNNEST({}) ON CONFLICT ({}) DO UPDATE SET {}",
        rollup.keys.join(", "),
        rollup.counters.join(", "),
        arrays.join(", "),
        rollup.keys.join(", "),
        updates.join(", "),
    )
}
