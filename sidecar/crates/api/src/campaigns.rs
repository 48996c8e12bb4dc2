//! `/api/v1/campaigns/{campaign}`: per-campaign aggregates of the links carrying that campaign.

use super::stats::CountsView;
use super::{AppState, ErrorBody, InWorkspace, Json, Path, Result};
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new().route("/campaigns/{campaign}", get(get_campaign))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CampaignView {
    pub campaign: String,
    /// Links of the campaign, in any state.
    pub links: i64,
    pub live: i64,
    pub expired: i64,
    pub revoked: i64,
    /// Sum of the links' `visit_count`: people's visits (docs/BOTS.md).
    pub visits: i64,
    /// Every visit of the campaign's links by verdict — `humans`, `previews`, `scanners`, `bots`
    /// (`clicks`: people's) — and `unique_visitors` summed over the links, all time, from the
    /// daily rollups, as a link's stats count them (docs/BOTS.md). `humans` differs from `visits`
    /// by visits of links whose counter was reset or never counted (imports).
    pub audience: CountsView,
}

/// Aggregates of a campaign: link counts by state, the sum of their visit counts, and their
/// visits by verdict (people, previews, scanners, bots).
#[utoipa::path(get, path = "/api/v1/campaigns/{campaign}", tag = "links",
    params(("campaign" = String, Path)),
    responses(
        (status = 200, body = CampaignView),
        (status = 404, description = "no link has this campaign", body = ErrorBody),
    ))]
pub async fn get_campaign(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(campaign): Path<String>,
) -> Result<Json<CampaignView>> {
    let stats = state.links.campaign(workspace, &campaign).await?;
    let counts = (state.analytics.store)
        .campaign_counts(workspace, &campaign)
        .await?;
    Ok(Json(CampaignView {
        campaign,
        links: stats.links,
        live: stats.live,
        expired: stats.expired,
        revoked: stats.revoked,
        visits: stats.visits,
        audience: CountsView::new(&counts, false),
    }))
}
