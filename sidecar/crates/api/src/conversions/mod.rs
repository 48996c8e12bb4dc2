//! `POST /api/v1/conversions` (one JSON object, or an NDJSON batch answered line by line) and
//! the A/B results built on them ([`ab`]). The checks and the storage are
//! `shortlink_visits::conversions`; here, the HTTP shapes.
//!
//! Conversions are data a sender reports, like visits, not changes to what the workspace owns:
//! they append no audit row (one per purchase would drown the log), and the visit feed carries
//! each one instead.

pub(crate) mod ab;
pub mod arms;
pub(crate) mod ingest;

use super::AppState;
use axum::routing::{get, post};
use axum::Router;

pub use ingest::answer_lines;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/conversions", post(ingest::post_conversions))
        .route("/links/{code}/ab", get(ab::link_ab))
        .route("/campaigns/{campaign}/ab", get(ab::campaign_ab))
}
