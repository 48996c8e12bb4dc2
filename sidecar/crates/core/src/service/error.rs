//! The write path's one error type.

use crate::issuer::IssueError;
use crate::limits::QuotaError;
use crate::projection::ProjectionError;
use shortlink_model::link::Invalid;
use shortlink_store::{Standing, StorageError};
use shortlink_threats::Refusal;
use std::sync::Arc;

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
    Invalid(Invalid),
    /// The workspace's quota does not admit the links (or could not be read).
    #[error(transparent)]
    Quota(#[from] QuotaError),
    /// The idempotency key was used before with another request.
    #[error("the idempotency key was used with another request")]
    IdempotencyKeyReused,
    /// A job's key or workspace no longer stands ([`super::authority`]).
    #[error(transparent)]
    Stopped(Stop),
    /// The target is listed by a threat feed ([`super::screen`]): nothing was stored.
    #[error("the target is listed by {}: {}", .0.feed, .0.entry)]
    UnsafeTarget(Arc<Refusal>),
}

impl ServiceError {
    /// A lock wait that ran out, or a deadlock ([`StorageError::lock_ran_out`]): worth writing
    /// again, not a database that is down.
    pub(crate) fn lock_ran_out(&self) -> bool {
        match self {
            ServiceError::Storage(error) | ServiceError::Issue(IssueError::Storage(error)) => {
                error.lock_ran_out()
            }
            _ => false,
        }
    }
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

/// Why a job stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    #[error("the job's key was revoked")]
    KeyRevoked,
    #[error("the job's workspace was suspended")]
    WorkspaceSuspended,
    #[error("the job's workspace was deleted")]
    WorkspaceDeleted,
}

impl Stop {
    /// Why a transaction that read `standing` must not write; `None` when it may.
    pub fn of(standing: Standing) -> Option<Stop> {
        match standing {
            Standing::Live => None,
            Standing::KeyRevoked => Some(Stop::KeyRevoked),
            Standing::WorkspaceSuspended => Some(Stop::WorkspaceSuspended),
            Standing::WorkspaceDeleted => Some(Stop::WorkspaceDeleted),
        }
    }
}
