//! Batch inserts on PostgreSQL: the binary `COPY` of a chunk, and the insert that skips
//! conflicts when the `COPY` met one.

use super::marker::Pg;
use crate::api::{StorageError, StorageResult};
use crate::model::{tags_column, NewRow};
use crate::pg_copy::CopyData;
use crate::sql::columns::LINK;
use crate::sql::rows::insert_columns;
use sqlx::{Postgres, Transaction};

/// `COPY {table} (the links' insert columns) FROM STDIN (FORMAT binary)`: the columns in the
/// order [`LinksCopy`] encodes them, which is [`LINK`]'s and then the slot's.
fn copy_into(table: &str) -> String {
    format!(
        "COPY {table} ({}) FROM STDIN (FORMAT binary)",
        insert_columns::<Pg>()
    )
}

/// How many columns a row of [`LinksCopy`] has.
const COPY_COLUMNS: usize = LINK.len() + 2;

/// A chunk's rows as the binary `COPY` data of [`copy_into`].
pub(super) struct LinksCopy(Vec<u8>);

impl LinksCopy {
    pub(super) fn new(rows: &[NewRow]) -> Self {
        let mut data = CopyData::with_capacity(rows.len(), 300);
        for NewRow { link, slot } in rows {
            let tags = tags_column(&link.tags);
            data.tuple(COPY_COLUMNS as i16)
                .text(&link.code)
                .text(&link.target)
                .text(&link.url_hash)
                .int2(redirect_column(link.redirect))
                .int4(flags_column(link.flags.0))
                .timestamptz(link.created_at)
                .timestamptz(link.updated_at)
                .opt_timestamptz(link.expires_at)
                .opt_timestamptz(link.revoked_at)
                .int8(link.visit_count)
                .opt_timestamptz(link.last_visit_at)
                .opt_text(link.campaign.as_deref())
                .opt_text(link.recipient_ref.as_deref())
                .opt_jsonb(tags.as_deref())
                .opt_timestamptz(link.extras.valid_since)
                .opt_text(link.extras.not_yet_url.as_deref())
                .opt_text(link.extras.expired_url.as_deref())
                .opt_text(link.extras.rules.as_deref())
                .opt_int8(link.extras.max_visits)
                .opt_text(link.extras.password_digest.as_deref())
                .opt_text(link.extras.preview.as_deref())
                .opt_text(link.extras.click_id_param.as_deref())
                .opt_timestamptz(link.quarantined_at)
                .opt_text(crate::host_key(&link.target).as_deref())
                .int8(link.workspace.get())
                .opt_int8(slot.map(|s| s.batch_id))
                .opt_int8(slot.map(|s| s.index));
        }
        Self(data.finish())
    }
}

/// Inserts every row by binary `COPY` ([`super::pg_copy`]) in a savepoint, and says whether
/// it did. The rule is that all go in: generated codes are new, and a retry's slots already
/// taken were answered before the insert. A unique conflict (an alias in use, a slot a
/// concurrent attempt just took) rolls the savepoint back and returns `false`, and the caller
/// takes [`insert_links_skipping_conflicts`].
pub(super) async fn copy_links(
    tx: &mut Transaction<'static, Postgres>,
    data: &LinksCopy,
) -> StorageResult<bool> {
    execute(tx, "SAVEPOINT links_copy").await?;
    match copy(tx, "links", data).await {
        Ok(_) => {
            execute(tx, "RELEASE SAVEPOINT links_copy").await?;
            Ok(true)
        }
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            execute(tx, "ROLLBACK TO SAVEPOINT links_copy").await?;
            Ok(false)
        }
        Err(e) => Err(StorageError::classify(e)),
    }
}

/// Inserts the rows that take no unique key already in use; returns their codes. The same
/// `COPY` data goes to a session's temporary table of the insert's columns, inserted from there
/// with `ON CONFLICT DO NOTHING`: one statement whatever the row count, and no second list of the
/// link's columns to keep in step with the first.
pub(super) async fn insert_links_skipping_conflicts(
    tx: &mut Transaction<'static, Postgres>,
    data: &LinksCopy,
) -> StorageResult<Vec<String>> {
    let columns = insert_columns::<Pg>();
    // Made once per session (`IF NOT EXISTS`), emptied at each commit and after each use, so a
    // second chunk of the same transaction starts from nothing.
    execute(
        tx,
        &format!(
            "CREATE TEMPORARY TABLE IF NOT EXISTS links_incoming ON COMMIT DELETE ROWS AS \
             SELECT {columns} FROM links WITH NO DATA"
        ),
    )
    .await?;
    copy(tx, "links_incoming", data)
        .await
        .map_err(StorageError::classify)?;
    // Any unique conflict (code or slot) skips the row; RETURNING names those inserted.
    let inserted: Vec<String> = sqlx::query_scalar(&format!(
        "INSERT INTO links ({columns}) SELECT {columns} FROM links_incoming \
         ON CONFLICT DO NOTHING RETURNING code"
    ))
    .fetch_all(&mut **tx)
    .await
    .map_err(StorageError::classify)?;
    execute(tx, "DELETE FROM links_incoming").await?;
    Ok(inserted)
}

/// Sends `data` to `table` by binary `COPY`.
async fn copy(
    tx: &mut Transaction<'static, Postgres>,
    table: &str,
    data: &LinksCopy,
) -> Result<u64, sqlx::Error> {
    let mut copy = tx.copy_in_raw(&copy_into(table)).await?;
    copy.send(data.0.as_slice()).await?;
    copy.finish().await
}

async fn execute(tx: &mut Transaction<'static, Postgres>, statement: &str) -> StorageResult<()> {
    sqlx::query(statement)
        .execute(&mut **tx)
        .await
        .map_err(StorageError::classify)?;
    Ok(())
}

fn redirect_column(status: u16) -> i16 {
    // Only 301..=308 ever get here (validated at the API, checked by the table).
    i16::try_from(status).unwrap_or(i16::MAX)
}

fn flags_column(flags: u32) -> i32 {
    i32::try_from(flags).unwrap_or(i32::MAX)
}
