//! Domains: the health of the signed-in workspace's domains as `GET /api/v1/domains` reports it
//! to its keys, and where its new links are issued (its part of the bases nginx sends with each
//! request). Another workspace's domains never show, not even in the pool line. An operator's
//! session sees every domain, by workspace, as the operator's key does in the API.

use super::layout::{self, when};
use super::operator::{InstanceOperator, Operator};
use super::page::PageResult;
use super::session::Person;
use crate::http::{AppState, DomainContext};
use axum::extract::State;
use axum::response::IntoResponse;
use maud::{html, Markup};
use shortlink_domains::health::DomainStatus;

pub async fn page(
    State(state): State<AppState>,
    person: Person,
    domains: DomainContext,
) -> PageResult {
    match person {
        Person::Workspace(operator) => workspace_page(&state, &operator, domains),
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
        (health_table(&statuses, true))
    };
    layout::operator_page(operator, "Domains", body).into_response()
}

fn workspace_page(state: &AppState, operator: &Operator, domains: DomainContext) -> PageResult {
    let workspace = operator.workspace_slug.as_str();
    let statuses = state.domains.statuses_of(workspace);
    let mut pool = domains.own_domains.clone();
    let issuing = (domains.in_workspace(workspace, state)).issuing_description();
    pool.retain(|domain| state.domains.workspace_of(domain) == workspace);
    pool.sort();
    pool.dedup();
    let body = html! {
        h1 { "Domains" }
        p { "New links are issued on: " strong { (issuing) } }
        p { "Short domains of this workspace (nginx's pool and --short-domains; its codes answer on each): "
            @if pool.is_empty() { "none reported" } @else { strong { (pool.join(", ")) } }
        }
        (health_table(&statuses, false))
    };
    Ok(layout::page(operator, "Domains", body).into_response())
}

/// The domains' last checks; with their workspace for the operator.
fn health_table(statuses: &[DomainStatus], with_workspace: bool) -> Markup {
    let columns = if with_workspace { 7 } else { 6 };
    html! {
        div.wide { table {
            thead { tr {
                @if with_workspace { th scope="col" { "Workspace" } }
                th scope="col" { "Domain" } th scope="col" { "State" } th scope="col" { "Why" }
                th.num scope="col" { "Issued" } th.num scope="col" { "Human clicks" } th scope="col" { "Last check" }
            } }
            tbody {
                @for d in statuses {
                    tr {
                        @if with_workspace { td { (d.workspace) } }
                        td { (d.domain) }
                        td { (d.state.as_str()) }
                        td { (d.reasons.join("; ")) }
                        td.num { (d.issued) }
                        td.num { (d.clicks) }
                        td { @if d.last_probe.is_some() { (when(d.last_probe)) } @else { "not yet" } }
                    }
                }
                @if statuses.is_empty() { tr { td colspan=(columns) { "No short domain is known yet." } } }
            }
        } }
        p.hint { "Issued and clicks count the health window of the domain checks. A domain is "
            "unknown until its first check, which starts as soon as a request names it." }
    }
}
