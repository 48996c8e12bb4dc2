//! `/api/v1/links`: create, read, update, revoke and list links.
//!
//! Handlers turn request bodies into validated domain values ([`NewLink`], [`LinkPatch`]) and
//! leave the write path to [`shortlink_core::service`]. Nothing is stored unless every field is valid.

use super::{
    ApiKeyId, AppState, Budget, DomainContext, Error, ErrorBody, InWorkspace, Json, Path, Query,
    Recorder, Result,
};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::Extension;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_core::service::accept;
use shortlink_core::service::{self, Created, IdempotencyKey, NewLink};
pub use shortlink_core::service::{CreateLinkRequest, UpdateLinkRequest};
use shortlink_model::link::card::{self, CardSpec};
use shortlink_model::link::rules::{self, RuleSpec};
use shortlink_model::{Link, LinkState, WorkspaceId};
use shortlink_store::{self as storage, LinkFilter, ListCursor};
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/links", get(list_links).post(create_link))
        .route(
            "/links/{code}",
            get(get_link).patch(update_link).delete(revoke_link),
        )
}

pub const DEFAULT_PAGE: u32 = 50;
pub const MAX_PAGE: u32 = 1000;

#[derive(Debug, Serialize, ToSchema)]
pub struct LinkView {
    pub code: String,
    pub url: String,
    /// Public base (header `X-Shortlink-Public-Base`, else `--public-base-url`) + `/` + code;
    /// `null` when neither is set.
    pub short_url: Option<String>,
    /// Present, `true`, only when every domain of the issuing list is drained (issue 55) and
    /// `short_url` is on the healthiest of them: a campaign tool may pause.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub degraded_issuing: bool,
    pub redirect: u16,
    pub forward_query: bool,
    /// `live`, `expired` or `revoked`.
    pub state: &'static str,
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Since when a threat feed's entry holds the link back: it answers the warning page (451)
    /// until released (`POST /api/v1/links/{code}/release`); absent when it is not quarantined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantined_at: Option<DateTime<Utc>>,
    pub visit_count: i64,
    pub last_visit_at: Option<DateTime<Utc>>,
    pub campaign: Option<String>,
    /// The recipient reference.
    #[serde(rename = "ref")]
    #[schema(rename = "ref")]
    pub recipient_ref: Option<String>,
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_since: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_yet_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expired_url: Option<String>,
    /// The rules as written, normalised; absent for none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleSpec>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_visits: Option<i64>,
    /// The clicks counted against `max_visits` so far (read of one link only; absent when
    /// Redis could not be asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visits_counted: Option<u64>,
    /// Whether a password guards the link (the password itself is never returned).
    pub password_protected: bool,
    /// The preview card; absent for none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<CardSpec>,
    /// The query parameter the click's id is sent in; absent for none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub click_id_param: Option<String>,
}

impl LinkView {
    pub fn new(link: Link, domains: &DomainContext) -> Self {
        let state = match link.state(storage::now()) {
            LinkState::Live => "live",
            LinkState::Expired => "expired",
            LinkState::Revoked => "revoked",
        };
        let issued = domains.issuing_on(&link.code, link.campaign.as_deref());
        LinkView {
            degraded_issuing: issued.as_ref().is_some_and(|(_, degraded)| *degraded),
            short_url: issued.map(|(url, _)| url),
            forward_query: link.flags.forward_query(),
            code: link.code,
            url: link.target,
            redirect: link.redirect,
            state,
            expires_at: link.expires_at,
            created_at: link.created_at,
            updated_at: link.updated_at,
            revoked_at: link.revoked_at,
            quarantined_at: link.quarantined_at,
            visit_count: link.visit_count,
            last_visit_at: link.last_visit_at,
            campaign: link.campaign,
            recipient_ref: link.recipient_ref,
            tags: link.tags,
            valid_since: link.extras.valid_since,
            not_yet_url: link.extras.not_yet_url,
            expired_url: link.extras.expired_url,
            // Checked when written; a row that no longer parses reads as no rules, as the
            // projection then writes it (logged there).
            rules: link
                .extras
                .rules
                .as_deref()
                .and_then(|text| rules::parse_stored(text).ok()),
            max_visits: link.extras.max_visits,
            visits_counted: None,
            password_protected: link.extras.password_digest.is_some(),
            // As the rules: checked when written; a row that no longer parses reads as none.
            preview: link
                .extras
                .preview
                .as_deref()
                .and_then(|text| card::parse_stored(text).ok()),
            click_id_param: link.extras.click_id_param,
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
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// `next_cursor` of the previous page.
    #[param(pattern = "^-?[0-9]{1,16}\\.[A-Za-z0-9._~-]{1,64}$")]
    pub cursor: Option<String>,
    /// 1..=1000, default 50.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Only links of this campaign.
    pub campaign: Option<String>,
    /// Only links with this recipient reference.
    #[serde(rename = "ref")]
    #[param(rename = "ref")]
    pub recipient_ref: Option<String>,
    /// Only links carrying this tag.
    pub tag: Option<String>,
}

use shortlink_core::service::accept::MAX_IDEMPOTENCY_KEY_LEN;
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// The request's `Idempotency-Key` (1 to 255 visible ASCII characters), scoped to its API key.
pub(crate) fn idempotency_key(
    headers: &HeaderMap,
    api_key: ApiKeyId,
) -> Result<Option<IdempotencyKey>> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY_HEADER) else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .and_then(|key| accept::idempotency_key(key, api_key.0))
        .ok_or_else(|| Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_header",
            message: format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"
            ),
        })?;
    Ok(Some(key))
}

/// Checks a create request (single or batch item) and turns it into a [`NewLink`].
pub(crate) fn new_link(
    state: &AppState,
    workspace: WorkspaceId,
    domains: &DomainContext,
    request: CreateLinkRequest,
) -> Result<NewLink> {
    Ok(accept::new_link(
        &state.links,
        workspace,
        &state.settings.url_policy,
        &domains.own_domains,
        request,
    )?)
}

/// A code from the path that could name a link (ours, or one imported from another shortener,
/// which `import --from` alone creates); anything else cannot exist.
pub(crate) fn path_code(state: &AppState, code: &str) -> Result<()> {
    if state.links.scheme().shape(code.as_bytes()).may_exist()
        || shortcode::is_imported_charset(code.as_bytes())
    {
        Ok(())
    } else {
        Err(Error::NotFound)
    }
}

/// Create a link. With an `Idempotency-Key` header, a retry with the same key and body answers
/// the same link and creates nothing; the same key with another body is refused (422
/// `idempotency_key_reused`).
#[utoipa::path(post, path = "/api/v1/links", tag = "links", request_body = CreateLinkRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "makes retries safe; 1 to 255 visible ASCII characters", pattern = "^[!-~]{1,255}$")),
    responses(
        (status = 201, description = "created", body = LinkView),
        (status = 200, description = "idempotent: the existing live link for this URL and ref", body = LinkView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, description = "the custom code is taken", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "a value the schema cannot judge: `invalid_expiry` (`expires_at` not in \
            the future), `invalid_url`, `unsupported_scheme`, `url_too_long`, `own_domain` (a target on one of \
            our short domains), `host_not_allowed`, `unsafe_target` (a threat feed, the shorteners' list, a brand's \
            look-alike or the workspace's own block or allow list refuses the target: the message names the feed \
            and the entry it matched; nothing is stored), `invalid_code` (an alias of the generated-code shape, or \
            `batch`), `invalid_redirect`, `invalid_campaign`, `invalid_ref`, `invalid_tags`, `invalid_max_visits`, \
            `invalid_password`, `invalid_preview` (a card field's length or its image URL), `invalid_rules` (what no schema can say of `rules`: real CIDRs, IANA zones, \
            language tags, days `mon` to `sun` and hours 0 to 23 without an empty list, weights of a split \
            not all 0, a variant's `weight` written without a fraction (`3`, not `3.0`), at most 8 conditions a \
            rule, each `query` entry counting as one), `record_too_large` (the link's record over 16 KiB), \
            `invalid_valid_since` (`valid_since` not before `expires_at`), `invalid_body`, \
            `idempotency_key_reused` (the `Idempotency-Key` was used with another request)", body = ErrorBody),
        (status = 503, description = "database or redis unavailable; nothing stored", body = ErrorBody),
    ))]
pub async fn create_link(
    State(state): State<AppState>,
    Recorder(origin): Recorder,
    budget: Budget,
    Extension(api_key): Extension<ApiKeyId>,
    headers: HeaderMap,
    domains: DomainContext,
    Json(request): Json<CreateLinkRequest>,
) -> Result<(StatusCode, Json<LinkView>)> {
    let key = idempotency_key(&headers, api_key)?;
    let hash = key.as_ref().map(|_| {
        let canonical = serde_json::to_vec(&request).unwrap_or_default();
        service::request_hash("create", [canonical.as_slice()])
    });
    let new = new_link(&state, budget.workspace(), &domains, request)?;
    let claim = match (&key, &hash) {
        (Some(key), Some(hash)) => Some(state.links.claim(key, hash).await?),
        _ => None,
    };
    let (status, link) = match state.links.create(new, &budget, claim, &origin).await? {
        Created::Existing(link) => (StatusCode::OK, link),
        Created::New(link) => {
            domains.link_created("single", &link);
            (StatusCode::CREATED, link)
        }
    };
    Ok((status, Json(LinkView::new(link, &domains))))
}

/// Read a link, in any state.
#[utoipa::path(get, path = "/api/v1/links/{code}", tag = "links",
    params(("code" = String, Path)),
    responses((status = 200, body = LinkView), (status = 404, body = ErrorBody)))]
pub async fn get_link(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    domains: DomainContext,
    Path(code): Path<String>,
) -> Result<Json<LinkView>> {
    path_code(&state, &code)?;
    let link = state.links.get(workspace, &code).await?;
    let capped = link.extras.max_visits.is_some();
    let mut view = LinkView::new(link, &domains);
    if capped {
        // One GET, only here: a listing would cost one per link. Redis down only hides it.
        view.visits_counted = state.links.projection().visit_count(&code).await.ok();
    }
    Ok(Json(view))
}

/// Change a link: any of its fields, each as a create takes it; `null` removes an optional one.
#[utoipa::path(patch, path = "/api/v1/links/{code}", tag = "links",
    params(("code" = String, Path)), request_body = UpdateLinkRequest,
    responses(
        (status = 200, body = LinkView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 410, description = "`link_revoked`: revoked links cannot change", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "a value the schema cannot judge: `invalid_expiry` (`expires_at` not in \
            the future), `invalid_url`, `unsupported_scheme`, `url_too_long`, `own_domain`, `host_not_allowed`, \
            `invalid_redirect`, `invalid_campaign`, `invalid_ref`, `invalid_tags`, `invalid_max_visits`, \
            `invalid_password`, `invalid_preview` (a card field's length or its image URL), `invalid_rules` (what no schema can say of `rules`: real CIDRs, IANA zones, \
            language tags, days `mon` to `sun` and hours 0 to 23 without an empty list, weights of a split \
            not all 0, a variant's `weight` written without a fraction (`3`, not `3.0`), at most 8 conditions a \
            rule, each `query` entry counting as one), `record_too_large` (the link's record over 16 KiB), \
            `invalid_valid_since` (`valid_since` not before `expires_at`), `invalid_body`, \
            `empty_patch` (nothing would change: `url`, `redirect`, `forward_query` and `tags` null only)", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn update_link(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    domains: DomainContext,
    Path(code): Path<String>,
    Json(request): Json<UpdateLinkRequest>,
) -> Result<Json<LinkView>> {
    path_code(&state, &code)?;
    let patch = request.into_patch(&state.settings.url_policy, &domains.own_domains)?;
    let link = state.links.update(workspace, &code, patch, &origin).await?;
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
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    domains: DomainContext,
    Path(code): Path<String>,
) -> Result<Json<LinkView>> {
    path_code(&state, &code)?;
    let link = state.links.revoke(workspace, &code, &origin).await?;
    Ok(Json(LinkView::new(link, &domains)))
}

/// List links, newest first (keyset pagination), optionally only those of a campaign, recipient
/// reference or tag.
#[utoipa::path(get, path = "/api/v1/links", tag = "links", params(ListParams),
    responses((status = 200, body = LinkPage), (status = 400, body = ErrorBody)))]
pub async fn list_links(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
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
    let mut filter = LinkFilter::in_workspace(workspace);
    filter.campaign = params.campaign;
    filter.recipient_ref = params.recipient_ref;
    filter.tag = params.tag;
    let mut links = state
        .links
        .list(&filter, cursor.as_ref(), limit + 1)
        .await?;
    let next_cursor = ListCursor::after_page(&mut links, limit as usize);
    Ok(Json(LinkPage {
        links: links
            .into_iter()
            .map(|link| LinkView::new(link, &domains))
            .collect(),
        next_cursor,
    }))
}
