//! The overview: clicks in the last 24 hours and 30 days (humans, bots, previews and scanners
//! apart), the top links and the top campaigns. The numbers are those of `GET /api/v1/stats` (the same
//! query and view code, read from the rollups).

use super::chart;
use super::layout;
use super::operator::Operator;
use super::page::{encode, PageResult};
use axum::extract::State;
use axum::response::IntoResponse;
use chrono::Duration;
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::stats::{self, CountsView, StatsParams, StatsView};
use shortlink_api::{AppState, Query};
use shortlink_visits::rollup::Interval;

/// Campaigns listed, most visited first.
const TOP_CAMPAIGNS: u32 = 10;

pub(super) async fn global(
    state: &AppState,
    workspace: shortlink_model::WorkspaceId,
    interval: Interval,
    window: Duration,
    top: u32,
) -> Result<StatsView, shortlink_api::Error> {
    let to = shortlink_store::now();
    let params = StatsParams {
        from: Some(to - window),
        to: Some(to),
        interval: Some(interval),
        include_bots: Some(false),
        top: Some(top),
    };
    let q = stats::query(workspace, None, params, None, false)?;
    let result = state.analytics.store.stats(&q).await?;
    Ok(stats::view(&q, result))
}

pub(super) fn totals(counts: &CountsView) -> Markup {
    html! {
        div.cards {
            div.card { "Human clicks" b data-audience="humans" { (counts.humans) } }
            div.card { "Unique visitors" b { (counts.unique_visitors) } }
            div.card { "Bots" b data-audience="bots" { (counts.bots) } }
            div.card { "Link previews" b data-audience="previews" { (counts.previews) } }
            div.card { "Scanners" b data-audience="scanners" { (counts.scanners) } }
        }
    }
}

/// `?left=<slug>`: the session's previous workspace left it (see [`super::session::Signed`]).
#[derive(Debug, Default, Deserialize)]
pub struct Notice {
    left: Option<String>,
}

pub async fn page(
    State(state): State<AppState>,
    operator: Operator,
    Query(notice): Query<Notice>,
) -> PageResult {
    // Only a slug is shown: the link is anyone's to craft, so it carries no free text.
    let left = (notice.left).filter(|slug| shortlink_store::is_valid_slug(slug));
    let recent = |interval, window| global(&state, operator.workspace, interval, window, 10);
    let day = recent(Interval::Hour, Duration::hours(24)).await?;
    let month = recent(Interval::Day, Duration::days(30)).await?;
    let top_links = month.top_links.as_deref().unwrap_or_default();
    // Every link of each campaign, as `GET /api/v1/campaigns/{campaign}` counts them (summing
    // the top links' clicks left out every link past the 50 most clicked).
    let campaigns = state
        .links
        .campaigns(operator.workspace, None, TOP_CAMPAIGNS)
        .await?;
    let body = html! {
        @if let Some(left) = &left {
            p.error role="alert" { "Workspace " (left) " left this session: its key was revoked "
                "or the workspace suspended. Add it again with a valid key." }
        }
        h1 { "Overview" }
        h2 { "Last 24 hours" }
        (totals(&day.totals))
        (chart::clicks(&day.series, |p| p.start.format("%b %d %H:00").to_string(), "visits per hour, UTC"))
        h2 { "Last 30 days" }
        (totals(&month.totals))
        (chart::clicks(&month.series, |p| p.start.format("%b %d").to_string(), "visits per day, UTC"))
        div.grid2 {
            section {
                h2 { "Top links (30 days)" }
                div.wide { table {
                    thead { tr { th scope="col" { "Code" } th.num scope="col" { "Human clicks" } th.num scope="col" { "Bots" } th.num scope="col" { "Previews" } th.num scope="col" { "Scanners" } } }
                    tbody {
                        @for top in top_links.iter().take(10) {
                            tr {
                                td { a href={ "/console/links/" (top.code) } { (top.code) } }
                                td.num { (top.counts.humans) }
                                td.num { (top.counts.bots) }
                                td.num { (top.counts.previews) }
                                td.num { (top.counts.scanners) }
                            }
                        }
                        @if top_links.is_empty() { tr { td colspan="5" { "No clicks yet." } } }
                    }
                } }
            }
            section {
                h2 { "Top campaigns (all time)" }
                p.hint { "Every link of the campaign, counted now: its visits and links." }
                div.wide { table {
                    thead { tr { th scope="col" { "Campaign" } th.num scope="col" { "Visits" } th.num scope="col" { "Links" } } }
                    tbody {
                        @for (campaign, stats) in &campaigns {
                            tr {
                                td { a href={ "/console/campaigns?name=" (encode(campaign)) } { (campaign) } }
                                td.num data-campaign-visits=(campaign) { (stats.visits) }
                                td.num data-campaign-links=(campaign) { (stats.links) }
                            }
                        }
                        @if campaigns.is_empty() { tr { td colspan="3" { "No campaign yet." } } }
                    }
                } }
            }
        }
    };
    Ok(layout::page(&operator, "Overview", body).into_response())
}
