//! SQLite backend: an embedded file, created on first run.
//!
//! SQLite allows one writer at a time, so writes go through a pool of a single connection (writers
//! queue in the pool instead of failing with SQLITE_BUSY) and start with `BEGIN IMMEDIATE`, which
//! takes the write lock up front so a transaction that read first never fails to upgrade. Reads use
//! their own pool and, in WAL mode, never wait for the writer.

use super::{
    checked_flags, checked_redirect, ApiKey, Backend, ConnectOptions, Link, LinkTx, ListCursor,
    Storage, StorageError, StorageResult,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct SqliteStorage {
    writer: SqlitePool,
    reader: SqlitePool,
}

const LINK_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at";

impl SqliteStorage {
    pub async fn connect(options: &ConnectOptions) -> StorageResult<Self> {
        let connect = SqliteConnectOptions::from_str(&options.url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // With WAL, NORMAL survives a process crash; only an OS crash or power loss can
            // undo the last commits.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(options.acquire_timeout)
            .foreign_keys(true);
        if let Some(dir) = connect.get_filename().parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StorageError::Other(sqlx::Error::Io(e)))?;
            }
        }
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect.clone())
            .await
            .map_err(StorageError::classify)?;
        sqlx::migrate!("../migrations/sqlite").run(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .idle_timeout(Some(Duration::from_secs(600)))
            .connect_with(connect.read_only(true))
            .await
            .map_err(StorageError::classify)?;
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
    })
}

fn api_key_from_row(row: &SqliteRow) -> StorageResult<ApiKey> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
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
        .fetch_one(&self.writer)
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
        now: DateTime<Utc>,
    ) -> StorageResult<Option<Link>> {
        let row = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM links \
             WHERE url_hash = ?1 AND revoked_at IS NULL \
               AND (expires_at IS NULL OR expires_at > ?2) \
             ORDER BY created_at DESC, code DESC LIMIT 1"
        ))
        .bind(url_hash)
        .bind(ts(now))
        .fetch_optional(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        row.as_ref().map(link_from_row).transpose()
    }

    async fn list_links(&self, after: Option<&ListCursor>, limit: u32) -> StorageResult<Vec<Link>> {
        let rows = match after {
            None => {
                sqlx::query(&format!(
                    "SELECT {LINK_COLUMNS} FROM links \
                     ORDER BY created_at DESC, code DESC LIMIT ?1"
                ))
                .bind(i64::from(limit))
                .fetch_all(&self.reader)
                .await
            }
            Some(cursor) => {
                sqlx::query(&format!(
                    "SELECT {LINK_COLUMNS} FROM links \
                     WHERE (created_at, code) < (?1, ?2) \
                     ORDER BY created_at DESC, code DESC LIMIT ?3"
                ))
                .bind(ts(cursor.created_at))
                .bind(&cursor.code)
                .bind(i64::from(limit))
                .fetch_all(&self.reader)
                .await
            }
        }
        .map_err(StorageError::classify)?;
        rows.iter().map(link_from_row).collect()
    }

    async fn scan_links(&self, after_code: Option<&str>, limit: u32) -> StorageResult<Vec<Link>> {
        let rows = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM links WHERE code > ?1 ORDER BY code LIMIT ?2"
        ))
        .bind(after_code.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        rows.iter().map(link_from_row).collect()
    }

    async fn begin(&self) -> StorageResult<Box<dyn LinkTx>> {
        let tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StorageError::classify)?;
        Ok(Box::new(SqliteTx { tx }))
    }

    async fn api_key_by_hash(&self, key_hash: &str) -> StorageResult<Option<ApiKey>> {
        let row = sqlx::query(
            "SELECT id, name, key_hash, created_at, revoked_at FROM api_keys WHERE key_hash = ?1",
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
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<ApiKey> {
        let row = sqlx::query(
            "INSERT INTO api_keys (name, key_hash, created_at) VALUES (?1, ?2, ?3) \
             RETURNING id, name, key_hash, created_at, revoked_at",
        )
        .bind(name)
        .bind(key_hash)
        .bind(ts(now))
        .fetch_one(&self.writer)
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
        .execute(&self.writer)
        .await
        .map_err(StorageError::classify)?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_api_keys(&self) -> StorageResult<Vec<ApiKey>> {
        let rows = sqlx::query(
            "SELECT id, name, key_hash, created_at, revoked_at FROM api_keys ORDER BY id",
        )
        .fetch_all(&self.reader)
        .await
        .map_err(StorageError::classify)?;
        rows.iter().map(api_key_from_row).collect()
    }

    async fn revoke_api_key(&self, id: i64, now: DateTime<Utc>) -> StorageResult<Option<ApiKey>> {
        let row = sqlx::query(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1 \
             RETURNING id, name, key_hash, created_at, revoked_at",
        )
        .bind(id)
        .bind(ts(now))
        .fetch_optional(&self.writer)
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
    async fn insert_link(&mut self, link: &Link) -> StorageResult<()> {
        sqlx::query(&format!(
            "INSERT INTO links ({LINK_COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
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
        .execute(&mut *self.tx)
        .await
        .map_err(StorageError::classify)?;
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
             updated_at = ?6, expires_at = ?7, revoked_at = ?8 WHERE code = ?1",
        )
        .bind(&link.code)
        .bind(&link.target)
        .bind(&link.url_hash)
        .bind(i64::from(link.redirect))
        .bind(i64::from(link.flags.0))
        .bind(ts(link.updated_at))
        .bind(opt_ts(link.expires_at))
        .bind(opt_ts(link.revoked_at))
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

    #[test]
    fn timestamps_sort_as_text_and_round_trip() {
        let a = DateTime::from_timestamp_micros(1_700_000_000_000_001).unwrap();
        let b = DateTime::from_timestamp_micros(1_700_000_000_100_000).unwrap();
        assert!(ts(a) < ts(b));
        assert_eq!(ts(a), "2023-11-14T22:13:20.000001Z");
        assert_eq!(parse_ts(&ts(a)).unwrap(), a);
    }
}
