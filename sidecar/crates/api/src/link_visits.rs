//! `GET /api/v1/links/{code}/visits` (issue 78, "shown where operators look… and why"): one
//! link's stored visits, newest first, each with its verdict and the reasons for it, as codes
//! and in the words the console's link page shows. Read through the console's very function
//! (`shortlink_webhooks::link_visits`: the visit feed's rows and their conversion), so a verdict
//! here is the feed's and the console's, corrections by hindsight included.

use super::{AppState, Error, ErrorBody, InWorkspace, Json, Path, Query, Result};
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_webhooks::link_visits::{LinkVisit, Reason, VisitKey, VisitQuery};
use shortlink_wire::agent::Audience;
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new().route("/links/{code}/visits", get(link_visits))
}

const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LinkVisitsParams {
    /// Resume after this cursor (the previous page's `next`): the visits older than it.
    #[param(pattern = "^[0-9]{1,18}_[!-~]{1,128}$")]
    pub after: Option<String>,
    /// Only visits with this verdict: `people` (or `human`), `preview`, `scanner`, `bot`; `all`
    /// (the default) for every one.
    #[param(pattern = "^(all|people|human|preview|scanner|bot)$")]
    pub verdict: Option<String>,
    /// Visits at most, 1..=1000 (default 100).
    #[param(schema_with = limit_schema)]
    pub limit: Option<u32>,
}

/// `limit`'s bounds in the document, read from the ones the handler enforces.
fn limit_schema() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{SchemaType, Type};
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .minimum(Some(1))
        .maximum(Some(MAX_LIMIT))
        .into()
}

/// A page of a link's visits.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkVisitsPage {
    /// Newest first; visits of one instant by id, the greater first.
    pub visits: Vec<LinkVisitView>,
    /// The cursor of the next (older) page (`after`); null on the last page.
    pub next: Option<String>,
}

/// One stored visit (a fetch of the link) and why it got its verdict.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkVisitView {
    /// The visit's id: its click event's `id` in the visit feed and webhooks.
    pub id: String,
    /// When nginx answered it.
    pub time: DateTime<Utc>,
    /// `human`, `preview`, `scanner` or `bot` (docs/BOTS.md): the feed's `audience`, as
    /// corrected since.
    pub verdict: String,
    /// Why, in docs/BOTS.md's order; empty for a person by every signal.
    pub reasons: Vec<Reason>,
    /// Who fetched, in the console's words: the agent table's label, else the browser on its
    /// system.
    pub client: String,
    /// Which bot or preview fetcher (the agent table's label).
    pub agent: Option<String>,
    pub browser: Option<String>,
    pub os: Option<String>,
    pub device: String,
    /// ISO 3166-1 alpha-2.
    pub country: Option<String>,
    /// The host the visit came to.
    pub short_domain: Option<String>,
    /// The HTTP status nginx answered (a redirect, or 410).
    pub status: Option<i64>,
}

impl From<LinkVisit> for LinkVisitView {
    fn from(visit: LinkVisit) -> Self {
        let event = visit.event;
        LinkVisitView {
            id: event.id,
            time: event.time,
            verdict: event.audience,
            reasons: visit.reasons,
            client: visit.client,
            agent: event.agent,
            browser: event.browser,
            os: event.os,
            device: event.device,
            country: event.country,
            short_domain: event.short_domain,
            status: event.status,
        }
    }
}

/// The verdict `verdict=` names; `None` for every one.
fn audience(verdict: Option<&str>) -> Result<Option<Audience>> {
    match verdict.unwrap_or("all") {
        "all" => Ok(None),
        "people" => Ok(Some(Audience::Human)),
        text => Audience::parse(text).map(Some).ok_or_else(|| {
            Error::bad_query("verdict must be all, people, human, preview, scanner or bot")
        }),
    }
}

/// A link's visits, newest first, each with its verdict and reasons; go on with `after` =
/// `next` until `next` is null. Another workspace's link answers 404, as one that does not
/// exist.
#[utoipa::path(get, path = "/api/v1/links/{code}/visits", tag = "visits",
    params(("code" = String, Path, description = "The link's code"), LinkVisitsParams),
    responses(
        (status = 200, body = LinkVisitsPage),
        (status = 400, description = "`invalid_query`: a bad `after`, `verdict` or `limit` (the message names it)", body = ErrorBody),
        (status = 404, description = "no such link in the key's workspace", body = ErrorBody),
    ))]
pub async fn link_visits(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(code): Path<String>,
    Query(params): Query<LinkVisitsParams>,
) -> Result<Json<LinkVisitsPage>> {
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::bad_query(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    let before =
        match params.after.as_deref() {
            None => None,
            Some(text) => Some(text.parse::<VisitKey>().map_err(|()| {
                Error::bad_query("after is not a cursor from this list (its `next`)")
            })?),
        };
    let audience = audience(params.verdict.as_deref())?;
    // The link first: another workspace's code and an unknown one are the same 404.
    let link = state.links.get(workspace, &code).await?;
    let query = VisitQuery {
        before,
        audience,
        limit,
    };
    let judge = &state.settings.click_judge;
    let system = |ip| judge.system(ip);
    let page = (state.webhooks).link_visits(workspace, &link.code, &query, &system);
    let page = page.await?;
    Ok(Json(LinkVisitsPage {
        visits: page.visits.into_iter().map(LinkVisitView::from).collect(),
        next: page.next.map(|key| key.to_string()),
    }))
}
