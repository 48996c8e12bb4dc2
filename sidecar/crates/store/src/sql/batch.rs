//! A batch chunk's multi-row `INSERT`s, encoded ahead of the transaction
//! ([`Storage::encode_rows`](crate::Storage::encode_rows)) so the write connection does
//! not wait while they are put together; run inside it by the backend (SQLite, MariaDB).

use super::dialect::Dialect;
use super::driver::Driver;
use super::rows::{insert_columns, link_marks, link_values_at};
use super::statement::Value;
use crate::api::{StorageError, StorageResult};
use crate::model::NewRow;
use chrono::{DateTime, Utc};

/// How large one statement may grow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Rows per statement (the backend's limit on bound values, divided by values per row).
    pub(crate) rows: usize,
    /// Bytes of values per statement, estimated (MySQL: under `max_allowed_packet`).
    pub(crate) bytes: usize,
}

/// A chunk's rows as statements in code order: the code, creation-time and campaign indexes
/// (all ordered by code among links created at the same time; InnoDB's table itself is ordered
/// by code) then take the rows in order, leaf after leaf, instead of at random places. A column
/// every row of a statement leaves at its default (see [`is_default`]) is not sent.
pub(crate) struct EncodedInsert<DB: Driver> {
    pub(crate) statements: Vec<Statement<DB>>,
}

pub(crate) struct Statement<DB: Driver> {
    pub(crate) sql: String,
    pub(crate) arguments: DB::Arguments<'static>,
    /// The rows it inserts, as positions in the chunk.
    pub(crate) rows: Vec<usize>,
}

/// Bytes a row costs beyond its text: sixteen values' framing, the fixed-size ones.
const ROW_OVERHEAD: usize = 160;

impl<DB: Driver> EncodedInsert<DB> {
    /// `verb` starts each statement (`INSERT INTO`, `INSERT OR IGNORE INTO`).
    pub(crate) fn new<D: Dialect<DB = DB>>(
        rows: &[NewRow],
        verb: &str,
        limits: Limits,
    ) -> StorageResult<Self> {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_unstable_by(|&a, &b| rows[a].link.code.cmp(&rows[b].link.code));
        let columns = insert_columns::<D>();
        let columns: Vec<&str> = columns.split(", ").collect();
        let marks = link_marks::<D>();
        // A batch's rows share their creation time: SQLite formats it once.
        let mut times = TimeCache::default();
        let mut statements = Vec::new();
        let mut at = 0;
        while at < order.len() {
            let mut part = Vec::new();
            let mut values = Vec::new();
            let mut bytes = 0;
            while at < order.len() && part.len() < limits.rows && bytes < limits.bytes {
                let row = &rows[order[at]];
                bytes += row_bytes(row);
                values.push(times.values::<D>(row));
                part.push(order[at]);
                at += 1;
            }
            let kept: Vec<bool> = (columns.iter().enumerate())
                .map(|(c, column)| !values.iter().all(|row| is_default(column, &row[c])))
                .collect();
            let mut arguments = DB::Arguments::default();
            for row in values {
                for (value, _) in row.into_iter().zip(&kept).filter(|(_, &kept)| kept) {
                    DB::add(&mut arguments, value).map_err(StorageError::Other)?;
                }
            }
            let names: Vec<&str> = kept_only(&columns, &kept);
            let group = format!("({})", kept_only(&marks, &kept).join(", "));
            let sql = format!(
                "{verb} links ({}) VALUES {}",
                names.join(", "),
                vec![group; part.len()].join(", ")
            );
            statements.push(Statement {
                sql,
                arguments,
                rows: part,
            });
        }
        Ok(Self { statements })
    }
}

fn kept_only<'a>(all: &[&'a str], kept: &[bool]) -> Vec<&'a str> {
    (all.iter().zip(kept))
        .filter(|(_, &kept)| kept)
        .map(|(name, _)| *name)
        .collect()
}

/// Whether `value` is what `column` holds when an insert leaves it out: every row of a
/// statement at its default, the column is left out. Fewer bound values each cost the server
/// less (a MariaDB statement spends more time on its values than on its rows).
fn is_default(column: &str, value: &Value) -> bool {
    match value {
        Value::OptText(None) | Value::OptInt(None) | Value::OptTime(None) => true,
        Value::Int(0) => matches!(column, "flags" | "visit_count"),
        Value::Int(1) => column == "workspace_id",
        _ => false,
    }
}

fn row_bytes(row: &NewRow) -> usize {
    let link = &row.link;
    ROW_OVERHEAD
        + link.code.len()
        + link.target.len()
        + link.url_hash.len()
        + link.campaign.as_ref().map_or(0, String::len)
        + link.recipient_ref.as_ref().map_or(0, String::len)
        + link.tags.iter().map(|tag| tag.len() + 3).sum::<usize>()
        + [
            &link.extras.not_yet_url,
            &link.extras.expired_url,
            &link.extras.rules,
            &link.extras.password_digest,
            &link.extras.preview,
            &link.extras.click_id_param,
        ]
        .iter()
        .map(|text| text.as_ref().map_or(0, String::len))
        .sum::<usize>()
}

/// The stored form of the last creation and update time seen, kept.
#[derive(Default)]
struct TimeCache(Option<(DateTime<Utc>, Value)>);

impl TimeCache {
    fn time<D: Dialect>(&mut self, at: DateTime<Utc>) -> Value {
        match &self.0 {
            Some((last, value)) if *last == at => value.clone(),
            _ => {
                let value = D::time(at);
                self.0 = Some((at, value.clone()));
                value
            }
        }
    }

    fn values<D: Dialect>(&mut self, row: &NewRow) -> Vec<Value> {
        let created_at = self.time::<D>(row.link.created_at);
        let updated_at = self.time::<D>(row.link.updated_at);
        link_values_at::<D>(&row.link, row.slot, created_at, updated_at)
    }
}
