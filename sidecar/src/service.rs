//! The link write path: SQL transaction + Redis write-through, and the resolver behind nginx's
//! fallback.
//!
//! Every create, update and revoke runs:
//!
//! 1. the SQL write, inside a transaction (row locked for updates);
//! 2. the Redis write of the resulting record (`SET`, `SET ... EXAT` or the tombstone);
//! 3. the commit.
//!
//! If Redis fails, the transaction is rolled back and the caller gets `redis_unavailable`: a link
//! only in SQL would answer 404 at nginx, so it is better not to acknowledge it. If the commit fails
//! after the Redis write, the previous record is put back (best effort) and the error returned. So an
//! acknowledged write is in both stores, and a refused one in neither (up to that best effort).
//!
//! A create writes its record with `SET NX` and never overwrites one: a code Redis holds but SQL
//! does not means SQL is behind Redis (restored from an older backup), and that code may be in
//! an SMS already. It is refused, the sequence moves past it and the item gets a fresh code.
//! Batches (groups of chunks, one transaction per group) are in [`chunks`].

use crate::issuer::{IssueError, Issuer};
use crate::projection::{written_value, Projection, ProjectionError, RecordWrite};
use crate::storage::{
    self, CampaignStats, Link, LinkFilter, LinkFlags, LinkState, ListCursor, Slot, Storage,
    StorageError,
};
use crate::validate::{hex, TargetUrl};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub mod chunks;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("no such link")]
    NotFound,
    #[error("the link is revoked")]
    Revoked,
    #[error("the code is taken")]
    CodeTaken,
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Redis(#[from] ProjectionError),
    #[error(transparent)]
    Issue(IssueError),
    /// The idempotency key was used before with another request.
    #[error("the idempotency key was used with another request")]
    IdempotencyKeyReused,
}

impl From<IssueError> for ServiceError {
    fn from(error: IssueError) -> Self {
        match error {
            // The issuer's high-water mark lives in Redis: the same outage as a record write.
            IssueError::Redis(error) => ServiceError::Redis(error),
            other => ServiceError::Issue(other),
        }
    }
}

/// A validated request to create a link.
#[derive(Debug, Clone)]
pub struct NewLink {
    pub target: TargetUrl,
    /// A custom alias (already checked with `shortcode::parse_alias`), or `None` to generate.
    pub code: Option<String>,
    /// Whole seconds, in the future.
    pub expires_at: Option<DateTime<Utc>>,
    pub redirect: u16,
    pub forward_query: bool,
    /// Return the existing live link for the same URL instead of creating one.
    pub idempotent: bool,
    pub campaign: Option<String>,
    pub recipient_ref: Option<String>,
    pub tags: Vec<String>,
    /// Set by `import` only: recreate an exported link as it was (its code may have the generated
    /// shape, its expiry may be past, it may be revoked).
    pub restore: Option<Restore>,
}

/// Times of an exported link, recreated by `import`.
#[derive(Debug, Clone, Copy)]
pub struct Restore {
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An `Idempotency-Key` and whose it is (API key id; [`CLI_API_KEY_ID`] for the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub api_key_id: i64,
    pub key: String,
}

/// The owner of idempotency keys given on the command line (`import`).
pub const CLI_API_KEY_ID: i64 = 0;

/// A claimed idempotency key: its row id numbers the request's slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub batch_id: i64,
    /// First use of the key: nothing can have been committed under it yet.
    pub fresh: bool,
}

/// SHA-256 (hex) identifying a request for its idempotency key: its kind and the canonical text
/// of its first items (a streamed batch is checked item by item after those).
pub fn request_hash<'a>(kind: &str, items: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(kind.as_bytes());
    for item in items {
        hasher.update(b"\n");
        hasher.update(item);
    }
    hex(&hasher.finalize())
}

/// What became of one item of a batch. Links are boxed: a chunk keeps one outcome slot per item
/// from its plan to its answer, mostly empty until the commit, and a `Link` inline made each
/// slot ~15 times larger (~240 bytes instead of 16; 8.4 MB of the peak heap of a 300k-link
/// batch, heaptrack).
#[derive(Debug, Clone)]
pub enum ItemOutcome {
    /// Created now, or by an earlier attempt with the same idempotency key.
    Created(Box<Link>),
    /// An `idempotent` item found this live link for the same URL.
    Existing(Box<Link>),
    Failed(ItemFailure),
}

/// Why a valid item was not stored. Causes are logged where they arise, once per chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemFailure {
    CodeTaken,
    /// A retry with the same idempotency key sent another URL for this item.
    IdempotencyMismatch,
    RedisUnavailable,
    DatabaseUnavailable,
    CodesExhausted,
    Internal,
}

impl ItemFailure {
    fn of(error: &ServiceError) -> Self {
        match error {
            ServiceError::CodeTaken | ServiceError::Storage(StorageError::Conflict) => {
                ItemFailure::CodeTaken
            }
            ServiceError::IdempotencyKeyReused => ItemFailure::IdempotencyMismatch,
            ServiceError::Redis(_) => ItemFailure::RedisUnavailable,
            ServiceError::Storage(StorageError::Unavailable(_))
            | ServiceError::Issue(IssueError::Storage(StorageError::Unavailable(_))) => {
                ItemFailure::DatabaseUnavailable
            }
            ServiceError::Issue(IssueError::Exhausted(_)) => ItemFailure::CodesExhausted,
            ServiceError::NotFound
            | ServiceError::Revoked
            | ServiceError::Storage(_)
            | ServiceError::Issue(_) => ItemFailure::Internal,
        }
    }
}

/// A validated change to a link; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct LinkPatch {
    pub target: Option<TargetUrl>,
    /// `Some(None)` clears the expiry.
    pub expires_at: Option<Option<DateTime<Utc>>>,
    pub redirect: Option<u16>,
    pub forward_query: Option<bool>,
    /// `Some(None)` clears.
    pub campaign: Option<Option<String>>,
    /// `Some(None)` clears.
    pub recipient_ref: Option<Option<String>>,
    pub tags: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub enum Created {
    New(Link),
    /// An idempotent create found this live link for the same URL.
    Existing(Link),
}

/// What the redirect path answers for a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Redirect { status: u16, location: String },
    NotFound,
    Gone,
}

pub struct LinkService {
    storage: Arc<dyn Storage>,
    projection: Arc<Projection>,
    issuer: Issuer,
    grace: Duration,
    /// Codes refused because Redis already held them (see `refused_code`).
    refused_codes: AtomicU64,
}

/// Attempts at a generated code whose insert collides, in SQL or in Redis: only possible if the
/// database's sequence went back (reset, or restored from an older backup) while nothing moved
/// it past the numbers issued (the high-water mark, see [`crate::issuer`], was lost too). Each
/// refused code moves the sequence past it, and the next number is tried.
const GENERATED_CODE_ATTEMPTS: usize = 32;

/// Idempotency keys deleted per statement.
const PRUNE_CHUNK: u32 = 10_000;

/// How often `serve` prunes idempotency keys.
pub const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Prunes idempotency keys older than `retention` now and every [`PRUNE_EVERY`], until aborted.
pub fn spawn_idempotency_pruner(
    links: Arc<LinkService>,
    retention: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PRUNE_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            match links.prune_idempotency_keys(retention).await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "idempotency keys past retention pruned"),
                Err(error) => tracing::warn!(%error, "pruning idempotency keys failed"),
            }
        }
    })
}

impl LinkService {
    pub fn new(
        storage: Arc<dyn Storage>,
        projection: Arc<Projection>,
        issuer: Issuer,
        grace: Duration,
    ) -> Self {
        Self {
            storage,
            projection,
            issuer,
            grace,
            refused_codes: AtomicU64::new(0),
        }
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub fn projection(&self) -> &Arc<Projection> {
        &self.projection
    }

    pub fn scheme(&self) -> &shortcode::CodeScheme {
        self.issuer.scheme()
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// Claims `key` for a request identified by `request_hash`: refused if the key was used
    /// with another request.
    pub async fn claim(
        &self,
        key: &IdempotencyKey,
        request_hash: &str,
    ) -> Result<Claim, ServiceError> {
        let record = self
            .storage
            .claim_idempotency_key(key.api_key_id, &key.key, request_hash, storage::now())
            .await?;
        if record.request_hash != request_hash {
            return Err(ServiceError::IdempotencyKeyReused);
        }
        Ok(Claim {
            batch_id: record.id,
            fresh: record.fresh,
        })
    }

    /// Forgets idempotency keys older than `retention`, a chunk at a time (short write locks on
    /// SQLite); returns how many. A retry with a forgotten key is a new request.
    pub async fn prune_idempotency_keys(&self, retention: Duration) -> Result<u64, ServiceError> {
        let before = chrono::Duration::from_std(retention)
            .ok()
            .and_then(|retention| storage::now().checked_sub_signed(retention))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let mut pruned = 0;
        loop {
            let deleted = self
                .storage
                .prune_idempotency_keys(before, PRUNE_CHUNK)
                .await?;
            pruned += deleted;
            if deleted < u64::from(PRUNE_CHUNK) {
                return Ok(pruned);
            }
        }
    }

    /// Creates one link. With a `claim`, the link takes slot 0 of the claimed key, and a retry
    /// returns the link the first attempt created.
    pub async fn create(
        &self,
        new: NewLink,
        claim: Option<Claim>,
    ) -> Result<Created, ServiceError> {
        let slot = claim.map(|claim| Slot {
            batch_id: claim.batch_id,
            index: 0,
        });
        if let Some(claim) = claim.filter(|claim| !claim.fresh) {
            if let Some((_, link)) = self
                .storage
                .links_by_slots(claim.batch_id, 0, 0)
                .await?
                .pop()
            {
                return Ok(Created::New(link));
            }
        }
        let now = storage::now();
        let url_hash = new.target.hash();
        if new.idempotent {
            if let Some(existing) = self.find_existing(&new, &url_hash, now).await? {
                return Ok(Created::Existing(existing));
            }
        }
        let alias = new.code.clone();
        let mut link = new_link(new, String::new(), url_hash, now);
        let attempts = if alias.is_some() {
            1
        } else {
            GENERATED_CODE_ATTEMPTS
        };
        for attempt in 1..=attempts {
            // Lease before beginning: on SQLite the lease needs the (single) write connection.
            link.code = match &alias {
                Some(code) => code.clone(),
                None => self.issuer.next_code().await?,
            };
            let mut tx = self.storage.begin().await?;
            match tx.insert_link(&link, slot).await {
                Ok(()) => {}
                Err(StorageError::Conflict) => {
                    let _ = tx.rollback().await;
                    // A concurrent request with the same idempotency key may have won the slot.
                    if let Some(slot) = slot {
                        if let Some((_, won)) = self
                            .storage
                            .links_by_slots(slot.batch_id, 0, 0)
                            .await?
                            .pop()
                        {
                            return Ok(Created::New(won));
                        }
                    }
                    if alias.is_none() {
                        tracing::error!(
                            code = %link.code,
                            attempt,
                            "generated code already exists: was the sequence table reset?"
                        );
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            if self
                .publish_new_and_commit(tx, &link, alias.is_some())
                .await?
            {
                return Ok(Created::New(link));
            }
            if alias.is_some() {
                return Err(ServiceError::CodeTaken);
            }
            self.issuer.skip_past(&link.code).await?;
        }
        Err(ServiceError::CodeTaken)
    }

    /// A create found its code in Redis but not in SQL: SQL is behind Redis (restored from an
    /// older backup). The record stays as it is: it may be a link already sent.
    fn refused_code(&self, code: &str, existing: &str) {
        self.refused_codes.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            code,
            existing,
            "a new link's code is already in Redis but not in the database: the database is \
             behind Redis (restored from an older backup?). The code was refused and left as it \
             is; see docs/BACKUP.md"
        );
    }

    /// How many codes creates refused because Redis already held them ([`Self::refused_code`]).
    pub fn refused_codes(&self) -> u64 {
        self.refused_codes.load(Ordering::Relaxed)
    }

    async fn find_existing(
        &self,
        new: &NewLink,
        url_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Link>, ServiceError> {
        let candidate = match &new.code {
            // With an alias, only that alias can be "the existing link".
            Some(code) => self.storage.get_link(code).await?,
            None => {
                self.storage
                    .find_live_link(url_hash, new.recipient_ref.as_deref(), now)
                    .await?
            }
        };
        Ok(candidate.filter(|link| {
            link.state(now) == LinkState::Live && link.target == new.target.as_str()
        }))
    }

    pub async fn get(&self, code: &str) -> Result<Link, ServiceError> {
        self.storage
            .get_link(code)
            .await?
            .ok_or(ServiceError::NotFound)
    }

    pub async fn list(
        &self,
        filter: &LinkFilter,
        after: Option<&ListCursor>,
        limit: u32,
    ) -> Result<Vec<Link>, ServiceError> {
        Ok(self.storage.list_links(filter, after, limit).await?)
    }

    /// Aggregates of a campaign; `NotFound` if it has no link.
    pub async fn campaign(&self, campaign: &str) -> Result<CampaignStats, ServiceError> {
        let stats = self
            .storage
            .campaign_stats(campaign, storage::now())
            .await?;
        if stats.links == 0 {
            return Err(ServiceError::NotFound);
        }
        Ok(stats)
    }

    pub async fn update(&self, code: &str, patch: LinkPatch) -> Result<Link, ServiceError> {
        let mut tx = self.storage.begin().await?;
        let Some(current) = tx.lock_link(code).await? else {
            let _ = tx.rollback().await;
            return Err(ServiceError::NotFound);
        };
        if current.revoked_at.is_some() {
            let _ = tx.rollback().await;
            return Err(ServiceError::Revoked);
        }
        let mut next = current.clone();
        if let Some(target) = patch.target {
            next.url_hash = target.hash();
            next.target = target.into_string();
        }
        if let Some(expires_at) = patch.expires_at {
            next.expires_at = expires_at;
        }
        if let Some(redirect) = patch.redirect {
            next.redirect = redirect;
        }
        if let Some(forward) = patch.forward_query {
            next.flags.set_forward_query(forward);
        }
        if let Some(campaign) = patch.campaign {
            next.campaign = campaign;
        }
        if let Some(recipient_ref) = patch.recipient_ref {
            next.recipient_ref = recipient_ref;
        }
        if let Some(tags) = patch.tags {
            next.tags = tags;
        }
        next.updated_at = storage::now().max(current.updated_at);
        tx.update_link(&next).await?;
        self.publish_and_commit(tx, &next, Some(&current)).await?;
        Ok(next)
    }

    /// Revokes a link for good. Revoking a revoked link changes nothing in SQL, rewrites the
    /// tombstone (repairing Redis if needed) and returns the link as it is.
    pub async fn revoke(&self, code: &str) -> Result<Link, ServiceError> {
        let mut tx = self.storage.begin().await?;
        let Some(current) = tx.lock_link(code).await? else {
            let _ = tx.rollback().await;
            return Err(ServiceError::NotFound);
        };
        let mut next = current.clone();
        if current.revoked_at.is_none() {
            let now = storage::now().max(current.updated_at);
            next.revoked_at = Some(now);
            next.updated_at = now;
            tx.update_link(&next).await?;
        }
        self.publish_and_commit(tx, &next, Some(&current)).await?;
        Ok(next)
    }

    /// The write-through of a new link: its record goes in with `SET NX`, so a create never
    /// overwrites a record (a code in Redis but not in SQL means SQL is behind Redis). Returns
    /// `false`, rolled back, when Redis holds the code already; an `explicit` code (alias,
    /// import) whose record is there exactly as it would be written is accepted.
    async fn publish_new_and_commit(
        &self,
        tx: Box<dyn storage::LinkTx>,
        link: &Link,
        explicit: bool,
    ) -> Result<bool, ServiceError> {
        let write = RecordWrite::for_link(link, storage::now(), self.grace);
        let ours = match self.projection.create(&write).await {
            Ok(None) => true,
            Ok(Some(existing)) if explicit && Some(existing.as_str()) == written_value(&write) => {
                false
            }
            Ok(Some(existing)) => {
                let _ = tx.rollback().await;
                self.refused_code(&link.code, &existing);
                return Ok(false);
            }
            Err(error) => {
                tracing::warn!(code = %link.code, %error, "redis write failed; rolling back");
                if let Err(rollback) = tx.rollback().await {
                    tracing::warn!(code = %link.code, error = %rollback, "rollback failed");
                }
                return Err(error.into());
            }
        };
        if let Err(error) = tx.commit().await {
            let written: Vec<(&str, &str)> = written_value(&write)
                .filter(|_| ours)
                .map(|value| (write.key(), value))
                .into_iter()
                .collect();
            if let Err(redis) = self.projection.delete_if_unchanged(&written).await {
                tracing::error!(
                    code = %link.code,
                    %error,
                    %redis,
                    "commit failed after the redis write, and redis could not be restored: \
                     run `shortlink-sidecar resync`"
                );
            }
            return Err(error.into());
        }
        Ok(true)
    }

    async fn publish_and_commit(
        &self,
        tx: Box<dyn storage::LinkTx>,
        link: &Link,
        previous: Option<&Link>,
    ) -> Result<(), ServiceError> {
        let now = storage::now();
        let write = RecordWrite::for_link(link, now, self.grace);
        if let Err(error) = self.projection.apply(std::slice::from_ref(&write)).await {
            tracing::warn!(code = %link.code, %error, "redis write failed; rolling back");
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(code = %link.code, error = %rollback, "rollback failed");
            }
            return Err(error.into());
        }
        if let Err(error) = tx.commit().await {
            let restore = RecordWrite::restore(&link.code, previous, now, self.grace);
            if let Err(redis) = self.projection.apply(&[restore]).await {
                tracing::error!(
                    code = %link.code,
                    %error,
                    %redis,
                    "commit failed after the redis write, and redis could not be restored: \
                     run `shortlink-sidecar resync`"
                );
            }
            return Err(error.into());
        }
        Ok(())
    }

    /// What nginx would answer for `code` (and the request's raw `query`), from SQL. Repairs the
    /// Redis key in the background if it is missing.
    pub async fn resolve(
        &self,
        code: &str,
        query: Option<&str>,
    ) -> Result<Resolution, ServiceError> {
        if !self.issuer.scheme().shape(code.as_bytes()).may_exist() {
            return Ok(Resolution::NotFound);
        }
        let Some(link) = self.storage.get_link(code).await? else {
            return Ok(Resolution::NotFound);
        };
        let now = storage::now();
        let write = RecordWrite::for_link(&link, now, self.grace);
        let resolution = match link.state(now) {
            LinkState::Live => Resolution::Redirect {
                status: link.redirect,
                location: match query {
                    Some(query) if link.flags.forward_query() => append_query(&link.target, query),
                    _ => link.target.clone(),
                },
            },
            LinkState::Revoked => Resolution::Gone,
            // 410 while the key would still exist (expiry + grace), then 404, as nginx answers.
            LinkState::Expired if matches!(write, RecordWrite::Delete { .. }) => {
                Resolution::NotFound
            }
            LinkState::Expired => Resolution::Gone,
        };
        let projection = Arc::clone(&self.projection);
        tokio::spawn(async move {
            if let Err(error) = projection.repair(&write).await {
                tracing::debug!(%error, "redis repair after fallback resolve failed");
            }
        });
        Ok(resolution)
    }
}

/// The link a new item becomes.
fn new_link(new: NewLink, code: String, url_hash: String, now: DateTime<Utc>) -> Link {
    let (created_at, revoked_at) = match new.restore {
        Some(restore) => (restore.created_at, restore.revoked_at),
        None => (now, None),
    };
    Link {
        code,
        target: new.target.into_string(),
        url_hash,
        redirect: new.redirect,
        flags: LinkFlags::with_forward_query(new.forward_query),
        created_at,
        updated_at: revoked_at.unwrap_or(created_at).max(created_at),
        expires_at: new.expires_at,
        revoked_at,
        visit_count: 0,
        last_visit_at: None,
        campaign: new.campaign,
        recipient_ref: new.recipient_ref,
        tags: new.tags,
    }
}

/// Appends a request's query string to a target, before its fragment.
pub fn append_query(target: &str, query: &str) -> String {
    if query.is_empty() {
        return target.to_owned();
    }
    let (base, fragment) = match target.find('#') {
        Some(at) => target.split_at(at),
        None => (target, ""),
    };
    let separator = if base.ends_with('?') || base.ends_with('&') {
        ""
    } else if base.contains('?') {
        "&"
    } else {
        "?"
    };
    format!("{base}{separator}{query}{fragment}")
}

#[cfg(test)]
mod tests {
    use super::append_query;

    #[test]
    fn query_forwarding() {
        assert_eq!(append_query("https://a.example/", ""), "https://a.example/");
        assert_eq!(
            append_query("https://a.example/", "x=1"),
            "https://a.example/?x=1"
        );
        assert_eq!(
            append_query("https://a.example/?a=b", "x=1"),
            "https://a.example/?a=b&x=1"
        );
        assert_eq!(
            append_query("https://a.example/?", "x=1"),
            "https://a.example/?x=1"
        );
        assert_eq!(
            append_query("https://a.example/p#f", "x=1"),
            "https://a.example/p?x=1#f"
        );
        assert_eq!(
            append_query("https://a.example/?a#f?g", "x"),
            "https://a.example/?a&x#f?g"
        );
    }
}
