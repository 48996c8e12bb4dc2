//! Not-found redirects (issue 70): where the workspace's short domains send the bare root, an
//! unknown code and an expired or revoked link without an `expired_url` of its own, instead of
//! 404 and 410. `GET/PUT /api/v1/not-found-redirects` for the workspace, `GET/PUT/DELETE
//! /api/v1/domains/{domain}/not-found-redirects` for one of its domains (another workspace's
//! domain answers as one never seen). A domain's setting beats its workspace's; unset falls
//! through. Stored in SQL, audited, and projected to Redis (`sl:nf`), where nginx's workers
//! read it within a second (`ngx-module/src/not_found.rs`).
//!
//! A domain's setting belongs to the workspace that maps the domain now (issue 77). Redis keys
//! each domain's setting by its workspace and both the module and the fallback apply only the
//! one of the workspace nginx maps the host to, so a former owner's row never answers; and when
//! nginx's issuing list shows a domain moved ([`super::moved::drop_moved`]), the former owner's row is dropped
//! (not handed over: a URL one brand chose for its visitors is not another brand's to inherit),
//! audited in the former owner's log, and the hash rewritten.

use super::moved::reproject;
use super::scope::known;
use crate::{AppState, DomainContext, ErrorBody, InWorkspace, Json, Path, Recorder, Result};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_core::service::accept::lifecycle_url;
use shortlink_model::WorkspaceId;
use shortlink_store::audit::{Changes, Origin};
use shortlink_store::NotFoundRedirects;
use utoipa::ToSchema;

/// The three URLs; each absent or `null` is unset (the domain's falls through to its
/// workspace's, the workspace's to today's 404 or 410). A PUT replaces all three.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NotFoundRequest {
    /// Where the bare root (`/`) is sent: an absolute http(s) URL, checked as a link's target
    /// (not on one of our own domains: it would loop).
    #[schema(schema_with = shortlink_model::schema::optional_url)]
    pub root_url: Option<String>,
    /// Where an unknown code is sent (no such link, another workspace's code, a path no code
    /// can be).
    #[schema(schema_with = shortlink_model::schema::optional_url)]
    pub unknown_url: Option<String>,
    /// Where an expired or revoked link without an `expired_url` of its own is sent.
    #[schema(schema_with = shortlink_model::schema::optional_url)]
    pub expired_url: Option<String>,
}

/// The settings as stored; `null`: unset.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotFoundView {
    /// The domain these settings are for; `null`: the workspace's own.
    pub domain: Option<String>,
    pub root_url: Option<String>,
    pub unknown_url: Option<String>,
    pub expired_url: Option<String>,
    /// `null`: never set (all three unset).
    pub updated_at: Option<DateTime<Utc>>,
}

fn view(domain: &str, row: Option<NotFoundRedirects>) -> NotFoundView {
    let domain = (!domain.is_empty()).then(|| domain.to_owned());
    match row {
        Some(row) => NotFoundView {
            domain,
            root_url: row.root_url,
            unknown_url: row.unknown_url,
            expired_url: row.expired_url,
            updated_at: Some(row.updated_at),
        },
        None => NotFoundView {
            domain,
            root_url: None,
            unknown_url: None,
            expired_url: None,
            updated_at: None,
        },
    }
}

pub use shortlink_core::projection::not_found::redirects;

/// The row of (workspace, domain), if any.
pub async fn stored(
    state: &AppState,
    workspace: WorkspaceId,
    domain: &str,
) -> Result<Option<NotFoundRedirects>> {
    let rows = state
        .links
        .storage()
        .not_found_redirects(Some(workspace))
        .await?;
    Ok(rows.into_iter().find(|row| row.domain == domain))
}

/// The workspace's own not-found redirects.
#[utoipa::path(get, path = "/api/v1/not-found-redirects", tag = "domains",
    responses((status = 200, body = NotFoundView)))]
pub async fn get_workspace(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<NotFoundView>> {
    Ok(Json(view("", stored(&state, workspace, "").await?)))
}

/// Set the workspace's not-found redirects (all three; absent or `null` unsets one).
#[utoipa::path(put, path = "/api/v1/not-found-redirects", tag = "domains",
    request_body = NotFoundRequest,
    responses(
        (status = 200, body = NotFoundView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "a URL that is no target (`invalid_url`, `url_too_long`, \
            `self_redirect`, ...): the message names the field", body = ErrorBody),
        (status = 503, description = "Redis is unavailable: stored in SQL, nginx sees it once \
            Redis is back (any later change or a resync writes it)", body = ErrorBody),
    ))]
pub async fn put_workspace(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    domains: DomainContext,
    Json(request): Json<NotFoundRequest>,
) -> Result<Json<NotFoundView>> {
    save(&state, workspace, origin, &domains.own_domains, "", request).await
}

/// A domain's not-found redirects (each unset one falls through to the workspace's).
#[utoipa::path(get, path = "/api/v1/domains/{domain}/not-found-redirects", tag = "domains",
    params(("domain" = String, Path)),
    responses(
        (status = 200, body = NotFoundView),
        (status = 404, description = "`unknown_domain`: no request or setting has named this domain, or it is another workspace's; \
            `no_not_found_redirects`: the domain has none of its own (never set, or deleted)", body = ErrorBody),
    ))]
pub async fn get_domain(
    State(state): State<AppState>,
    workspace: InWorkspace,
    _named: DomainContext,
    Path(domain): Path<String>,
) -> Result<Json<NotFoundView>> {
    let status = known(&state, Some(workspace), &domain)?;
    let row = stored(&state, workspace.0, &status.domain).await?;
    let row = row.ok_or_else(|| crate::Error::Request {
        status: StatusCode::NOT_FOUND,
        code: "no_not_found_redirects",
        message: "the domain has no not-found redirects of its own (its workspace's apply)".into(),
    })?;
    Ok(Json(view(&status.domain, Some(row))))
}

/// Set a domain's not-found redirects (all three; absent or `null` unsets one).
#[utoipa::path(put, path = "/api/v1/domains/{domain}/not-found-redirects", tag = "domains",
    params(("domain" = String, Path)),
    request_body = NotFoundRequest,
    responses(
        (status = 200, body = NotFoundView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 404, description = "`unknown_domain`: no request or setting has named this domain, or it is another workspace's", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "a URL that is no target: the message names the field", body = ErrorBody),
        (status = 503, description = "Redis is unavailable (stored in SQL)", body = ErrorBody),
    ))]
pub async fn put_domain(
    State(state): State<AppState>,
    workspace: InWorkspace,
    Recorder(origin): Recorder,
    domains: DomainContext,
    Path(domain): Path<String>,
    Json(request): Json<NotFoundRequest>,
) -> Result<Json<NotFoundView>> {
    let status = known(&state, Some(workspace), &domain)?;
    save(
        &state,
        workspace.0,
        origin,
        &domains.own_domains,
        &status.domain,
        request,
    )
    .await
}

/// Remove a domain's not-found redirects: it falls through to its workspace's.
#[utoipa::path(delete, path = "/api/v1/domains/{domain}/not-found-redirects", tag = "domains",
    params(("domain" = String, Path)),
    responses(
        (status = 204),
        (status = 404, description = "`unknown_domain`", body = ErrorBody),
        (status = 503, description = "Redis is unavailable (deleted in SQL)", body = ErrorBody),
    ))]
pub async fn delete_domain(
    State(state): State<AppState>,
    workspace: InWorkspace,
    Recorder(origin): Recorder,
    domains: DomainContext,
    Path(domain): Path<String>,
) -> Result<StatusCode> {
    let status = known(&state, Some(workspace), &domain)?;
    let request = NotFoundRequest::default();
    save(
        &state,
        workspace.0,
        origin,
        &domains.own_domains,
        &status.domain,
        request,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Checks, stores, audits and projects the settings of (workspace, domain) (empty: the
/// workspace's own); `own`: our short domains, which no URL may name (it would loop). The API's
/// routes and the console's page.
pub async fn save(
    state: &AppState,
    workspace: WorkspaceId,
    origin: Origin,
    own: &[String],
    domain: &str,
    request: NotFoundRequest,
) -> Result<Json<NotFoundView>> {
    let policy = &state.settings.url_policy;
    let row = NotFoundRedirects {
        workspace,
        domain: domain.to_owned(),
        root_url: lifecycle_url(policy, own, request.root_url, "root_url")?,
        unknown_url: lifecycle_url(policy, own, request.unknown_url, "unknown_url")?,
        expired_url: lifecycle_url(policy, own, request.expired_url, "expired_url")?,
        updated_at: Utc::now(),
    };
    let before = stored(state, workspace, domain).await?;
    let storage = state.links.storage();
    storage.put_not_found_redirects(&row).await?;
    let url = |row: Option<&NotFoundRedirects>, pick: fn(&NotFoundRedirects) -> &Option<String>| {
        row.and_then(|row| pick(row).clone())
    };
    let mut changes = Changes::new();
    for (field, pick) in [
        (
            "root_url",
            (|r| &r.root_url) as fn(&NotFoundRedirects) -> &Option<String>,
        ),
        ("unknown_url", |r| &r.unknown_url),
        ("expired_url", |r| &r.expired_url),
    ] {
        changes = changes.diff(field, url(before.as_ref(), pick), url(Some(&row), pick));
    }
    let object = if domain.is_empty() {
        "workspace"
    } else {
        domain
    };
    let entry = origin.entry("not_found_redirects.set", object, changes);
    storage.append_audit(&entry).await?;
    reproject(state).await?;
    let row = (!row.is_empty()).then_some(row);
    Ok(Json(view(domain, row)))
}
