//! `/api/v1/domains`: each short domain's health as the last check found it, grouped by
//! workspace. A workspace's key sees its own domains only (another's answer as a name never
//! seen); the operator's sees every workspace's, each labelled.
//!
//! Issue 55: `POST /api/v1/domains/{domain}/restore`, `/pin` and `/drain` set whether a domain
//! takes new links (shortlink_domains::drain), for every sidecar of the installation; each
//! change is audited in the key's chain, sent on the domain webhook and counted. The re-send
//! list of a drained domain (`unclicked`) and its replacement links (`reissue`).

use super::{AppState, DomainContext, Error, ErrorBody, InWorkspace, Json, Path, Recorder, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
pub(crate) use scope::{known, slug};
use serde::{Deserialize, Serialize};
use shortlink_domains::drain::Event;
use shortlink_domains::health::DomainStatus;
use shortlink_visits::orphans::OrphanCounts;
use std::collections::BTreeMap;

pub mod moved;
pub mod not_found;
pub mod reasons;
pub mod reissue;
mod scope;
pub mod unclicked;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/domains", get(list_domains))
        .route("/domains/{domain}", get(get_domain))
        .route("/domains/{domain}/restore", post(restore_domain))
        .route("/domains/{domain}/pin", post(pin_domain))
        .route("/domains/{domain}/drain", post(drain_domain))
        .route(
            "/domains/{domain}/unclicked",
            get(unclicked::unclicked_links),
        )
        .route("/domains/{domain}/reissue", post(reissue::reissue_links))
        .route(
            "/domains/{domain}/not-found-redirects",
            get(not_found::get_domain)
                .put(not_found::put_domain)
                .delete(not_found::delete_domain),
        )
        .route(
            "/not-found-redirects",
            get(not_found::get_workspace).put(not_found::put_workspace),
        )
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DomainList {
    /// By workspace, then by name.
    pub domains: Vec<DomainStatus>,
    /// Orphan visits so far per listed domain and kind (issue 70, `GET /api/v1/visits/orphan`);
    /// a domain without any is left out.
    pub orphan_visits: BTreeMap<String, OrphanCounts>,
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
) -> Result<Json<DomainList>> {
    let domains = match workspace {
        Some(workspace) => state.domains.statuses_of(&slug(&state, workspace)),
        None => state.domains.statuses(),
    };
    let orphan_visits = (state.analytics.store.orphans())
        .orphan_counts(&crate::orphans::scope_of(&state, workspace))
        .await?;
    Ok(Json(DomainList {
        domains,
        orphan_visits,
    }))
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
    known(&state, workspace, &domain).map(Json)
}

/// Applies an operator's `event` to the domain: stored for every sidecar, in this sidecar's
/// snapshot at once, audited, on the webhook. A repeat (restoring an active domain) changes
/// nothing and answers the same.
async fn change(
    state: &AppState,
    workspace: Option<InWorkspace>,
    origin: shortlink_store::audit::Origin,
    domain: &str,
    event: Event,
) -> Result<Json<DomainStatus>> {
    let status = known(state, workspace, domain)?;
    (state.domains)
        .change_by_hand(
            state.links.storage().as_ref(),
            &origin,
            &status.domain,
            event,
        )
        .await?;
    known(state, workspace, &status.domain).map(Json)
}

/// Takes new links again at once (an automatic drain ends by itself after
/// `--domain-drain-healthy-checks` healthy checks; one by hand, or a pin, only so).
#[utoipa::path(post, path = "/api/v1/domains/{domain}/restore", tag = "domains",
    params(("domain" = String, Path)),
    responses(
        (status = 200, description = "The domain, now `active` (a repeat answers the same)", body = DomainStatus),
        (status = 404, description = "`unknown_domain`: no request or setting has named this domain, or it is another workspace's", body = ErrorBody),
    ))]
pub async fn restore_domain(
    State(state): State<AppState>,
    workspace: Option<InWorkspace>,
    Recorder(origin): Recorder,
    _named: DomainContext,
    Path(domain): Path<String>,
) -> Result<Json<DomainStatus>> {
    change(&state, workspace, origin, &domain, Event::Restore).await
}

/// Never drained by the health job, whatever its checks find (until restored or drained by
/// hand).
#[utoipa::path(post, path = "/api/v1/domains/{domain}/pin", tag = "domains",
    params(("domain" = String, Path)),
    responses(
        (status = 200, description = "The domain, now `pinned`", body = DomainStatus),
        (status = 404, description = "`unknown_domain`: no request or setting has named this domain, or it is another workspace's", body = ErrorBody),
    ))]
pub async fn pin_domain(
    State(state): State<AppState>,
    workspace: Option<InWorkspace>,
    Recorder(origin): Recorder,
    _named: DomainContext,
    Path(domain): Path<String>,
) -> Result<Json<DomainStatus>> {
    change(&state, workspace, origin, &domain, Event::Pin).await
}

/// Why a domain is drained by hand.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainRequest {
    /// Shown with the state and recorded in the audit log (at most 500 characters).
    #[serde(default)]
    pub reason: String,
}

/// No new links on the domain until restored (the links already issued on it keep answering);
/// the health job never restores a drain by hand.
#[utoipa::path(post, path = "/api/v1/domains/{domain}/drain", tag = "domains",
    params(("domain" = String, Path)),
    request_body(content = Option<DrainRequest>, description = "Optional: the reason"),
    responses(
        (status = 200, description = "The domain, now `drained`", body = DomainStatus),
        (status = 400, description = "`invalid_body`: not a drain request", body = ErrorBody),
        (status = 404, description = "`unknown_domain`: no request or setting has named this domain, or it is another workspace's", body = ErrorBody),
        (status = 422, description = "`invalid_reason`: longer than 500 characters", body = ErrorBody),
    ))]
pub async fn drain_domain(
    State(state): State<AppState>,
    workspace: Option<InWorkspace>,
    Recorder(origin): Recorder,
    _named: DomainContext,
    Path(domain): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<DomainStatus>> {
    // The body is optional: an empty one is no reason.
    let reason = match body.is_empty() {
        true => String::new(),
        false => {
            let invalid = |e: String| Error::Request {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_body",
                message: format!("the body is not a drain request: {e}"),
            };
            // `null` is the optional body's absence too. Only an object is a request: serde
            // would also take a struct from an array (`[]`, `["why"]`).
            match serde_json::from_slice(&body).map_err(|e| invalid(e.to_string()))? {
                serde_json::Value::Null => String::new(),
                object @ serde_json::Value::Object(_) => {
                    let request: DrainRequest =
                        serde_json::from_value(object).map_err(|e| invalid(e.to_string()))?;
                    request.reason
                }
                _ => return Err(invalid("not a JSON object".into())),
            }
        }
    };
    if reason.chars().count() > 500 {
        return Err(Error::Invalid {
            code: "invalid_reason",
            message: "the reason is longer than 500 characters".into(),
        });
    }
    change(&state, workspace, origin, &domain, Event::Drain { reason }).await
}
