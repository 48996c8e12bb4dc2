//! `/api/v1/domains`: each short domain's health as the last check found it.

use super::{AppState, Error, ErrorBody, Json, Path, Result};
use crate::domains::health::DomainStatus;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Serialize;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/domains", get(list_domains))
        .route("/domains/{domain}", get(get_domain))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DomainList {
    pub domains: Vec<DomainStatus>,
}

/// Every domain checked so far: pool, issuing domains and `--short-domains`.
#[utoipa::path(get, path = "/api/v1/domains", tag = "domains",
    responses((status = 200, body = DomainList), (status = 401, body = ErrorBody)))]
pub async fn list_domains(State(state): State<AppState>) -> Json<DomainList> {
    Json(DomainList {
        domains: state.domains.statuses(),
    })
}

/// One domain's health.
#[utoipa::path(get, path = "/api/v1/domains/{domain}", tag = "domains",
    params(("domain" = String, Path)),
    responses((status = 200, body = DomainStatus), (status = 404, description = "not a checked domain", body = ErrorBody)))]
pub async fn get_domain(
    State(state): State<AppState>,
    Path(domain): Path<String>,
) -> Result<Json<DomainStatus>> {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    state
        .domains
        .status(&domain)
        .map(Json)
        .ok_or_else(|| Error::Request {
            status: StatusCode::NOT_FOUND,
            code: "unknown_domain",
            message: "no short domain of that name has been checked".into(),
        })
}
