//! SQLite backend: an embedded file, created on first run.
//!
//! SQLite allows one writer at a time, so writes go through a pool of a single connection, shared
//! with the visit store (writers queue in the pool instead of failing with SQLITE_BUSY; see
//! [`super::sqlite_file`]) and start with `BEGIN IMMEDIATE`, which
//! takes the write lock up front so a transaction that read first never fails to upgrade. Reads use
//! their own pool and, in WAL mode, never wait for the writer.

mod batch;

use self::batch::EncodedInsert;
use super::sqlite_file;
use super::{
    checked_flags, checked_redirect, parse_tags, tags_column, url_hash_prefix, ApiKey, Backend,
    CampaignStats, ConnectOptions, EncodedRows, IdempotencyRecord, Link, LinkFilter, LinkState,
    LinkTx, ListCursor, NewRow, Role, Slot, Storage, StorageError, StorageResult,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct SqliteStorage {
    /// Shared with the visit store on the same file ([`sqlite_file::shared_writer`]).
    writer: Arc<SqlitePool>,
    reader: SqlitePool,
}

const LINK_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags";

/// Columns written by an insert: the link's, its slot, and the URL-hash prefix the live-link
/// lookup is indexed on (a column, not an expression index: see migration 7).
const INSERT_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags, \
     batch_id, batch_index, url_prefix";

/// Rows per multi-row INSERT: 17 binds each, well under SQLite's 32,766 variables.
const INSERT_ROWS: usize = 1000;

/// Appends `WHERE` conditions for `filter`; callers may add more with `AND`.
fn push_filter(query: &mut QueryBuilder<'_, Sqlite>, filter: &LinkFilter) {
    query.push(" WHERE 1 = 1");
    if let Some(campaign) = &filter.campaign {
        query.push(" AND campaign = ").push_bind(campaign.clone());
    }
    if let Some(recipient_ref) = &filter.recipient_ref {
        query
            .push(" AND recipient_ref = ")
            .push_bind(recipient_ref.clone());
    }
    if let Some(tag) = &filter.tag {
        query
            .push(" AND EXISTS (SELECT 1 FROM json_each(links.tags) WHERE json_each.value = ")
            .push_bind(tag.clone())
            .push(")");
    }
    if let Some((state, now)) = filter.state {
        match state {
            LinkState::Revoked => query.push(" AND revoked_at IS NOT NULL"),
            LinkState::Live => query
                .push(" AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ")
                .push_bind(ts(now))
                .push(")"),
            LinkState::Expired => query
                .push(" AND revoked_at IS NULL AND expires_at <= ")
                .push_bind(ts(now)),
        };
    }
}

/// `SELECT code FROM links WHERE code IN (<codes>)`.
fn codes_in(codes: &[String]) -> QueryBuilder<'static, Sqlite> {
    let mut query = QueryBuilder::new("SELECT code FROM links WHERE code IN (");
    let mut list = query.separated(", ");
    for code in codes {
        list.push_bind(code.clone());
    }
    query.push(")");
    query
}

/// `SELECT <link columns> FROM links WHERE <filter>`, for the caller to extend.
fn select_links(filter: &LinkFilter) -> QueryBuilder<'static, Sqlite> {
    let mut query = QueryBuilder::new(format!("SELECT {LINK_COLUMNS} FROM links"));
    push_filter(&mut query, filter);
    query
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

/// Fixed-width UTC text, so that text order is time order.
fn ts(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn opt_ts(at: Option<DateTime<Utc>>) -> Option<String> {
    at.map(ts)
}

fn parse_ts(text: &str) -> StorageResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| StorageError::Corrupt(format!("timestamp {text:?} in the database")))
}

fn parse_opt_ts(text: Option<String>) -> StorageResult<Option<DateTime<Utc>>> {
    text.as_deref().map(parse_ts).transpose()
}

fn link_from_row(row: &SqliteRow) -> StorageResult<Link> {
    Ok(Link {
        code: row.try_get("code")?,
        target: row.try_get("target")?,
        url_hash: row.try_get("url_hash")?,
        redirect: checked_redirect(row.try_get("redirect_status")?)?,
        flags: checked_flags(row.try_get("flags")?)?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at")?)?,
        updated_at: parse_ts(&row.try_get::<String, _>("updated_at")?)?,
        expires_at: parse_opt_ts(row.try_get("expires_at")?)?,
        revoked_at: parse_opt_ts(row.try_get("revoked_at")?)?,
        visit_count: row.try_get("visit_count")?,
        last_visit_at: parse_opt_ts(row.try_get("last_visit_at")?)?,
        campaign: row.try_get("campaign")?,
        recipient_ref: row.try_get("recipient_ref")?,
        tags: parse_tags(row.try_get("tags")?)?,
    })
}

fn api_key_from_row(row: &SqliteRow) -> StorageResult<ApiKey> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        role: row.try_get::<String, _>("role")?.parse()?,
        key_hash: row.try_get("key_hash")?,
        created_at: parse_ts(&row.try_get::<String, _>("created_at")?)?,
        revoked_at: parse_opt_ts(row.try_get("revoked_at")?)?,
    })
}

fn sequence_value(value: u64) -> StorageResult<i64> {
    i64::try_from(value).map_err(|_| StorageError::Corrupt(format!("sequence value {value}")))
}

#[async_trait]
impl Storage for SqliteStorage {
    fn backend(&self) -> Backend {
        Backend::Sqlite
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

struct SqliteTx {
    tx: Transaction<'static, Sqlite>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_sort_as_text_and_round_trip() {
        let a = DateTime::from_timestamp_micros(1_700_000_000_000_001).unwrap();
        let b = DateTime::from_timestamp_micros(1_700_000_000_100_000).unwrap();
        assert!(ts(a) < ts(b));
        assert_eq!(ts(a), "2023-11-14T22:13:20.000001Z");
        assert_eq!(parse_ts(&ts(a)).unwrap(), a);
    }

    fn row(code: &str, slot: Option<Slot>) -> NewRow {
        let now = crate::storage::now();
        NewRow {
            link: Link {
                code: code.into(),
                target: format!("https://t.example/{code}"),
                url_hash: format!("{code:0>64}"),
                redirect: 302,
                flags: crate::storage::LinkFlags(0),
                created_at: now,
                updated_at: now,
                expires_at: None,
                revoked_at: None,
                visit_count: 0,
                last_visit_at: None,
                campaign: None,
                recipient_ref: None,
                tags: Vec::new(),
            },
            slot,
        }
    }

    /// The live-link lookup goes through the stored URL-hash prefix (migration 7): every writer
    /// of `url_hash` (batch insert, single insert, update) keeps it in step.
    #[tokio::test]
    async fn live_link_lookup_follows_every_writer_of_the_url_hash() {
        let dir = tempfile::tempdir().unwrap();
        let storage = SqliteStorage::connect(&ConnectOptions {
            url: format!("sqlite://{}", dir.path().join("t.db").display()),
            max_connections: 2,
            acquire_timeout: Duration::from_secs(10),
        })
        .await
        .unwrap();
        let hash = |digit: &str| digit.repeat(64);
        let mut batch = row("a", None);
        batch.link.url_hash = hash("a");
        let mut single = row("b", None);
        single.link.url_hash = hash("b");
        let mut tx = storage.begin().await.unwrap();
        let rows = [batch.clone()];
        let encoded = storage.encode_rows(&rows).unwrap();
        assert_eq!(tx.insert_links(&rows, encoded).await.unwrap(), ["a"]);
        tx.insert_link(&single.link, None).await.unwrap();
        tx.commit().await.unwrap();
        let now = crate::storage::now();
        let found = |hash: String| {
            let storage = storage.clone();
            async move {
                let link = storage.find_live_link(&hash, None, now).await.unwrap();
                link.map(|link| link.code)
            }
        };
        assert_eq!(found(hash("a")).await.as_deref(), Some("a"));
        assert_eq!(found(hash("b")).await.as_deref(), Some("b"));

        let mut moved = batch.link.clone();
        moved.url_hash = hash("c");
        let mut tx = storage.begin().await.unwrap();
        tx.update_link(&moved).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(found(hash("c")).await.as_deref(), Some("a"));
        assert_eq!(found(hash("a")).await, None);
    }

    /// The codes `insert_links` reports are exactly those it inserted, also when some rows of a
    /// statement are skipped (the count no longer covers every row).
    #[tokio::test]
    async fn insert_links_reports_the_rows_inserted() {
        let dir = tempfile::tempdir().unwrap();
        let storage = SqliteStorage::connect(&ConnectOptions {
            url: format!("sqlite://{}", dir.path().join("t.db").display()),
            max_connections: 2,
            acquire_timeout: Duration::from_secs(10),
        })
        .await
        .unwrap();
        let slot = |index| Some(Slot { batch_id: 7, index });
        let mut tx = storage.begin().await.unwrap();
        let first = [row("a", None), row("b", slot(1))];
        assert_eq!(
            tx.insert_links(&first, storage.encode_rows(&first).unwrap())
                .await
                .unwrap(),
            ["a", "b"]
        );
        tx.commit().await.unwrap();

        let mut tx = storage.begin().await.unwrap();
        // "a" is taken, slot 1 is taken: only "c" and "e" go in.
        let second = [
            row("a", None),
            row("c", None),
            row("d", slot(1)),
            row("e", slot(2)),
        ];
        let mut inserted = tx
            .insert_links(&second, storage.encode_rows(&second).unwrap())
            .await
            .unwrap();
        inserted.sort();
        assert_eq!(inserted, ["c", "e"]);
        // All skipped.
        assert!(tx
            .insert_links(&second[..1], storage.encode_rows(&second[..1]).unwrap())
            .await
            .unwrap()
            .is_empty());
        tx.commit().await.unwrap();
        assert_eq!(
            storage.count_links(&LinkFilter::default()).await.unwrap(),
            4
        );
    }
}
