//! PostgreSQL backend: several sidecar processes may share one database.

use super::{
    checked_flags, checked_redirect, ApiKey, Backend, ConnectOptions, Link, LinkTx, ListCursor,
    Storage, StorageError, StorageResult,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Row, Transaction};
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct PgStorage {
    pool: PgPool,
}

const LINK_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at";

impl PgStorage {
    pub async fn connect(options: &ConnectOptions) -> StorageResult<Self> {
        // Server-side bounds, so a request never waits indefinitely on a lock or a slow query
        // (answered 503), and a transaction left open by a stuck process cannot hold row locks.
        let lock_timeout = format!("{}ms", options.acquire_timeout.as_millis().max(1));
        let connect = PgConnectOptions::from_str(&options.url)?
            .application_name("shortlink-sidecar")
            .options([
                ("statement_timeout", "10s"),
                ("lock_timeout", lock_timeout.as_str()),
                ("idle_in_transaction_session_timeout", "60s"),
            ]);
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .idle_timeout(Some(Duration::from_secs(600)))
            .connect_with(connect)
            .await
            .map_err(StorageError::classify)?;
        // The migrator takes an advisory lock, so sidecars starting together apply it once.
        sqlx::migrate!("../migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }
}

fn link_from_row(row: &PgRow) -> StorageResult<Link> {
    Ok(Link {
        code: row.try_get("code")?,
        target: row.try_get("target")?,
        url_hash: row.try_get("url_hash")?,
        redirect: checked_redirect(row.try_get::<i16, _>("redirect_status")?.into())?,
        flags: checked_flags(row.try_get::<i32, _>("flags")?.into())?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        expires_at: row.try_get("expires_at")?,
        revoked_at: row.try_get("revoked_at")?,
        visit_count: row.try_get("visit_count")?,
        last_visit_at: row.try_get("last_visit_at")?,
    })
}

fn api_key_from_row(row: &PgRow) -> StorageResult<ApiKey> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        key_hash: row.try_get("key_hash")?,
        created_at: row.try_get("created_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

fn redirect_column(status: u16) -> i16 {
    // Only 301..=308 ever get here (validated at the API, checked by the table).
    i16::try_from(status).unwrap_or(i16::MAX)
}

fn flags_column(flags: u32) -> i32 {
    i32::try_from(flags).unwrap_or(i32::MAX)
}

#[async_trait]
impl Storage for PgStorage {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn ping(&self) -> StorageResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(StorageError::classify)?;
        Ok(())
    }

    async fn lease_sequence_block(&self, size: u64) -> StorageResult<u64> {
        let size = i64::try_from(size)
            .map_err(|_| StorageError::Corrupt(format!("sequence block {size}")))?;
        // One statement: the row lock serialises concurrent leases, so blocks never overlap.
        let start: i64 = sqlx::query_scalar(
            "UPDATE sequence_blocks SET next_value = next_value + $1 \
             WHERE name = 'links' RETURNING next_value - $1",
        )
        .bind(size)
        .fetch_one(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        u64::try_from(start).map_err(|_| StorageError::Corrupt(format!("sequence value {start}")))
    }

    async fn get_link(&self, code: &str) -> StorageResult<Option<Link>> {
        let row = sqlx::query(&format!("SELECT {LINK_COLUMNS} FROM links WHERE code = $1"))
            .bind(code)
            .fetch_optional(&self.pool)
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
             WHERE url_hash = $1 AND revoked_at IS NULL \
               AND (expires_at IS NULL OR expires_at > $2) \
             ORDER BY created_at DESC, code DESC LIMIT 1"
        ))
        .bind(url_hash)
        .bind(now)
        .fetch_optional(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        row.as_ref().map(link_from_row).transpose()
    }

    async fn list_links(&self, after: Option<&ListCursor>, limit: u32) -> StorageResult<Vec<Link>> {
        let rows = match after {
            None => {
                sqlx::query(&format!(
                    "SELECT {LINK_COLUMNS} FROM links \
                     ORDER BY created_at DESC, code DESC LIMIT $1"
                ))
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
            }
            Some(cursor) => {
                sqlx::query(&format!(
                    "SELECT {LINK_COLUMNS} FROM links \
                     WHERE (created_at, code) < ($1, $2) \
                     ORDER BY created_at DESC, code DESC LIMIT $3"
                ))
                .bind(cursor.created_at)
                .bind(&cursor.code)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await
            }
        }
        .map_err(StorageError::classify)?;
        rows.iter().map(link_from_row).collect()
    }

    async fn scan_links(&self, after_code: Option<&str>, limit: u32) -> StorageResult<Vec<Link>> {
        let rows = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM links WHERE code > $1 ORDER BY code LIMIT $2"
        ))
        .bind(after_code.unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        rows.iter().map(link_from_row).collect()
    }

    async fn begin(&self) -> StorageResult<Box<dyn LinkTx>> {
        let tx = self.pool.begin().await.map_err(StorageError::classify)?;
        Ok(Box::new(PgTx { tx }))
    }

    async fn api_key_by_hash(&self, key_hash: &str) -> StorageResult<Option<ApiKey>> {
        let row = sqlx::query(
            "SELECT id, name, key_hash, created_at, revoked_at FROM api_keys WHERE key_hash = $1",
        )
        .bind(key_hash)
        .fetch_optional(&self.pool)
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
            "INSERT INTO api_keys (name, key_hash, created_at) VALUES ($1, $2, $3) \
             RETURNING id, name, key_hash, created_at, revoked_at",
        )
        .bind(name)
        .bind(key_hash)
        .bind(now)
        .fetch_one(&self.pool)
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
            "INSERT INTO api_keys (name, key_hash, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (key_hash) DO NOTHING",
        )
        .bind(name)
        .bind(key_hash)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        Ok(done.rows_affected() == 1)
    }

    async fn list_api_keys(&self) -> StorageResult<Vec<ApiKey>> {
        let rows = sqlx::query(
            "SELECT id, name, key_hash, created_at, revoked_at FROM api_keys ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        rows.iter().map(api_key_from_row).collect()
    }

    async fn revoke_api_key(&self, id: i64, now: DateTime<Utc>) -> StorageResult<Option<ApiKey>> {
        let row = sqlx::query(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 \
             RETURNING id, name, key_hash, created_at, revoked_at",
        )
        .bind(id)
        .bind(now)
        .fetch_optional(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        row.as_ref().map(api_key_from_row).transpose()
    }
}

struct PgTx {
    tx: Transaction<'static, Postgres>,
}

#[async_trait]
impl LinkTx for PgTx {
    async fn insert_link(&mut self, link: &Link) -> StorageResult<()> {
        sqlx::query(&format!(
            "INSERT INTO links ({LINK_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
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
             updated_at = $6, expires_at = $7, revoked_at = $8 WHERE code = $1",
        )
        .bind(&link.code)
        .bind(&link.target)
        .bind(&link.url_hash)
        .bind(redirect_column(link.redirect))
        .bind(flags_column(link.flags.0))
        .bind(link.updated_at)
        .bind(link.expires_at)
        .bind(link.revoked_at)
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
