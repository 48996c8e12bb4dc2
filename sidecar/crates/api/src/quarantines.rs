//! Quarantined links (issue 79): `GET /api/v1/quarantines` lists the workspace's (held and
//! released, with the feed and entry that listed each), `POST /api/v1/links/{code}/release`
//! lets one answer again. Admins only (`auth::permits`); both act inside the caller's workspace.

use crate::links::{path_code, LinkView};
use crate::{AppState, DomainContext, ErrorBody, InWorkspace, Json, Path, Recorder, Result};
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Serialize;
use shortlink_store::Quarantine;
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/quarantines", get(list_quarantines))
        .route("/links/{code}/release", post(release_link))
}

/// A link a threat feed listed after it was created.
#[derive(Debug, Serialize, ToSchema)]
pub struct QuarantineView {
    pub code: String,
    /// The feed (`--threat-feeds` name) that listed the target.
    pub feed: String,
    /// The feed's entry the target matched: a host (it stands for its subdomains) or a URL.
    pub entry: String,
    pub quarantined_at: DateTime<Utc>,
    /// Set once released: the link answers again, and this entry does not quarantine it again
    /// while the feed lists it.
    pub released_at: Option<DateTime<Utc>>,
    /// Who released it (a key's name, a console user, `cli`).
    pub released_by: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct QuarantineList {
    pub quarantines: Vec<QuarantineView>,
}

impl From<Quarantine> for QuarantineView {
    fn from(q: Quarantine) -> Self {
        QuarantineView {
            code: q.code,
            feed: q.feed,
            entry: q.entry,
            quarantined_at: q.quarantined_at,
            released_at: q.released_at,
            released_by: q.released_by,
        }
    }
}

/// The workspace's quarantined links, held and released, newest first.
#[utoipa::path(get, path = "/api/v1/quarantines", tag = "links",
    responses((status = 200, body = QuarantineList)))]
pub async fn list_quarantines(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<QuarantineList>> {
    let rows = state.links.quarantines(workspace).await?;
    Ok(Json(QuarantineList {
        quarantines: rows.into_iter().map(QuarantineView::from).collect(),
    }))
}

/// Release a quarantined link: it redirects again (audited `link.released`), and the feed
/// entry that listed it does not quarantine it again while the feed keeps it (another entry
/// does). A link that is not quarantined is returned as it is.
#[utoipa::path(post, path = "/api/v1/links/{code}/release", tag = "links",
    params(("code" = String, Path)),
    responses(
        (status = 200, body = LinkView), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn release_link(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    domains: DomainContext,
    Path(code): Path<String>,
) -> Result<Json<LinkView>> {
    path_code(&state, &code)?;
    let link = state.links.release(Some(workspace), &code, &origin).await?;
    Ok(Json(LinkView::new(link, &domains)))
}
