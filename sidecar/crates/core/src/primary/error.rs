//! What can go wrong on the way to the Redis primary and back: the error of every projection
//! write, named for it. It lives with the connection (below the projection), since most of its
//! variants come from here.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    /// Sentinel named no primary that answers as one (a failover under way, or none possible).
    #[error("no redis primary: {0}")]
    NoPrimary(&'static str),
    /// `WAIT` counted fewer replicas than `--redis-wait-replicas` within its timeout.
    #[error("the write reached {acknowledged} replica(s) of the {required} required")]
    NotReplicated { acknowledged: u32, required: u32 },
}
