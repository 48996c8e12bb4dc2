//! What a batch item that failed answers (the console's bulk upload shows the same).

use crate::error::Error;
use axum::http::StatusCode;
use shortlink_core::service::ItemFailure;

/// The error a failed item answers.
pub fn failure_error(failure: ItemFailure) -> Error {
    let (status, code, message) = match failure {
        ItemFailure::CodeTaken => return Error::CodeTaken,
        ItemFailure::IdempotencyMismatch => (
            StatusCode::CONFLICT,
            "idempotency_mismatch",
            "this item differs from the one sent first with this Idempotency-Key",
        ),
        ItemFailure::RedisUnavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "redis_unavailable",
            "redis is unavailable, this item was not stored; retry later",
        ),
        ItemFailure::DatabaseUnavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            "the database is unavailable, this item was not stored; retry later",
        ),
        ItemFailure::CodesExhausted => (
            StatusCode::SERVICE_UNAVAILABLE,
            "codes_exhausted",
            "no generated codes are left at this code length",
        ),
        ItemFailure::QuotaExceeded => (
            StatusCode::TOO_MANY_REQUESTS,
            "quota_exceeded",
            "the workspace's links per UTC day are used up: this item and those after it were \
             not created",
        ),
        ItemFailure::Stopped(stop) => return stop.into(),
        ItemFailure::UnsafeTarget(refusal) => return crate::error::unsafe_target(&refusal),
        ItemFailure::Internal => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        ),
    };
    Error::Request {
        status,
        code,
        message: message.into(),
    }
}
