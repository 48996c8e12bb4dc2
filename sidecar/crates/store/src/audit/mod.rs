//! The audit log (issue 53): one append-only row per change, chained per workspace by SHA-256 so
//! that a row deleted, edited or inserted in SQL is found by [`verify`].
//!
//! Recording: build an [`AuditEntry`] and append it with [`LinkTx::append_audit`](crate::LinkTx)
//! inside the transaction of the change it records (so one is never stored without the other),
//! or with [`Storage::append_audit`](crate::Storage) for a change that is not a link transaction.
//! What the hash covers and how retention keeps the chain checkable: [`hash`], docs/SECURITY.md.

mod changes;
pub(crate) mod entry;
pub mod hash;
mod verify;

pub use changes::{link_changes, Changes, CHANGED, REDACTED};
pub use entry::{
    Actor, ActorKind, AuditEntry, AuditFilter, AuditHead, AuditRecord, Origin, RequestInfo,
    DEFAULT_WORKSPACE, INSTALLATION_CHAIN,
};
pub use verify::{verify, ChainReport, Problem};
