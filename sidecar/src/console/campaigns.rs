//! Campaigns: every campaign by name, 50 a page; find one, see its totals and per-recipient status
//! (clicked or not, clicks, first and last click), a page of 50 at a time by keyset (so a campaign
//! of a million recipients costs the same per page), and export every recipient as CSV, streamed.

use super::layout::{self, when};
use super::links;
use super::operator::Operator;
use super::page::{encode, PageResult};
use super::totals::{Shown, Totals};
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Extension;
use chrono::{DateTime, Utc};
use maud::html;
use serde::Deserialize;
use shortlink_api::links::LinkView;
use shortlink_api::{AppState, DomainContext, Error};
use shortlink_core::csv_cell::push_field as csv_field;
use shortlink_model::Link;
use shortlink_store::{LinkFilter, ListCursor};
use std::collections::HashMap;
use std::sync::Arc;

const PAGE: u32 = 50;
const EXPORT_CHUNK: u32 = 1000;

#[derive(Debug, Default, Deserialize)]
pub struct CampaignQuery {
    #[serde(default)]
    name: String,
    cursor: Option<String>,
    /// The list's page: campaigns after this name.
    #[serde(default)]
    after: String,
}

pub async fn list(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Query(query): Query<CampaignQuery>,
) -> PageResult {
    let name = query.name.trim();
    if !name.is_empty() {
        return detail(&state, &operator, &domains, name, query.cursor.as_deref()).await;
    }
    let mut campaigns = state
        .links
        .storage()
        .list_campaigns(operator.workspace, &query.after, PAGE + 1)
        .await?;
    let next = (campaigns.len() > PAGE as usize).then(|| {
        campaigns.truncate(PAGE as usize);
        campaigns.last().cloned()
    });
    // Each listed campaign's aggregates, as `GET /api/v1/campaigns/{campaign}` answers them.
    let numbers: HashMap<String, shortlink_store::CampaignStats> = state
        .links
        .campaigns(operator.workspace, Some(&campaigns), PAGE)
        .await?
        .into_iter()
        .collect();
    let body = html! {
        h1 { "Campaigns" }
        form.inline method="get" action="/console/campaigns" role="search" {
            label { "Campaign name" input type="search" name="name" required; }
            button type="submit" { "Open" }
        }
        div.wide { table.campaigns {
            thead { tr {
                th scope="col" { "Campaign" } th.num scope="col" { "Links" } th.num scope="col" { "Live" }
                th.num scope="col" { "Visits" } th scope="col" { "More" }
            } }
            tbody {
                @for campaign in &campaigns {
                    @let stats = numbers.get(campaign).cloned().unwrap_or_default();
                    tr {
                        td { a href={ "/console/campaigns?name=" (encode(campaign)) } { (campaign) } }
                        td.num data-campaign-links=(campaign) { (stats.links) }
                        td.num data-campaign-live=(campaign) { (stats.live) }
                        td.num data-campaign-visits=(campaign) { (stats.visits) }
                        td { a href={ "/console/campaigns/" (encode_segment(campaign)) "/funnel" } { "Delivery funnel" } }
                    }
                }
                @if campaigns.is_empty() { tr { td colspan="5" { "No campaign yet." } } }
            }
        } }
        p.hint { "Visits: the links' visit counts, all time. Delivery, clicks by people and "
            "conversions are on each campaign's page." }
        @if let Some(Some(last)) = next {
            p { a href={ "/console/campaigns?after=" (encode(&last)) } { "Next page →" } }
        }
    };
    Ok(layout::page(&operator, "Campaigns", body).into_response())
}

async fn detail(
    state: &AppState,
    operator: &Operator,
    domains: &DomainContext,
    name: &str,
    cursor: Option<&str>,
) -> PageResult {
    let mut filter = LinkFilter::in_workspace(operator.workspace);
    filter.campaign = Some(name.to_owned());
    let cursor = cursor.and_then(ListCursor::decode);
    let mut page = state.links.list(&filter, cursor.as_ref(), PAGE + 1).await?;
    if page.is_empty() && cursor.is_none() {
        return Err(no_such_campaign().into());
    }
    let next = ListCursor::after_page(&mut page, PAGE as usize);
    let views: Vec<LinkView> = page
        .into_iter()
        .map(|link| LinkView::new(link, domains))
        .collect();
    let codes: Vec<String> = views.iter().map(|view| view.code.clone()).collect();
    let summary = match cursor {
        None => Some(super::campaign_summary::cards(state, operator.workspace, name).await?),
        Some(_) => None,
    };
    let first: HashMap<String, DateTime<Utc>> = state
        .analytics
        .store
        .first_visits(&codes)
        .await?
        .into_iter()
        .collect();
    let body = html! {
        h1 { "Campaign " (name) }
        @if let Some(summary) = summary { (summary) }
        p {
            a href={ "/console/campaigns/totals?name=" (encode(name)) } { "Totals: links by state, visits" }
            " · "
            a href={ "/console/campaigns/recipients.csv?name=" (encode(name)) } download { "Export all recipients (CSV)" }
            " · "
            a href={ "/console/campaigns/ab?campaign=" (encode(name)) } { "A/B results and conversions" }
            " · "
            a href={ "/console/campaigns/" (encode_segment(name)) "/funnel" } { "Delivery funnel" }
        }
        h2 { "Recipients" }
        div.wide { table {
            thead { tr {
                th scope="col" { "Recipient" } th scope="col" { "Code" } th scope="col" { "Clicked" }
                th.num scope="col" { "Visits" } th scope="col" { "First click" } th scope="col" { "Last click" }
                th scope="col" { "State" }
            } }
            tbody {
                @for link in &views {
                    tr {
                        td { (link.recipient_ref.as_deref().unwrap_or("—")) }
                        td { a href={ "/console/links/" (link.code) } { (link.code) } }
                        td { @if link.visit_count > 0 { "yes" } @else { "no" } }
                        td.num { (link.visit_count) }
                        td { (when(first.get(&link.code).copied())) }
                        td { (when(link.last_visit_at)) }
                        td { (links::state_cell(link)) }
                    }
                }
            }
        } }
        @if let Some(next) = next {
            p { a href={ "/console/campaigns?name=" (encode(name)) "&cursor=" (encode(&next)) } { "Next page →" } }
        }
    };
    Ok(layout::page(operator, &format!("Campaign {name}"), body).into_response())
}

/// `name` as one path segment: form encoding's `+` for a space is a plus in a path.
fn encode_segment(name: &str) -> String {
    encode(name).replace('+', "%20")
}

fn no_such_campaign() -> Error {
    Error::Request {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: "no link has this campaign".into(),
    }
}

/// A campaign's totals on a page of their own, as last counted in the background ([`totals`]):
/// counting a million links takes longer than a page may.
pub async fn totals(
    State(state): State<AppState>,
    Extension(totals): Extension<Arc<Totals>>,
    operator: Operator,
    Query(query): Query<CampaignQuery>,
) -> PageResult {
    let name = query.name.trim();
    let count = match totals.show(&state.links, operator.workspace, name) {
        Shown::Counted(count) => count,
        Shown::Counting => {
            let body = html! {
                h1 { "Campaign " (name) ": totals" }
                p role="status" { "Counting the campaign's links… this page refreshes itself." }
            };
            let title = format!("Campaign {name}");
            return Ok(layout::progress_page(&operator, &title, body, false));
        }
        Shown::Failed => {
            return Err(Error::Request {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "unavailable",
                message: "the campaign's totals could not be counted; reload to try again".into(),
            }
            .into())
        }
    };
    let Some(totals) = count.stats else {
        return Err(no_such_campaign().into());
    };
    let body = html! {
        h1 { "Campaign " (name) ": totals" }
        div.cards {
            div.card { "Links" b { (totals.links) } }
            div.card { "Live" b { (totals.live) } }
            div.card { "Expired" b { (totals.expired) } }
            div.card { "Revoked" b { (totals.revoked) } }
            div.card { "Visits" b { (totals.visits) } }
        }
        p { "Counted " (when(Some(count.at))) "; counted again on a view after "
            (super::totals::FRESH.as_secs()) " s." }
        p { a href={ "/console/campaigns?name=" (encode(name)) } { "Recipients" } }
    };
    Ok(layout::page(&operator, &format!("Campaign {name}"), body).into_response())
}

fn csv_row(link: &Link, first: &HashMap<String, DateTime<Utc>>) -> String {
    let mut row = String::new();
    csv_field(&mut row, link.recipient_ref.as_deref().unwrap_or(""));
    row.push(',');
    csv_field(&mut row, &link.code);
    row.push_str(if link.visit_count > 0 {
        ",yes,"
    } else {
        ",no,"
    });
    row.push_str(&link.visit_count.to_string());
    row.push(',');
    if let Some(at) = first.get(&link.code) {
        row.push_str(&at.to_rfc3339());
    }
    row.push(',');
    if let Some(at) = link.last_visit_at {
        row.push_str(&at.to_rfc3339());
    }
    row.push('\n');
    row
}

pub async fn export(
    State(state): State<AppState>,
    operator: Operator,
    Query(query): Query<CampaignQuery>,
) -> PageResult {
    let name = query.name.trim().to_owned();
    if name.is_empty() {
        return Err(Error::invalid("invalid_campaign", "name a campaign").into());
    }
    let mut filter = LinkFilter::in_workspace(operator.workspace);
    filter.campaign = Some(name.clone());
    if state.links.list(&filter, None, 1).await?.is_empty() {
        return Err(no_such_campaign().into());
    }
    let storage = Arc::clone(state.links.storage());
    let visits = Arc::clone(&state.analytics.store);
    // Code order, a chunk at a time: memory stays flat for a million recipients.
    let header = futures_util::stream::once(async {
        Ok::<_, std::io::Error>("recipient,code,clicked,visits,first_click,last_click\n".to_owned())
    });
    let rows = futures_util::stream::unfold(Some(None::<String>), move |after| {
        let storage = Arc::clone(&storage);
        let visits = Arc::clone(&visits);
        let filter = filter.clone();
        async move {
            let after = after?;
            let chunk = match storage
                .scan_links(&filter, after.as_deref(), EXPORT_CHUNK)
                .await
            {
                Ok(links) => {
                    let codes: Vec<String> = links.iter().map(|l| l.code.clone()).collect();
                    visits
                        .first_visits(&codes)
                        .await
                        .map(|first| (links, first))
                }
                Err(error) => Err(error),
            };
            match chunk {
                Ok((links, _)) if links.is_empty() => None,
                Ok((links, first)) => {
                    let first: HashMap<String, DateTime<Utc>> = first.into_iter().collect();
                    let last = links.last().map(|l| l.code.clone());
                    let text: String = links.iter().map(|link| csv_row(link, &first)).collect();
                    Some((Ok(text), Some(last)))
                }
                Err(error) => {
                    tracing::warn!(%error, "campaign export stopped");
                    Some((Err(std::io::Error::other("export failed")), None))
                }
            }
        }
    });
    use futures_util::StreamExt;
    let body = Body::from_stream(header.chain(rows));
    let filename: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Ok((
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}-recipients.csv\""),
            ),
        ],
        body,
    )
        .into_response())
}
