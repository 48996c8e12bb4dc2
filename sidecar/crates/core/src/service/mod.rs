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
//! [`model`], the requests and outcomes they share; [`screen`], the threat feeds' check of
//! every new target; [`LinkService`] (`links`), what they are
//! methods of, and [`ServiceError`] (`error`) sit below them all.

pub mod accept;
pub mod authority;
pub mod batch;
pub mod click;
mod commit;
pub mod compose;
mod create;
pub mod destinations;
mod error;
mod host_lists;
mod idempotency;
mod in_flight;
pub mod keys;
mod links;
mod model;
mod quarantine;
mod read;
mod requests;
mod rescreen;
mod screen;
mod subjects;
pub mod target_lists;
pub mod turn;
mod update;
pub mod workspaces;

pub use crate::projection::slugs;
pub use authority::{Authority, Job};
pub use click::append_query;
pub use error::{ServiceError, Stop};
pub use host_lists::MAX_HOSTS as MAX_LIST_HOSTS;
pub use idempotency::{prune_idempotency_keys_every, PRUNE_EVERY};
pub use links::{LinkService, OwnDomains};
pub use model::{
    request_hash, Claim, Created, IdempotencyKey, ItemFailure, ItemOutcome, LinkPatch, NewLink,
    Resolution, Restore, CLI_API_KEY_ID,
};
pub use requests::{CreateLinkRequest, UpdateLinkRequest};
pub use turn::Turn;
pub use workspaces::WorkspaceError;
