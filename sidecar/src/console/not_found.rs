//! `/console/not-found`: the workspace's not-found redirects (issue 70), as
//! `GET/PUT /api/v1/not-found-redirects` and `/api/v1/domains/{domain}/not-found-redirects` keep
//! them: where its short domains send the bare root, an unknown code and an expired or revoked
//! link without an `expired_url`, for the workspace and for each of its domains. Its admins only.

use super::form::{AdminForm, Posted};
use super::layout;
use super::operator::Operator;
use super::page::{refused_form, see_other, PageResult};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::not_found_redirects::{save, stored, NotFoundRequest};
use shortlink_api::{AppState, DomainContext, Error};
use shortlink_store::NotFoundRedirects;

const PAGE: &str = "/console/not-found";

/// One form: whose settings (`domain` empty: the workspace's) and the three URLs (empty: unset).
#[derive(Debug, Default, Deserialize)]
pub struct SettingsForm {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    root_url: String,
    #[serde(default)]
    unknown_url: String,
    #[serde(default)]
    expired_url: String,
}

pub async fn page(
    State(state): State<AppState>,
    operator: Operator,
    // Extracted for what it records: the domains' workspaces as nginx's list says them now
    // (a sidecar just started has learned none yet), before they are listed.
    _named: DomainContext,
) -> PageResult {
    operator.require_admin()?;
    let shown = load(&state, &operator).await?;
    Ok(render(&operator, &shown, None))
}

/// The workspace's row and each of its domains' (`None`: nothing set), the workspace's first.
async fn load(
    state: &AppState,
    operator: &Operator,
) -> Result<Vec<(String, Option<NotFoundRedirects>)>, Error> {
    let mut shown = vec![(String::new(), stored(state, operator.workspace, "").await?)];
    for status in state.domains.statuses_of(operator.workspace_slug.as_str()) {
        let row = stored(state, operator.workspace, &status.domain).await?;
        shown.push((status.domain, row));
    }
    Ok(shown)
}

fn render(
    operator: &Operator,
    shown: &[(String, Option<NotFoundRedirects>)],
    error: Option<(String, String)>,
) -> Response {
    let body = html! {
        h1 { "Not-found redirects" }
        p { "Where this workspace's short domains send the bare root, an unknown code and an "
            "expired or revoked link without an expired URL of its own, instead of the 404 or 410 "
            "page. A domain's URL beats the workspace's; an empty field falls through (a domain's "
            "to the workspace's, the workspace's to the 404 or 410 page). nginx's edges see a "
            "change within about a second." }
        @for (domain, row) in shown {
            @let title = if domain.is_empty() { "This workspace".to_owned() } else { domain.clone() };
            h2 { (title) }
            @if let Some((failed, message)) = &error {
                @if failed == domain { p.error role="alert" { (message) } }
            }
            (form(operator, domain, row.as_ref()))
        }
    };
    layout::page(operator, "Not-found redirects", body).into_response()
}

fn form(operator: &Operator, domain: &str, row: Option<&NotFoundRedirects>) -> Markup {
    let value = |pick: fn(&NotFoundRedirects) -> &Option<String>| {
        row.and_then(|row| pick(row).clone()).unwrap_or_default()
    };
    let fields: [(&str, &str, String); 3] = [
        ("root_url", "Bare root (/)", value(|r| &r.root_url)),
        ("unknown_url", "Unknown code", value(|r| &r.unknown_url)),
        (
            "expired_url",
            "Expired or revoked link",
            value(|r| &r.expired_url),
        ),
    ];
    html! {
        form method="post" action=(PAGE) {
            (layout::csrf(operator))
            input type="hidden" name="domain" value=(domain);
            @for (name, label, current) in &fields {
                label { (label) " " input type="url" name=(name) value=(current) size="60"; }
                br;
            }
            button type="submit" { "Save" }
        }
    }
}

/// Saves one form as the API's PUT does (an empty field unsets), then shows the page again.
pub async fn change(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Posted(form, origin, ..): AdminForm<SettingsForm>,
) -> PageResult {
    let slug = operator.workspace_slug.as_str();
    // Only the workspace's own domains: another's is one never seen, as in the API.
    let ours = form.domain.is_empty() || state.domains.workspace_of(&form.domain) == slug;
    if !ours || (!form.domain.is_empty() && state.domains.status(&form.domain).is_none()) {
        return Err(Error::NotFound.into());
    }
    let set = |text: &str| Some(text.trim().to_owned()).filter(|text| !text.is_empty());
    let settings = NotFoundRequest {
        root_url: set(&form.root_url),
        unknown_url: set(&form.unknown_url),
        expired_url: set(&form.expired_url),
    };
    let own = &domains.own_domains;
    let saved = save(
        &state,
        operator.workspace,
        origin,
        own,
        &form.domain,
        settings,
    )
    .await;
    match saved {
        Ok(_) => Ok(see_other(PAGE)),
        Err(error) => {
            let shown = load(&state, &operator).await?;
            let domain = form.domain.clone();
            Ok(refused_form(error, |message| {
                render(&operator, &shown, Some((domain, message)))
            }))
        }
    }
}
