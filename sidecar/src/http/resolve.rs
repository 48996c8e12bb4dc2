//! `GET /api/v1/resolve/{code}`: nginx's fallback when Redis is unavailable. Answers exactly what
//! the module would (redirect, 404 or 410) from SQL, and repairs the Redis key in the background.

use super::{AppState, Error, ErrorBody, Path, Result};
use crate::service::Resolution;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

pub fn router() -> Router<AppState> {
    Router::new().route("/resolve/{code}", get(resolve))
}

/// `Cache-Control` of permanent redirects (301, 308), as the module sends by default
/// (`shortlink_cache_control permanent=...`).
pub const CACHE_CONTROL_PERMANENT: &str = "public, max-age=3600";
/// `Cache-Control` of temporary redirects (302, 307), as the module sends by default; also sent
/// with 404/410 here, which caches would otherwise be free to keep (a 404 code may be created soon).
pub const CACHE_CONTROL_TEMPORARY: &str = "no-store";

/// Resolve a code as the redirect path would.
#[utoipa::path(get, path = "/api/v1/resolve/{code}", tag = "resolve",
    params(("code" = String, Path)),
    responses(
        (status = 301, description = "redirect; `Location` is the target (plus the request's query string if the link forwards queries)"),
        (status = 302), (status = 307), (status = 308),
        (status = 404, body = ErrorBody),
        (status = 410, description = "revoked, or expired within the grace period", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn resolve(
    State(state): State<AppState>,
    Path(code): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let (mut response, cache_control) = match state.links.resolve(&code, query.as_deref()).await? {
        Resolution::Redirect { status, location } => {
            let status = StatusCode::from_u16(status).map_err(|e| Error::Internal(Box::new(e)))?;
            let location =
                HeaderValue::from_str(&location).map_err(|e| Error::Internal(Box::new(e)))?;
            let cache_control = match status.as_u16() {
                301 | 308 => CACHE_CONTROL_PERMANENT,
                _ => CACHE_CONTROL_TEMPORARY,
            };
            (
                (status, [(header::LOCATION, location)]).into_response(),
                cache_control,
            )
        }
        Resolution::NotFound => (Error::NotFound.into_response(), CACHE_CONTROL_TEMPORARY),
        Resolution::Gone => (Error::Gone.into_response(), CACHE_CONTROL_TEMPORARY),
    };
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    Ok(response)
}
