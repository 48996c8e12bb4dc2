//! `GET /api/v1/visits/orphan` (issue 70): the requests on the workspace's hosts that no link
//! answered (and taps on its links that are gone), oldest first, a page at a time. Whose each is
//! was recorded at the edge: the workspace nginx mapped the host to when the request came
//! (`shortlink_wire::event`'s `ws`), never what this sidecar has learned of the hosts since.

use super::domains::slug;
use super::{AppState, Error, ErrorBody, InWorkspace, Json, Query, Result};
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_visits::orphans::{OrphanQuery, OrphanScope, OrphanVisit};
use shortlink_wire::event::OrphanKind;
use utoipa::IntoParams;

pub fn router() -> Router<AppState> {
    Router::new().route("/visits/orphan", get(orphan_visits))
}

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OrphanParams {
    /// Only this kind: `base_url`, `invalid_short_url`, `regular_404` or `recovered`.
    #[param(pattern = "^(base_url|invalid_short_url|regular_404|recovered)$")]
    pub kind: Option<String>,
    /// Only this host.
    pub domain: Option<String>,
    /// Only visits at or after this time (RFC 3339).
    pub from: Option<DateTime<Utc>>,
    /// Only visits before this time (RFC 3339).
    pub to: Option<DateTime<Utc>>,
    /// Resume after this cursor (the previous page's `next`).
    #[param(pattern = "^[0-9]{1,18}_.{1,64}$")]
    pub after: Option<String>,
    /// Visits at most, 1..=1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct OrphanPage {
    /// Oldest first.
    pub visits: Vec<OrphanVisit>,
    /// The cursor of the next page (`after`); null on the last page.
    pub next: Option<String>,
}

/// The orphan visits `workspace` reads: those recorded under its name; the operator's key (no
/// workspace): every one, those recorded under none included.
pub(crate) fn scope_of(state: &AppState, workspace: Option<InWorkspace>) -> OrphanScope {
    match workspace {
        Some(workspace) => scope_of_slug(&slug(state, workspace)),
        None => OrphanScope::Every,
    }
}

/// The orphan visits of the workspace `slug`; one this process cannot name (`""`) reads none,
/// never those recorded under no workspace.
pub fn scope_of_slug(slug: &str) -> OrphanScope {
    match slug {
        "" => OrphanScope::Nothing,
        slug => OrphanScope::Workspace(slug.to_owned()),
    }
}

/// Orphan visits on the workspace's hosts, oldest first; go on with `after` = `next` until
/// `next` is null.
#[utoipa::path(get, path = "/api/v1/visits/orphan", tag = "visits", params(OrphanParams),
    responses(
        (status = 200, body = OrphanPage),
        (status = 400, description = "`invalid_query`: an unknown kind, a bad cursor or limit", body = ErrorBody),
    ))]
pub async fn orphan_visits(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Query(params): Query<OrphanParams>,
) -> Result<Json<OrphanPage>> {
    let kind = match params.kind.as_deref() {
        None => None,
        Some(text) => Some(OrphanKind::parse(text.as_bytes()).ok_or_else(|| {
            Error::bad_query("kind must be base_url, invalid_short_url, regular_404 or recovered")
        })?),
    };
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::bad_query(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    let after = match params.after.as_deref() {
        None => None,
        Some(text) => {
            let parsed = text
                .split_once('_')
                .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id)))
                .filter(|(_, id)| !id.is_empty() && id.len() <= 64);
            let (at, id) =
                parsed.ok_or_else(|| Error::bad_query("after is not a cursor from this API"))?;
            Some((at, id.to_owned()))
        }
    };
    let query = OrphanQuery {
        scope: scope_of(&state, Some(InWorkspace(workspace))),
        kind,
        domain: params
            .domain
            .map(|d| d.trim_end_matches('.').to_ascii_lowercase()),
        from: params.from,
        to: params.to,
        after,
        limit,
    };
    let visits = state
        .analytics
        .store
        .orphans()
        .orphan_visits(&query)
        .await?;
    let next = (visits.len() == limit)
        .then(|| visits.last())
        .flatten()
        .map(|last| format!("{}_{}", last.at.timestamp_millis(), last.id));
    Ok(Json(OrphanPage { visits, next }))
}
