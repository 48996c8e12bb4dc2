//! The HTTP API: `/api/v1/*` behind API-key auth, `/healthz` and `/readyz` open.

mod auth;
mod batch;
mod campaigns;
pub(crate) mod compose;
pub(crate) mod domains;
mod early_close;
mod error;
mod health;
pub(crate) mod links;
mod metrics;
pub(crate) mod preview;
pub(crate) mod qr;
mod resolve;
pub(crate) mod stats;
mod visits;
mod webhooks;

pub use auth::{generate_api_key, hash_api_key, ApiKeyId};
pub(crate) use batch::failure_error;
pub use error::{Error, ErrorBody, ErrorDetail};

use crate::domains::IssuingBases;
use crate::schema::SchemaFixes;
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
    pub analytics: crate::visits::Analytics,
    /// Per-domain health (issue 20): fed by requests, checked by the job.
    pub domains: Arc<crate::domains::health::DomainHealth>,
    /// Click webhook subscriptions and the visit feed (issue 36).
    pub webhooks: Arc<crate::webhooks::WebhookService>,
}

/// Request-handling settings derived from the configuration once, at start-up.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub url_policy: UrlPolicy,
    /// Fallback base of `short_url`, without a trailing slash.
    pub public_base_url: Option<String>,
    /// Fallback short domains, normalised.
    pub short_domains: Vec<String>,
    /// The client's country, for rules the fallback and the preview evaluate.
    pub countries: Arc<crate::visits::countries::Countries>,
}

/// The whole app: the API, `pages` (the operator console: HTML for people, built above this
/// layer), health and metrics, and what every request goes through.
pub fn router(state: AppState, pages: Router<AppState>) -> Router {
    let api = Router::new()
        .merge(links::router())
        .merge(preview::router())
        .merge(batch::router())
        .merge(compose::router())
        .merge(campaigns::router())
        .merge(domains::router())
        .merge(resolve::router())
        .merge(stats::router())
        .merge(qr::router())
        .merge(visits::router())
        .merge(webhooks::router())
        .route("/openapi.json", get(openapi))
        // Its own fallback, so that unknown /api/v1 paths are behind auth too.
        .fallback(|| async { Error::NotFound })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ))
        .route_layer(axum::middleware::from_fn(crate::metrics::track));
    crate::metrics::install();
    Router::new()
        .nest("/api/v1", api)
        // Not API: HTML for people, outside the OpenAPI document and the API-key layer (the
        // console has sessions of its own).
        .merge(pages)
        .merge(
            health::router()
                .route("/metrics", get(metrics::serve))
                .route_layer(axum::middleware::from_fn(crate::metrics::track)),
        )
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
        preview::preview,
        batch::create_batch,
        compose::compose,
        campaigns::get_campaign,
        domains::list_domains,
        domains::get_domain,
        resolve::resolve,
        stats::link_stats,
        stats::global_stats,
        qr::link_qr,
        visits::visit_feed,
        webhooks::create_webhook,
        webhooks::list_webhooks,
        webhooks::get_webhook,
        webhooks::replace_webhook,
        webhooks::delete_webhook,
        webhooks::webhook_failures,
        webhooks::replay_webhook,
        health::healthz,
        health::readyz,
    ),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        compose::RecipientResult,
        compose::SummaryLine,
        crate::service::compose::OverBudget,
        crate::webhooks::FeedEvent
    )),
    modifiers(&BearerAuth, &CommonResponses, &SchemaFixes),
    security(("api_key" = [])),
    tags((name = "links"), (name = "domains"), (name = "resolve"), (name = "stats"), (name = "visits"), (name = "webhooks"), (name = "health"))
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

/// The answers any `/api/v1` operation can give besides its own: those of the auth layer and of
/// a failing dependency. Added here once so that every operation lists them.
struct CommonResponses;

impl utoipa::Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        const COMMON: [(&str, &str); 4] = [
            (
                "401",
                "no API key, or not a valid one (`missing_api_key`, `invalid_api_key`)",
            ),
            (
                "403",
                "the key's role does not allow this operation (`forbidden`)",
            ),
            (
                "500",
                "an internal error; the details are in the sidecar's log",
            ),
            (
                "503",
                "the database or Redis is unavailable; nothing was stored",
            ),
        ];
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !path.starts_with("/api/v1/") {
                continue;
            }
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                for (status, description) in COMMON {
                    let response = ResponseBuilder::new()
                        .description(description)
                        .content(
                            "application/json",
                            ContentBuilder::new()
                                .schema(Some(Ref::from_schema_name("ErrorBody")))
                                .build(),
                        )
                        .build();
                    operation
                        .responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert(response.into());
                }
            }
        }
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
    /// Where new short URLs are built: one base or several with weights.
    pub issuing: Option<IssuingBases>,
    /// The pool from the request header together with `--short-domains`: a target on any of our
    /// domains would loop.
    pub own_domains: Vec<String>,
    health: Arc<crate::domains::health::DomainHealth>,
}

impl DomainContext {
    /// Counts a new link under the host it is issued on (`shortlink_links_issued_total`), the
    /// expected-traffic side of a domain's health.
    pub fn count_issued(&self, code: &str, campaign: Option<&str>) {
        if let Some(bases) = &self.issuing {
            let base = bases.pick(code, campaign);
            let host = url::Url::parse(base)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_default();
            self.health.issued_on(&host);
            crate::metrics::links_issued(host);
        }
    }

    /// Where new links go, for people: each base with its weight, `draining` ones marked.
    pub fn issuing_description(&self) -> String {
        match &self.issuing {
            None => "no issuing domain configured".into(),
            Some(bases) => bases
                .bases
                .iter()
                .map(|base| match (base.draining, bases.bases.len()) {
                    (true, _) => format!("{} (draining)", base.url),
                    (false, 1) => base.url.clone(),
                    (false, _) => format!("{} (weight {})", base.url, base.weight),
                })
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The same request, issuing every link on the shortest issuing base
    /// ([`IssuingBases::shortest`]).
    pub fn on_shortest_base(mut self) -> Self {
        self.issuing = self.issuing.as_ref().map(IssuingBases::shortest);
        self
    }

    /// The link's short URL on the base it is issued on ([`crate::domains::issuing`]).
    pub fn short_url(&self, code: &str, campaign: Option<&str>) -> Option<String> {
        self.issuing
            .as_ref()
            .map(|bases| format!("{}/{code}", bases.pick(code, campaign)))
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
        let issuing = match header(PUBLIC_BASE_HEADER)? {
            Some(raw) => Some(IssuingBases::parse(raw).map_err(|reason| Error::Request {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_header",
                message: format!("the {PUBLIC_BASE_HEADER} header {reason}"),
            })?),
            None => state
                .settings
                .public_base_url
                .clone()
                .map(IssuingBases::single),
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
        // Listed (and checked) from the first request naming them, the domains endpoints' own
        // included: not only once a link is issued.
        state.domains.saw(
            own_domains
                .iter()
                .cloned()
                .chain(issuing.iter().flat_map(IssuingBases::hosts)),
        );
        Ok(DomainContext {
            issuing,
            own_domains,
            health: Arc::clone(&state.domains),
        })
    }
}
