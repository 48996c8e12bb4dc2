//! `POST /api/v1/links/{code}/preview`: what a given phone would get from a link, by the same
//! function the module and the fallback answer with, without a click being made or counted.
//! With `rules` in the body, the answer is for that unsaved rule set instead of the stored one
//! (checked as a PATCH would check it), so an editor can try rules before saving them.

use super::{AppState, DomainContext, Error, ErrorBody, InWorkspace, Json, Path, Result};
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_core::service::accept;
use shortlink_core::service::click::{self, ClickInput};
use shortlink_core::service::Resolution;
use shortlink_model::Link;
use std::net::IpAddr;
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new().route("/links/{code}/preview", post(preview))
}

/// The click to answer; every field optional.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// The phone's `User-Agent`.
    pub user_agent: Option<String>,
    /// The phone's `Accept-Language` (`pt-BR,en;q=0.8`).
    pub language: Option<String>,
    /// ISO alpha-2 (either case); if absent, looked up from `ip` in the geo database.
    #[schema(pattern = "^[A-Za-z]{2}$")]
    pub country: Option<String>,
    /// The client address.
    #[schema(schema_with = shortlink_model::schema::ip)]
    pub ip: Option<String>,
    /// RFC 3339; default now.
    pub time: Option<DateTime<Utc>>,
    /// The short URL's query string, without `?`.
    pub query: Option<String>,
    /// Rules to try instead of the stored ones (`[]`: none).
    #[schema(value_type = Option<Vec<shortlink_model::link::rules::RuleSpec>>)]
    pub rules: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewView {
    /// `redirect`, `gone` (410), `not_yet` (the "not yet" page), `password` (the password
    /// page), `card` (a preview fetcher's agent on a link with a card: the card page, 200, drawn
    /// for `location`).
    pub answer: &'static str,
    /// The HTTP status the phone would get.
    pub status: u16,
    pub location: Option<String>,
    /// `<rule>` or `<rule>.<variant>` when a rule answered; `null` for the link's own target
    /// and for the lifecycle's URLs.
    pub rule: Option<String>,
    pub rule_index: Option<u8>,
    pub variant: Option<u8>,
    /// For `not_yet`: when the link opens.
    pub opens_at: Option<DateTime<Utc>>,
}

/// What a phone would get from this link (or from this link with `rules`), as the module would
/// answer it. A split per click draws at random, as a click would.
#[utoipa::path(post, path = "/api/v1/links/{code}/preview", tag = "links",
    params(("code" = String, Path)), request_body = PreviewRequest,
    responses(
        (status = 200, body = PreviewView),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_preview` (an address or country that is not one), \
            `invalid_rules` and the URL errors of `rules`", body = ErrorBody),
    ))]
pub async fn preview(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    domains: DomainContext,
    Path(code): Path<String>,
    Json(request): Json<PreviewRequest>,
) -> Result<Json<PreviewView>> {
    let link = state.links.get(workspace, &code).await?;
    Ok(Json(answer(&state, &domains.own_domains, link, request)?))
}

/// The preview of `request` for `link` (the API's and the console's).
pub fn answer(
    state: &AppState,
    own_domains: &[String],
    mut link: Link,
    request: PreviewRequest,
) -> Result<PreviewView> {
    if let Some(rules) = request.rules {
        let policy = &state.settings.url_policy;
        link.extras.rules = accept::rules_column(policy, own_domains, Some(rules))?;
        accept::whole_link(&link)?;
    }
    if let Some(text) = &request.ip {
        text.parse::<IpAddr>()
            .map_err(|_| Error::invalid("invalid_preview", "ip: not an IP address"))?;
    }
    let given_country = match request.country.as_deref() {
        None => None,
        Some(text) => match text.to_ascii_uppercase().as_bytes() {
            &[a, b] if a.is_ascii_uppercase() && b.is_ascii_uppercase() => Some([a, b]),
            _ => {
                return Err(Error::invalid(
                    "invalid_preview",
                    "country: not an ISO 3166-1 alpha-2 code",
                ))
            }
        },
    };
    let countries = &state.settings.countries;
    let country = |ip| given_country.or_else(|| countries.country(ip));
    // A country condition asks about the client's address: with a country given and no
    // address, an unspecified one stands in (it only matters to address-range conditions).
    let client_text = request
        .ip
        .clone()
        .or_else(|| given_country.map(|_| "0.0.0.0".to_owned()));
    let click = ClickInput {
        user_agent: request.user_agent.as_deref().unwrap_or("").as_bytes(),
        accept_language: request.language.as_deref().unwrap_or("").as_bytes(),
        query: request.query.as_deref(),
        client: client_text.as_deref(),
        cookies: b"",
        random: super::resolve::random_u64(),
        // Never counted (`within_cap` below): no verdict is asked, no token needed.
        signals: Default::default(),
        judge: None,
        token: None,
    };
    let now = request.time.unwrap_or_else(Utc::now);
    let now = u64::try_from(now.timestamp()).unwrap_or(0);
    // A preview is not a click: it is answered as a click within `max_visits`, uncounted.
    let within_cap = Some(0);
    let resolution =
        click::answer(&link, &click, now, &country, within_cap).unwrap_or(Resolution::Gone);
    Ok(view(resolution))
}

impl PreviewView {
    fn set_chosen(&mut self, chosen: Option<shortlink_wire::record::Chosen>) {
        if let Some(chosen) = chosen {
            let (text, len) = shortlink_wire::event::chosen_text(chosen);
            self.rule = Some(String::from_utf8_lossy(&text[..len]).into_owned());
            self.rule_index = Some(chosen.rule);
            self.variant = chosen.variant;
        }
    }
}

fn view(resolution: Resolution) -> PreviewView {
    let mut view = PreviewView {
        answer: "redirect",
        status: 0,
        location: None,
        rule: None,
        rule_index: None,
        variant: None,
        opens_at: None,
    };
    match resolution {
        Resolution::Redirect {
            status,
            location,
            chosen,
        } => {
            view.status = status;
            view.location = Some(location);
            view.set_chosen(chosen);
        }
        Resolution::Card { target, chosen, .. } => {
            view.answer = "card";
            view.status = shortlink_wire::preview::CARD_STATUS;
            view.location = Some(target);
            view.set_chosen(chosen);
        }
        Resolution::Gone | Resolution::NotFound => {
            view.answer = "gone";
            view.status = 410;
        }
        Resolution::Quarantined => {
            view.answer = "quarantined";
            view.status = shortlink_wire::record::QUARANTINE_STATUS;
        }
        Resolution::Password => {
            view.answer = "password";
            view.status = shortlink_wire::record::password::PASSWORD_STATUS;
        }
        Resolution::NotYet { opens_at } => {
            view.answer = "not_yet";
            view.status = shortlink_wire::record::NOT_YET_STATUS;
            view.opens_at = i64::try_from(opens_at)
                .ok()
                .and_then(|at| DateTime::from_timestamp(at, 0));
        }
    }
    view
}
