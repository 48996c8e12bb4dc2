//! The HTTP API: `/api/v1/*` behind API-key auth, `/healthz` and `/readyz` open.

mod auth;
mod batch;
mod campaigns;
mod early_close;
mod error;
mod health;
pub(crate) mod links;
mod resolve;
mod stats;

pub use auth::{generate_api_key, hash_api_key, ApiKeyId};
pub(crate) use batch::failure_error;
pub use error::{Error, ErrorBody, ErrorDetail};

use crate::service::LinkService;
use crate::validate::{self, UrlPolicy};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Largest request body accepted: a URL of the maximum length plus JSON fields fits many times over.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Request headers set by the internal nginx API server (docs/ARCHITECTURE.md, "The domain pool").
pub const PUBLIC_BASE_HEADER: &str = "x-shortlink-public-base";
pub const POOL_HEADER: &str = "x-shortlink-pool";

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub links: Arc<LinkService>,
    pub settings: Arc<HttpSettings>,
    /// Visit statistics (issue 4).
    pub analytics: crate::analytics::Analytics,
}

/// Request-handling settings derived from the configuration once, at start-up.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub url_policy: UrlPolicy,
    /// Fallback base of `short_url`, without a trailing slash.
    pub public_base_url: Option<String>,
    /// Fallback short domains, normalised.
    pub short_domains: Vec<String>,
}

pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .merge(links::router())
        .merge(batch::router())
        .merge(campaigns::router())
        .merge(resolve::router())
        .merge(stats::router())
        .route("/openapi.json", get(openapi))
        // Its own fallback, so that unknown /api/v1 paths are behind auth too.
        .fallback(|| async { Error::NotFound })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ));
    Router::new()
        .nest("/api/v1", api)
        .merge(health::router())
        .fallback(|| async { Error::NotFound })
        .method_not_allowed_fallback(|| async {
            Error::Request {
                status: StatusCode::METHOD_NOT_ALLOWED,
                code: "method_not_allowed",
                message: "this method is not allowed on this path".into(),
            }
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(
            early_close::close_after_client_error,
        ))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &axum::extract::Request| {
                    // The path only: query strings may carry recipients' data.
                    tracing::info_span!(
                        "request",
                        method = %request.method(),
                        path = %request.uri().path(),
                        api_key = tracing::field::Empty,
                    )
                })
                // 5xx answers (503 while Redis or the database is down) are logged where they arise.
                .on_failure(
                    tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG),
                ),
        )
        .with_state(state)
}

/// The OpenAPI document, generated from the handlers and types.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "shortlink sidecar",
        description = "Issues short codes for SMS campaigns; SQL is the source of truth, Redis the \
                       projection nginx reads. Every /api/v1 route needs `Authorization: Bearer <key>`."
    ),
    paths(
        links::create_link,
        links::list_links,
        links::get_link,
        links::update_link,
        links::revoke_link,
        batch::create_batch,
        campaigns::get_campaign,
        resolve::resolve,
        stats::link_stats,
        stats::global_stats,
        health::healthz,
        health::readyz,
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&BearerAuth),
    security(("api_key" = [])),
    tags((name = "links"), (name = "resolve"), (name = "stats"), (name = "health"))
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

async fn openapi() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(ApiDoc::openapi())
}

/// `axum::Json` whose rejections become [`Error`]s with a JSON body.
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(Error))]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `axum::extract::Query` whose rejections become [`Error`]s.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(Error))]
pub struct Query<T>(pub T);

/// `axum::extract::Path` whose rejections become [`Error`]s.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(Error))]
pub struct Path<T>(pub T);

/// The request's view of the domain pool: where short URLs live and which hosts are ours.
#[derive(Debug, Clone)]
pub struct DomainContext {
    pub public_base: Option<String>,
    /// The pool from the request header together with `--short-domains`: a target on any of our
    /// domains would loop.
    pub own_domains: Vec<String>,
}

impl DomainContext {
    pub fn short_url(&self, code: &str) -> Option<String> {
        self.public_base
            .as_ref()
            .map(|base| format!("{base}/{code}"))
    }
}

impl FromRequestParts<AppState> for DomainContext {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        let header = |name: &str| -> Result<Option<&str>> {
            match parts.headers.get(name) {
                None => Ok(None),
                Some(value) => value.to_str().map(Some).map_err(|_| Error::Request {
                    status: StatusCode::BAD_REQUEST,
                    code: "invalid_header",
                    message: format!("the {name} header is not ASCII"),
                }),
            }
        };
        let public_base = match header(PUBLIC_BASE_HEADER)? {
            Some(raw) => Some(validate::public_base(raw).map_err(|reason| Error::Request {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_header",
                message: format!("the {PUBLIC_BASE_HEADER} header {reason}"),
            })?),
            None => state.settings.public_base_url.clone(),
        };
        let mut own_domains = state.settings.short_domains.clone();
        if let Some(pool) = header(POOL_HEADER)? {
            let hosts: Vec<&str> = pool.split_ascii_whitespace().collect();
            let pool = validate::normalize_hosts(&hosts).map_err(|entry| Error::Request {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_header",
                message: format!("the {POOL_HEADER} header has {entry:?}, not a host name"),
            })?;
            own_domains.extend(pool);
        }
        Ok(DomainContext {
            public_base,
            own_domains,
        })
    }
}
