//! A link's click-time rules: a JSON editor (the API's form, errors shown as the API words
//! them) and "what would this phone get", answered by the API's preview, for the saved rules or
//! for the text in the editor before it is saved.

use super::form::{ConsoleForm, IssuerForm, Posted};
use super::layout;
use super::operator::Operator;
use super::page::{refused_form, see_other, PageResult};
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use chrono::{NaiveDateTime, TimeZone, Utc};
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::links::LinkView;
use shortlink_api::preview::{self, PreviewRequest, PreviewView};
use shortlink_api::{AppState, DomainContext, Error};
use shortlink_core::service::UpdateLinkRequest;
use shortlink_model::Link;
use shortlink_store::audit::Origin;

#[derive(Debug, Default, Deserialize)]
pub struct RulesQuery {
    saved: Option<String>,
}

/// The editor and the phone, posted together: the phone is answered with the editor's text.
#[derive(Debug, Default, Deserialize)]
pub struct RulesForm {
    #[serde(default)]
    rules: String,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    language: String,
    #[serde(default)]
    country: String,
    #[serde(default)]
    ip: String,
    /// `datetime-local`, UTC; empty: now.
    #[serde(default)]
    time: String,
    #[serde(default)]
    query: String,
}

/// What the page shows besides the link: the editor's text, an error, a preview's answer.
#[derive(Default)]
struct Shown<'a> {
    form: Option<&'a RulesForm>,
    error: Option<String>,
    answer: Option<PreviewView>,
}

pub async fn page(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Query(query): Query<RulesQuery>,
) -> PageResult {
    let link = state.links.get(operator.workspace, &code).await?;
    let saved = query.saved.is_some();
    Ok(render(&operator, link, &domains, Shown::default(), saved))
}

/// Saves the editor's rules (empty text or `[]`: none).
pub async fn save(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Posted(form, origin, ..): IssuerForm<RulesForm>,
) -> PageResult {
    save_text(&state, &operator, origin, &domains, &code, &form).await
}

/// Saves the rules the forms say: as JSON, through the same check and change as the editor's.
pub async fn save_form(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Posted(pairs, origin, ..): IssuerForm<Vec<(String, String)>>,
) -> PageResult {
    let rules = super::rule_form::parse(&pairs)?;
    let form = RulesForm {
        rules: serde_json::to_string_pretty(&rules).map_err(|e| Error::Internal(Box::new(e)))?,
        ..RulesForm::default()
    };
    save_text(&state, &operator, origin, &domains, &code, &form).await
}

async fn save_text(
    state: &AppState,
    operator: &Operator,
    origin: Origin,
    domains: &DomainContext,
    code: &str,
    form: &RulesForm,
) -> PageResult {
    let link = state.links.get(operator.workspace, code).await?;
    let checked = parse(&form.rules).and_then(|rules| {
        let change = UpdateLinkRequest {
            rules: Some(Some(rules)),
            ..UpdateLinkRequest::default()
        };
        (change.into_patch(&state.settings.url_policy, &domains.own_domains)).map_err(Error::from)
    });
    let patch = match checked {
        Ok(patch) => patch,
        Err(error) => return Ok(refused(operator, link, domains, form, error)),
    };
    match state
        .links
        .update(operator.workspace, code, patch, &origin)
        .await
    {
        Ok(_) => Ok(see_other(&format!("/console/links/{code}/rules?saved=1"))),
        Err(error) => Ok(refused(operator, link, domains, form, error.into())),
    }
}

/// Answers the phone of the form with the editor's (unsaved) rules.
pub async fn try_phone(
    State(state): State<AppState>,
    operator: Operator,
    domains: DomainContext,
    Path(code): Path<String>,
    Posted(form, ..): ConsoleForm<RulesForm>,
) -> PageResult {
    let link = state.links.get(operator.workspace, &code).await?;
    let request = parse(&form.rules).and_then(|rules| {
        Ok(PreviewRequest {
            user_agent: optional(&form.user_agent),
            language: optional(&form.language),
            country: optional(&form.country),
            ip: optional(&form.ip),
            time: time(&form.time)?,
            query: optional(&form.query),
            rules: Some(rules),
        })
    });
    let answered = request
        .and_then(|request| preview::answer(&state, &domains.own_domains, link.clone(), request));
    match answered {
        Ok(answer) => {
            let shown = Shown {
                form: Some(&form),
                answer: Some(answer),
                error: None,
            };
            Ok(render(&operator, link, &domains, shown, false))
        }
        Err(error) => Ok(refused(&operator, link, &domains, &form, error)),
    }
}

fn optional(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The editor's text as JSON: empty means no rules.
fn parse(text: &str) -> Result<serde_json::Value, Error> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Array(Vec::new()));
    }
    serde_json::from_str(text).map_err(|e| Error::invalid("invalid_rules", format!("rules: {e}")))
}

fn time(text: &str) -> Result<Option<chrono::DateTime<Utc>>, Error> {
    let Some(text) = optional(text) else {
        return Ok(None);
    };
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(&text, format).ok())
        .map(|at| Some(Utc.from_utc_datetime(&at)))
        .ok_or_else(|| Error::invalid("invalid_preview", "time: not a date and time"))
}

/// The page again, with the form as sent and the error (422).
fn refused(
    operator: &Operator,
    link: Link,
    domains: &DomainContext,
    form: &RulesForm,
    error: Error,
) -> axum::response::Response {
    refused_form(error, |message| {
        let shown = Shown {
            form: Some(form),
            error: Some(message),
            answer: None,
        };
        render(operator, link, domains, shown, false)
    })
}

fn render(
    operator: &Operator,
    link: Link,
    domains: &DomainContext,
    shown: Shown<'_>,
    saved: bool,
) -> axum::response::Response {
    let view = LinkView::new(link, domains);
    let saved_text = view
        .rules
        .as_ref()
        .and_then(|rules| serde_json::to_string_pretty(rules).ok())
        .unwrap_or_default();
    let form = shown.form;
    let field = |pick: fn(&RulesForm) -> &str| form.map_or("", pick).to_owned();
    let text = form.map_or(saved_text, |form| form.rules.clone());
    let action = |path: &str| format!("/console/links/{}/rules{path}", view.code);
    let body = html! {
        h1 { "Rules of " a href={ "/console/links/" (view.code) } { (view.code) } }
        @if saved { p.ok role="status" { "Saved." } }
        @if let Some(error) = &shown.error { p.error role="alert" { (error) } }
        p {
            "Tried in order; the first whose " code { "if" } " holds answers, else the link's own target ("
            (view.url) "). The format is the API's " code { "rules" } " field."
        }
        div.grid2.rule-editor {
        section {
            h2 { "As forms" }
            (super::rule_form::render(view.rules.as_deref().unwrap_or_default(), &action("/form"),
                &layout::csrf(operator), operator.may_issue() && view.state != "revoked"))
        }
        section {
        h2 { "As JSON, and a phone to try them on" }
        form.stack method="post" action=(action("")) {
            (layout::csrf(operator))
            label for="rules" { "Rules (JSON)" }
            textarea #rules name="rules" rows="16" spellcheck="false" { (text) }
            @if operator.may_issue() && view.state != "revoked" {
                button type="submit" { "Save rules" }
            }
            h2 { "What would this phone get?" }
            p { "Answered with the rules above, saved or not." }
            label for="user_agent" { "User-Agent" }
            input #user_agent name="user_agent" value=(field(|f| &f.user_agent));
            label for="language" { "Accept-Language" }
            input #language name="language" placeholder="pt-BR,en;q=0.8" value=(field(|f| &f.language));
            label for="country" { "Country (empty: from the address)" }
            input #country name="country" placeholder="PT" value=(field(|f| &f.country));
            label for="ip" { "Address" }
            input #ip name="ip" placeholder="192.0.2.7" value=(field(|f| &f.ip));
            label for="time" { "Time, UTC (empty: now)" }
            input #time type="datetime-local" name="time" value=(field(|f| &f.time));
            label for="query" { "Query string" }
            input #query name="query" placeholder="src=sms" value=(field(|f| &f.query));
            button type="submit" formaction=(action("/preview")) { "Preview" }
        }
        @if let Some(answer) = &shown.answer { (answer_box(answer)) }
        }
        }
    };
    layout::page(operator, &format!("Rules of {}", view.code), body).into_response()
}

fn answer_box(answer: &PreviewView) -> Markup {
    html! {
        section #answer role="status" {
            h2 { "Answer" }
            dl {
                dt { "Status" } dd { (answer.status) " (" (answer.answer) ")" }
                @if let Some(location) = &answer.location { dt { "Location" } dd { (location) } }
                dt { "Rule" } dd { (answer.rule.as_deref().unwrap_or("— (the link's own target)")) }
                @if let Some(at) = answer.opens_at { dt { "Opens" } dd { (layout::when(Some(at))) } }
            }
        }
    }
}
