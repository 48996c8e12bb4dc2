//! A campaign's delivery funnel (issue 68): what `GET /api/v1/campaigns/{campaign}/funnel`
//! answers, drawn (sent → delivered → clicked → converted, with failed by error code, rejected
//! and expired beside) and as tables per short domain and per carrier, with the delivered rate
//! over time below. A page of its own, as the totals: the funnel reads every link of the
//! campaign, which a recipients page that costs the same per 50 must not.

use super::chart;
use super::layout::{self, when};
use super::operator::Operator;
use super::page::{encode, PageResult};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use maud::{html, Markup};
use shortlink_api::{AppState, Error, Path};
use shortlink_visits::deliveries::{DeliveryState, FunnelCounts, RatePoint};
use std::collections::BTreeMap;

pub async fn page(
    State(state): State<AppState>,
    operator: Operator,
    Path(campaign): Path<String>,
) -> PageResult {
    let funnels = state.analytics.store.funnels();
    let (funnel, rate) = tokio::try_join!(
        funnels.funnel(operator.workspace, &campaign),
        funnels.delivered_rate(operator.workspace, &campaign)
    )?;
    let funnel = funnel.ok_or(Error::Request {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: "no link has this campaign".into(),
    })?;
    let total = &funnel.total;
    let sent = total.units - total.no_receipt;
    // Each step a subset of the one before: clicked among delivered, converted among those.
    let stages = [
        ("Sent", sent),
        ("Delivered", total.state(DeliveryState::Delivered)),
        ("Clicked", total.clicked_delivered),
        ("Converted", total.converted_delivered),
    ];
    let clicked_undelivered = total.clicked - total.clicked_delivered;
    let bucket = format_bucket(rate.bucket_ms);
    let label = |point: &RatePoint| {
        let percent = point.percent().unwrap_or_default();
        format!(
            "{}: {} of {} delivered ({percent:.0}%)",
            when(Some(point.start)),
            point.delivered,
            point.finals
        )
    };
    let body = html! {
        h1 { "Campaign " (campaign) ": delivery funnel" }
        p { a href={ "/console/campaigns?name=" (encode(&campaign)) } { "Recipients" } }
        div.cards {
            div.card { "Links" b { (funnel.links) } }
            @for (name, n) in &stages { div.card { (name) b { (n) } } }
            div.card { "Failed" b { (total.state(DeliveryState::Failed)) } }
            div.card { "Rejected" b { (total.state(DeliveryState::Rejected)) } }
            div.card { "No receipt" b { (total.no_receipt) } }
            div.card { "Clicked, not reported delivered" b { (clicked_undelivered) } }
        }
        (chart::funnel(&stages))
        p.hint { "Sent: messages a gateway reported anything of (a re-send is a second message). "
            "Each step counts among the one before: clicked, the delivered messages whose link had "
            "a human click; converted, those of them with a conversion. Clicks on links whose "
            "message has no delivery report (not yet reported, or reported otherwise) are beside: "
            "Clicked, not reported delivered. Links: " (funnel.links) ", with a human click "
            (funnel.clicked_links) ", with a conversion " (funnel.converted_links) ". Failed and "
            "rejected messages by the gateway's error code are in the tables below." }
        h2 { "Delivered rate over time" }
        @if rate.points.is_empty() {
            p { "No message of this campaign has a final report (delivered, failed, rejected, expired) yet." }
        } @else {
            (chart::rate_line(&rate.points, RatePoint::percent, label, |point: &RatePoint| {
                point.start.format("%b %d %H:%M").to_string()
            }))
            p.hint { "Of the messages whose final report falls in each " (bucket)
                ", those delivered (by the gateway's time of the report)." }
        }
        h2 { "Per short domain" }
        (counts_table("Short domain", std::iter::once((None, total)).chain(
            funnel.by_domain.iter().map(|(domain, counts)| (Some(domain.as_deref()), counts)))))
        p.hint { "A domain is known where the receipts named the link by its short URL." }
        h2 { "Per carrier" }
        (counts_table("Carrier", std::iter::once((None, total)).chain(
            funnel.by_carrier.iter().map(|(carrier, counts)| (Some(carrier.as_deref()), counts)))))
    };
    Ok(layout::page(&operator, &format!("Campaign {campaign}"), body).into_response())
}

fn format_bucket(ms: i64) -> String {
    match ms {
        60_000 => "minute".into(),
        3_600_000 => "hour".into(),
        86_400_000 => "day".into(),
        ms if ms % 3_600_000 == 0 => format!("{} hours", ms / 3_600_000),
        ms => format!("{} minutes", ms / 60_000),
    }
}

/// One row per part: `None` is the campaign's total, `Some(None)` the part no receipt named.
fn counts_table<'a>(
    part: &str,
    rows: impl Iterator<Item = (Option<Option<&'a str>>, &'a FunnelCounts)>,
) -> Markup {
    use DeliveryState::*;
    html! {
        div.wide { table.funnel {
            thead { tr {
                th scope="col" { (part) } th.num scope="col" { "Messages" }
                th.num scope="col" { "Submitted" } th.num scope="col" { "Buffered" }
                th.num scope="col" { "Unknown" } th.num scope="col" { "Delivered" }
                th.num scope="col" { "Failed" } th.num scope="col" { "Rejected" }
                th.num scope="col" { "Expired" } th.num scope="col" { "No receipt" }
                th.num scope="col" { "Clicked" } th.num scope="col" { "Converted" }
            } }
            tbody {
                @for (name, c) in rows {
                    tr {
                        th scope="row" { @match name {
                            None => "All",
                            Some(None) => "(none named)",
                            Some(Some(name)) => (name),
                        } }
                        td.num { (c.units) }
                        td.num { (c.state(Submitted)) } td.num { (c.state(Buffered)) }
                        td.num { (c.state(Unknown)) } td.num { (c.state(Delivered)) }
                        td.num { (c.state(Failed)) (by_error(&c.failed_errors)) }
                        td.num { (c.state(Rejected)) (by_error(&c.rejected_errors)) }
                        td.num { (c.state(Expired)) } td.num { (c.no_receipt) }
                        td.num { (c.clicked) } td.num { (c.converted) }
                    }
                }
            }
        } }
    }
}

/// `err 005: 3` lines under a count; `(none)` for a report without a code.
fn by_error(errors: &BTreeMap<String, i64>) -> Markup {
    html! {
        @for (code, n) in errors {
            br;
            small.error-code {
                "err " @if code.is_empty() { "(none)" } @else { (code) } ": " (n)
            }
        }
    }
}
