//! A write transaction on SQLite (`BEGIN IMMEDIATE`).

use super::batch::EncodedInsert;
use super::rows::{codes_in, link_from_row, opt_ts, ts, INSERT_COLUMNS, INSERT_ROWS, LINK_COLUMNS};
use crate::storage::{
    tags_column, url_hash_prefix, EncodedRows, Link, LinkTx, NewRow, Slot, StorageError,
    StorageResult,
};
use async_trait::async_trait;
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};

pub(super) struct SqliteTx {
    pub(super) tx: Transaction<'static, Sqlite>,
}

#[async_trait]
impl LinkTx for SqliteTx {
    async fn insert_link(&mut self, link: &Link, slot: Option<Slot>) -> StorageResult<()> {
        sqlx::query(&format!(
            "INSERT INTO links ({INSERT_COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
        ))
        .bind(&link.code)
        .bind(&link.target)
        .bind(&link.url_hash)
        .bind(i64::from(link.redirect))
        .bind(i64::from(link.flags.0))
        .bind(ts(link.created_at))
        .bind(ts(link.updated_at))
        .bind(opt_ts(link.expires_at))
        .bind(opt_ts(link.revoked_at))
        .bind(link.visit_count)
        .bind(opt_ts(link.last_visit_at))
        .bind(&link.campaign)
        .bind(&link.recipient_ref)
        .bind(tags_column(&link.tags))
        .bind(slot.map(|s| s.batch_id))
        .bind(slot.map(|s| s.index))
        .bind(url_hash_prefix(&link.url_hash))
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
        let encoded = match encoded.into_inner::<EncodedInsert>() {
            Some(encoded) => encoded,
            None => EncodedInsert::new(rows)?,
        };
        encoded.run(&mut self.tx, rows).await
    }

    async fn links_by_slot_list(
        &mut self,
        batch_id: i64,
        indexes: &[i64],
    ) -> StorageResult<Vec<(i64, Link)>> {
        let mut found = Vec::new();
        for part in indexes.chunks(INSERT_ROWS) {
            let mut query = QueryBuilder::new(format!(
                "SELECT batch_index, {LINK_COLUMNS} FROM links WHERE batch_id = "
            ));
            query.push_bind(batch_id).push(" AND batch_index IN (");
            let mut list = query.separated(", ");
            for index in part {
                list.push_bind(*index);
            }
            query.push(")");
            let rows = query
                .build()
                .fetch_all(&mut *self.tx)
                .await
                .map_err(StorageError::classify)?;
            for row in &rows {
                found.push((row.try_get("batch_index")?, link_from_row(row)?));
            }
        }
        Ok(found)
    }

    async fn existing_codes(&mut self, codes: &[String]) -> StorageResult<Vec<String>> {
        let mut found = Vec::with_capacity(codes.len());
        for part in codes.chunks(INSERT_ROWS) {
            let codes: Vec<String> = codes_in(part)
                .build_query_scalar()
                .fetch_all(&mut *self.tx)
                .await
                .map_err(StorageError::classify)?;
            found.extend(codes);
        }
        Ok(found)
    }

    async fn delete_new_links(&mut self, codes: &[String]) -> StorageResult<()> {
        for part in codes.chunks(INSERT_ROWS) {
            let mut query = QueryBuilder::new("DELETE FROM links WHERE code IN (");
            let mut list = query.separated(", ");
            for code in part {
                list.push_bind(code.clone());
            }
            query.push(")");
            query
                .build()
                .execute(&mut *self.tx)
                .await
                .map_err(StorageError::classify)?;
        }
        Ok(())
    }

    async fn lock_link(&mut self, code: &str) -> StorageResult<Option<Link>> {
        // BEGIN IMMEDIATE already holds the database's write lock.
        let row = sqlx::query(&format!("SELECT {LINK_COLUMNS} FROM links WHERE code = ?1"))
            .bind(code)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(StorageError::classify)?;
        row.as_ref().map(link_from_row).transpose()
    }

    async fn update_link(&mut self, link: &Link) -> StorageResult<()> {
        sqlx::query(
            "UPDATE links SET target = ?2, url_hash = ?3, redirect_status = ?4, flags = ?5, \
             updated_at = ?6, expires_at = ?7, revoked_at = ?8, campaign = ?9, \
             recipient_ref = ?10, tags = ?11, url_prefix = ?12 WHERE code = ?1",
        )
        .bind(&link.code)
        .bind(&link.target)
        .bind(&link.url_hash)
        .bind(i64::from(link.redirect))
        .bind(i64::from(link.flags.0))
        .bind(ts(link.updated_at))
        .bind(opt_ts(link.expires_at))
        .bind(opt_ts(link.revoked_at))
        .bind(&link.campaign)
        .bind(&link.recipient_ref)
        .bind(tags_column(&link.tags))
        .bind(url_hash_prefix(&link.url_hash))
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
