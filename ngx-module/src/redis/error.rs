//! How a Redis request failed, as every part of the client reports it.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisError {
    /// No connection could be had: connect failed, or still backing off after failures.
    Unavailable,
    /// The connection broke before the reply arrived.
    Closed,
    Timeout,
    /// The peer does not speak RESP (or replied to nothing).
    Protocol,
    /// Redis answered with an error reply.
    ErrorReply,
    /// A reply that is not a readable link record.
    BadValue,
    /// No record and no projection marker: Redis lost its data and the sidecar has not
    /// rebuilt it yet, so "no such key" says nothing about the code.
    Unprojected,
    /// No record, and the projection marker does not vouch for this worker's code scheme (it
    /// names another, or none while the code's check character failed here): the code may be
    /// a link issued under the sidecar's scheme, so "no such key" is not a 404.
    SchemeMismatch,
    /// No record on a Redis that may lag behind the one the sidecar writes (a replica, with
    /// `shortlink_miss_fallback on`): the link may have been created a moment ago.
    NotYetThere,
}

impl RedisError {
    pub fn is_timeout(self) -> bool {
        self == RedisError::Timeout
    }
}

impl fmt::Display for RedisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RedisError::Unavailable => "redis unavailable",
            RedisError::Closed => "redis connection closed",
            RedisError::Timeout => "redis timed out",
            RedisError::Protocol => "redis protocol error",
            RedisError::ErrorReply => "redis error reply",
            RedisError::BadValue => "unreadable value",
            RedisError::Unprojected => "redis holds no projection marker",
            RedisError::SchemeMismatch => "the projection marker names another code scheme",
            RedisError::NotYetThere => "no record yet on this redis",
        })
    }
}
