//! `/console/held`, the workspace's links held back by the threat checks (issue 79; its admins
//! only, as `GET /api/v1/quarantines` and the audit log): the links a feed quarantined after
//! they were sent (held or released, with the feed and the entry), each held one with its
//! release, and the targets refused at create lately (`link.refused` rows).

use super::form::{AdminForm, Confirmed, Posted};
use super::layout::{self, when};
use super::operator::Operator;
use super::page::{see_other, PageResult};
use axum::extract::State;
use axum::response::IntoResponse;
use maud::html;
use shortlink_api::{AppState, Path};
use shortlink_store::audit::AuditFilter;

/// The refusals the page shows, newest first.
const REFUSED: u32 = 50;

pub async fn page(State(state): State<AppState>, operator: Operator) -> PageResult {
    operator.require_admin()?;
    let quarantines = state.links.quarantines(operator.workspace).await?;
    let filter = AuditFilter {
        workspace_id: Some(operator.workspace.get()),
        action: Some("link.refused".into()),
        limit: REFUSED,
        ..AuditFilter::default()
    };
    let refused = state.links.storage().list_audit(&filter).await?;
    // A refusal's changes: `[null, value]` per field (feed, entry, target).
    let change = |row: &shortlink_store::audit::AuditRecord, field: &str| {
        let changes: serde_json::Value = serde_json::from_str(&row.changes).unwrap_or_default();
        changes[field][1].as_str().unwrap_or_default().to_owned()
    };
    let body = html! {
        h1 { "Held back" }
        p.hint { "Links a threat feed listed after they were sent answer a warning page (451) "
            "instead of their target until released; a release holds while the feed keeps the "
            "entry. Also in the API at " code { "/api/v1/quarantines" } "." }
        h2 { "Quarantined" }
        div.wide { table.held {
            thead { tr {
                th scope="col" { "Link" } th scope="col" { "Feed" } th scope="col" { "Entry" }
                th scope="col" { "Since" } th scope="col" { "State" }
            } }
            tbody {
                @for q in &quarantines {
                    tr {
                        td { a href={ "/console/links/" (q.code) } { (q.code) } }
                        td { (q.feed) } td { code { (q.entry) } } td { (when(Some(q.quarantined_at))) }
                        td {
                            @match (&q.released_at, &q.released_by) {
                                (Some(at), by) => {
                                    "released " (when(Some(*at))) " by " (by.as_deref().unwrap_or(""))
                                }
                                (None, _) => form.inline method="post" action={ "/console/held/" (q.code) "/release" } {
                                    (layout::csrf(&operator))
                                    button type="submit" { "Release" }
                                },
                            }
                        }
                    }
                }
                @if quarantines.is_empty() { tr { td colspan="5" { "No link is quarantined." } } }
            }
        } }
        h2 { "Refused at create" }
        div.wide { table.refused {
            thead { tr {
                th scope="col" { "When" } th scope="col" { "Feed" } th scope="col" { "Entry" }
                th scope="col" { "Target" }
            } }
            tbody {
                @for row in &refused {
                    tr {
                        td { (when(chrono::DateTime::from_timestamp_millis(row.at_ms))) }
                        td { (row.object) } td { code { (change(row, "entry")) } }
                        td { code.target { (change(row, "target")) } }
                    }
                }
                @if refused.is_empty() { tr { td colspan="4" { "No target refused." } } }
            }
        } }
    };
    Ok(layout::page(&operator, "Held back", body).into_response())
}

/// Releases a quarantined link of the workspace (audited `link.released`, as the console user).
pub async fn release(
    State(state): State<AppState>,
    operator: Operator,
    Path(code): Path<String>,
    Posted(_, origin, ..): AdminForm<Confirmed>,
) -> PageResult {
    (state.links)
        .release(Some(operator.workspace), &code, &origin)
        .await?;
    Ok(see_other("/console/held"))
}
