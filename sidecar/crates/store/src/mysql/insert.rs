//! Batch inserts on MariaDB/MySQL: multi-row `INSERT`s, and the retry without the rows whose code
//! or slot turned out to be taken.
//!
//! Not `INSERT IGNORE`: it skips duplicate keys but also turns strict mode's errors into
//! warnings, storing a value cut or zeroed. Not `LOAD DATA LOCAL INFILE` either: it needs
//! `local_infile` on the server and the client, and a client that honours it will send any file
//! a (compromised or impersonated) server asks for; sqlx does not implement it, and multi-row
//! INSERTs already reach the throughput the benchmark asks for (bench/batch-throughput).

use crate::api::{StorageError, StorageResult};
use crate::model::NewRow;
use crate::sql::batch::EncodedInsert;
use crate::sql::rows::{insert_columns, link_placeholders, link_values, push_list};
use crate::sql::{statement, Dialect, Driver, Statement, Value};
use sqlx::{MySql, Row, Transaction};
use std::collections::HashSet;

use super::marker::My;

/// Runs the statements; returns the codes inserted. A statement that meets a taken code or slot
/// is rolled back by InnoDB on its own (the transaction goes on), and its rows are inserted again
/// without those taken.
pub(super) async fn run(
    tx: &mut Transaction<'static, MySql>,
    rows: &[NewRow],
    encoded: EncodedInsert<MySql>,
) -> StorageResult<Vec<String>> {
    let mut inserted = Vec::with_capacity(rows.len());
    for statement in encoded.statements {
        let done = sqlx::query_with(&statement.sql, statement.arguments)
            .execute(&mut **tx)
            .await;
        match done {
            Ok(_) => inserted.extend(statement.rows.iter().map(|&at| rows[at].link.code.clone())),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                let part: Vec<&NewRow> = statement.rows.iter().map(|&at| &rows[at]).collect();
                inserted.extend(insert_untaken(tx, part).await?);
            }
            Err(e) => return Err(StorageError::classify(e)),
        }
    }
    Ok(inserted)
}

/// Inserts the rows whose code and slot are free; returns their codes. The reads lock what they
/// find (a concurrent insert of the same code is waited for, then seen), so each round removes
/// what made the last one fail; a few rounds only if other requests keep taking the same codes.
/// In a batch group's transaction (READ COMMITTED: `Dialect::begin_batch`) they lock no gap: a
/// code found free may be taken before the insert (the next round sees it), but the job's other
/// groups never wait for this one's commit to insert codes beside the ones it looked for.
async fn insert_untaken(
    tx: &mut Transaction<'static, MySql>,
    mut part: Vec<&NewRow>,
) -> StorageResult<Vec<String>> {
    for _ in 0..5 {
        let taken_codes = taken_codes(tx, &part).await?;
        let taken_slots = taken_slots(tx, &part).await?;
        part.retain(|row| {
            !taken_codes.contains(&row.link.code)
                && !row
                    .slot
                    .is_some_and(|slot| taken_slots.contains(&(slot.batch_id, slot.index)))
        });
        if part.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "INSERT INTO links ({}) VALUES {}",
            insert_columns::<My>(),
            vec![link_placeholders::<My>(); part.len()].join(", ")
        );
        let values = part
            .iter()
            .flat_map(|row| link_values::<My>(&row.link, row.slot));
        match MySql::execute(&mut **tx, statement(&sql, values)).await {
            Ok(_) => return Ok(part.iter().map(|row| row.link.code.clone()).collect()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => continue,
            Err(e) => return Err(StorageError::classify(e)),
        }
    }
    Err(StorageError::Unavailable(sqlx::Error::Protocol(
        "codes kept being taken by concurrent inserts".into(),
    )))
}

async fn taken_codes(
    tx: &mut Transaction<'static, MySql>,
    part: &[&NewRow],
) -> StorageResult<HashSet<String>> {
    let mut query = Statement::new("SELECT code FROM links WHERE code IN");
    push_list(
        &mut query,
        part.iter().map(|row| Value::Text(row.link.code.clone())),
    );
    query.push(" LOCK IN SHARE MODE");
    let rows = MySql::fetch_all(&mut **tx, query)
        .await
        .map_err(StorageError::classify)?;
    rows.iter().map(|row| My::read_text(row, "code")).collect()
}

async fn taken_slots(
    tx: &mut Transaction<'static, MySql>,
    part: &[&NewRow],
) -> StorageResult<HashSet<(i64, i64)>> {
    let slots: Vec<(i64, i64)> = part
        .iter()
        .filter_map(|row| row.slot.map(|slot| (slot.batch_id, slot.index)))
        .collect();
    if slots.is_empty() {
        return Ok(HashSet::new());
    }
    let mut query = Statement::new(
        "SELECT batch_id, batch_index FROM links WHERE (batch_id, batch_index) IN (",
    );
    for (i, (batch_id, index)) in slots.iter().enumerate() {
        if i > 0 {
            query.push(", ");
        }
        query
            .push("(")
            .bind(Value::Int(*batch_id))
            .push(", ")
            .bind(Value::Int(*index))
            .push(")");
    }
    query.push(") LOCK IN SHARE MODE");
    let rows = MySql::fetch_all(&mut **tx, query)
        .await
        .map_err(StorageError::classify)?;
    rows.iter()
        .map(|row| Ok((row.try_get("batch_id")?, row.try_get("batch_index")?)))
        .collect()
}
