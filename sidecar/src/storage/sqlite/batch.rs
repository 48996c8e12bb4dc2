//! A batch chunk's multi-row `INSERT`s: encoded ahead of the transaction
//! ([`Storage::encode_rows`](crate::storage::Storage::encode_rows)), run inside it.

use super::rows::{opt_ts, ts, INSERT_COLUMNS, INSERT_ROWS};
use crate::storage::{tags_column, url_hash_prefix, NewRow, StorageError, StorageResult};
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteArguments;
use sqlx::{Arguments, Sqlite, Transaction};

/// Values bound per row: [`INSERT_COLUMNS`].
const ROW_VALUES: usize = 17;

/// A chunk's rows as statements of up to [`INSERT_ROWS`] rows, in code order: the code,
/// creation-time and campaign indexes (all ordered by code among links created at the same time)
/// then take the rows in order, leaf after leaf, instead of at random places.
pub(super) struct EncodedInsert {
    statements: Vec<Statement>,
}

struct Statement {
    sql: String,
    arguments: SqliteArguments<'static>,
    /// The rows it inserts, as positions in the chunk.
    rows: Vec<usize>,
}

impl EncodedInsert {
    pub(super) fn new(rows: &[NewRow]) -> StorageResult<Self> {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_unstable_by(|&a, &b| rows[a].link.code.cmp(&rows[b].link.code));
        // A batch's rows share their creation time: format it once.
        let mut times = TimeText::default();
        let statements = order
            .chunks(INSERT_ROWS)
            .map(|part| {
                let mut arguments = SqliteArguments::default();
                arguments.reserve(part.len() * ROW_VALUES, 0);
                for &at in part {
                    bind_row(&mut arguments, &rows[at], &mut times)
                        .map_err(|e| StorageError::Other(sqlx::Error::Encode(e)))?;
                }
                Ok(Statement {
                    sql: insert_sql(part.len()),
                    arguments,
                    rows: part.to_vec(),
                })
            })
            .collect::<StorageResult<_>>()?;
        Ok(Self { statements })
    }

    /// Runs the statements; returns the codes inserted.
    pub(super) async fn run(
        self,
        tx: &mut Transaction<'static, Sqlite>,
        rows: &[NewRow],
    ) -> StorageResult<Vec<String>> {
        let mut inserted = Vec::with_capacity(rows.len());
        for statement in self.statements {
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
fn insert_sql(rows: usize) -> String {
    let values = format!("({})", vec!["?"; ROW_VALUES].join(", "));
    format!(
        "INSERT OR IGNORE INTO links ({INSERT_COLUMNS}) VALUES {}",
        vec![values; rows].join(", ")
    )
}

fn bind_row(
    arguments: &mut SqliteArguments<'static>,
    row: &NewRow,
    times: &mut TimeText,
) -> Result<(), sqlx::error::BoxDynError> {
    let link = &row.link;
    arguments.add(link.code.clone())?;
    arguments.add(link.target.clone())?;
    arguments.add(link.url_hash.clone())?;
    arguments.add(i64::from(link.redirect))?;
    arguments.add(i64::from(link.flags.0))?;
    arguments.add(times.text(link.created_at))?;
    arguments.add(times.text(link.updated_at))?;
    arguments.add(opt_ts(link.expires_at))?;
    arguments.add(opt_ts(link.revoked_at))?;
    arguments.add(link.visit_count)?;
    arguments.add(opt_ts(link.last_visit_at))?;
    arguments.add(link.campaign.clone())?;
    arguments.add(link.recipient_ref.clone())?;
    arguments.add(tags_column(&link.tags))?;
    arguments.add(row.slot.map(|s| s.batch_id))?;
    arguments.add(row.slot.map(|s| s.index))?;
    arguments.add(url_hash_prefix(&link.url_hash).to_owned())?;
    Ok(())
}

/// [`ts`] of the last time asked for, kept.
#[derive(Default)]
struct TimeText(Option<(DateTime<Utc>, String)>);

impl TimeText {
    fn text(&mut self, at: DateTime<Utc>) -> String {
        match &self.0 {
            Some((last, text)) if *last == at => text.clone(),
            _ => {
                let text = ts(at);
                self.0 = Some((at, text.clone()));
                text
            }
        }
    }
}
