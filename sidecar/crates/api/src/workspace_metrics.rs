//! `GET /api/v1/workspace/metrics`: a workspace's own numbers (its links, its clicks, its
//! domains' health). The operator's `/metrics` labels every workspace's domains, so it is on a
//! listener of the operator's; this answers a brand's key with its own rows only.

use super::stats::{self, CountsView, StatsParams};
use super::{AppState, DomainContext, Error, ErrorBody, InWorkspace, Result};
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Serialize;
use shortlink_domains::health::DomainStatus;
use shortlink_store::LinkFilter;

pub fn router() -> Router<AppState> {
    Router::new().route("/workspace/metrics", get(workspace_metrics))
}

/// The numbers of the key's workspace.
#[derive(Serialize, utoipa::ToSchema)]
pub struct WorkspaceMetrics {
    /// The workspace's slug.
    pub workspace: String,
    /// Its links, in every state (expired and revoked included).
    pub links: u64,
    /// Its links' clicks from the rollups, over the 30 days before `clicks_to`.
    pub clicks: CountsView,
    pub clicks_from: DateTime<Utc>,
    pub clicks_to: DateTime<Utc>,
    /// Its short domains and their health, as `GET /api/v1/domains` lists them.
    pub domains: Vec<DomainStatus>,
}

/// The key's workspace's links, clicks and domains: never another workspace's.
#[utoipa::path(get, path = "/api/v1/workspace/metrics", tag = "keys",
    responses(
        (status = 200, body = WorkspaceMetrics),
        (status = 400, description = "`invalid_header`: the pool or issuing list nginx sends is malformed", body = ErrorBody),
        (status = 403, description = "an operator key: it has no workspace of its own", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn workspace_metrics(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    // Extracted for what it records: the domains this request names, as the domain list does.
    _named: DomainContext,
) -> Result<Json<WorkspaceMetrics>> {
    let storage = state.links.storage();
    let own = (storage.workspace(workspace).await?).ok_or(Error::WorkspaceSuspended)?;
    let links = storage
        .count_links(&LinkFilter::in_workspace(workspace))
        .await?;
    let params = StatsParams {
        from: None,
        to: None,
        interval: None,
        include_bots: None,
        top: Some(1),
    };
    let q = stats::query(workspace, None, params, None, state.analytics.count_bots)?;
    let totals = state.analytics.store.stats(&q).await?.totals;
    Ok(Json(WorkspaceMetrics {
        links,
        clicks: CountsView::new(&totals, q.include_bots),
        clicks_from: stats::at(q.from),
        clicks_to: stats::at(q.to),
        domains: state.domains.statuses_of(&own.slug),
        workspace: own.slug,
    }))
}
