//! Creating, listing, editing and revoking links. Every change goes through the same validation
//! (`service::accept::new_link`, the URL policy) and the same service as the REST API.

use super::form::{Confirmed, IssuerForm, Posted};
use super::layout::{self, when};
use super::operator::Operator;
use super::page::{encode, see_other, PageError, PageResult};
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use chrono::{DateTime, NaiveDateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::links::LinkView;
use shortlink_api::{AppState, DomainContext, Error};
use shortlink_core::service::accept::{self, CreateLinkRequest, PlainPassword};
use shortlink_core::service::{Created, UpdateLinkRequest};
use shortlink_model::schema::WholeNumber;
use shortlink_model::LinkState;
use shortlink_store::{self, LinkFilter, ListCursor};

const PAGE: u32 = 50;

/// What the create form sends; every field optional so that a missing one is our message.
#[derive(Debug, Default, Deserialize)]
pub struct CreateForm {
    #[serde(default)]
    url: String,
    #[serde(default)]
    code: String,
    /// `datetime-local`, read as UTC.
    #[serde(default)]
    expires_at: String,
    #[serde(default)]
    redirect: String,
    #[serde(default)]
    campaign: String,
    /// Comma-separated.
    #[serde(default)]
    tags: String,
    #[serde(default)]
    max_visits: String,
    /// Never shown again (a refused form comes back without it), nor in `Debug`.
    #[serde(default)]
    password: PlainPassword,
}

fn optional(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// A `datetime-local` value (`2026-12-01T09:30`, seconds optional) as UTC.
pub(super) fn parse_local(text: &str) -> Result<Option<DateTime<Utc>>, Error> {
    let Some(text) = optional(text) else {
        return Ok(None);
    };
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(&text, format).ok())
        .map(|at| Some(at.and_utc()))
        .ok_or_else(|| Error::invalid("invalid_expiry", "the expiry is not a date and time"))
}

fn form_page(operator: &Operator, form: &CreateForm, problem: Option<&str>) -> Markup {
    let redirect = if form.redirect.is_empty() {
        "302"
    } else {
        form.redirect.as_str()
    };
    layout::page(
        operator,
        "Create a link",
        html! {
            h1 { "Create a link" }
            @if let Some(problem) = problem { p.error role="alert" { (problem) } }
            form.stack method="post" action="/console/create" {
                (layout::csrf(operator))
                label for="url" { "Target URL" }
                input #url type="url" name="url" value=(form.url) required placeholder="https://shop.example/spring";
                label for="code" { "Alias (optional)" }
                input #code type="text" name="code" value=(form.code) pattern=(shortcode::ALIAS_PATTERN);
                label for="expires_at" { "Expires at, UTC (optional)" }
                input #expires_at type="datetime-local" name="expires_at" value=(form.expires_at);
                label for="redirect" { "Redirect status" }
                select #redirect name="redirect" {
                    @for (status, text) in [("302", "302 Found (default)"), ("301", "301 Moved permanently"), ("307", "307 Temporary redirect"), ("308", "308 Permanent redirect")] {
                        option value=(status) selected[redirect == status] { (text) }
                    }
                }
                label for="campaign" { "Campaign (optional)" }
                input #campaign type="text" name="campaign" value=(form.campaign) maxlength=(shortlink_model::schema::MAX_META_LEN);
                label for="tags" { "Tags, comma-separated (optional)" }
                input #tags type="text" name="tags" value=(form.tags);
                label for="max_visits" { "Visit cap (optional)" }
                input #max_visits type="number" name="max_visits" min="1" value=(form.max_visits);
                label for="password" { "Password (optional)" }
                input #password type="password" name="password" autocomplete="new-password";
                button type="submit" { "Create" }
            }
        },
    )
}

pub async fn create_page(operator: Operator) -> PageResult {
    operator.require_issue()?;
    Ok(form_page(&operator, &CreateForm::default(), None).into_response())
}

pub async fn create(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Posted(form, origin, ..): IssuerForm<CreateForm>,
) -> PageResult {
    let request = || -> Result<CreateLinkRequest, Error> {
        let redirect = match optional(&form.redirect) {
            None => None,
            Some(text) => Some(text.parse::<u16>().map_err(|_| {
                Error::invalid("invalid_redirect", "the redirect status is not a number")
            })?),
        };
        let tags: Vec<String> = form.tags.split(',').filter_map(optional).collect();
        let max_visits = match optional(&form.max_visits) {
            None => None,
            Some(text) => Some(text.parse::<i64>().map_err(|_| {
                Error::invalid("invalid_max_visits", "the visit cap is not a number")
            })?),
        };
        Ok(CreateLinkRequest {
            url: form.url.trim().to_owned(),
            code: optional(&form.code),
            expires_at: parse_local(&form.expires_at)?,
            redirect,
            forward_query: None,
            idempotent: None,
            campaign: optional(&form.campaign),
            recipient_ref: None,
            tags: (!tags.is_empty()).then_some(tags),
            max_visits: max_visits.map(WholeNumber),
            // As typed: spaces may be part of a password.
            password: Some(form.password.clone()).filter(|password| !password.0.is_empty()),
            ..CreateLinkRequest::default()
        })
    };
    let check = |r| {
        let policy = &state.settings.url_policy;
        Ok(accept::new_link(
            &state.links,
            operator.workspace,
            policy,
            &domains.own_domains,
            r,
        )?)
    };
    // The workspace's quota, as for the API's create: the service counts against it.
    let budget = shortlink_api::budget_of(&state, operator.workspace).await?;
    let created = match request().and_then(check) {
        Ok(new) => state
            .links
            .create(new, &budget, None, &origin)
            .await
            .map_err(Error::from),
        Err(error) => Err(error),
    };
    match created {
        Ok(Created::New(link)) => {
            domains.link_created("single", &link);
            Ok(see_other(&format!(
                "/console/links/{}?created=1",
                link.code
            )))
        }
        Ok(Created::Existing(link)) => Ok(see_other(&format!("/console/links/{}", link.code))),
        // The person's mistakes are shown on the form, with what they typed.
        Err(error) if error.status_code().is_client_error() => {
            let page = form_page(&operator, &form, Some(&error.message()));
            Ok((error.status_code(), page).into_response())
        }
        Err(error) => Err(PageError(error)),
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    /// Any part of a code, target, recipient reference, campaign or tag (3 characters or
    /// more; shorter: a whole code, reference or campaign).
    #[serde(default)]
    q: String,
    #[serde(default)]
    campaign: String,
    #[serde(default)]
    tag: String,
    /// `live`, `expired`, `revoked` or empty.
    #[serde(default)]
    state: String,
    cursor: Option<String>,
}

impl ListQuery {
    /// The query string of these filters, for the next page's link.
    fn filters(&self) -> String {
        format!(
            "q={}&campaign={}&tag={}&state={}",
            encode(&self.q),
            encode(&self.campaign),
            encode(&self.tag),
            encode(&self.state)
        )
    }
}

pub(super) fn state_cell(view: &LinkView) -> Markup {
    html! { span class={ "state-" (view.state) } { (view.state) } }
}

pub(super) fn links_table(operator: &Operator, links: &[LinkView]) -> Markup {
    html! {
        div.wide { table {
            thead { tr {
                th scope="col" { "Code" } th scope="col" { "Target" } th scope="col" { "State" }
                th scope="col" { "Campaign" } th.num scope="col" { "Clicks" } th scope="col" { "Created" }
                @if operator.may_issue() { th scope="col" { "Actions" } }
            } }
            tbody {
                @for link in links {
                    tr {
                        td { a href={ "/console/links/" (link.code) } { (link.code) } }
                        td { (link.url) }
                        td { (state_cell(link)) }
                        td { @if let Some(c) = &link.campaign { a href={ "/console/campaigns?name=" (encode(c)) } { (c) } } }
                        td.num { (link.visit_count) }
                        td { (when(Some(link.created_at))) }
                        @if operator.may_issue() {
                            td { @if link.state != "revoked" { a href={ "/console/links/" (link.code) "/revoke" } { "Revoke…" } } }
                        }
                    }
                }
                @if links.is_empty() { tr { td colspan="7" { "No links match." } } }
            }
        } }
    }
}

pub async fn list(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let now = shortlink_store::now();
    let link_state = match query.state.as_str() {
        "live" => Some((LinkState::Live, now)),
        "expired" => Some((LinkState::Expired, now)),
        "revoked" => Some((LinkState::Revoked, now)),
        _ => None,
    };
    let mut filter = LinkFilter::in_workspace(operator.workspace);
    filter.search = optional(&query.q);
    filter.campaign = optional(&query.campaign);
    filter.tag = optional(&query.tag);
    filter.state = link_state;
    let cursor = query.cursor.as_deref().and_then(ListCursor::decode);
    let mut links = state.links.list(&filter, cursor.as_ref(), PAGE + 1).await?;
    let mut next = None;
    if links.len() > PAGE as usize {
        links.truncate(PAGE as usize);
        next = links.last().map(|last| {
            ListCursor {
                created_at: last.created_at,
                code: last.code.clone(),
            }
            .encode()
        });
    }
    let views: Vec<LinkView> = links
        .into_iter()
        .map(|link| LinkView::new(link, &domains))
        .collect();
    let body = html! {
        h1 { "Links" }
        form.inline method="get" action="/console/links" role="search" {
            label { "Search" input type="search" name="q" value=(query.q)
                placeholder="part of a URL, code, ref, campaign or tag"; }
            label { "Campaign" input type="text" name="campaign" value=(query.campaign); }
            label { "Tag" input type="text" name="tag" value=(query.tag); }
            label { "State"
                select name="state" {
                    @for (value, text) in [("", "any"), ("live", "live"), ("expired", "expired"), ("revoked", "revoked")] {
                        option value=(value) selected[query.state == value] { (text) }
                    }
                }
            }
            button type="submit" { "Search" }
        }
        (links_table(&operator, &views))
        @if let Some(next) = next {
            p { a href={ "/console/links?" (query.filters()) "&cursor=" (encode(&next)) } { "Next page →" } }
        }
    };
    Ok(layout::page(&operator, "Links", body).into_response())
}

#[derive(Debug, Deserialize)]
pub struct EditForm {
    #[serde(default)]
    url: String,
    #[serde(default)]
    expires_at: String,
    /// A checkbox: remove the expiry.
    clear_expiry: Option<String>,
}

pub async fn edit(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Posted(form, origin, ..): IssuerForm<EditForm>,
) -> PageResult {
    // The API's change, checked by the API's rules: the form refuses what a PATCH refuses.
    let change = UpdateLinkRequest {
        url: optional(&form.url),
        expires_at: if form.clear_expiry.is_some() {
            Some(None)
        } else {
            parse_local(&form.expires_at)?.map(Some)
        },
        ..UpdateLinkRequest::default()
    };
    let patch = change
        .into_patch(&state.settings.url_policy, &domains.own_domains)
        .map_err(Error::from)?;
    state
        .links
        .update(operator.workspace, &code, patch, &origin)
        .await?;
    Ok(see_other(&format!("/console/links/{code}?updated=1")))
}

pub async fn revoke_confirm(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
) -> PageResult {
    operator.require_issue()?;
    let link = LinkView::new(state.links.get(operator.workspace, &code).await?, &domains);
    let body = html! {
        h1 { "Revoke " (link.code) "?" }
        p { "The short URL " strong { (link.short_url.as_deref().unwrap_or(&link.code)) } " will answer "
            "“gone” (410) from now on, and its code is never issued again. This cannot be undone." }
        p { "Target: " (link.url) }
        form method="post" action={ "/console/links/" (link.code) "/revoke" } {
            (layout::csrf(&operator))
            button.danger type="submit" { "Revoke " (link.code) }
            " "
            a href={ "/console/links/" (link.code) } { "Cancel" }
        }
    };
    Ok(layout::page(&operator, "Revoke", body).into_response())
}

pub async fn revoke(
    State(state): State<AppState>,
    operator: Operator,
    Path(code): Path<String>,
    Posted(_, origin, ..): IssuerForm<Confirmed>,
) -> PageResult {
    state
        .links
        .revoke(operator.workspace, &code, &origin)
        .await?;
    Ok(see_other(&format!("/console/links/{code}?revoked=1")))
}
