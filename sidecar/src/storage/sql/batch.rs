//! A batch chunk's multi-row `INSERT`s, encoded ahead of the transaction
//! ([`Storage::encode_rows`](crate::storage::Storage::encode_rows)) so the write connection does
//! not wait while they are put together; run inside it by the backend (SQLite, MariaDB).

use super::rows::{insert_columns, link_placeholders, link_values_at};
use super::{Dialect, Driver, Value};
use crate::storage::{NewRow, StorageError, StorageResult};
use chrono::{DateTime, Utc};

/// How large one statement may grow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Rows per statement (the backend's limit on bound values, divided by values per row).
    pub rows: usize,
    /// Bytes of values per statement, estimated (MySQL: under `max_allowed_packet`).
    pub bytes: usize,
}

/// A chunk's rows as statements in code order: the code, creation-time and campaign indexes
/// (all ordered by code among links created at the same time; InnoDB's table itself is ordered
/// by code) then take the rows in order, leaf after leaf, instead of at random places.
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
        let head = format!("{verb} links ({}) VALUES ", insert_columns::<D>());
        let placeholders = link_placeholders::<D>();
        // A batch's rows share their creation time: SQLite formats it once.
        let mut times = TimeCache::default();
        let mut statements = Vec::new();
        let mut at = 0;
        while at < order.len() {
            let mut arguments = DB::Arguments::default();
            let mut part = Vec::new();
            let mut bytes = 0;
            while at < order.len() && part.len() < limits.rows && bytes < limits.bytes {
                let row = &rows[order[at]];
                bytes += row_bytes(row);
                for value in times.values::<D>(row) {
                    DB::add(&mut arguments, value).map_err(StorageError::Other)?;
                }
                part.push(order[at]);
                at += 1;
            }
            let mut sql = String::with_capacity(head.len() + part.len() * (placeholders.len() + 2));
            sql.push_str(&head);
            for i in 0..part.len() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&placeholders);
            }
            statements.push(Statement {
                sql,
                arguments,
                rows: part,
            });
        }
        Ok(Self { statements })
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
