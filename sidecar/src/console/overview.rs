//! The overview: clicks in the last 24 hours and 30 days (humans, bots and previews apart), the
//! top links and the top campaigns. The numbers are those of `GET /api/v1/stats` (the same
//! query and view code, read from the rollups).

use super::chart;
use super::layout;
use super::operator::Operator;
use super::page::{encode, PageResult};
use crate::http::stats::{self, CountsView, StatsParams, StatsView};
use crate::http::{AppState, Query};
use crate::visits::rollup::Interval;
use axum::extract::State;
use axum::response::IntoResponse;
use chrono::Duration;
use maud::{html, Markup};
use serde::Deserialize;
use std::collections::HashMap;

/// Links whose campaigns are summed into the top campaigns: the campaigns of the most-clicked
/// links. A full per-campaign rollup does not exist yet; the page says what the list covers.
const CAMPAIGN_SAMPLE: u32 = 50;

pub(super) async fn global(
    state: &AppState,
    workspace: crate::storage::WorkspaceId,
    interval: Interval,
    window: Duration,
    top: u32,
) -> Result<StatsView, crate::http::Error> {
    let to = crate::storage::now();
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
            div.card { "Human clicks" b { (counts.humans) } }
            div.card { "Unique visitors" b { (counts.unique_visitors) } }
            div.card { "Bots" b { (counts.bots) } }
            div.card { "Link previews" b { (counts.previews) } }
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
    let left = (notice.left).filter(|slug| crate::storage::is_valid_slug(slug));
    let day = global(
        &state,
        operator.workspace,
        Interval::Hour,
        Duration::hours(24),
        10,
    )
    .await?;
    let month = global(
        &state,
        operator.workspace,
        Interval::Day,
        Duration::days(30),
        CAMPAIGN_SAMPLE,
    )
    .await?;
    let top_links = month.top_links.as_deref().unwrap_or_default();
    // Campaign of each of the top links, summed.
    let mut campaigns: HashMap<String, i64> = HashMap::new();
    for top in top_links {
        if let Ok(link) = state.links.get(operator.workspace, &top.code).await {
            if let Some(campaign) = link.campaign {
                *campaigns.entry(campaign).or_default() += top.counts.humans;
            }
        }
    }
    let mut campaigns: Vec<(String, i64)> = campaigns.into_iter().collect();
    campaigns.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    campaigns.truncate(10);
    let body = html! {
        @if let Some(left) = &left {
            p.error role="alert" { "Workspace " (left) " left this session: its key was revoked "
                "or the workspace suspended. Add it again with a valid key." }
        }
        h1 { "Overview" }
        h2 { "Last 24 hours" }
        (totals(&day.totals))
        (chart::clicks(&day.series, |p| p.start.format("%b %d %H:00").to_string()))
        h2 { "Last 30 days" }
        (totals(&month.totals))
        (chart::clicks(&month.series, |p| p.start.format("%b %d").to_string()))
        div.grid2 {
            section {
                h2 { "Top links (30 days)" }
                div.wide { table {
                    thead { tr { th scope="col" { "Code" } th.num scope="col" { "Human clicks" } th.num scope="col" { "Bots" } th.num scope="col" { "Previews" } } }
                    tbody {
                        @for top in top_links.iter().take(10) {
                            tr {
                                td { a href={ "/console/links/" (top.code) } { (top.code) } }
                                td.num { (top.counts.humans) }
                                td.num { (top.counts.bots) }
                                td.num { (top.counts.previews) }
                            }
                        }
                        @if top_links.is_empty() { tr { td colspan="4" { "No clicks yet." } } }
                    }
                } }
            }
            section {
                h2 { "Top campaigns (30 days)" }
                p.hint { "Summed over the " (CAMPAIGN_SAMPLE) " most-clicked links." }
                div.wide { table {
                    thead { tr { th scope="col" { "Campaign" } th.num scope="col" { "Human clicks" } } }
                    tbody {
                        @for (campaign, clicks) in &campaigns {
                            tr {
                                td { a href={ "/console/campaigns?name=" (encode(campaign)) } { (campaign) } }
                                td.num { (clicks) }
                            }
                        }
                        @if campaigns.is_empty() { tr { td colspan="2" { "No campaign clicks yet." } } }
                    }
                } }
            }
        }
    };
    Ok(layout::page(&operator, "Overview", body).into_response())
}
