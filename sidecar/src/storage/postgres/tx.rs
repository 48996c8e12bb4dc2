//! A write transaction on PostgreSQL, with the binary `COPY` of batch inserts.

use super::rows::{flags_column, link_from_row, redirect_column, INSERT_COLUMNS, LINK_COLUMNS};
use crate::storage::pg_copy::CopyData;
use crate::storage::{
    tags_column, EncodedRows, Link, LinkTx, NewRow, Slot, StorageError, StorageResult,
};
use async_trait::async_trait;
use sqlx::{Postgres, Row, Transaction};

pub(super) struct PgTx {
    pub(super) tx: Transaction<'static, Postgres>,
}

/// The binary `COPY` of [`PgTx::copy_links`], columns in the order encoded.
pub(super) const COPY_LINKS: &str = "COPY links (code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags, \
     batch_id, batch_index) FROM STDIN (FORMAT binary)";

/// A chunk's rows as the binary `COPY` data of [`COPY_LINKS`].
pub(super) struct LinksCopy(Vec<u8>);

impl LinksCopy {
    pub(super) fn new(rows: &[NewRow]) -> Self {
        let mut data = CopyData::with_capacity(rows.len(), 300);
        for NewRow { link, slot } in rows {
            let tags = tags_column(&link.tags);
            data.tuple(16)
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
                .opt_int8(slot.map(|s| s.batch_id))
                .opt_int8(slot.map(|s| s.index));
        }
        Self(data.finish())
    }
}

impl PgTx {
    /// Inserts every row by binary `COPY` ([`super::pg_copy`]) in a savepoint, and says whether
    /// it did. The rule is that all go in: generated codes are new, and a retry's slots already
    /// taken were answered before the insert. A unique conflict (an alias in use, a slot a
    /// concurrent attempt just took) rolls the savepoint back and returns `false`, and the caller
    /// takes [`Self::insert_links_skipping_conflicts`].
    async fn copy_links(&mut self, data: LinksCopy) -> StorageResult<bool> {
        self.execute("SAVEPOINT links_copy").await?;
        let mut copy = self
            .tx
            .copy_in_raw(COPY_LINKS)
            .await
            .map_err(StorageError::classify)?;
        copy.send(data.0).await.map_err(StorageError::classify)?;
        match copy.finish().await {
            Ok(_) => {
                self.execute("RELEASE SAVEPOINT links_copy").await?;
                Ok(true)
            }
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                self.execute("ROLLBACK TO SAVEPOINT links_copy").await?;
                Ok(false)
            }
            Err(e) => Err(StorageError::classify(e)),
        }
    }

    /// Inserts the rows that take no unique key already in use; returns their codes.
    async fn insert_links_skipping_conflicts(
        &mut self,
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
            batch_id.push(row.slot.map(|s| s.batch_id));
            batch_index.push(row.slot.map(|s| s.index));
        }
        // Any unique conflict (code or slot) skips the row; RETURNING names those inserted.
        let inserted: Vec<String> = sqlx::query_scalar(&format!(
            "INSERT INTO links ({INSERT_COLUMNS}) \
             SELECT c, t, h, r, f, ca, ua, ea, ra, vc, lv, cp, rr, tg::jsonb, bi, bx \
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int2[], $5::int4[], \
                         $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], \
                         $9::timestamptz[], $10::int8[], $11::timestamptz[], $12::text[], \
                         $13::text[], $14::text[], $15::int8[], $16::int8[]) \
               AS u(c, t, h, r, f, ca, ua, ea, ra, vc, lv, cp, rr, tg, bi, bx) \
             ON CONFLICT DO NOTHING RETURNING code"
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
        .bind(batch_id)
        .bind(batch_index)
        .fetch_all(&mut *self.tx)
        .await
        .map_err(StorageError::classify)?;
        Ok(inserted)
    }

    async fn execute(&mut self, statement: &str) -> StorageResult<()> {
        sqlx::query(statement)
            .execute(&mut *self.tx)
            .await
            .map_err(StorageError::classify)?;
        Ok(())
    }
}

#[async_trait]
impl LinkTx for PgTx {
    async fn insert_link(&mut self, link: &Link, slot: Option<Slot>) -> StorageResult<()> {
        sqlx::query(&format!(
            "INSERT INTO links ({INSERT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
             $10, $11, $12, $13, $14::jsonb, $15, $16)"
        ))
        .bind(&link.code)
        .bind(&link.target)
        .bind(&link.url_hash)
        .bind(redirect_column(link.redirect))
        .bind(flags_column(link.flags.0))
        .bind(link.created_at)
        .bind(link.updated_at)
        .bind(link.expires_at)
        .bind(link.revoked_at)
        .bind(link.visit_count)
        .bind(link.last_visit_at)
        .bind(&link.campaign)
        .bind(&link.recipient_ref)
        .bind(tags_column(&link.tags))
        .bind(slot.map(|s| s.batch_id))
        .bind(slot.map(|s| s.index))
        .execute(&mut *self.tx)
        .await
        .map_err(StorageError::classify)?;
        Ok(())
    }

    async fn insert_links(
        &mut self,
        rows: &[NewRow],
        encoded: EncodedRows,
    ) -> StorageResult<Vec<String>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let data = encoded
            .into_inner::<LinksCopy>()
            .unwrap_or_else(|| LinksCopy::new(rows));
        if self.copy_links(data).await? {
            return Ok(rows.iter().map(|row| row.link.code.clone()).collect());
        }
        self.insert_links_skipping_conflicts(rows).await
    }

    async fn links_by_slot_list(
        &mut self,
        batch_id: i64,
        indexes: &[i64],
    ) -> StorageResult<Vec<(i64, Link)>> {
        let rows = sqlx::query(&format!(
            "SELECT batch_index, {LINK_COLUMNS} FROM links \
             WHERE batch_id = $1 AND batch_index = ANY($2)"
        ))
        .bind(batch_id)
        .bind(indexes)
        .fetch_all(&mut *self.tx)
        .await
        .map_err(StorageError::classify)?;
        rows.iter()
            .map(|row| Ok((row.try_get("batch_index")?, link_from_row(row)?)))
            .collect()
    }

    async fn existing_codes(&mut self, codes: &[String]) -> StorageResult<Vec<String>> {
        sqlx::query_scalar("SELECT code FROM links WHERE code = ANY($1)")
            .bind(codes)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(StorageError::classify)
    }

    async fn delete_new_links(&mut self, codes: &[String]) -> StorageResult<()> {
        sqlx::query("DELETE FROM links WHERE code = ANY($1)")
            .bind(codes)
            .execute(&mut *self.tx)
            .await
            .map_err(StorageError::classify)?;
        Ok(())
    }

    async fn lock_link(&mut self, code: &str) -> StorageResult<Option<Link>> {
        let row = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM links WHERE code = $1 FOR UPDATE"
        ))
        .bind(code)
        .fetch_optional(&mut *self.tx)
        .await
        .map_err(StorageError::classify)?;
        row.as_ref().map(link_from_row).transpose()
    }

    async fn update_link(&mut self, link: &Link) -> StorageResult<()> {
        sqlx::query(
            "UPDATE links SET target = $2, url_hash = $3, redirect_status = $4, flags = $5, \
             updated_at = $6, expires_at = $7, revoked_at = $8, campaign = $9, \
             recipient_ref = $10, tags = $11::jsonb WHERE code = $1",
        )
        .bind(&link.code)
        .bind(&link.target)
        .bind(&link.url_hash)
        .bind(redirect_column(link.redirect))
        .bind(flags_column(link.flags.0))
        .bind(link.updated_at)
        .bind(link.expires_at)
        .bind(link.revoked_at)
        .bind(&link.campaign)
        .bind(&link.recipient_ref)
        .bind(tags_column(&link.tags))
        .execute(&mut *self.tx)
        .await
        .map_err(StorageError::classify)?;
        Ok(())
    }

    async fn commit(self: Box<Self>) -> StorageResult<()> {
        self.tx.commit().await.map_err(StorageError::classify)
    }

    async fn rollback(self: Box<Self>) -> StorageResult<()> {
        self.tx.rollback().await.map_err(StorageError::classify)
    }
}
