//! One link: its short URL with a copy button and its QR code, the edit form, clicks over time
//! by the hour or day, and the breakdowns (browser, OS, device, country, referrer, short
//! domain; bots and previews in columns of their own and by agent), and its visits with each
//! one's verdict and why ([`visit_list`]).

use super::layout::{self, when};
use super::operator::Operator;
use super::page::PageResult;
use super::{chart, overview, visit_list};
use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use maud::{html, Markup, PreEscaped};
use serde::Deserialize;
use shortlink_api::links::LinkView;
use shortlink_api::qr::{self, QrFormat};
use shortlink_api::stats::{self, EntryView, StatsParams};
use shortlink_api::{AppState, DomainContext, Error};
use shortlink_visits::rollup::Interval;

#[derive(Debug, Default, Deserialize)]
pub struct DetailQuery {
    /// `hour` (the last 48 hours) or `day` (default: since creation, at most 400 days).
    interval: Option<String>,
    created: Option<String>,
    updated: Option<String>,
    revoked: Option<String>,
    /// The visits' list from after this visit (its page's last): see [`visit_list`].
    before: Option<String>,
}

fn breakdown(title: &str, entries: &[EntryView]) -> Markup {
    html! {
        section {
            h2 { (title) }
            div.wide { table {
                thead { tr { th scope="col" { "Value" } th.num scope="col" { "Humans" } th.num scope="col" { "Bots" } th.num scope="col" { "Previews" } th.num scope="col" { "Scanners" } } }
                tbody {
                    @for e in entries {
                        tr { td { (e.value.as_deref().unwrap_or("unknown")) } td.num { (e.humans) } td.num { (e.bots) } td.num { (e.previews) } td.num { (e.scanners) } }
                    }
                    @if entries.is_empty() { tr { td colspan="5" { "None yet." } } }
                }
            } }
        }
    }
}

pub async fn page(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Query(query): Query<DetailQuery>,
) -> PageResult {
    let link = LinkView::new(state.links.get(operator.workspace, &code).await?, &domains);
    let interval = match query.interval.as_deref() {
        Some("hour") => Interval::Hour,
        _ => Interval::Day,
    };
    let to = shortlink_store::now();
    let from = match interval {
        Interval::Hour => to - chrono::Duration::hours(48),
        Interval::Day => link.created_at.max(to - chrono::Duration::days(400)),
    };
    let params = StatsParams {
        from: Some(from),
        to: Some(to),
        interval: Some(interval),
        include_bots: Some(false),
        top: Some(10),
    };
    let q = stats::query(
        operator.workspace,
        Some(link.code.clone()),
        params,
        None,
        false,
    )?;
    let view = stats::view(&q, state.analytics.store.stats(&q).await?);
    let before = query.before.as_deref();
    let visits = visit_list::read(&state, operator.workspace, &link.code, before).await?;
    let qr_svg = match (&link.short_url, link.state) {
        (Some(url), "live") => {
            Some(String::from_utf8_lossy(&qr::render(url, QrFormat::Svg, 256)?.1).into_owned())
        }
        _ => None,
    };
    let format = match interval {
        Interval::Hour => "%b %d %H:00",
        Interval::Day => "%b %d",
    };
    let b = &view.breakdowns;
    let body = html! {
        h1 { "Link " (link.code) }
        @if query.created.is_some() { p.ok role="status" { "Created." } }
        @if query.updated.is_some() { p.ok role="status" { "Saved." } }
        @if query.revoked.is_some() { p.ok role="status" { "Revoked: the short URL now answers 410." } }
        div.grid2 {
            section {
                @if let Some(url) = &link.short_url {
                    p.short { a #short-url href=(url) { (url) } }
                    button type="button" data-copy="short-url" hidden { "Copy short URL" }
                }
                (facts(&link))
            }
            @if let Some(svg) = &qr_svg { (qr_section(&link.code, svg)) }
        }
        @if operator.may_issue() && link.state != "revoked" {
            h2 { "Edit" }
            form.stack method="post" action={ "/console/links/" (link.code) "/edit" } {
                (layout::csrf(&operator))
                label for="url" { "New target URL (empty: unchanged)" }
                input #url type="url" name="url" placeholder=(link.url);
                label for="expires_at" { "New expiry, UTC (empty: unchanged)" }
                input #expires_at type="datetime-local" name="expires_at";
                label { input type="checkbox" name="clear_expiry" value="1"; " Remove the expiry" }
                button type="submit" { "Save" }
            }
            p { a href={ "/console/links/" (link.code) "/revoke" } { "Revoke this link…" } }
        }
        h2 { "Clicks" }
        p {
            "By "
            @if interval == Interval::Day { strong { "day" } } @else { a href={ "/console/links/" (link.code) "?interval=day" } { "day" } }
            " · "
            @if interval == Interval::Hour { strong { "hour (48 h)" } } @else { a href={ "/console/links/" (link.code) "?interval=hour" } { "hour (48 h)" } }
        }
        (overview::totals(&view.totals))
        (chart::clicks(&view.series, |p| p.start.format(format).to_string(),
            if interval == Interval::Day { "visits per day, UTC" } else { "visits per hour, UTC" }))
        (visit_list::section(&link.code, &visits, before.is_some()))
        div.grid2 {
            (breakdown("Browser", &b.browser))
            (breakdown("Operating system", &b.os))
            (breakdown("Device", &b.device))
            (breakdown("Country", &b.country))
            (breakdown("Referrer", &b.referrer_host))
            (breakdown("Short domain", &b.short_domain))
            (breakdown("Bots, previews and scanners by agent", &b.agent))
        }
    };
    Ok(layout::page(&operator, &format!("Link {}", link.code), body).into_response())
}

/// The live link's QR code (`svg`), with its downloads.
fn qr_section(code: &str, svg: &str) -> Markup {
    html! {
        section.qr {
            h2 { "QR code" }
            (PreEscaped(svg))
            p {
                a href={ "/console/links/" (code) "/qr?format=png" } download { "Download PNG" } " · "
                a href={ "/console/links/" (code) "/qr?format=svg" } download { "Download SVG" }
            }
        }
    }
}

/// What the link is: its target, state, times, campaign and extras, with links to edit them.
fn facts(link: &LinkView) -> Markup {
    html! {
        dl {
            dt { "Target" } dd { (link.url) }
            dt { "State" } dd { (super::links::state_cell(link)) }
            dt { "Redirect" } dd { (link.redirect) }
            dt { "Expires" } dd { (when(link.expires_at)) }
            dt { "Created" } dd { (when(Some(link.created_at))) }
            dt { "Campaign" } dd { (link.campaign.as_deref().unwrap_or("—")) }
            dt { "Recipient" } dd { (link.recipient_ref.as_deref().unwrap_or("—")) }
            dt { "Tags" } dd { (link.tags.join(", ")) }
            dt { "Clicks (all time)" } dd { (link.visit_count) }
            dt { "Last click" } dd { (when(link.last_visit_at)) }
            @if link.valid_since.is_some() { dt { "Opens" } dd { (when(link.valid_since)) } }
            @if let Some(url) = &link.not_yet_url { dt { "Before it opens" } dd { (url) } }
            @if let Some(url) = &link.expired_url { dt { "After it expires" } dd { (url) } }
            dt { "Rules" } dd {
                (link.rules.as_ref().map_or(0, Vec::len)) " · "
                a href={ "/console/links/" (link.code) "/rules" } { "edit and preview" }
                " · "
                a href={ "/console/links/" (link.code) "/ab" } { "A/B results and conversions" }
            }
            @if let Some(cap) = link.max_visits { dt { "Visit cap" } dd { (cap) } }
            @if link.password_protected { dt { "Password" } dd { "protected" } }
            dt { "Preview card" } dd {
                (link.preview.as_ref().map_or("none", |card| card.title.as_str())) " · "
                a href={ "/console/links/" (link.code) "/card" } { "edit and preview" }
            }
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct QrQuery {
    format: Option<QrFormat>,
}

/// The QR code as a file to download (the API's route needs a bearer key, the browser has a
/// session instead).
pub async fn qr_file(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Query(query): Query<QrQuery>,
) -> PageResult {
    let link = LinkView::new(state.links.get(operator.workspace, &code).await?, &domains);
    if link.state != "live" {
        return Err(Error::Gone.into());
    }
    let url = link.short_url.ok_or_else(|| Error::Request {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        code: "no_public_base",
        message: "no issuing domain is configured".into(),
    })?;
    let format = query.format.unwrap_or_default();
    let (content_type, body) = qr::render(&url, format, 1024)?;
    let extension = match format {
        QrFormat::Svg => "svg",
        QrFormat::Png => "png",
    };
    Ok((
        [
            (CONTENT_TYPE, content_type.to_owned()),
            (CACHE_CONTROL, "private, max-age=3600".to_owned()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"{}.{extension}\"", link.code),
            ),
        ],
        body,
    )
        .into_response())
}
