//! `/api/v1/domains`: each short domain's health as the last check found it, grouped by
//! workspace. A workspace's key sees its own domains only (another's answer as a name never
//! seen); the operator's sees every workspace's, each labelled.

use super::{AppState, DomainContext, Error, ErrorBody, InWorkspace, Json, Path, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use shortlink_core::projection::slugs;
use shortlink_domains::health::DomainStatus;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/domains", get(list_domains))
        .route("/domains/{domain}", get(get_domain))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DomainList {
    /// By workspace, then by name.
    pub domains: Vec<DomainStatus>,
}

/// The short domains of the key's workspace: those its part of the issuing list names (nginx's
/// `[<slug>]` part; for the default workspace, also every pool domain and `--short-domains` no
/// part names), by name. The operator's key gets every workspace's, by workspace. A domain is
/// listed from the first request naming it (this one included), as `unknown` until its first
/// check, which that request starts.
#[utoipa::path(get, path = "/api/v1/domains", tag = "domains",
    responses(
        (status = 200, body = DomainList),
        (status = 400, description = "`invalid_header`: the pool or issuing list nginx sends is malformed (a domain in two workspaces' parts included)", body = ErrorBody),
    ))]
pub async fn list_domains(
    State(state): State<AppState>,
    workspace: Option<InWorkspace>,
    // Extracted for what it records: the domains this request names, and their workspaces.
    _named: DomainContext,
) -> Json<DomainList> {
    let domains = match workspace {
        Some(workspace) => state.domains.statuses_of(&slug(workspace)),
        None => state.domains.statuses(),
    };
    Json(DomainList { domains })
}

/// One domain's health (`unknown` until its first check). Another workspace's domain is the
/// same 404 as a name never seen.
#[utoipa::path(get, path = "/api/v1/domains/{domain}", tag = "domains",
    params(("domain" = String, Path)),
    responses(
        (status = 200, body = DomainStatus),
        (status = 400, description = "`invalid_header`: the pool or issuing list nginx sends is malformed", body = ErrorBody),
        (status = 404, description = "`unknown_domain`: no request or setting has named this domain, or it is another workspace's", body = ErrorBody),
    ))]
pub async fn get_domain(
    State(state): State<AppState>,
    workspace: Option<InWorkspace>,
    _named: DomainContext,
    Path(domain): Path<String>,
) -> Result<Json<DomainStatus>> {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    let ours = |status: &DomainStatus| match workspace {
        Some(workspace) => status.workspace == slug(workspace),
        None => true,
    };
    (state.domains.status(&domain))
        .filter(ours)
        .map(Json)
        .ok_or_else(|| Error::Request {
            status: StatusCode::NOT_FOUND,
            code: "unknown_domain",
            message: "no short domain of that name is known".into(),
        })
}

/// The workspace's slug; one this process has not met (authentication remembers every key's)
/// matches no domain rather than the default's.
fn slug(workspace: InWorkspace) -> String {
    slugs::get(workspace.0).map_or_else(String::new, |name| name.as_str().to_owned())
}
