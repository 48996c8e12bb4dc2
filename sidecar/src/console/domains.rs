//! Domains: the health of the signed-in workspace's domains as `GET /api/v1/domains` reports it
//! to its keys, and where its new links are issued (its part of the bases nginx sends with each
//! request). Another workspace's domains never show, not even in the pool line. An operator's
//! session sees every domain, by workspace, as the operator's key does in the API.
//!
//! Issue 55: whether each domain takes new links (active, drained by the health job or by hand,
//! pinned) with why, since when and what the check saw; a workspace admin restores, pins or
//! drains one with the buttons, as `POST /api/v1/domains/{domain}/…` does.
//!
//! Issue 70: above the table, each domain's human clicks over the health window beside its
//! workspace's other domains, with its drains and restores marked ([`super::domain_chart`]); below
//! it, the orphan visits of its domains ([`super::orphans`]).
//!
//! Issue 78: each domain's visits by verdict (people, previews, scanners, bots), the stats API's
//! numbers; the chart draws people only.

use super::domain_chart;
use super::form::{AdminForm, Confirmed, Posted};
use super::layout::{self, when};
use super::operator::{InstanceOperator, Operator};
use super::page::{see_other, PageResult};
use super::session::Person;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use chrono::Duration;
use maud::{html, Markup};
use shortlink_api::stats::{EntryView, MAX_TOP};
use shortlink_api::{AppState, DomainContext, Error, Path};
use shortlink_domains::drain::{Event, Mode};
use shortlink_domains::health::DomainStatus;
use shortlink_visits::rollup::Interval;

pub async fn page(
    State(state): State<AppState>,
    person: Person,
    domains: DomainContext,
) -> PageResult {
    match person {
        Person::Workspace(operator) => workspace_page(&state, &operator, domains).await,
        Person::Instance(operator) => Ok(installation_page(&state, &operator)),
    }
}

/// Every domain with its workspace: whose it is comes from the issuing list's parts.
fn installation_page(state: &AppState, operator: &InstanceOperator) -> axum::response::Response {
    let statuses = state.domains.statuses();
    let body = html! {
        h1 { "Domains" }
        p { "Every short domain of the installation, by the workspace whose part of the issuing "
            "list names it (a domain no part names is the default's)." }
        (health_table(&statuses, true, None))
    };
    layout::operator_page(operator, "Domains", body).into_response()
}

async fn workspace_page(
    state: &AppState,
    operator: &Operator,
    domains: DomainContext,
) -> PageResult {
    let workspace = operator.workspace_slug.as_str();
    let statuses = state.domains.statuses_of(workspace);
    let names: Vec<String> = statuses.iter().map(|s| s.domain.clone()).collect();
    let now = chrono::Utc::now();
    let chart = (state.analytics.store.domain_charts())
        .domain_chart(
            operator.workspace,
            &names,
            state.settings.domain_health_window,
            now,
        )
        .await?;
    let mut pool = domains.own_domains.clone();
    let issuing = (domains.in_workspace(workspace, state)).issuing_description();
    pool.retain(|domain| state.domains.workspace_of(domain) == workspace);
    pool.sort();
    pool.dedup();
    let orphans = super::orphans::section(state, workspace).await?;
    // The stats API's `short_domain` breakdown of all the workspace's links (`GET /api/v1/stats`).
    let month = Duration::days(AUDIENCE_DAYS);
    let stats = super::overview::global(state, operator.workspace, Interval::Day, month, MAX_TOP);
    let mut by_domain = stats.await?.breakdowns.short_domain;
    // A link's visit names the host it came on, which may be another workspace's domain: this
    // page never names one (a host no workspace owns is shown where its visits are).
    by_domain.retain(|entry| {
        (entry.value.as_deref()).is_none_or(|host| {
            (state.domains.owner_of(host)).is_none_or(|owner| owner == workspace)
        })
    });
    let body = html! {
        h1 { "Domains" }
        p { "New links are issued on: " strong { (issuing) } }
        p { "Short domains of this workspace (nginx's pool and --short-domains; its codes answer on each): "
            @if pool.is_empty() { "none reported" } @else { strong { (pool.join(", ")) } }
        }
        @if !statuses.is_empty() {
            h2 { "Clicks over the health window" }
            (domain_chart::charts(&chart, &statuses, now))
        }
        (health_table(&statuses, false, Some(operator)))
        (audience_table(&by_domain))
        (orphans)
    };
    Ok(layout::page(operator, "Domains", body).into_response())
}

/// The domains' last checks and drain states; with their workspace for the operator, with the
/// restore, pin and drain buttons for a workspace's admin.
fn health_table(
    statuses: &[DomainStatus],
    with_workspace: bool,
    admin: Option<&Operator>,
) -> Markup {
    let admin = admin.filter(|operator| operator.require_admin().is_ok());
    let columns = 7 + usize::from(with_workspace) + usize::from(admin.is_some());
    html! {
        div.wide { table {
            thead { tr {
                @if with_workspace { th scope="col" { "Workspace" } }
                th scope="col" { "Domain" } th scope="col" { "State" } th scope="col" { "Last check found" }
                th.num scope="col" { "Issued" } th.num scope="col" { "Human clicks" } th scope="col" { "Last check" }
                th scope="col" { "Drain: why, evidence" }
                @if admin.is_some() { th scope="col" { "Change" } }
            } }
            tbody {
                @for d in statuses {
                    tr {
                        @if with_workspace { td { (d.workspace) } }
                        td { (d.domain) }
                        td.state { (state_line(d)) }
                        td {
                            (d.state.as_str())
                            @if !d.reasons.is_empty() { ": " (d.reasons.join("; ")) }
                            // Receipts that are not this domain's fault (a dead route).
                            @for note in &d.receipt_notes { br; small.receipt-note { (note) } }
                        }
                        td.num { (d.issued) }
                        td.num { (d.clicks) }
                        td { @if d.last_probe.is_some() { (when(d.last_probe)) } @else { "not yet" } }
                        td { (drain_detail(d)) }
                        @if let Some(operator) = admin { td { (buttons(operator, d)) } }
                    }
                }
                @if statuses.is_empty() { tr { td colspan=(columns) { "No short domain is known yet." } } }
            }
        } }
        p.hint { "Issued and clicks count the health window of the domain checks. A domain is "
            "unknown until its first check, which starts as soon as a request names it. A domain "
            "found suspected-blocked or unreachable is drained (no new links) until it passes "
            "its healthy checks or is restored; a pinned one is never drained by the checks." }
    }
}

/// Days the domains' visits by verdict cover.
const AUDIENCE_DAYS: i64 = 30;

/// Each short domain's visits by verdict over [`AUDIENCE_DAYS`]: people, previews, scanners and
/// bots, as the stats API's `short_domain` breakdown counts them (hindsight's corrections
/// included). The chart above and the health check count people only.
fn audience_table(entries: &[EntryView]) -> Markup {
    html! {
        h2 { "Visits by verdict (" (AUDIENCE_DAYS) " days)" }
        div.wide { table {
            thead { tr {
                th scope="col" { "Domain" } th.num scope="col" { "People" } th.num scope="col" { "Previews" }
                th.num scope="col" { "Scanners" } th.num scope="col" { "Bots" }
            } }
            tbody {
                @for e in entries {
                    @let domain = e.value.as_deref().unwrap_or("unknown");
                    tr {
                        td { (domain) }
                        td.num data-domain-humans=(domain) { (e.humans) }
                        td.num data-domain-previews=(domain) { (e.previews) }
                        td.num data-domain-scanners=(domain) { (e.scanners) }
                        td.num data-domain-bots=(domain) { (e.bots) }
                    }
                }
                @if entries.is_empty() { tr { td colspan="5" { "No visit in these days." } } }
            }
        } }
        p.hint { "Every fetch of the workspace's links by the domain it came to: previews draw a "
            "messaging app's card, scanners judge the target for a carrier or a security service, "
            "bots are the rest (docs/BOTS.md). Only people count in the chart and the health check." }
    }
}

/// The one state a person acts on: whether the domain takes new links and, when it does not,
/// who drained it on what (the health check's own finding is in the next column).
fn state_line(d: &DomainStatus) -> String {
    let on = match (d.drain.by, &d.drain.evidence.receipts) {
        (shortlink_domains::drain::By::Operator, _) => "by hand",
        (_, Some(_)) => "on delivery receipts",
        _ => "by the health check",
    };
    match d.drain.mode {
        Mode::Active => d.state.as_str().into(),
        Mode::Pinned => "pinned: takes new links, never drained by the checks".into(),
        Mode::Drained => format!("no new links: drained {on} {}", when(d.drain.since)),
    }
}

/// The reason and the numbers that drained it: the receipts' (failures among final receipts,
/// against the other domains on that carrier), else the clicks' (seen against expected).
fn drain_detail(d: &DomainStatus) -> Markup {
    let evidence = &d.drain.evidence;
    html! {
        @if d.drain.since.is_some() {
            (d.drain.reason)
            @if let Some(r) = &evidence.receipts {
                br;
                small { (format!("{} of {} final receipts failed{} over {} min; the other domains: {} of {}",
                    r.failures, r.finals,
                    if r.carrier.is_empty() { String::new() } else { format!(" on {}", r.carrier) },
                    r.over_secs / 60, r.peer_failures, r.peer_finals)) }
                @if !r.top_errors.is_empty() { br; small { "Errors: " (r.top_errors.join(", ")) } }
            } @else if evidence.state.is_some() {
                br;
                small { (format!("{} human clicks seen when drained, about {:.0} expected, {} links issued",
                    evidence.clicks, evidence.expected_clicks, evidence.issued)) }
            }
            @if d.drain.mode == Mode::Drained && d.drain.healthy_checks > 0 {
                br; small { (d.drain.healthy_checks) " healthy checks in a row" }
            }
        }
    }
}

fn buttons(operator: &Operator, d: &DomainStatus) -> Markup {
    let actions: &[(&str, &str)] = match d.drain.mode {
        Mode::Active => &[("drain", "Drain"), ("pin", "Pin")],
        Mode::Drained => &[("restore", "Restore"), ("pin", "Pin")],
        Mode::Pinned => &[("restore", "Unpin"), ("drain", "Drain")],
    };
    html! {
        @for (action, label) in actions {
            form.inline method="post" action=(format!("/console/domains/{}/{action}", d.domain)) {
                (layout::csrf(operator))
                button type="submit" { (label) }
            }
        }
    }
}

/// A workspace admin's restore, pin or drain of one of its domains.
pub async fn change(
    State(state): State<AppState>,
    operator: Operator,
    Path((domain, action)): Path<(String, String)>,
    Posted(_, origin, ..): AdminForm<Confirmed>,
) -> PageResult {
    let event = match action.as_str() {
        "restore" => Event::Restore,
        "pin" => Event::Pin,
        "drain" => Event::Drain {
            reason: format!("drained by hand in the console by {}", operator.name),
        },
        _ => return Err(Error::NotFound.into()),
    };
    let ours = (state.domains.status(&domain))
        .filter(|status| status.workspace == operator.workspace_slug)
        .ok_or(Error::Request {
            status: StatusCode::NOT_FOUND,
            code: "unknown_domain",
            message: "no short domain of that name is known".into(),
        })?;
    (state.domains)
        .change_by_hand(state.links.storage().as_ref(), &origin, &ours.domain, event)
        .await
        .map_err(Error::from)?;
    Ok(see_other("/console/domains"))
}
