//! `GET /api/v1/resolve/{code}`: nginx's fallback when Redis is unavailable. Answers exactly what
//! the module would (redirect, 404, 410, the "not yet", password or card page) from SQL, rules
//! included, and
//! repairs the Redis key in the background.

use super::{AppState, Error, ErrorBody, Path, Result, WORKSPACE_HEADER};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use shortlink_core::service::click::ClickInput;
use shortlink_core::service::click::CountryOf;
use shortlink_core::service::Resolution;
use shortlink_wire::click_id::ClickId;
use shortlink_wire::fallback;
use shortlink_wire::not_found::{self, Case};
use shortlink_wire::preview::CARD_STATUS;
use shortlink_wire::record::password::{password_page, PASSWORD_STATUS};
use shortlink_wire::record::{
    not_yet_page, quarantine_page, WorkspaceName, NOT_YET_STATUS, QUARANTINE_STATUS,
};
use shortlink_wire::verdict::Signals;

pub fn router() -> Router<AppState> {
    Router::new().route("/resolve/{code}", get(resolve))
}

/// `Cache-Control` of permanent redirects (301, 308), as the module sends by default
/// (`shortlink_cache_control permanent=...`).
pub const CACHE_CONTROL_PERMANENT: &str = "public, max-age=3600";
/// `Cache-Control` of temporary redirects (302, 307), as the module sends by default; also sent
/// with 404/410 here, which caches would otherwise be free to keep (a 404 code may be created soon).
pub const CACHE_CONTROL_TEMPORARY: &str = "no-store";

/// Resolve a code as the redirect path would, on a host of the workspace the header names. nginx's
/// fallback only: a key of role `resolve` (`keys create --role resolve`), no other role. A code
/// with punctuation a text glued to it (`abc1234.`, `abc1234。`) that is no code itself answers as
/// the code without it, as the module does.
#[utoipa::path(get, path = "/api/v1/resolve/{code}", tag = "resolve",
    params(("code" = String, Path),
        ("X-Shortlink-Workspace" = Option<String>, Header, description = "`ws=` and the workspace \
            nginx maps the short domain to (`ws=$shortlink_workspace`); a code answers only on \
            its own workspace's hosts, and without this header on none (404)"),
        ("X-Shortlink-Click-Token" = Option<String>, Header, description = "nginx's alone: the \
            token (a click id, 16 base64url characters) of a capped click whose count the module \
            sent without getting its reply; the click is counted with it, once however many \
            tries reached Redis. Without it the sidecar draws one")),
    responses(
        (status = 200, description = "a link preview fetcher's `User-Agent` on a link with a card: \
            the card page (HTML, Open Graph and Twitter card tags), as the module draws it"),
        (status = 301, description = "redirect; `Location` is the target (plus the request's query string if the link forwards queries)"),
        (status = 302), (status = 307), (status = 308),
        (status = 401, description = "a password-protected link: the password page (HTML; its form \
            posts to the short URL, which nginx answers); or no valid API key (JSON)",
            content((ErrorBody = "application/json"), (String = "text/html"))),
        (status = 403, description = "before `valid_since`, without a `not_yet_url`: the \"not yet\" \
            page (HTML); or a key of another role than `resolve` (JSON, before any lookup)",
            content((ErrorBody = "application/json"), (String = "text/html"))),
        (status = 404, description = "no such code, a code of another workspace than the host's, \
            or a host that names no workspace", body = ErrorBody),
        (status = 410, description = "revoked, or expired within the grace period", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn resolve(
    State(state): State<AppState>,
    method: Method,
    Path(code): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response> {
    let header = |name: &str| headers.get(name).map_or(&b""[..], HeaderValue::as_bytes);
    let client = headers
        .get("x-real-ip")
        .and_then(|value| value.to_str().ok());
    let click = ClickInput {
        user_agent: header("user-agent"),
        accept_language: header("accept-language"),
        query: query.as_deref(),
        client,
        cookies: header("cookie"),
        random: random_u64(),
        signals: signals(&method, &headers),
        judge: Some(&*state.settings.click_judge),
        token: click_token(&headers),
    };
    let countries = &state.settings.countries;
    let country = |ip| countries.country(ip);
    let workspace = host_workspace(&headers);
    let resolution = match workspace {
        Some(host) => resolve_or_stripped(&state, host, &code, &click, &country).await?,
        None => Resolution::NotFound,
    };
    let case = match resolution {
        Resolution::NotFound => Some(Case::Unknown),
        Resolution::Gone => Some(Case::Expired),
        _ => None,
    };
    if let (Some(case), Some(workspace)) = (case, workspace) {
        let host = headers
            .get(fallback::HOST_HEADER)
            .and_then(|h| h.to_str().ok());
        if let Some(url) = not_found_redirect(&state, workspace, host, case).await? {
            return answer(Resolution::Redirect {
                status: 302,
                location: url,
                chosen: None,
            });
        }
    }
    answer(resolution)
}

/// The click's signals as the module reads them (`shortlink_wire::verdict::Signals`): nginx
/// proxies the client's method and headers, and names the client's scheme in
/// [`fallback::SCHEME_HEADER`] (fetch metadata is only sent over TLS).
fn signals(method: &Method, headers: &HeaderMap) -> Signals {
    let mut bits = 0;
    if method == Method::HEAD {
        bits |= Signals::HEAD;
    } else if method == Method::OPTIONS {
        bits |= Signals::OPTIONS;
    }
    if !headers.contains_key("accept-language") {
        bits |= Signals::NO_LANGUAGE;
    }
    let secure = headers
        .get(fallback::SCHEME_HEADER)
        .is_some_and(|scheme| scheme.as_bytes() == b"https");
    if secure {
        bits |= Signals::SECURE;
        if !headers.contains_key("sec-fetch-mode") {
            bits |= Signals::NO_FETCH_MODE;
        }
    }
    Signals::new(bits)
}

/// The token of a capped click the module tried to count ([`fallback::CLICK_TOKEN_HEADER`]),
/// which nginx alone sets (it replaces any the client sent). One that is no click id is nginx's
/// mistake, never a client's: the click is then counted with a token of the sidecar's own.
fn click_token(headers: &HeaderMap) -> Option<ClickId> {
    let value = headers.get(fallback::CLICK_TOKEN_HEADER)?;
    let token = ClickId::parse(value.as_bytes());
    if token.is_none() {
        tracing::warn!("a click token from nginx that is no click id; counting with a new one");
    }
    token
}

/// The module's not-found redirect of `case` on `host` of `workspace`, from SQL
/// (`shortlink_wire::not_found::choose`: the domain's, else the workspace's).
async fn not_found_redirect(
    state: &AppState,
    workspace: WorkspaceName,
    host: Option<&str>,
    case: Case,
) -> Result<Option<String>> {
    let storage = state.links.storage();
    let Some(workspace) = storage.workspace_by_slug(workspace.as_str()).await? else {
        return Ok(None);
    };
    let rows = storage.not_found_redirects(Some(workspace.id)).await?;
    let host = host.map(|h| h.trim_end_matches('.').to_ascii_lowercase());
    let of = |domain: &str| {
        (rows.iter().find(|row| row.domain == domain)).map(crate::domains::not_found::redirects)
    };
    let domain = host.as_deref().filter(|h| !h.is_empty()).and_then(of);
    let own = of("");
    Ok(not_found::choose(domain.as_ref(), own.as_ref(), case).map(str::to_owned))
}

/// The module's rule for a path ending in punctuation a text glued to the link
/// (`shortlink_wire::trailing`): the exact code first (an imported code may end in `.`), and only
/// if it finds nothing, the code without its trailing run, raw or percent-encoded. The module
/// sends here the code it looked up: the stripped one when the path could be no code, the exact
/// one when it could (and Redis failed before its second lookup).
async fn resolve_or_stripped(
    state: &AppState,
    host: WorkspaceName,
    code: &str,
    click: &ClickInput<'_>,
    country: CountryOf<'_>,
) -> Result<Resolution> {
    let stripped = shortlink_wire::trailing::strip(code.as_bytes())
        // Whole characters go, so what is left ends on a character boundary.
        .and_then(|rest| code.get(..rest.len()))
        .filter(|rest| !rest.is_empty());
    let Some(stripped) = stripped else {
        return Ok(state.links.resolve(host, code, click, country).await?);
    };
    match state.links.resolve(host, code, click, country).await? {
        Resolution::NotFound => Ok(state.links.resolve(host, stripped, click, country).await?),
        found => Ok(found),
    }
}

/// The workspace nginx maps the request's host to, as its fallback location names it
/// (`X-Shortlink-Workspace: ws=<name>`, `shortlink_wire::fallback`). `None`: a host mapped to
/// `""` or to a malformed name, or a request without the header; no code answers there (404, as
/// the module answers such a host).
fn host_workspace(headers: &HeaderMap) -> Option<WorkspaceName> {
    fallback::host_workspace(headers.get(WORKSPACE_HEADER).map(HeaderValue::as_bytes))
}

/// The module's answer to `resolution`, as nginx relays it.
fn answer(resolution: Resolution) -> Result<Response> {
    let (mut response, cache_control) = match resolution {
        Resolution::Redirect {
            status, location, ..
        } => {
            let status = StatusCode::from_u16(status).map_err(|e| Error::Internal(Box::new(e)))?;
            let location =
                HeaderValue::from_str(&location).map_err(|e| Error::Internal(Box::new(e)))?;
            let cache_control = match status.as_u16() {
                301 | 308 => CACHE_CONTROL_PERMANENT,
                _ => CACHE_CONTROL_TEMPORARY,
            };
            (
                (status, [(header::LOCATION, location)]).into_response(),
                cache_control,
            )
        }
        Resolution::NotFound => (Error::NotFound.into_response(), CACHE_CONTROL_TEMPORARY),
        Resolution::Gone => (Error::Gone.into_response(), CACHE_CONTROL_TEMPORARY),
        Resolution::Quarantined => (
            page(QUARANTINE_STATUS, quarantine_page().to_vec()),
            CACHE_CONTROL_TEMPORARY,
        ),
        Resolution::NotYet { opens_at } => (
            page(NOT_YET_STATUS, not_yet_page(opens_at)),
            CACHE_CONTROL_TEMPORARY,
        ),
        Resolution::Password => (
            page(PASSWORD_STATUS, password_page(false)),
            CACHE_CONTROL_TEMPORARY,
        ),
        Resolution::Card { page: card, .. } => (page(CARD_STATUS, card), CACHE_CONTROL_TEMPORARY),
    };
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(cache_control),
    );
    Ok(response)
}

/// One of `wire`'s pages ("not yet", password, card), byte for byte what the module sends, with
/// the module's headers.
fn page(status: u16, body: Vec<u8>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
    let mut response = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        body,
    )
        .into_response();
    for (name, value) in shortlink_wire::page::SECURITY_HEADERS {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

/// A fresh random number for a split per click.
pub(super) fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // The OS generator does not fail on supported systems; a zero draw is still a valid draw.
    let _ = getrandom::fill(&mut bytes);
    u64::from_ne_bytes(bytes)
}
