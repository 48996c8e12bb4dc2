//! `/api/v1/links`: create, read, update, revoke and list links.
//!
//! Handlers turn request bodies into validated domain values ([`NewLink`], [`LinkPatch`]) and
//! leave the write path to [`crate::service`]. Nothing is stored unless every field is valid.

use super::{AppState, DomainContext, Error, ErrorBody, Json, Path, Query, Result};
use crate::service::{Created, LinkPatch, NewLink};
use crate::storage::{self, Link, LinkState, ListCursor};
use crate::validate::TargetUrl;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/links", get(list_links).post(create_link))
        .route(
            "/links/{code}",
            get(get_link).patch(update_link).delete(revoke_link),
        )
}

pub const DEFAULT_REDIRECT: u16 = 302;
pub const DEFAULT_PAGE: u32 = 50;
pub const MAX_PAGE: u32 = 1000;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateLinkRequest {
    /// Absolute http(s) URL; IDN hosts are stored as punycode.
    #[schema(example = "https://shop.example/spring?utm_source=sms")]
    pub url: String,
    /// Custom alias `[A-Za-z0-9_-]{3,64}`, not of the generated-code shape; generated if absent.
    pub code: Option<String>,
    /// RFC 3339, in the future; fractions of a second are dropped.
    pub expires_at: Option<DateTime<Utc>>,
    /// 301, 302 (default), 307 or 308.
    #[schema(example = 302)]
    pub redirect: Option<u16>,
    /// Append the short URL's query string to the target (default false).
    pub forward_query: Option<bool>,
    /// Return the newest live link with the same URL (200) instead of creating one.
    pub idempotent: Option<bool>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateLinkRequest {
    pub url: Option<String>,
    /// RFC 3339 in the future, or `null` to remove the expiry.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<DateTime<Utc>>, nullable)]
    pub expires_at: Option<Option<DateTime<Utc>>>,
    pub redirect: Option<u16>,
    pub forward_query: Option<bool>,
}

/// `Some(value)` for a present field, `null` included; `#[serde(default)]` gives `None` for absent.
fn present<'de, D, T>(deserializer: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LinkView {
    pub code: String,
    pub url: String,
    /// Public base (header `X-Shortlink-Public-Base`, else `--public-base-url`) + `/` + code;
    /// `null` when neither is set.
    pub short_url: Option<String>,
    pub redirect: u16,
    pub forward_query: bool,
    /// `live`, `expired` or `revoked`.
    pub state: &'static str,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub visit_count: i64,
    pub last_visit_at: Option<DateTime<Utc>>,
}

impl LinkView {
    fn new(link: Link, domains: &DomainContext) -> Self {
        let state = match link.state(storage::now()) {
            LinkState::Live => "live",
            LinkState::Expired => "expired",
            LinkState::Revoked => "revoked",
        };
        LinkView {
            short_url: domains.short_url(&link.code),
            forward_query: link.flags.forward_query(),
            code: link.code,
            url: link.target,
            redirect: link.redirect,
            state,
            expires_at: link.expires_at,
            created_at: link.created_at,
            updated_at: link.updated_at,
            revoked_at: link.revoked_at,
            visit_count: link.visit_count,
            last_visit_at: link.last_visit_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LinkPage {
    pub links: Vec<LinkView>,
    /// Pass as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct ListParams {
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// 1..=1000, default 50.
    pub limit: Option<u32>,
}

fn redirect_status(value: Option<u16>) -> Result<u16> {
    match value.unwrap_or(DEFAULT_REDIRECT) {
        status @ (301 | 302 | 307 | 308) => Ok(status),
        other => Err(Error::invalid(
            "invalid_redirect",
            format!("redirect must be 301, 302, 307 or 308, not {other}"),
        )),
    }
}

fn expiry(value: DateTime<Utc>) -> Result<DateTime<Utc>> {
    // The Redis record carries whole seconds; keep SQL identical to it.
    let value = value.trunc_subsecs(0);
    if value <= Utc::now() {
        return Err(Error::invalid(
            "invalid_expiry",
            "expires_at must be in the future",
        ));
    }
    Ok(value)
}

fn target(state: &AppState, domains: &DomainContext, raw: &str) -> Result<TargetUrl> {
    Ok(state.settings.url_policy.check(raw, &domains.own_domains)?)
}

/// A code from the path that could name a link; anything else cannot exist.
fn path_code(state: &AppState, code: &str) -> Result<()> {
    if state.links.scheme().shape(code.as_bytes()).may_exist() {
        Ok(())
    } else {
        Err(Error::NotFound)
    }
}

/// Create a link.
#[utoipa::path(post, path = "/api/v1/links", tag = "links", request_body = CreateLinkRequest,
    responses(
        (status = 201, description = "created", body = LinkView),
        (status = 200, description = "idempotent: the existing live link for this URL", body = LinkView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, description = "the custom code is taken", body = ErrorBody),
        (status = 415, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, description = "database or redis unavailable; nothing stored", body = ErrorBody),
    ))]
pub async fn create_link(
    State(state): State<AppState>,
    domains: DomainContext,
    Json(request): Json<CreateLinkRequest>,
) -> Result<(StatusCode, Json<LinkView>)> {
    let target = target(&state, &domains, &request.url)?;
    if let Some(code) = &request.code {
        shortcode::parse_alias(state.links.scheme(), code)
            .map_err(|e| Error::invalid("invalid_code", e.to_string()))?;
    }
    let new = NewLink {
        target,
        code: request.code,
        expires_at: request.expires_at.map(expiry).transpose()?,
        redirect: redirect_status(request.redirect)?,
        forward_query: request.forward_query.unwrap_or(false),
        idempotent: request.idempotent.unwrap_or(false),
    };
    let (status, link) = match state.links.create(new).await? {
        Created::New(link) => (StatusCode::CREATED, link),
        Created::Existing(link) => (StatusCode::OK, link),
    };
    Ok((status, Json(LinkView::new(link, &domains))))
}

/// Read a link, in any state.
#[utoipa::path(get, path = "/api/v1/links/{code}", tag = "links",
    params(("code" = String, Path)),
    responses((status = 200, body = LinkView), (status = 404, body = ErrorBody)))]
pub async fn get_link(
    State(state): State<AppState>,
    domains: DomainContext,
    Path(code): Path<String>,
) -> Result<Json<LinkView>> {
    path_code(&state, &code)?;
    let link = state.links.get(&code).await?;
    Ok(Json(LinkView::new(link, &domains)))
}

/// Change a link's target, expiry, redirect status or query forwarding.
#[utoipa::path(patch, path = "/api/v1/links/{code}", tag = "links",
    params(("code" = String, Path)), request_body = UpdateLinkRequest,
    responses(
        (status = 200, body = LinkView), (status = 404, body = ErrorBody),
        (status = 410, description = "revoked links cannot change", body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 503, body = ErrorBody),
    ))]
pub async fn update_link(
    State(state): State<AppState>,
    domains: DomainContext,
    Path(code): Path<String>,
    Json(request): Json<UpdateLinkRequest>,
) -> Result<Json<LinkView>> {
    path_code(&state, &code)?;
    let patch = LinkPatch {
        target: request
            .url
            .as_deref()
            .map(|raw| target(&state, &domains, raw))
            .transpose()?,
        expires_at: request
            .expires_at
            .map(|at| at.map(expiry).transpose())
            .transpose()?,
        redirect: request
            .redirect
            .map(|status| redirect_status(Some(status)))
            .transpose()?,
        forward_query: request.forward_query,
    };
    if patch.target.is_none()
        && patch.expires_at.is_none()
        && patch.redirect.is_none()
        && patch.forward_query.is_none()
    {
        return Err(Error::invalid(
            "empty_patch",
            "give at least one of url, expires_at, redirect, forward_query",
        ));
    }
    let link = state.links.update(&code, patch).await?;
    Ok(Json(LinkView::new(link, &domains)))
}

/// Revoke a link: it answers 410 from now on and its code is never reissued. Revoking again
/// returns the revoked link unchanged (200).
#[utoipa::path(delete, path = "/api/v1/links/{code}", tag = "links",
    params(("code" = String, Path)),
    responses(
        (status = 200, body = LinkView), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn revoke_link(
    State(state): State<AppState>,
    domains: DomainContext,
    Path(code): Path<String>,
) -> Result<Json<LinkView>> {
    path_code(&state, &code)?;
    let link = state.links.revoke(&code).await?;
    Ok(Json(LinkView::new(link, &domains)))
}

/// List links, newest first (keyset pagination).
#[utoipa::path(get, path = "/api/v1/links", tag = "links", params(ListParams),
    responses((status = 200, body = LinkPage), (status = 400, body = ErrorBody)))]
pub async fn list_links(
    State(state): State<AppState>,
    domains: DomainContext,
    Query(params): Query<ListParams>,
) -> Result<Json<LinkPage>> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_query",
            message: format!("limit must be 1 to {MAX_PAGE}"),
        });
    }
    let cursor = params
        .cursor
        .as_deref()
        .map(|text| {
            ListCursor::decode(text).ok_or(Error::Request {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_cursor",
                message: "cursor is not a next_cursor from this API".into(),
            })
        })
        .transpose()?;
    // One extra row tells whether there is a next page.
    let mut links = state.links.list(cursor.as_ref(), limit + 1).await?;
    let next_cursor = if links.len() > limit as usize {
        links.truncate(limit as usize);
        links.last().map(|last| {
            ListCursor {
                created_at: last.created_at,
                code: last.code.clone(),
            }
            .encode()
        })
    } else {
        None
    };
    Ok(Json(LinkPage {
        links: links
            .into_iter()
            .map(|link| LinkView::new(link, &domains))
            .collect(),
        next_cursor,
    }))
}
