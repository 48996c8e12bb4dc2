//! The Privacy page (a workspace's admin): the workspace's erase requests, newest first, as
//! `GET /api/v1/subjects/requests` lists them. Never a ref: a request keeps its selector's kind
//! and counts only (docs/PRIVACY.md). A `running` one was cut short and is finished by sending
//! it again.

use super::layout::{self, when};
use super::operator::Operator;
use super::page::PageResult;
use axum::extract::State;
use axum::response::IntoResponse;
use chrono::DateTime;
use maud::html;
use shortlink_api::AppState;
use shortlink_visits::subjects::SubjectService;

/// Requests shown.
const PAGE: u32 = 100;

pub async fn page(State(state): State<AppState>, operator: Operator) -> PageResult {
    operator.require_admin()?;
    let service = SubjectService::new(state.analytics.store.clone(), state.links.clone());
    let requests = service.requests(operator.workspace, PAGE).await?;
    let body = html! {
        h1 { "Privacy requests" }
        p { "Erasures of a recipient's data (here or through " code { "POST /api/v1/subjects/erase" }
            "), newest first. What an erase removes and what stays: docs/PRIVACY.md." }
        div.wide { table {
            thead { tr {
                th scope="col" { "Made" } th scope="col" { "Request" } th scope="col" { "By" }
                th scope="col" { "State" } th scope="col" { "Links" } th scope="col" { "Visits" }
                th scope="col" { "Conversions" } th scope="col" { "Finished" }
            } }
            tbody {
                @for r in &requests {
                    tr {
                        td { (when(DateTime::from_timestamp_millis(r.created_ms))) }
                        td { (r.key) br; code { (r.id) } }
                        td { (r.selector) }
                        td { @if r.done { "done" } @else { "running (send it again to finish)" } }
                        td { (r.links) } td { (r.visits) } td { (r.conversions) }
                        td { (when(r.finished_ms.and_then(DateTime::from_timestamp_millis))) }
                    }
                }
                @if requests.is_empty() { tr { td colspan="8" { "No request yet." } } }
            }
        } }
        (super::subject_forms::forms(&operator))
    };
    Ok(layout::page(&operator, "Privacy requests", body).into_response())
}
