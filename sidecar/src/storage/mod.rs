//! SQL storage: the source of truth. One trait, one implementation per backend, chosen once from
//! the database URL's scheme.
//!
//! Writes that must reach Redis go through a [`LinkTx`], so the caller can publish to Redis between
//! the SQL write and the commit (see [`crate::service`]).

pub(crate) mod pg_copy;
mod postgres;
mod sqlite;
pub(crate) mod sqlite_file;

pub use self::postgres::PgStorage;
pub use self::sqlite::SqliteStorage;

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// A link as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub code: String,
    /// Normalised ASCII target URL.
    pub target: String,
    /// SHA-256 (hex) of `target`.
    pub url_hash: String,
    /// 301, 302, 307 or 308.
    pub redirect: u16,
    pub flags: LinkFlags,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Whole seconds: the Redis record carries Unix seconds.
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub visit_count: i64,
    pub last_visit_at: Option<DateTime<Utc>>,
    /// Caller metadata: the campaign the link belongs to.
    pub campaign: Option<String>,
    /// Caller metadata: an opaque recipient reference (`ref` in the API).
    pub recipient_ref: Option<String>,
    /// Caller metadata: free tags, in the caller's order.
    pub tags: Vec<String>,
}

/// Where a link came from in a request sent with an `Idempotency-Key`: the key's row and the
/// item's index (0 for a single create). Unique, so a retry can find what was committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub batch_id: i64,
    pub index: i64,
}

/// A link to insert, with its slot if the request had an idempotency key.
#[derive(Debug, Clone)]
pub struct NewRow {
    pub link: Link,
    pub slot: Option<Slot>,
}

/// Which links a listing, export or count covers; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct LinkFilter {
    pub campaign: Option<String>,
    pub recipient_ref: Option<String>,
    /// Links carrying this tag.
    pub tag: Option<String>,
    /// Links in this state at `now`.
    pub state: Option<(LinkState, DateTime<Utc>)>,
}

/// Per-campaign aggregates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CampaignStats {
    pub links: i64,
    pub live: i64,
    pub expired: i64,
    pub revoked: i64,
    /// Sum of `visit_count`.
    pub visits: i64,
}

/// The row of an idempotency key, claimed or found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub id: i64,
    pub request_hash: String,
    /// This call inserted it: no link can have its slots yet (unless a concurrent request with the
    /// same key races, which the slots' unique index settles).
    pub fresh: bool,
}

/// What the URL-hash index holds: the first 16 hex digits (64 bits) of the hash. A quarter of the
/// full hash's size, so batch inserts dirty (and write to the WAL) far fewer index pages; lookups
/// compare the full hash on the few rows it finds.
pub(crate) fn url_hash_prefix(url_hash: &str) -> &str {
    url_hash.get(..16).unwrap_or(url_hash)
}

/// Tags as stored: a JSON array, or NULL for none.
pub(crate) fn tags_column(tags: &[String]) -> Option<String> {
    (!tags.is_empty()).then(|| serde_json::to_string(tags).unwrap_or_else(|_| "[]".into()))
}

pub(crate) fn parse_tags(text: Option<String>) -> StorageResult<Vec<String>> {
    match text {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|_| StorageError::Corrupt(format!("tags {text:?} in the database"))),
    }
}

/// The link record's flag bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkFlags(pub u32);

impl LinkFlags {
    /// Append the short URL's query string to the target.
    pub const FORWARD_QUERY: u32 = 1;

    pub fn with_forward_query(forward: bool) -> Self {
        LinkFlags(if forward { Self::FORWARD_QUERY } else { 0 })
    }

    pub fn forward_query(self) -> bool {
        self.0 & Self::FORWARD_QUERY != 0
    }

    pub fn set_forward_query(&mut self, forward: bool) {
        if forward {
            self.0 |= Self::FORWARD_QUERY;
        } else {
            self.0 &= !Self::FORWARD_QUERY;
        }
    }
}

/// What a link answers at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    Live,
    Expired,
    Revoked,
}

impl Link {
    pub fn state(&self, now: DateTime<Utc>) -> LinkState {
        if self.revoked_at.is_some() {
            LinkState::Revoked
        } else if self.expires_at.is_some_and(|at| at <= now) {
            LinkState::Expired
        } else {
            LinkState::Live
        }
    }
}

/// Position in the newest-first listing: the last link of the previous page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    pub created_at: DateTime<Utc>,
    pub code: String,
}

impl ListCursor {
    /// Opaque to clients: `<unix microseconds>.<code>`.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.created_at.timestamp_micros(), self.code)
    }

    pub fn decode(text: &str) -> Option<Self> {
        let (micros, code) = text.split_once('.')?;
        let created_at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
        let valid_code = (1..=shortcode::ALIAS_MAX_LEN).contains(&code.len())
            && code
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        valid_code.then(|| ListCursor {
            created_at,
            code: code.to_owned(),
        })
    }
}

/// What an API key may do (`api_keys.role`). New roles (e.g. a console's `issuer`, `viewer`) are a
/// variant here, an arm in `http::auth::permits` and a wider CHECK in a migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Every route (what every key could do before roles existed).
    Admin,
    /// `GET /api/v1/resolve/{code}` only: nginx's fallback.
    Resolve,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Resolve => "resolve",
        }
    }

    /// What the role allows, for people (error messages, `keys list`).
    pub fn scope(self) -> &'static str {
        match self {
            Role::Admin => "may use every route",
            Role::Resolve => "may only resolve codes (GET /api/v1/resolve/{code})",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = StorageError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "admin" => Ok(Role::Admin),
            "resolve" => Ok(Role::Resolve),
            other => Err(StorageError::Corrupt(format!("API key role {other:?}"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// SHA-256 (hex) of the key; the key itself is never stored.
    pub key_hash: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A unique constraint refused the write (a taken code).
    #[error("unique constraint violated")]
    Conflict,
    /// The database cannot be reached or is overloaded: worth retrying later.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    #[error("database error: {0}")]
    Other(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: use sqlite://... or postgres://...")]
    UnsupportedUrl(String),
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
}

impl StorageError {
    /// Sorts a driver error: unique violations, connectivity problems, the rest.
    pub(crate) fn classify(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => StorageError::Conflict,
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or_default();
                let unavailable = if db
                    .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some()
                {
                    // Class 08 connection exception, 53 insufficient resources, 28 authorization
                    // refused, 57P0x operator intervention (shutdown, crash recovery, cannot
                    // connect now), 55000 "database is not currently accepting connections",
                    // 55P03 lock timeout, 57014 statement timeout, 3D000 no such database.
                    code.starts_with("08")
                        || code.starts_with("53")
                        || code.starts_with("28")
                        || code.starts_with("57P0")
                        || matches!(code.as_ref(), "55000" | "55P03" | "57014" | "3D000")
                } else {
                    // SQLite: SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
                    code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
                };
                if unavailable {
                    StorageError::Unavailable(error)
                } else {
                    StorageError::Other(error)
                }
            }
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed => StorageError::Unavailable(error),
            _ => StorageError::Other(error),
        }
    }
}

pub type StorageResult<T> = Result<T, StorageError>;

/// Connection settings common to both backends.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub url: String,
    pub max_connections: u32,
    pub acquire_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn from_url(url: &str) -> Option<Self> {
        if url.starts_with("sqlite:") {
            Some(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Backend::Postgres)
        } else {
            None
        }
    }
}

/// Opens the database named by `options.url` and applies its migrations.
pub async fn connect(options: &ConnectOptions) -> StorageResult<Arc<dyn Storage>> {
    match Backend::from_url(&options.url) {
        Some(Backend::Sqlite) => Ok(Arc::new(SqliteStorage::connect(options).await?)),
        Some(Backend::Postgres) => Ok(Arc::new(PgStorage::connect(options).await?)),
        None => Err(StorageError::UnsupportedUrl(crate::config::redact_url(
            &options.url,
        ))),
    }
}

/// The current time as stored: UTC, microsecond precision (what PostgreSQL keeps).
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

#[async_trait]
pub trait Storage: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Whether the database answers.
    async fn ping(&self) -> StorageResult<()>;

    /// Leases `size` sequence numbers; returns the first. Atomic across processes.
    async fn lease_sequence_block(&self, size: u64) -> StorageResult<u64>;

    async fn get_link(&self, code: &str) -> StorageResult<Option<Link>>;

    /// The newest link with this URL hash and this recipient reference (`None`: links without
    /// one) that is neither revoked nor expired at `now`.
    async fn find_live_link(
        &self,
        url_hash: &str,
        recipient_ref: Option<&str>,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<Link>>;

    /// Newest first, starting after `after`.
    async fn list_links(
        &self,
        filter: &LinkFilter,
        after: Option<&ListCursor>,
        limit: u32,
    ) -> StorageResult<Vec<Link>>;

    /// Every link in code order, `limit` at a time, starting after `after_code` (resync, export).
    async fn scan_links(
        &self,
        filter: &LinkFilter,
        after_code: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>>;

    /// Which of `codes` have a link (in any state), read outside any transaction.
    async fn existing_codes(&self, codes: &[String]) -> StorageResult<Vec<String>>;

    /// How many links the filter covers (for progress bars).
    async fn count_links(&self, filter: &LinkFilter) -> StorageResult<u64>;

    /// Aggregates of one campaign at `now`.
    async fn campaign_stats(
        &self,
        campaign: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<CampaignStats>;

    /// Inserts the idempotency key unless it exists; returns its row either way.
    async fn claim_idempotency_key(
        &self,
        api_key_id: i64,
        key: &str,
        request_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<IdempotencyRecord>;

    /// The links created by the request `batch_id` with item indexes in `from..=to`, as
    /// `(index, link)`.
    async fn links_by_slots(
        &self,
        batch_id: i64,
        from: i64,
        to: i64,
    ) -> StorageResult<Vec<(i64, Link)>>;

    /// Deletes at most `limit` idempotency keys created before `before`; returns how many.
    /// Links keep their slot columns: a later key never reuses a pruned key's id.
    async fn prune_idempotency_keys(&self, before: DateTime<Utc>, limit: u32)
        -> StorageResult<u64>;

    /// Moves the sequence to at least `next` (an import restored generated codes up to it, or
    /// the database was restored from a backup older than the codes issued); returns whether
    /// it moved.
    async fn raise_sequence(&self, next: u64) -> StorageResult<bool>;

    /// A recorded setting (table `settings`), e.g. [`CODE_SCHEME_SETTING`].
    async fn setting(&self, name: &str) -> StorageResult<Option<String>>;

    /// Records a setting unless one is recorded; returns the value recorded now (ours, or the
    /// one a concurrent first start recorded).
    async fn init_setting(
        &self,
        name: &str,
        value: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<String>;

    /// Records a setting, replacing any.
    async fn set_setting(&self, name: &str, value: &str, now: DateTime<Utc>) -> StorageResult<()>;

    async fn delete_setting(&self, name: &str) -> StorageResult<()>;

    /// The next sequence number a lease would start at.
    async fn sequence_next(&self) -> StorageResult<u64>;

    /// Makes `rows` ready for [`LinkTx::insert_links`] on this backend (no I/O).
    fn encode_rows(&self, rows: &[NewRow]) -> StorageResult<EncodedRows>;

    /// Starts a write transaction; dropping it uncommitted rolls it back.
    async fn begin(&self) -> StorageResult<Box<dyn LinkTx>>;

    /// Starts a transaction that first waits for every link write in flight to end (commit or
    /// rollback) and keeps new ones waiting until it ends. Inside it, a code SQL does not have
    /// cannot belong to a write between its Redis write and its commit: `resync` deletes
    /// orphan Redis keys under it. Hold it briefly.
    async fn begin_quiesced(&self) -> StorageResult<Box<dyn LinkTx>>;

    async fn api_key_by_hash(&self, key_hash: &str) -> StorageResult<Option<ApiKey>>;

    async fn create_api_key(
        &self,
        name: &str,
        role: Role,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<ApiKey>;

    /// Inserts the key unless one with this hash exists; returns whether it was inserted.
    async fn ensure_api_key(
        &self,
        name: &str,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<bool>;

    async fn list_api_keys(&self) -> StorageResult<Vec<ApiKey>>;

    /// Marks the key revoked (keeping the first revocation time); `None` if there is no such key.
    async fn revoke_api_key(&self, id: i64, now: DateTime<Utc>) -> StorageResult<Option<ApiKey>>;
}

/// Rows made ready for their backend's bulk insert by [`Storage::encode_rows`] (the statements
/// and their arguments, or the `COPY` data). Encoding comes before the transaction, so the write
/// connection does not wait while a chunk is put together: on SQLite, whose one writer bounds a
/// batch, that wait was ~7% of the transaction's time.
pub struct EncodedRows(Box<dyn Any + Send>);

impl EncodedRows {
    fn new<T: Any + Send>(encoded: T) -> Self {
        Self(Box::new(encoded))
    }

    /// The backend's own form; `None` if another backend made it.
    fn into_inner<T: Any>(self) -> Option<T> {
        self.0.downcast().ok().map(|encoded| *encoded)
    }
}

/// A write transaction on links.
#[async_trait]
pub trait LinkTx: Send {
    /// Inserts a new link; [`StorageError::Conflict`] if the code (or the slot) is taken.
    async fn insert_link(&mut self, link: &Link, slot: Option<Slot>) -> StorageResult<()>;

    /// Inserts many links in bulk, skipping those whose code or slot is taken; returns the codes
    /// inserted. `encoded` is `rows` as [`Storage::encode_rows`] made them.
    async fn insert_links(
        &mut self,
        rows: &[NewRow],
        encoded: EncodedRows,
    ) -> StorageResult<Vec<String>>;

    /// Links created by the request `batch_id` with these indexes, as `(index, link)`: inside the
    /// transaction, after a conflicting insert.
    async fn links_by_slot_list(
        &mut self,
        batch_id: i64,
        indexes: &[i64],
    ) -> StorageResult<Vec<(i64, Link)>>;

    /// Which of `codes` have a link (in any state).
    async fn existing_codes(&mut self, codes: &[String]) -> StorageResult<Vec<String>>;

    /// Deletes links this transaction inserted (their codes were refused by Redis, see
    /// [`crate::service`]); nothing else may be passed.
    async fn delete_new_links(&mut self, codes: &[String]) -> StorageResult<()>;

    /// Reads a link and locks it against concurrent writers until the transaction ends.
    async fn lock_link(&mut self, code: &str) -> StorageResult<Option<Link>>;

    /// Writes every mutable field of `link`, metadata included (matched by code).
    async fn update_link(&mut self, link: &Link) -> StorageResult<()>;

    async fn commit(self: Box<Self>) -> StorageResult<()>;

    async fn rollback(self: Box<Self>) -> StorageResult<()>;
}

/// The setting holding the code scheme's fingerprint ([`shortcode::CodeScheme::fingerprint`]).
pub const CODE_SCHEME_SETTING: &str = "code_scheme";

/// Set (to the high-water mark found) when a lease found the database's sequence behind Redis's
/// mark, i.e. the database was restored older than Redis: Redis may hold sent links SQL lacks,
/// which `resync` must not take for orphans. Cleared by `resync --remove-orphans-after-restore`.
pub const RESTORED_BEHIND_REDIS_SETTING: &str = "restored_behind_redis";

/// Timestamps must round-trip through every backend unchanged; stored `u16`/`u32` columns are
/// checked on the way out.
pub(crate) fn checked_redirect(value: i64) -> StorageResult<u16> {
    match value {
        301 | 302 | 307 | 308 => Ok(value as u16),
        other => Err(StorageError::Corrupt(format!(
            "redirect status {other} in the database"
        ))),
    }
}

pub(crate) fn checked_flags(value: i64) -> StorageResult<LinkFlags> {
    u32::try_from(value)
        .map(LinkFlags)
        .map_err(|_| StorageError::Corrupt(format!("link flags {value} in the database")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip() {
        let cursor = ListCursor {
            created_at: now(),
            code: "a_b-c".into(),
        };
        assert_eq!(ListCursor::decode(&cursor.encode()), Some(cursor));
        assert_eq!(ListCursor::decode("x.abc"), None);
        assert_eq!(ListCursor::decode("12.a'b"), None);
        assert_eq!(ListCursor::decode("12"), None);
        assert_eq!(ListCursor::decode("12."), None);
    }

    #[test]
    fn backend_from_url() {
        assert_eq!(Backend::from_url("sqlite://x.db"), Some(Backend::Sqlite));
        assert_eq!(Backend::from_url("sqlite::memory:"), Some(Backend::Sqlite));
        assert_eq!(
            Backend::from_url("postgres://u@h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(
            Backend::from_url("postgresql://u@h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(Backend::from_url("mysql://u@h/db"), None);
    }
}
