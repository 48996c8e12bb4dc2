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
//! Batches (groups of chunks, one transaction per group) are in [`batch`].
//!
//! The parts: [`create`] (one link), [`batch`] (chunks of items), [`update`] (update and revoke),
//! [`read`] (reads and the fallback's resolver), [`idempotency`] (`Idempotency-Key` claims), and
//! [`model`], the requests and outcomes they share.

use crate::issuer::{IssueError, Issuer};
use crate::projection::{Projection, ProjectionError};
use shortlink_store::{Storage, StorageError};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

pub mod batch;
pub mod click;
mod commit;
pub mod compose;
mod create;
mod idempotency;
mod model;
mod read;
mod update;
pub mod validate;

pub use idempotency::{prune_idempotency_keys_every, PRUNE_EVERY};
pub use model::{
    request_hash, Claim, Created, IdempotencyKey, ItemFailure, ItemOutcome, LinkPatch, NewLink,
    Resolution, Restore, CLI_API_KEY_ID,
};
pub use read::append_query;

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
    /// A change that is valid field by field but not as a whole (a record over its size limit,
    /// opening after its expiry).
    #[error(transparent)]
    Invalid(validate::Invalid),
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

pub struct LinkService {
    storage: Arc<dyn Storage>,
    projection: Arc<Projection>,
    issuer: Issuer,
    grace: Duration,
    /// Codes refused because Redis already held them (see `refused_code`).
    refused_codes: AtomicU64,
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
}
