//! PostgreSQL backend: several sidecar processes may share one database.

use super::pg_copy::CopyData;
use super::{
    checked_flags, checked_redirect, parse_tags, tags_column, url_hash_prefix, ApiKey, Backend,
    CampaignStats, ConnectOptions, EncodedRows, IdempotencyRecord, Link, LinkFilter, LinkState,
    LinkTx, ListCursor, NewRow, Role, Slot, Storage, StorageError, StorageResult,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, QueryBuilder, Row, Transaction};
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct PgStorage {
    pool: PgPool,
}

const LINK_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, \
     tags::text AS tags";

/// Columns written by an insert: the link's and its slot.
const INSERT_COLUMNS: &str = "code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags, \
     batch_id, batch_index";

/// Appends `WHERE`/`AND` conditions for `filter`.
fn push_filter(query: &mut QueryBuilder<'_, Postgres>, filter: &LinkFilter) {
    query.push(" WHERE TRUE");
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
            .push(" AND tags @> jsonb_build_array(")
            .push_bind(tag.clone())
            .push("::text)");
    }
    if let Some((state, now)) = filter.state {
        match state {
            LinkState::Revoked => query.push(" AND revoked_at IS NOT NULL"),
            LinkState::Live => query
                .push(" AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ")
                .push_bind(now)
                .push(")"),
            LinkState::Expired => query
                .push(" AND revoked_at IS NULL AND expires_at <= ")
                .push_bind(now),
        };
    }
}

/// `SELECT <link columns> FROM links WHERE <filter>`, for the caller to extend.
fn select_links(filter: &LinkFilter) -> QueryBuilder<'static, Postgres> {
    let mut query = QueryBuilder::new(format!("SELECT {LINK_COLUMNS} FROM links"));
    push_filter(&mut query, filter);
    query
}

impl PgStorage {
    async fn fetch_links(&self, mut query: QueryBuilder<'_, Postgres>) -> StorageResult<Vec<Link>> {
        let rows = query
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(StorageError::classify)?;
        rows.iter().map(link_from_row).collect()
    }

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
        campaign: row.try_get("campaign")?,
        recipient_ref: row.try_get("recipient_ref")?,
        tags: parse_tags(row.try_get("tags")?)?,
    })
}

fn api_key_from_row(row: &PgRow) -> StorageResult<ApiKey> {
    Ok(ApiKey {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        role: row.try_get::<String, _>("role")?.parse()?,
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
        recipient_ref: Option<&str>,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<Link>> {
        // Each form names its index's key and predicate (migration 9), so the planner can use it.
        let (by, key) = match recipient_ref {
            None => (
                "left(url_hash, 16) = $3 AND recipient_ref IS NULL",
                url_hash_prefix(url_hash),
            ),
            Some(recipient_ref) => ("recipient_ref = $3", recipient_ref),
        };
        let row = sqlx::query(&format!(
            "SELECT {LINK_COLUMNS} FROM links \
             WHERE {by} AND url_hash = $1 AND revoked_at IS NULL \
               AND (expires_at IS NULL OR expires_at > $2) \
             ORDER BY created_at DESC, code DESC LIMIT 1"
        ))
        .bind(url_hash)
        .bind(now)
        .bind(key)
        .fetch_optional(&self.pool)
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
                .push_bind(cursor.created_at)
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
        sqlx::query_scalar("SELECT code FROM links WHERE code = ANY($1)")
            .bind(codes)
            .fetch_all(&self.pool)
            .await
            .map_err(StorageError::classify)
    }

    async fn count_links(&self, filter: &LinkFilter) -> StorageResult<u64> {
        let mut query = QueryBuilder::new("SELECT COUNT(*) FROM links");
        push_filter(&mut query, filter);
        let count: i64 = query
            .build_query_scalar()
            .fetch_one(&self.pool)
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
               COUNT(*) FILTER (WHERE revoked_at IS NULL \
                                  AND (expires_at IS NULL OR expires_at > $2)) AS live, \
               COUNT(*) FILTER (WHERE revoked_at IS NULL AND expires_at <= $2) AS expired, \
               COUNT(*) FILTER (WHERE revoked_at IS NOT NULL) AS revoked, \
               COALESCE(SUM(visit_count), 0)::BIGINT AS visits \
             FROM links WHERE campaign = $1",
        )
        .bind(campaign)
        .bind(now)
        .fetch_one(&self.pool)
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
             VALUES ($1, $2, $3, $4) ON CONFLICT (api_key_id, key) DO NOTHING RETURNING id",
        )
        .bind(api_key_id)
        .bind(key)
        .bind(request_hash)
        .bind(now)
        .fetch_optional(&self.pool)
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
            "SELECT id, request_hash FROM idempotency_keys WHERE api_key_id = $1 AND key = $2",
        )
        .bind(api_key_id)
        .bind(key)
        .fetch_one(&self.pool)
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
             WHERE batch_id = $1 AND batch_index BETWEEN $2 AND $3"
        ))
        .bind(batch_id)
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
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
             (SELECT id FROM idempotency_keys WHERE created_at < $1 LIMIT $2)",
        )
        .bind(before)
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        Ok(done.rows_affected())
    }

    async fn raise_sequence(&self, next: u64) -> StorageResult<bool> {
        let next = i64::try_from(next)
            .map_err(|_| StorageError::Corrupt(format!("sequence value {next}")))?;
        let done = sqlx::query(
            "UPDATE sequence_blocks SET next_value = $1 WHERE name = 'links' AND next_value < $1",
        )
        .bind(next)
        .execute(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_setting(&self, name: &str) -> StorageResult<()> {
        sqlx::query("DELETE FROM settings WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(StorageError::classify)?;
        Ok(())
    }

    async fn sequence_next(&self) -> StorageResult<u64> {
        let next: i64 =
            sqlx::query_scalar("SELECT next_value FROM sequence_blocks WHERE name = 'links'")
                .fetch_one(&self.pool)
                .await
                .map_err(StorageError::classify)?;
        u64::try_from(next).map_err(|_| StorageError::Corrupt(format!("sequence value {next}")))
    }

    async fn setting(&self, name: &str) -> StorageResult<Option<String>> {
        sqlx::query_scalar("SELECT value FROM settings WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
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
            "INSERT INTO settings (name, value, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(value)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        sqlx::query_scalar("SELECT value FROM settings WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .map_err(StorageError::classify)
    }

    async fn set_setting(&self, name: &str, value: &str, now: DateTime<Utc>) -> StorageResult<()> {
        sqlx::query(
            "INSERT INTO settings (name, value, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value, \
             updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(value)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        Ok(())
    }

    fn encode_rows(&self, rows: &[NewRow]) -> StorageResult<EncodedRows> {
        Ok(EncodedRows::new(LinksCopy::new(rows)))
    }

    async fn begin(&self) -> StorageResult<Box<dyn LinkTx>> {
        let tx = self.pool.begin().await.map_err(StorageError::classify)?;
        Ok(Box::new(PgTx { tx }))
    }

    async fn begin_quiesced(&self) -> StorageResult<Box<dyn LinkTx>> {
        let mut tx = self.pool.begin().await.map_err(StorageError::classify)?;
        // SHARE conflicts with the ROW EXCLUSIVE lock every INSERT/UPDATE takes: it waits for
        // the link writes in flight and blocks new ones until this transaction ends.
        sqlx::query("LOCK TABLE links IN SHARE MODE")
            .execute(&mut *tx)
            .await
            .map_err(StorageError::classify)?;
        Ok(Box::new(PgTx { tx }))
    }

    async fn api_key_by_hash(&self, key_hash: &str) -> StorageResult<Option<ApiKey>> {
        let row = sqlx::query(
            "SELECT id, name, role, key_hash, created_at, revoked_at FROM api_keys WHERE key_hash = $1",
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
        role: Role,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<ApiKey> {
        let row = sqlx::query(
            "INSERT INTO api_keys (name, role, key_hash, created_at) VALUES ($1, $2, $3, $4) \
             RETURNING id, name, role, key_hash, created_at, revoked_at",
        )
        .bind(name)
        .bind(role.as_str())
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
            "SELECT id, name, role, key_hash, created_at, revoked_at FROM api_keys ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(StorageError::classify)?;
        rows.iter().map(api_key_from_row).collect()
    }

    async fn revoke_api_key(&self, id: i64, now: DateTime<Utc>) -> StorageResult<Option<ApiKey>> {
        let row = sqlx::query(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 \
             RETURNING id, name, role, key_hash, created_at, revoked_at",
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

/// The binary `COPY` of [`PgTx::copy_links`], columns in the order encoded.
const COPY_LINKS: &str = "COPY links (code, target, url_hash, redirect_status, flags, created_at, \
     updated_at, expires_at, revoked_at, visit_count, last_visit_at, campaign, recipient_ref, tags, \
     batch_id, batch_index) FROM STDIN (FORMAT binary)";

/// A chunk's rows as the binary `COPY` data of [`COPY_LINKS`].
struct LinksCopy(Vec<u8>);

impl LinksCopy {
    fn new(rows: &[NewRow]) -> Self {
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
