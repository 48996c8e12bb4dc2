//! A link's visits under its page, newest first, each with its verdict and why (issue 78: "shown
//! where operators look… and why"). Read as the visit feed gives each visit away
//! (`shortlink_webhooks::link_visits`: the feed's rows and their conversion into the event that
//! `GET /api/v1/visits` and the webhooks send), so a verdict and its reasons here are the API's,
//! corrections by hindsight included; each reason in the words `GET /api/v1/links/{code}/visits`
//! gives beside its code (one table: `shortlink_webhooks::link_visits::WORDS`), a hosting network
//! named by its autonomous system. Paged by the last visit shown (`?before=`).

use super::layout::when;
use super::page::encode;
use axum::http::StatusCode;
use maud::{html, Markup};
use shortlink_api::{AppState, Error};
use shortlink_model::WorkspaceId;
use shortlink_webhooks::link_visits::{LinkVisits, VisitKey, VisitQuery};

/// Visits shown per page.
pub const PAGE: u32 = 50;

/// The page of `code`'s visits older than `before` (the `before` query value, if any).
pub async fn read(
    state: &AppState,
    workspace: WorkspaceId,
    code: &str,
    before: Option<&str>,
) -> Result<LinkVisits, Error> {
    let before = match before {
        None => None,
        Some(text) => Some(text.parse::<VisitKey>().map_err(|()| Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_query",
            message: "before is not a visit of this list".into(),
        })?),
    };
    let query = VisitQuery {
        before,
        audience: None,
        limit: PAGE,
    };
    let judge = &state.settings.click_judge;
    let system = |ip| judge.system(ip);
    let page = (state.webhooks).link_visits(workspace, code, &query, &system);
    page.await.map_err(Error::from)
}

/// The section: the table, and the links to the newest and the next older page.
pub fn section(code: &str, page: &LinkVisits, paged: bool) -> Markup {
    html! {
        section #visits {
            h2 { "Visits" }
            p.hint { "Every fetch of the link, newest first, with its verdict and why: the verdict "
                "the visit feed and webhooks carry, changed here when a sweep or a later visit "
                "corrects it (docs/BOTS.md). Only people count in the numbers above." }
            div.wide { table {
                thead { tr {
                    th scope="col" { "Time" } th scope="col" { "Verdict" } th scope="col" { "Why" }
                    th scope="col" { "Client" } th scope="col" { "Country" } th scope="col" { "Domain" }
                    th.num scope="col" { "Answer" }
                } }
                tbody {
                    @for visit in &page.visits {
                        @let event = &visit.event;
                        tr data-visit=(event.id) {
                            td { (when(Some(event.time))) }
                            td data-verdict=(event.id) { (event.audience) }
                            td data-reasons=(event.reasons.join(",")) {
                                @if visit.reasons.is_empty() { "a person by every signal" }
                                @for (i, reason) in visit.reasons.iter().enumerate() {
                                    @if i > 0 { "; " }
                                    (reason.words)
                                }
                            }
                            td { (visit.client) }
                            td { (event.country.as_deref().unwrap_or("—")) }
                            td { (event.short_domain.as_deref().unwrap_or("—")) }
                            td.num { (event.status.map_or_else(|| "—".to_owned(), |s| s.to_string())) }
                        }
                    }
                    @if page.visits.is_empty() { tr { td colspan="7" { "No visit stored yet." } } }
                }
            } }
            p {
                @if paged { a href={ "/console/links/" (code) "#visits" } { "Newest visits" } }
                @if paged && page.next.is_some() { " · " }
                @if let Some(next) = &page.next {
                    a rel="next" href={ "/console/links/" (code) "?before=" (encode(&next.to_string())) "#visits" } { "Older visits" }
                }
            }
        }
    }
}
