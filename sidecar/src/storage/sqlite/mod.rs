//! SQLite backend: an embedded file, created on first run.
//!
//! SQLite allows one writer at a time, so writes go through a pool of a single connection, shared
//! with the visit store (writers queue in the pool instead of failing with SQLITE_BUSY; see
//! [`super::sqlite_file`]) and start with `BEGIN IMMEDIATE`, which
//! takes the write lock up front so a transaction that read first never fails to upgrade. Reads use
//! their own pool and, in WAL mode, never wait for the writer.

mod batch;
mod rows;
mod tx;

use self::batch::EncodedInsert;
use super::sqlite_file;
use super::{
    url_hash_prefix, ApiKey, Backend, CampaignStats, ConnectOptions, EncodedRows,
    IdempotencyRecord, Link, LinkFilter, LinkTx, ListCursor, NewRow, Role, Storage, StorageError,
    StorageResult,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rows::{
    api_key_from_row, codes_in, link_from_row, push_filter, select_links, sequence_value, ts,
    INSERT_ROWS, LINK_COLUMNS,
};
use sqlx::sqlite::SqlitePool;
use sqlx::{QueryBuilder, Row, Sqlite};
use std::sync::Arc;
use tx::SqliteTx;

#[derive(Debug, Clone)]
pub struct SqliteStorage {
    /// Shared with the visit store on the same file ([`sqlite_file::shared_writer`]).
    writer: Arc<SqlitePool>,
    reader: SqlitePool,
}

impl SqliteStorage {
    async fn fetch_links(&self, mut query: QueryBuilder<'_, Sqlite>) -> StorageResult<Vec<Link>> {
        let rows = query
            .build()
            .fetch_all(&self.reader)
            .await
            .map_err(StorageError::classify)?;
        rows.iter().map(link_from_row).collect()
    }

    pub async fn connect(options: &ConnectOptions) -> StorageResult<Self> {
        let connect = sqlite_file::connect_options(&options.url, options.acquire_timeout)?;
        if let Some(dir) = connect.get_filename().parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StorageError::Other(sqlx::Error::Io(e)))?;
            }
        }
        let writer = sqlite_file::shared_writer(&connect, options.acquire_timeout).await?;
        sqlx::migrate!("../migrations/sqlite").run(&*writer).await?;
        let reader = sqlite_file::reader(
            &connect,
            options.max_connections.max(1),
            options.acquire_timeout,
        )
        .await?;
        Ok(Self { writer, reader })
    }
}

#[async_trait]
impl Storage for SqliteStorage {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn pool_use(&self) -> Vec<(&'static str, u32, usize)> {
        vec![
            ("writer", self.writer.size(), self.writer.num_idle()),
            ("reader", self.reader.size(), self.reader.num_idle()),
        ]
    }

    async fn ping(&self) -> StorageResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map_err(StorageError::classify)?;
        Ok(())
    }

    async fn lease_sequence_block(&self, size: u64) -> StorageResult<u64> {
        let size = sequence_value(size)?;
        let start: i64 = sqlx::query_scalar(
            "UPDATE sequence_blocks SET next_value = next_value + ?1 \
             WHERE name = 'links' RETURNING next_value - ?1",
        )
        .bind(size)
        .fetch_one(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        u64::try_from(start).map_err(|_| StorageError::Corrupt(format!("sequence value {start}")))
    }

    async fn get_link(&self, code: &str) -> StorageResult<Option<Link>> {
        let row = sqlx::query(&format!("SELECT {LINK_COLUMNS} FROM links WHERE code = ?1"))
            .bind(code)
            .fetch_optional(&self.reader)
            .await
            .map_err(StorageError::classify)?;
        row.as_ref().map(link_from_row).transpose()
    }

    async fn find_live_link(
        &self,
        url_hash: &str,
        recipient_ref: Option<&str>,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<Link>> {
        // Each form names its index's key and predicate (migration 9), so the planner can use it.
        let (by, key) = match recipient_ref {
            None => (
                "url_prefix = ?3 AND recipient_ref IS NULL",
                url_hash_prefix(url_hash),
            ),
            Some(recipient_ref) => ("recipient_ref = ?3", recipient_ref),
        };
        let row = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM links \
             WHERE {by} AND url_hash = ?1 AND revoked_at IS NULL \
               AND (expires_at IS NULL OR expires_at > ?2) \
             ORDER BY created_at DESC, code DESC LIMIT 1"
        ))
        .bind(url_hash)
        .bind(ts(now))
        .bind(key)
        .fetch_optional(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        row.as_ref().map(link_from_row).transpose()
    }

    async fn list_links(
        &self,
        filter: &LinkFilter,
        after: Option<&ListCursor>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        let mut query = select_links(filter);
        if let Some(cursor) = after {
            query
                .push(" AND (created_at, code) < (")
                .push_bind(ts(cursor.created_at))
                .push(", ")
                .push_bind(cursor.code.clone())
                .push(")");
        }
        query
            .push(" ORDER BY created_at DESC, code DESC LIMIT ")
            .push_bind(i64::from(limit));
        self.fetch_links(query).await
    }

    async fn scan_links(
        &self,
        filter: &LinkFilter,
        after_code: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>> {
        let mut query = select_links(filter);
        query
            .push(" AND code > ")
            .push_bind(after_code.unwrap_or("").to_owned())
            .push(" ORDER BY code LIMIT ")
            .push_bind(i64::from(limit));
        self.fetch_links(query).await
    }

    async fn existing_codes(&self, codes: &[String]) -> StorageResult<Vec<String>> {
        let mut found = Vec::with_capacity(codes.len());
        for part in codes.chunks(INSERT_ROWS) {
            let codes: Vec<String> = codes_in(part)
                .build_query_scalar()
                .fetch_all(&self.reader)
                .await
                .map_err(StorageError::classify)?;
            found.extend(codes);
        }
        Ok(found)
    }

    async fn count_links(&self, filter: &LinkFilter) -> StorageResult<u64> {
        let mut query = QueryBuilder::new("SELECT COUNT(*) FROM links");
        push_filter(&mut query, filter);
        let count: i64 = query
            .build_query_scalar()
            .fetch_one(&self.reader)
            .await
            .map_err(StorageError::classify)?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn list_campaigns(&self, after: &str, limit: u32) -> StorageResult<Vec<String>> {
        let rows = sqlx::query(
            "WITH RECURSIVE c(name, n) AS ( \
               SELECT (SELECT MIN(campaign) FROM links WHERE campaign > ?1), 1 \
               UNION ALL \
               SELECT (SELECT MIN(campaign) FROM links WHERE campaign > c.name), c.n + 1 \
               FROM c WHERE c.name IS NOT NULL AND c.n < ?2 \
             ) SELECT name FROM c WHERE name IS NOT NULL",
        )
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        rows.iter()
            .map(|row| row.try_get("name").map_err(StorageError::from))
            .collect()
    }

    async fn campaign_stats(
        &self,
        campaign: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<CampaignStats> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS links, \
               COALESCE(SUM(revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?2)), 0) AS live, \
               COALESCE(SUM(revoked_at IS NULL AND expires_at <= ?2), 0) AS expired, \
               COALESCE(SUM(revoked_at IS NOT NULL), 0) AS revoked, \
               COALESCE(SUM(visit_count), 0) AS visits \
             FROM links WHERE campaign = ?1",
        )
        .bind(campaign)
        .bind(ts(now))
        .fetch_one(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        Ok(CampaignStats {
            links: row.try_get("links")?,
            live: row.try_get("live")?,
            expired: row.try_get("expired")?,
            revoked: row.try_get("revoked")?,
            visits: row.try_get("visits")?,
        })
    }

    async fn claim_idempotency_key(
        &self,
        api_key_id: i64,
        key: &str,
        request_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<IdempotencyRecord> {
        let inserted: Option<i64> = sqlx::query_scalar(
            "INSERT INTO idempotency_keys (api_key_id, key, request_hash, created_at) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (api_key_id, key) DO NOTHING RETURNING id",
        )
        .bind(api_key_id)
        .bind(key)
        .bind(request_hash)
        .bind(ts(now))
        .fetch_optional(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        if let Some(id) = inserted {
            return Ok(IdempotencyRecord {
                id,
                request_hash: request_hash.to_owned(),
                fresh: true,
            });
        }
        let row = sqlx::query(
            "SELECT id, request_hash FROM idempotency_keys WHERE api_key_id = ?1 AND key = ?2",
        )
        .bind(api_key_id)
        .bind(key)
        .fetch_one(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        Ok(IdempotencyRecord {
            id: row.try_get("id")?,
            request_hash: row.try_get("request_hash")?,
            fresh: false,
        })
    }

    async fn links_by_slots(
        &self,
        batch_id: i64,
        from: i64,
        to: i64,
    ) -> StorageResult<Vec<(i64, Link)>> {
        let rows = sqlx::query(&format!(
            "SELECT batch_index, {LINK_COLUMNS} FROM links \
             WHERE batch_id = ?1 AND batch_index BETWEEN ?2 AND ?3"
        ))
        .bind(batch_id)
        .bind(from)
        .bind(to)
        .fetch_all(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        rows.iter()
            .map(|row| Ok((row.try_get("batch_index")?, link_from_row(row)?)))
            .collect()
    }

    async fn prune_idempotency_keys(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> StorageResult<u64> {
        let done = sqlx::query(
            "DELETE FROM idempotency_keys WHERE id IN \
             (SELECT id FROM idempotency_keys WHERE created_at < ?1 LIMIT ?2)",
        )
        .bind(ts(before))
        .bind(i64::from(limit))
        .execute(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        Ok(done.rows_affected())
    }

    async fn raise_sequence(&self, next: u64) -> StorageResult<bool> {
        let done = sqlx::query(
            "UPDATE sequence_blocks SET next_value = ?1 WHERE name = 'links' AND next_value < ?1",
        )
        .bind(sequence_value(next)?)
        .execute(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_setting(&self, name: &str) -> StorageResult<()> {
        sqlx::query("DELETE FROM settings WHERE name = ?1")
            .bind(name)
            .execute(&*self.writer)
            .await
            .map_err(StorageError::classify)?;
        Ok(())
    }

    async fn sequence_next(&self) -> StorageResult<u64> {
        let next: i64 =
            sqlx::query_scalar("SELECT next_value FROM sequence_blocks WHERE name = 'links'")
                .fetch_one(&*self.writer)
                .await
                .map_err(StorageError::classify)?;
        u64::try_from(next).map_err(|_| StorageError::Corrupt(format!("sequence value {next}")))
    }

    async fn setting(&self, name: &str) -> StorageResult<Option<String>> {
        sqlx::query_scalar("SELECT value FROM settings WHERE name = ?1")
            .bind(name)
            .fetch_optional(&self.reader)
            .await
            .map_err(StorageError::classify)
    }

    async fn init_setting(
        &self,
        name: &str,
        value: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<String> {
        sqlx::query(
            "INSERT INTO settings (name, value, updated_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(value)
        .bind(ts(now))
        .execute(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        sqlx::query_scalar("SELECT value FROM settings WHERE name = ?1")
            .bind(name)
            .fetch_one(&*self.writer)
            .await
            .map_err(StorageError::classify)
    }

    async fn set_setting(&self, name: &str, value: &str, now: DateTime<Utc>) -> StorageResult<()> {
        sqlx::query(
            "INSERT INTO settings (name, value, updated_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value, \
             updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(value)
        .bind(ts(now))
        .execute(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        Ok(())
    }

    fn encode_rows(&self, rows: &[NewRow]) -> StorageResult<EncodedRows> {
        Ok(EncodedRows::new(EncodedInsert::new(rows)?))
    }

    async fn begin(&self) -> StorageResult<Box<dyn LinkTx>> {
        let tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StorageError::classify)?;
        Ok(Box::new(SqliteTx { tx }))
    }

    async fn begin_quiesced(&self) -> StorageResult<Box<dyn LinkTx>> {
        // BEGIN IMMEDIATE takes the one write lock: no other writer is mid-transaction. A writer
        // in another process waits for it (busy timeout) like for any write.
        self.begin().await
    }

    async fn api_key_by_hash(&self, key_hash: &str) -> StorageResult<Option<ApiKey>> {
        let row = sqlx::query(
            "SELECT id, name, role, key_hash, created_at, revoked_at FROM api_keys WHERE key_hash = ?1",
        )
        .bind(key_hash)
        .fetch_optional(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        row.as_ref().map(api_key_from_row).transpose()
    }

    async fn create_api_key(
        &self,
        name: &str,
        role: Role,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<ApiKey> {
        let row = sqlx::query(
            "INSERT INTO api_keys (name, role, key_hash, created_at) VALUES (?1, ?2, ?3, ?4) \
             RETURNING id, name, role, key_hash, created_at, revoked_at",
        )
        .bind(name)
        .bind(role.as_str())
        .bind(key_hash)
        .bind(ts(now))
        .fetch_one(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        api_key_from_row(&row)
    }

    async fn ensure_api_key(
        &self,
        name: &str,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<bool> {
        let done = sqlx::query(
            "INSERT INTO api_keys (name, key_hash, created_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (key_hash) DO NOTHING",
        )
        .bind(name)
        .bind(key_hash)
        .bind(ts(now))
        .execute(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_api_keys(&self) -> StorageResult<Vec<ApiKey>> {
        let rows = sqlx::query(
            "SELECT id, name, role, key_hash, created_at, revoked_at FROM api_keys ORDER BY id",
        )
        .fetch_all(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        rows.iter().map(api_key_from_row).collect()
    }

    async fn revoke_api_key(&self, id: i64, now: DateTime<Utc>) -> StorageResult<Option<ApiKey>> {
        let row = sqlx::query(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1 \
             RETURNING id, name, role, key_hash, created_at, revoked_at",
        )
        .bind(id)
        .bind(ts(now))
        .fetch_optional(&*self.writer)
        .await
        .map_err(StorageError::classify)?;
        row.as_ref().map(api_key_from_row).transpose()
    }
}

#[cfg(test)]
mod tests;
