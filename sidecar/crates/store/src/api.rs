//! What the storage is, whatever the backend: the [`Storage`] and [`LinkTx`] traits every backend
//! implements, their errors, the backend kinds and connection settings. Below the backends and
//! the facade (`storage/mod.rs`) that picks one, so neither imports the other in a circle.

use super::audit::entry::{AuditEntry, AuditFilter, AuditHead, AuditRecord};
use super::imported::ImportedLink;
use super::model::{
    ApiKey, CampaignStats, IdempotencyRecord, KeyRate, LinkFilter, ListCursor, NewRow, Role, Slot,
};
use super::quarantine::{AbuseReport, LinkEvent, Quarantine};
use super::workspace::{DeletedWorkspace, Quotas, Workspace, WorkspaceChange};
use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use shortlink_model::WorkspaceId;
use shortlink_model::{Link, LinkFlags};
use std::any::Any;
use std::time::Duration;

// The errors live in error.rs, below the model that also returns them; the backends name them
// from here as before.
pub use super::error::{StorageError, StorageResult};

/// Connection settings common to every backend.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub url: String,
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// Page caches of SQLite's connections (other backends keep theirs in the server).
    pub sqlite_cache: SqliteCache,
}

impl ConnectOptions {
    /// The database connection settings of the configuration.
    pub fn from_config(config: &shortlink_config::Config) -> Self {
        Self {
            url: config.database_url.clone(),
            max_connections: config.db_max_connections,
            acquire_timeout: config.db_timeout,
            sqlite_cache: SqliteCache {
                writer_mib: config.sqlite_writer_cache_mib,
                reader_mib: config.sqlite_reader_cache_mib,
            },
        }
    }
}

/// SQLite's page cache per connection, in MiB: what bounds most of the sidecar's memory on
/// SQLite, as every open connection fills its own cache up to this size and keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteCache {
    /// The one write connection's (shared by links and visits).
    pub writer_mib: u32,
    /// Each read connection's.
    pub reader_mib: u32,
}

impl Default for SqliteCache {
    fn default() -> Self {
        Self {
            writer_mib: 32,
            reader_mib: 4,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    /// MariaDB or MySQL.
    Mysql,
}

impl Backend {
    pub fn from_url(url: &str) -> Option<Self> {
        if url.starts_with("sqlite:") {
            Some(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Backend::Postgres)
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Some(Backend::Mysql)
        } else {
            None
        }
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

    /// Per connection pool: its name, open connections and idle ones (for metrics).
    fn pool_use(&self) -> Vec<(&'static str, u32, usize)> {
        Vec::new()
    }

    /// Leases `size` sequence numbers; returns the first. Atomic across processes.
    async fn lease_sequence_block(&self, size: u64) -> StorageResult<u64>;

    /// `workspace`'s link with this code; `None` for a code another workspace owns, as for a
    /// code nobody does (one query either way).
    async fn get_link(&self, workspace: WorkspaceId, code: &str) -> StorageResult<Option<Link>>;

    /// The link with this code, whoever owns it: for nginx's fallback (which then checks the
    /// host's workspace), the projection's repairs and the installation's own jobs.
    async fn link_by_code(&self, code: &str) -> StorageResult<Option<Link>>;

    /// `workspace`'s newest link with this URL hash and this recipient reference (`None`: links
    /// without one) that is neither revoked nor expired at `now`.
    async fn find_live_link(
        &self,
        workspace: WorkspaceId,
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

    /// Campaign names after `after` (`""`: from the first), in order, at most `limit`: one index
    /// seek each (a skip scan of `links_campaign`), so a campaign's size does not matter.
    async fn list_campaigns(
        &self,
        workspace: WorkspaceId,
        after: &str,
        limit: u32,
    ) -> StorageResult<Vec<String>>;

    /// Aggregates of one campaign of `workspace` at `now`.
    async fn campaign_stats(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<CampaignStats>;

    /// The campaigns of `workspace` (only those named in `only`, if given) with the aggregates
    /// [`Storage::campaign_stats`] answers, most visited first, at most `limit`.
    async fn campaign_totals(
        &self,
        workspace: WorkspaceId,
        only: Option<&[String]>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> StorageResult<Vec<(String, CampaignStats)>>;

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

    /// [`Self::begin`] for a batch group, whose transaction writes thousands of codes beside the
    /// job's other groups (MariaDB: at READ COMMITTED, so its checks of taken codes lock no gaps
    /// the other groups' inserts would wait for; see `mysql/insert.rs`).
    async fn begin_batch(&self) -> StorageResult<Box<dyn LinkTx>>;

    /// Starts a transaction that first waits for every link write in flight to end (commit or
    /// rollback) and keeps new ones waiting until it ends. Inside it, a code SQL does not have
    /// cannot belong to a write between its Redis write and its commit: `resync` deletes
    /// orphan Redis keys under it. Hold it briefly.
    async fn begin_quiesced(&self) -> StorageResult<Box<dyn LinkTx>>;

    async fn api_key_by_hash(&self, key_hash: &str) -> StorageResult<Option<ApiKey>>;

    /// A key acting in `workspace` (`None` only for [`Role::Operator`], which acts in none).
    async fn create_api_key(
        &self,
        name: &str,
        role: Role,
        workspace: Option<WorkspaceId>,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<ApiKey>;

    /// Inserts an `admin` key of the default workspace unless one with this hash exists;
    /// returns whether it was inserted.
    async fn ensure_api_key(
        &self,
        name: &str,
        key_hash: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<bool>;

    /// The keys of `workspace`, or of the whole installation (operator keys included) for `None`.
    async fn list_api_keys(&self, workspace: Option<WorkspaceId>) -> StorageResult<Vec<ApiKey>>;

    /// Marks the key revoked (keeping the first revocation time); `None` if there is no such key
    /// in `workspace` (`None`: anywhere).
    async fn revoke_api_key(
        &self,
        workspace: Option<WorkspaceId>,
        id: i64,
        now: DateTime<Utc>,
    ) -> StorageResult<Option<ApiKey>>;

    /// Gives the key its own request rate (`None`: the installation's default again).
    async fn set_api_key_rate(&self, id: i64, rate: Option<KeyRate>) -> StorageResult<()>;

    /// Every workspace, by id.
    async fn workspaces(&self) -> StorageResult<Vec<Workspace>>;

    async fn workspace(&self, id: WorkspaceId) -> StorageResult<Option<Workspace>>;

    async fn workspace_by_slug(&self, slug: &str) -> StorageResult<Option<Workspace>>;

    /// [`StorageError::Conflict`] if the slug is taken.
    async fn create_workspace(
        &self,
        slug: &str,
        name: &str,
        quotas: Quotas,
        now: DateTime<Utc>,
    ) -> StorageResult<Workspace>;

    /// `None` if there is no such workspace.
    async fn change_workspace(
        &self,
        id: WorkspaceId,
        change: &WorkspaceChange,
    ) -> StorageResult<Option<Workspace>>;

    /// Deletes a workspace with its links (and their visits and rollups), keys and webhook
    /// subscriptions, in one transaction. The caller has taken the links out of Redis.
    async fn delete_workspace(&self, id: WorkspaceId) -> StorageResult<DeletedWorkspace>;

    /// The import records (`imported_links`) of these codes, in no order.
    async fn imported_links(&self, codes: &[String]) -> StorageResult<Vec<ImportedLink>>;

    /// Records where imported links came from; a code recorded already keeps its first record.
    async fn record_imported(&self, links: &[ImportedLink]) -> StorageResult<()>;

    /// Raises the `visit_count` of `workspace`'s link `code` to at least `total` (an imported
    /// link's history), and gives a link without a last visit `at`. Another workspace's link of
    /// that code is left alone: an import never counts visits for a link it does not own.
    async fn raise_visit_count(
        &self,
        workspace: WorkspaceId,
        code: &str,
        total: i64,
        at: DateTime<Utc>,
    ) -> StorageResult<()>;

    /// Appends an audit row in a transaction of its own (a change that is not a [`LinkTx`];
    /// inside one, use [`LinkTx::append_audit`]).
    /// Not-found redirects (issue 70): `workspace`'s rows (its own, domain empty, and its
    /// domains'), or every workspace's, by workspace and domain.
    async fn not_found_redirects(
        &self,
        workspace: Option<WorkspaceId>,
    ) -> StorageResult<Vec<crate::NotFoundRedirects>>;

    /// Replaces the row of its workspace and domain; one with no URL set is deleted.
    async fn put_not_found_redirects(&self, row: &crate::NotFoundRedirects) -> StorageResult<()>;

    async fn append_audit(&self, entry: &AuditEntry) -> StorageResult<()>;

    /// Audit rows, newest first.
    async fn list_audit(&self, filter: &AuditFilter) -> StorageResult<Vec<AuditRecord>>;

    /// Every audit chain's head, and the workspaces with rows but no head.
    async fn audit_heads(&self) -> StorageResult<Vec<AuditHead>>;

    /// A chain's rows with `seq` above `after_seq`, in chain order, at most `limit`.
    async fn audit_chain(
        &self,
        workspace_id: i64,
        after_seq: i64,
        limit: u32,
    ) -> StorageResult<Vec<AuditRecord>>;

    /// Deletes audit rows older than `before_ms` (Unix ms) from the start of each chain, moving
    /// its anchor; returns how many.
    async fn prune_audit(&self, before_ms: i64) -> StorageResult<u64>;

    /// The unrevoked links, whoever owns them, whose target's host is `host` or a subdomain of
    /// it, by code after `after`, at most `limit`: found through `links.target_host`'s index.
    async fn links_on_host(
        &self,
        host: &str,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>>;

    /// The distinct host keys ([`crate::host_key`]) of the links after `after`, at most `limit`.
    async fn link_host_keys(&self, after: Option<&str>, limit: u32) -> StorageResult<Vec<String>>;

    /// [`Self::links_on_host`] for the links that can send to `host` besides their target
    /// (lifecycle URLs, rules' targets: [`LinkTx::set_destination_hosts`]).
    async fn links_sending_to_host(
        &self,
        host: &str,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<Link>>;

    /// [`Self::link_host_keys`] of the links' other destinations.
    async fn destination_host_keys(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> StorageResult<Vec<String>>;

    /// Writes the host key of up to `limit` links stored before keys existed; returns how many
    /// (0: none is left).
    async fn fill_link_host_keys(&self, limit: u32) -> StorageResult<u64>;

    /// The quarantines (held and released) under `feed` and of `workspace`, each `None`: any;
    /// newest first.
    async fn quarantines(
        &self,
        feed: Option<&str>,
        workspace: Option<WorkspaceId>,
    ) -> StorageResult<Vec<Quarantine>>;

    /// Records a visitor's abuse report.
    async fn record_abuse_report(&self, report: &AbuseReport) -> StorageResult<()>;

    /// The newest `limit` abuse reports, newest first.
    async fn abuse_reports(&self, limit: u32) -> StorageResult<Vec<AbuseReport>>;
}

/// Rows made ready for their backend's bulk insert by [`Storage::encode_rows`] (the statements
/// and their arguments, or the `COPY` data). Encoding comes before the transaction, so the write
/// connection does not wait while a chunk is put together: on SQLite, whose one writer bounds a
/// batch, that wait was ~7% of the transaction's time.
pub struct EncodedRows(Box<dyn Any + Send>);

impl EncodedRows {
    pub(super) fn new<T: Any + Send>(encoded: T) -> Self {
        Self(Box::new(encoded))
    }

    /// The backend's own form; `None` if another backend made it.
    pub(super) fn into_inner<T: Any>(self) -> Option<T> {
        self.0.downcast().ok().map(|encoded| *encoded)
    }
}

/// A write transaction on links.
#[async_trait]
pub trait LinkTx: Send {
    /// Inserts a new link; [`StorageError::Conflict`] if the code (or the slot) is taken.
    async fn insert_link(&mut self, link: &Link, slot: Option<Slot>) -> StorageResult<()>;

    /// Inserts a new link as [`insert_link`](Self::insert_link) does and, where the backend can
    /// in the same round trip, appends `audit`: `true` if it did, `false` if the caller must
    /// still append it ([`append_audit`](Self::append_audit)) before the commit.
    async fn insert_link_audited(
        &mut self,
        link: &Link,
        slot: Option<Slot>,
        audit: &AuditEntry,
    ) -> StorageResult<bool> {
        let _ = audit;
        self.insert_link(link, slot).await?;
        Ok(false)
    }

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
    /// `shortlink_core::service`); nothing else may be passed.
    async fn delete_new_links(&mut self, codes: &[String]) -> StorageResult<()>;

    /// Reads `workspace`'s link and locks it against concurrent writers until the transaction
    /// ends; `None` for a code another workspace owns, as for one nobody does.
    async fn lock_link(
        &mut self,
        workspace: WorkspaceId,
        code: &str,
    ) -> StorageResult<Option<Link>>;

    /// [`Self::lock_link`] whoever owns the code: the projection's repair of a key in doubt.
    async fn lock_link_by_code(&mut self, code: &str) -> StorageResult<Option<Link>>;

    /// Writes every mutable field of `link`, metadata included (matched by code).
    async fn update_link(&mut self, link: &Link) -> StorageResult<()>;

    /// The quarantine of the link `code` (held or released), if any.
    async fn quarantine_of(&mut self, code: &str) -> StorageResult<Option<Quarantine>>;

    /// Replaces the quarantine of `quarantine.code` with it.
    async fn put_quarantine(&mut self, quarantine: &Quarantine) -> StorageResult<()>;

    /// Forgets the quarantine of the link `code`.
    async fn delete_quarantine(&mut self, code: &str) -> StorageResult<()>;

    /// Makes `urls` the destinations of the link `code` besides its target, as the quarantine
    /// after the fact finds them (`link_destination_hosts`, by host).
    async fn set_destination_hosts(&mut self, code: &str, urls: &[String]) -> StorageResult<()>;

    /// Tells the link's workspace's webhook subscribers of `event` if this transaction commits:
    /// stored with a feed row of its own at the commit, last.
    fn stage_link_event(&mut self, event: LinkEvent);

    /// Appends an audit row in this transaction: it commits, or rolls back, with the change.
    async fn append_audit(&mut self, entry: &AuditEntry) -> StorageResult<()>;

    /// Reads whether `workspace` is live (and key `key` of it unrevoked). With `hold`, also
    /// holds both rows against change until the transaction ends: a suspend, delete or revoke
    /// then waits for this transaction, and one that committed first is what it reads. Held
    /// only for the moment before a commit: a writer must not wait behind a long transaction,
    /// and on PostgreSQL share locks taken one after the other can keep it waiting for ever.
    async fn standing(
        &mut self,
        workspace: WorkspaceId,
        key: Option<i64>,
        hold: bool,
    ) -> StorageResult<crate::Standing>;

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
    match u64::try_from(value) {
        Ok(status) if shortlink_wire::status::is_redirect_status(status) => Ok(status as u16),
        _ => Err(StorageError::Corrupt(format!(
            "redirect status {value} in the database"
        ))),
    }
}

pub(crate) fn checked_flags(value: i64) -> StorageResult<LinkFlags> {
    u32::try_from(value)
        .map(LinkFlags)
        .map_err(|_| StorageError::Corrupt(format!("link flags {value} in the database")))
}
