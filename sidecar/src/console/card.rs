//! A link's preview card (issue 35): the four fields, and the card drawn as a messaging app
//! draws it — from the saved card, from the form's unsaved values ("Preview"), and, with the
//! console's script, as the fields are typed. Checked by the API's own code (`card::column`).

use super::form::{ConsoleForm, IssuerForm, Posted};
use super::layout;
use super::operator::Operator;
use super::page::{refused_form, see_other, PageResult, CSP};
use axum::extract::{Path, Query, State};
use axum::http::header::CONTENT_SECURITY_POLICY;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::links::LinkView;
use shortlink_api::{AppState, DomainContext, Error};
use shortlink_core::service::UpdateLinkRequest;
use shortlink_model::link::card::CardSpec;
use shortlink_wire::preview::{MAX_DESCRIPTION, MAX_IMAGE, MAX_SITE_NAME, MAX_TITLE};

#[derive(Debug, Default, Deserialize)]
pub struct CardQuery {
    saved: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct CardForm {
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    image: String,
    #[serde(default)]
    site_name: String,
    /// A checkbox: remove the card.
    remove: Option<String>,
}

impl CardForm {
    fn spec(&self) -> CardSpec {
        CardSpec {
            title: self.title.trim().to_owned(),
            description: self.description.trim().to_owned(),
            image: self.image.trim().to_owned(),
            site_name: Some(self.site_name.trim().to_owned()).filter(|name| !name.is_empty()),
        }
    }
}

pub async fn page(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Query(query): Query<CardQuery>,
) -> PageResult {
    let view = LinkView::new(state.links.get(operator.workspace, &code).await?, &domains);
    let shown = view.preview.clone();
    Ok(render(&operator, &view, shown, None, query.saved.is_some()))
}

/// Saves the form's card, or removes the card.
pub async fn save(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Posted(form, origin, ..): IssuerForm<CardForm>,
) -> PageResult {
    let view = LinkView::new(state.links.get(operator.workspace, &code).await?, &domains);
    let change = UpdateLinkRequest {
        preview: Some(form.remove.is_none().then(|| form.spec())),
        ..UpdateLinkRequest::default()
    };
    let patch = match change.into_patch(&state.settings.url_policy, &domains.own_domains) {
        Ok(patch) => patch,
        Err(error) => return Ok(refused(&operator, &view, &form, error.into())),
    };
    match state
        .links
        .update(operator.workspace, &code, patch, &origin)
        .await
    {
        Ok(_) => Ok(see_other(&format!("/console/links/{code}/card?saved=1"))),
        Err(error) => Ok(refused(&operator, &view, &form, error.into())),
    }
}

/// The page with the form's values drawn, unsaved.
pub async fn preview(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Posted(form, ..): ConsoleForm<CardForm>,
) -> PageResult {
    let view = LinkView::new(state.links.get(operator.workspace, &code).await?, &domains);
    Ok(render(&operator, &view, Some(form.spec()), None, false))
}

/// The page again, with the form as sent and the error (422).
fn refused(operator: &Operator, view: &LinkView, form: &CardForm, error: Error) -> Response {
    refused_form(error, |message| {
        render(operator, view, Some(form.spec()), Some(message), false)
    })
}

fn render(
    operator: &Operator,
    view: &LinkView,
    shown: Option<CardSpec>,
    error: Option<String>,
    saved: bool,
) -> Response {
    let card = shown.unwrap_or(CardSpec {
        title: String::new(),
        description: String::new(),
        image: String::new(),
        site_name: None,
    });
    let action = |path: &str| format!("/console/links/{}/card{path}", view.code);
    let editable = operator.may_issue() && view.state != "revoked";
    let body = html! {
        h1 { "Preview card of " a href={ "/console/links/" (view.code) } { (view.code) } }
        @if saved { p.ok role="status" { "Saved." } }
        @if let Some(error) = &error { p.error role="alert" { (error) } }
        p {
            "What WhatsApp, iMessage, Telegram and the other messaging apps draw for the link before "
            "anyone taps it. Their preview fetchers get it from nginx; people still go straight to "
            (view.url) "."
        }
        div.grid2 {
            form.stack method="post" action=(action("")) {
                (layout::csrf(operator))
                label for="title" { "Title" }
                input #title name="title" required maxlength=(MAX_TITLE) value=(card.title) data-card-field;
                label for="description" { "Description" }
                textarea #description name="description" rows="3" required maxlength=(MAX_DESCRIPTION) data-card-field { (card.description) }
                label for="image" { "Image (https URL)" }
                input #image type="url" name="image" required maxlength=(MAX_IMAGE) placeholder="https://cdn.example/card.jpg" value=(card.image) data-card-field;
                label for="site_name" { "Site name (optional)" }
                input #site_name name="site_name" maxlength=(MAX_SITE_NAME) value=(card.site_name.as_deref().unwrap_or("")) data-card-field;
                @if editable {
                    @if view.preview.is_some() {
                        label { input type="checkbox" name="remove" value="1"; " Remove the card" }
                    }
                    button type="submit" { "Save card" }
                }
                button type="submit" formaction=(action("/preview")) formnovalidate { "Preview" }
            }
            (drawn(view, &card))
        }
    };
    let mut response =
        layout::page(operator, &format!("Card of {}", view.code), body).into_response();
    // The card's image comes from its own host, as a messaging app would load it; nothing
    // else on the page may (and no referrer goes with it: `referrerpolicy` below).
    if let Ok(policy) = HeaderValue::from_str(&format!("{CSP}; img-src 'self' https:")) {
        response
            .headers_mut()
            .insert(CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// The card as a chat bubble draws it: image, site name, title, description, the link's host.
/// Every value is text (escaped); the script updates the same elements as fields are typed.
fn drawn(view: &LinkView, card: &CardSpec) -> Markup {
    let host = view
        .short_url
        .as_deref()
        .and_then(|url| url::Url::parse(url).ok())
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_default();
    let image = Some(card.image.as_str()).filter(|image| image.starts_with("https://"));
    html! {
        figure.bubble aria-label="The card as a messaging app shows it" {
            img #card-image src=[image] alt="" referrerpolicy="no-referrer" hidden[image.is_none()];
            div.bubble-text {
                small #card-site_name { (card.site_name.as_deref().unwrap_or("")) }
                strong #card-title { (card.title) }
                span #card-description { (card.description) }
                small.hint { (host) }
            }
        }
    }
}
