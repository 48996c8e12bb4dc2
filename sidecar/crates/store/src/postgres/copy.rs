//! Batch inserts on PostgreSQL: the binary `COPY` of a chunk, and the insert that skips
//! conflicts when the `COPY` met one.

use super::marker::Pg;
use crate::api::{StorageError, StorageResult};
use crate::model::{tags_column, NewRow};
use crate::pg_copy::CopyData;
use crate::sql::rows::insert_columns;
use sqlx::{Postgres, Transaction};

/// The binary `COPY` of [`copy_links`], columns in the order encoded.
pub(super) const COPY_LINKS: &str = "COPY links (code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags, \
     valid_since, not_yet_url, expired_url, rules, max_visits, password_digest, preview, \
     click_id_param, workspace_id, batch_id, batch_index) FROM STDIN (FORMAT binary)";

/// A chunk's rows as the binary `COPY` data of [`COPY_LINKS`].
pub(super) struct LinksCopy(Vec<u8>);

impl LinksCopy {
    pub(super) fn new(rows: &[NewRow]) -> Self {
        let mut data = CopyData::with_capacity(rows.len(), 300);
        for NewRow { link, slot } in rows {
            let tags = tags_column(&link.tags);
            data.tuple(25)
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
    data: LinksCopy,
) -> StorageResult<bool> {
    execute(tx, "SAVEPOINT links_copy").await?;
    let mut copy = tx
        .copy_in_raw(COPY_LINKS)
        .await
        .map_err(StorageError::classify)?;
    copy.send(data.0).await.map_err(StorageError::classify)?;
    match copy.finish().await {
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

/// Inserts the rows that take no unique key already in use; returns their codes.
pub(super) async fn insert_links_skipping_conflicts(
    tx: &mut Transaction<'static, Postgres>,
    rows: &[NewRow],
) -> StorageResult<Vec<String>> {
    // One statement, one array per column: no bind limit, one plan whatever the row count.
    let n = rows.len();
    let mut code = Vec::with_capacity(n);
    let mut target = Vec::with_capacity(n);
    let mut url_hash = Vec::with_capacity(n);
    let mut redirect = Vec::with_capacity(n);
    let mut flags = Vec::with_capacity(n);
    let mut created_at = Vec::with_capacity(n);
    let mut updated_at = Vec::with_capacity(n);
    let mut expires_at = Vec::with_capacity(n);
    let mut revoked_at = Vec::with_capacity(n);
    let mut visit_count = Vec::with_capacity(n);
    let mut last_visit_at = Vec::with_capacity(n);
    let mut campaign = Vec::with_capacity(n);
    let mut recipient_ref = Vec::with_capacity(n);
    let mut tags = Vec::with_capacity(n);
    let mut valid_since = Vec::with_capacity(n);
    let mut not_yet_url = Vec::with_capacity(n);
    let mut expired_url = Vec::with_capacity(n);
    let mut rules = Vec::with_capacity(n);
    let mut max_visits = Vec::with_capacity(n);
    let mut password_digest = Vec::with_capacity(n);
    let mut preview = Vec::with_capacity(n);
    let mut click_id_param = Vec::with_capacity(n);
    let mut workspace = Vec::with_capacity(n);
    let mut batch_id = Vec::with_capacity(n);
    let mut batch_index = Vec::with_capacity(n);
    for row in rows {
        let link = &row.link;
        code.push(link.code.as_str());
        target.push(link.target.as_str());
        url_hash.push(link.url_hash.as_str());
        redirect.push(redirect_column(link.redirect));
        flags.push(flags_column(link.flags.0));
        created_at.push(link.created_at);
        updated_at.push(link.updated_at);
        expires_at.push(link.expires_at);
        revoked_at.push(link.revoked_at);
        visit_count.push(link.visit_count);
        last_visit_at.push(link.last_visit_at);
        campaign.push(link.campaign.as_deref());
        recipient_ref.push(link.recipient_ref.as_deref());
        tags.push(tags_column(&link.tags));
        valid_since.push(link.extras.valid_since);
        not_yet_url.push(link.extras.not_yet_url.as_deref());
        expired_url.push(link.extras.expired_url.as_deref());
        rules.push(link.extras.rules.as_deref());
        max_visits.push(link.extras.max_visits);
        password_digest.push(link.extras.password_digest.as_deref());
        preview.push(link.extras.preview.as_deref());
        click_id_param.push(link.extras.click_id_param.as_deref());
        workspace.push(link.workspace.get());
        batch_id.push(row.slot.map(|s| s.batch_id));
        batch_index.push(row.slot.map(|s| s.index));
    }
    // Any unique conflict (code or slot) skips the row; RETURNING names those inserted.
    let inserted: Vec<String> = sqlx::query_scalar(&format!(
        "INSERT INTO links ({}) \
             SELECT c, t, h, r, f, ca, ua, ea, ra, vc, lv, cp, rr, tg::jsonb, vs, ny, ex, ru, \
                    mv, pw, pv, ci, ws, bi, bx \
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int2[], $5::int4[], \
                         $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], \
                         $9::timestamptz[], $10::int8[], $11::timestamptz[], $12::text[], \
                         $13::text[], $14::text[], $15::timestamptz[], $16::text[], \
                         $17::text[], $18::text[], $19::int8[], $20::text[], $21::text[], \
                         $22::text[], $23::int8[], $24::int8[], $25::int8[]) \
               AS u(c, t, h, r, f, ca, ua, ea, ra, vc, lv, cp, rr, tg, vs, ny, ex, ru, mv, pw, \
                    pv, ci, ws, bi, bx) \
             ON CONFLICT DO NOTHING RETURNING code",
        insert_columns::<Pg>()
    ))
    .bind(code)
    .bind(target)
    .bind(url_hash)
    .bind(redirect)
    .bind(flags)
    .bind(created_at)
    .bind(updated_at)
    .bind(expires_at)
    .bind(revoked_at)
    .bind(visit_count)
    .bind(last_visit_at)
    .bind(campaign)
    .bind(recipient_ref)
    .bind(tags)
    .bind(valid_since)
    .bind(not_yet_url)
    .bind(expired_url)
    .bind(rules)
    .bind(max_visits)
    .bind(password_digest)
    .bind(preview)
    .bind(click_id_param)
    .bind(workspace)
    .bind(batch_id)
    .bind(batch_index)
    .fetch_all(&mut **tx)
    .await
    .map_err(StorageError::classify)?;
    Ok(inserted)
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
