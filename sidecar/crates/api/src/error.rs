//! The API's one error type: every failure a handler can return, its status code, and its JSON
//! body `{"error":{"code":"...","message":"..."}}`.
//!
//! Client errors say what was wrong. Internal errors are logged with their cause and answered with
//! a generic message: driver and Redis errors never reach the client.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use shortlink_core::projection::ProjectionError;
use shortlink_core::service::{ServiceError, Stop};
use shortlink_model::link::Invalid;
use shortlink_model::validate::UrlError;
use shortlink_store::StorageError;
use std::borrow::Cow;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Refused whole with its own status: 400/415/422 for a body, query or path the API cannot
    /// read, 403 for a feature the deployment has off.
    #[error("{message}")]
    Request {
        status: StatusCode,
        code: &'static str,
        message: String,
    },
    /// 422: the request was read but a value is not acceptable.
    #[error("{message}")]
    Invalid {
        code: &'static str,
        message: Cow<'static, str>,
    },
    #[error("invalid url: {0}")]
    Url(#[from] UrlError),
    #[error("missing api key")]
    MissingApiKey,
    #[error("invalid api key")]
    InvalidApiKey,
    #[error("revoked api key")]
    RevokedApiKey,
    /// 403: a valid key whose role does not cover this route (e.g. a `resolve` key creating).
    #[error("api key role {0} does not allow this route")]
    Forbidden(shortlink_store::Role),
    /// 403: the key's workspace is suspended by the operator.
    #[error("workspace suspended")]
    WorkspaceSuspended,
    #[error("no such link")]
    NotFound,
    #[error("the link is revoked")]
    Revoked,
    /// Resolve only: the link is revoked, or expired within the grace period.
    #[error("the link is gone")]
    Gone,
    #[error("the code is taken")]
    CodeTaken,
    #[error("database unavailable")]
    DatabaseUnavailable(#[source] StorageError),
    #[error("redis unavailable")]
    RedisUnavailable(#[source] ProjectionError),
    #[error("no codes left")]
    CodesExhausted(#[source] shortcode::SchemeError),
    /// 429: past the key's rate or a workspace's quota ([`crate::throttle`]), with
    /// `Retry-After` and the `RateLimit-Policy` / `RateLimit` fields.
    #[error("{}", .0.message)]
    RateLimited(Box<crate::throttle::Throttled>),
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `invalid_url`, `unsupported_scheme`, `url_too_long`,
    /// `own_domain`, `host_not_allowed`, `invalid_code`, `invalid_expiry`, `invalid_redirect`,
    /// `malformed_json`, `invalid_body`, `unsupported_media_type`, `payload_too_large`,
    /// `invalid_query`, `invalid_cursor`, `empty_patch`, `invalid_header`, `missing_api_key`,
    /// `invalid_api_key`, `revoked_api_key`, `forbidden`, `not_found`, `method_not_allowed`, `link_revoked`,
    /// `gone`, `code_taken`, `database_unavailable`, `redis_unavailable`, `codes_exhausted`,
    /// `private_address`, `invalid_secret`, `invalid_name`, `invalid_filter`, `invalid_batch`,
    /// `invalid_replay`, `unknown_failure`, `rate_limited`, `quota_exceeded`, `unsafe_target`
    /// (a threat feed lists the target; the message names the feed and its entry), `internal`.
    pub code: String,
    /// For people; may change.
    pub message: String,
}

/// 422 `unsafe_target`: a threat feed (or the shorteners' list, or a brand's look-alike) lists
/// the target; the message names the feed and the entry it matched.
pub fn unsafe_target(refusal: &shortlink_threats::Refusal) -> Error {
    Error::invalid(
        "unsafe_target",
        format!(
            "the target is listed by the threat feed {:?} (entry {:?}); nothing was stored",
            refusal.feed, refusal.entry
        ),
    )
}

impl Error {
    pub fn invalid(code: &'static str, message: impl Into<Cow<'static, str>>) -> Self {
        Error::Invalid {
            code,
            message: message.into(),
        }
    }

    /// 400 `invalid_query`: a query parameter out of its bounds or shape, the message naming it.
    pub fn bad_query(message: impl Into<String>) -> Self {
        Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_query",
            message: message.into(),
        }
    }

    pub fn status_code(&self) -> StatusCode {
        match self {
            Error::Request { status, .. } => *status,
            Error::Invalid { .. } | Error::Url(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Error::MissingApiKey | Error::InvalidApiKey | Error::RevokedApiKey => {
                StatusCode::UNAUTHORIZED
            }
            Error::Forbidden(_) | Error::WorkspaceSuspended => StatusCode::FORBIDDEN,
            Error::NotFound => StatusCode::NOT_FOUND,
            Error::Revoked | Error::Gone => StatusCode::GONE,
            Error::CodeTaken => StatusCode::CONFLICT,
            Error::DatabaseUnavailable(_)
            | Error::RedisUnavailable(_)
            | Error::CodesExhausted(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Error::Request { code, .. } | Error::Invalid { code, .. } => code,
            Error::Url(e) => e.code(),
            Error::MissingApiKey => "missing_api_key",
            Error::InvalidApiKey => "invalid_api_key",
            Error::RevokedApiKey => "revoked_api_key",
            Error::Forbidden(_) => "forbidden",
            Error::WorkspaceSuspended => "workspace_suspended",
            Error::NotFound => "not_found",
            Error::Revoked => "link_revoked",
            Error::Gone => "gone",
            Error::CodeTaken => "code_taken",
            Error::DatabaseUnavailable(_) => "database_unavailable",
            Error::RedisUnavailable(_) => "redis_unavailable",
            Error::CodesExhausted(_) => "codes_exhausted",
            Error::RateLimited(throttled) => throttled.code,
            Error::Internal(_) => "internal",
        }
    }

    pub fn message(&self) -> String {
        match self {
            Error::Request { message, .. } => message.clone(),
            Error::Invalid { message, .. } => message.to_string(),
            Error::Url(e) => e.to_string(),
            Error::MissingApiKey => "send an API key as `Authorization: Bearer <key>`".into(),
            Error::InvalidApiKey => "the API key is not valid".into(),
            Error::RevokedApiKey => "the API key has been revoked".into(),
            Error::Forbidden(role) => format!("this key {}", role.scope()),
            Error::WorkspaceSuspended => {
                "this key's workspace is suspended; ask the installation's operator".into()
            }
            Error::NotFound => "no link has this code".into(),
            Error::Revoked => "the link is revoked and cannot change".into(),
            Error::Gone => "the link has expired or was revoked".into(),
            Error::CodeTaken => "a link with this code already exists".into(),
            Error::DatabaseUnavailable(_) => "the database is unavailable; retry later".into(),
            Error::RedisUnavailable(_) => {
                "redis is unavailable, nothing was stored; retry later".into()
            }
            Error::CodesExhausted(_) => "no generated codes are left at this code length".into(),
            Error::RateLimited(throttled) => throttled.message.clone(),
            Error::Internal(_) => "internal error".into(),
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status_code();
        shortlink_core::metrics::api_error(self.code());
        match &self {
            Error::Internal(cause) => tracing::error!(error = %cause, "internal error"),
            Error::DatabaseUnavailable(cause) => {
                tracing::warn!(error = %cause, "database unavailable")
            }
            Error::RedisUnavailable(cause) => tracing::warn!(error = %cause, "redis unavailable"),
            Error::CodesExhausted(cause) => tracing::error!(error = %cause, "codes exhausted"),
            _ => {}
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code().to_owned(),
                message: self.message(),
            },
        };
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Error::RateLimited(throttled) = &self {
            throttled.apply(response.headers_mut());
        }
        response
    }
}

impl From<StorageError> for Error {
    fn from(error: StorageError) -> Self {
        match error {
            StorageError::Unavailable(_) => Error::DatabaseUnavailable(error),
            StorageError::Conflict => Error::CodeTaken,
            other => Error::Internal(Box::new(other)),
        }
    }
}

impl From<shortlink_messaging::Error> for Error {
    fn from(error: shortlink_messaging::Error) -> Self {
        match error {
            shortlink_messaging::Error::Invalid { code, message } => Error::invalid(code, message),
            shortlink_messaging::Error::Storage(error) => error.into(),
            shortlink_messaging::Error::Internal(error) => Error::Internal(error),
        }
    }
}

impl From<Invalid> for Error {
    fn from(invalid: Invalid) -> Self {
        match invalid {
            Invalid::Field { code, message } => Error::Invalid { code, message },
            Invalid::Url(error) => Error::Url(error),
            Invalid::NoRandomness(error) => Error::Internal(Box::new(error)),
        }
    }
}

impl From<ServiceError> for Error {
    fn from(error: ServiceError) -> Self {
        use shortlink_core::issuer::IssueError;
        match error {
            ServiceError::NotFound => Error::NotFound,
            ServiceError::Invalid(invalid) => invalid.into(),
            ServiceError::Revoked => Error::Revoked,
            ServiceError::CodeTaken => Error::CodeTaken,
            ServiceError::Storage(e) | ServiceError::Issue(IssueError::Storage(e)) => e.into(),
            ServiceError::Redis(e) | ServiceError::Issue(IssueError::Redis(e)) => {
                Error::RedisUnavailable(e)
            }
            ServiceError::Issue(IssueError::Exhausted(e)) => Error::CodesExhausted(e),
            ServiceError::Quota(error) => error.into(),
            ServiceError::IdempotencyKeyReused => Error::Request {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                code: "idempotency_key_reused",
                message: "this Idempotency-Key was used with another request".into(),
            },
            ServiceError::Stopped(stop) => stop.into(),
            ServiceError::UnsafeTarget(refusal) => unsafe_target(&refusal),
        }
    }
}

/// Why a job stopped, as its later items answer it: the codes a request of the key would get
/// now, and a message saying that nothing from this item on was created.
impl From<Stop> for Error {
    fn from(stop: Stop) -> Self {
        let (status, code, message) = match stop {
            Stop::KeyRevoked => (
                StatusCode::UNAUTHORIZED,
                "revoked_api_key",
                "the API key was revoked while this request ran: this item and those after it \
                 were not created",
            ),
            Stop::WorkspaceSuspended => (
                StatusCode::FORBIDDEN,
                "workspace_suspended",
                "the workspace was suspended while this request ran: this item and those after it \
                 were not created",
            ),
            Stop::WorkspaceDeleted => (
                StatusCode::FORBIDDEN,
                "workspace_deleted",
                "the workspace was deleted while this request ran: this item and those after it \
                 were not created",
            ),
        };
        Error::Request {
            status,
            code,
            message: message.into(),
        }
    }
}

impl From<JsonRejection> for Error {
    fn from(rejection: JsonRejection) -> Self {
        let (code, status) = match &rejection {
            JsonRejection::JsonSyntaxError(_) => ("malformed_json", StatusCode::BAD_REQUEST),
            JsonRejection::JsonDataError(_) => ("invalid_body", StatusCode::UNPROCESSABLE_ENTITY),
            JsonRejection::MissingJsonContentType(_) => {
                ("unsupported_media_type", StatusCode::UNSUPPORTED_MEDIA_TYPE)
            }
            JsonRejection::BytesRejection(_)
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                ("payload_too_large", StatusCode::PAYLOAD_TOO_LARGE)
            }
            _ => ("invalid_body", rejection.status()),
        };
        let message = match code {
            "unsupported_media_type" => "send the body as `Content-Type: application/json`".into(),
            "payload_too_large" => "the request body is too large".into(),
            _ => bounded(rejection.body_text()),
        };
        Error::Request {
            status,
            code,
            message,
        }
    }
}

impl From<QueryRejection> for Error {
    fn from(rejection: QueryRejection) -> Self {
        Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_query",
            message: bounded(rejection.body_text()),
        }
    }
}

impl From<PathRejection> for Error {
    fn from(_: PathRejection) -> Self {
        // Paths that cannot be read name no link.
        Error::NotFound
    }
}

/// Keeps echoed parser messages short (they may quote the input).
fn bounded(mut message: String) -> String {
    const MAX: usize = 300;
    if message.len() > MAX {
        let mut end = MAX;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}
