//! What can stop a consumer step.

use shortlink_store::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Finding the primary through Sentinel failed.
    #[error("redis: {0}")]
    Primary(#[from] shortlink_core::projection::ProjectionError),
    #[error("unexpected reply to {0}")]
    Reply(&'static str),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("shutting down")]
    Shutdown,
    #[error("a consumer task stopped: {0}")]
    Task(#[from] tokio::task::JoinError),
}
