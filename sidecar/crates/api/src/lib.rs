//! The HTTP API: `/api/v1/*` behind API-key auth, `/healthz` and `/readyz` open; `/metrics` on
//! the operator's listener of its own ([`metrics_router`]). This file
//! wires the parts; what handlers share lives below them (`state`, `extract`, `error`).

#![deny(unsafe_code)]

pub mod abuse;
mod audit;
mod auth;
mod batch;
mod budget;
mod campaigns;
pub mod compose;
pub mod conversions;
pub mod deliveries;
pub(crate) mod domains;
/// Not-found redirects (issue 70): the console edits them as the API does.
pub use domains::not_found as not_found_redirects;
mod early_close;
mod error;
mod extract;
pub mod gateway;
mod health;
mod link_visits;
pub mod links;
mod metrics;
mod ndjson;
mod openapi;
pub mod orphans;
mod per_address;
pub mod preview;
pub mod proxy_secret;
pub mod qr;
mod quarantines;
pub mod rate_limit;
pub mod request_id;
mod resolve;
mod retention;
pub mod serving;
mod state;
pub mod stats;
pub mod subjects;
mod target_lists;
mod throttle;
mod visits;
mod webhooks;
mod workspace_metrics;
mod workspaces;

pub use audit::Recorder;
pub use auth::{generate_api_key, hash_api_key, ApiKeyId, InWorkspace};
pub use batch::failure_error;
pub use budget::{budget_of, Budget};
pub use error::{Error, ErrorBody, ErrorDetail, Result};
pub use extract::{
    DomainContext, Json, Path, Query, POOL_HEADER, PUBLIC_BASE_HEADER, WORKSPACE_HEADER,
};
pub use openapi::ApiDoc;
pub use state::{AppState, HttpSettings, MAX_BODY_BYTES};

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tower_http::trace::TraceLayer;

/// The operator's metrics listener (`--metrics-listen`): `GET /metrics` and nothing else, apart
/// from [`router`]'s listener, which every brand's tool reaches through nginx's API server.
pub fn metrics_router(state: AppState) -> Router {
    shortlink_core::metrics::install();
    Router::new()
        .route("/metrics", get(metrics::serve))
        .route_layer(axum::middleware::from_fn(shortlink_core::metrics::track))
        .fallback(|| async { Error::NotFound })
        .with_state(state)
}

/// The whole app: the API, `pages` (the operator console: HTML for people, built above this
/// layer), health, and what every request goes through.
pub fn router(state: AppState, pages: Router<AppState>) -> Router {
    let api = Router::new()
        .merge(links::router())
        .merge(preview::router())
        .merge(batch::router())
        .merge(compose::router())
        .merge(campaigns::router())
        .merge(conversions::router())
        .merge(deliveries::router())
        .merge(gateway::router())
        .merge(domains::router())
        .merge(resolve::router())
        .merge(stats::router())
        .merge(qr::router())
        .merge(visits::router())
        .merge(link_visits::router())
        .merge(orphans::router())
        .merge(webhooks::router())
        .merge(workspaces::router())
        .merge(workspace_metrics::router())
        .merge(audit::router())
        .merge(subjects::router())
        .merge(retention::router())
        .merge(target_lists::router())
        .merge(quarantines::router())
        .route("/openapi.json", get(openapi::serve))
        // Its own fallback, so that unknown /api/v1 paths are behind auth too.
        .fallback(|| async { Error::NotFound })
        // Inside the key check: it counts the key that check found.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            rate_limit::limit_api_key,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_api_key,
        ))
        .route_layer(axum::middleware::from_fn(shortlink_core::metrics::track));
    shortlink_core::metrics::install();
    Router::new()
        .nest("/api/v1", api)
        // Not API: HTML for people, outside the OpenAPI document and the API-key layer (the
        // console has sessions of its own).
        .merge(pages)
        // Gateways' delivery callbacks: outside the API-key layer, the token in the path is
        // their credential (deliveries::callbacks).
        .merge(
            deliveries::callbacks_router()
                .route_layer(axum::middleware::from_fn(shortlink_core::metrics::track)),
        )
        // Visitors' abuse reports: outside the API-key layer, limited per address (abuse).
        .merge(
            abuse::router().route_layer(axum::middleware::from_fn(shortlink_core::metrics::track)),
        )
        // No /metrics here: it names every workspace's domains, so it is the operator's, on a
        // listener of its own ([`metrics_router`]).
        .merge(
            health::router().route_layer(axum::middleware::from_fn(shortlink_core::metrics::track)),
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
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            request_id::tag_request,
        ))
        .layer(axum::middleware::from_fn(
            early_close::close_after_client_error,
        ))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &axum::extract::Request| {
                    // The path only: query strings may carry recipients' data. A callback's
                    // path holds its token, a credential: not logged.
                    tracing::info_span!(
                        "request",
                        method = %request.method(),
                        path = %deliveries::callbacks::loggable_path(request.uri().path()),
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
