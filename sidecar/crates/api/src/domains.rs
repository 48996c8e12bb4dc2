//! `/api/v1/domains`: each short domain's health as the last check found it.

use super::{AppState, DomainContext, Error, ErrorBody, Json, Path, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use shortlink_domains::health::DomainStatus;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/domains", get(list_domains))
        .route("/domains/{domain}", get(get_domain))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DomainList {
    pub domains: Vec<DomainStatus>,
}

/// Every short domain: nginx's pool, the issuing domains and `--short-domains`, by name. A domain
/// is listed from the first request naming it (this one included), as `unknown` until its first
/// check, which that request starts.
#[utoipa::path(get, path = "/api/v1/domains", tag = "domains",
    responses(
        (status = 200, body = DomainList),
        (status = 400, description = "`invalid_header`: the pool or issuing list nginx sends is malformed", body = ErrorBody),
    ))]
pub async fn list_domains(
    State(state): State<AppState>,
    // Extracted for what it records: the domains this request names.
    _named: DomainContext,
) -> Json<DomainList> {
    Json(DomainList {
        domains: state.domains.statuses(),
    })
}

/// One domain's health (`unknown` until its first check).
#[utoipa::path(get, path = "/api/v1/domains/{domain}", tag = "domains",
    params(("domain" = String, Path)),
    responses(
        (status = 200, body = DomainStatus),
        (status = 400, description = "`invalid_header`: the pool or issuing list nginx sends is malformed", body = ErrorBody),
        (status = 404, description = "`unknown_domain`: no request or setting has named this domain", body = ErrorBody),
    ))]
pub async fn get_domain(
    State(state): State<AppState>,
    _named: DomainContext,
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
            message: "no short domain of that name is known".into(),
        })
}
