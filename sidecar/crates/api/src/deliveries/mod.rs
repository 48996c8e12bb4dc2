//! Delivery receipts (issue 68, docs/DELIVERIES.md): `POST /api/v1/deliveries` ([`ingest`]),
//! the callback tokens ([`tokens`]), the gateways' native callbacks ([`callbacks`], outside
//! `/api/v1`) and a campaign's funnel ([`funnel`]). The storage is
//! `shortlink_visits::deliveries`; here, the HTTP shapes.
//!
//! A Twilio token's auth token is stored sealed (`shortlink_messaging::sealed`).
//!
//! Receipts are data gateways report, as visits are: they append no audit row (one per message
//! would drown the log); making and revoking a callback token, a change to what the workspace
//! owns, does.

pub mod callbacks;
pub(crate) mod funnel;
pub(crate) mod ingest;
pub(crate) mod proof;
pub(crate) mod receipt;
pub(crate) mod tokens;

use super::AppState;
use axum::routing::{delete, get, post};
use axum::Router;

/// The routes under `/api/v1`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/deliveries", post(ingest::post_deliveries))
        .route(
            "/callback-tokens",
            get(tokens::list_tokens).post(tokens::create_token),
        )
        .route("/callback-tokens/{id}", delete(tokens::revoke_token))
        .route("/campaigns/{campaign}/funnel", get(funnel::campaign_funnel))
}

/// The native callbacks, beside `/api/v1` on the API listener (no API key: the token is in the
/// path).
pub fn callbacks_router() -> Router<AppState> {
    callbacks::router()
}
