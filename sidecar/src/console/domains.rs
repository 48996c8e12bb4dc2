//! Domains: the health of the signed-in workspace's domains as `GET /api/v1/domains` reports it
//! to its keys, and where its new links are issued (its part of the bases nginx sends with each
//! request). Another workspace's domains never show, not even in the pool line.

use super::layout::{self, when};
use super::operator::Operator;
use super::page::PageResult;
use crate::http::{AppState, DomainContext};
use axum::extract::State;
use axum::response::IntoResponse;
use maud::html;

pub async fn page(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
) -> PageResult {
    let workspace = operator.workspace_slug.as_str();
    let statuses = state.domains.statuses_of(workspace);
    let mut pool = domains.own_domains.clone();
    let issuing = (domains.in_workspace(workspace, &state)).issuing_description();
    pool.retain(|domain| state.domains.workspace_of(domain) == workspace);
    pool.sort();
    pool.dedup();
    let body = html! {
        h1 { "Domains" }
        p { "New links are issued on: " strong { (issuing) } }
        p { "Short domains of this workspace (nginx's pool and --short-domains; its codes answer on each): "
            @if pool.is_empty() { "none reported" } @else { strong { (pool.join(", ")) } }
        }
        div.wide { table {
            thead { tr {
                th scope="col" { "Domain" } th scope="col" { "State" } th scope="col" { "Why" }
                th.num scope="col" { "Issued" } th.num scope="col" { "Human clicks" } th scope="col" { "Last check" }
            } }
            tbody {
                @for d in &statuses {
                    tr {
                        td { (d.domain) }
                        td { (d.state.as_str()) }
                        td { (d.reasons.join("; ")) }
                        td.num { (d.issued) }
                        td.num { (d.clicks) }
                        td { @if d.last_probe.is_some() { (when(d.last_probe)) } @else { "not yet" } }
                    }
                }
                @if statuses.is_empty() { tr { td colspan="6" { "No short domain is known yet." } } }
            }
        } }
        p.hint { "Issued and clicks count the health window of the domain checks. A domain is "
            "unknown until its first check, which starts as soon as a request names it." }
    };
    Ok(layout::page(&operator, "Domains", body).into_response())
}
