//! Click webhooks (admin only, as the API): the subscriptions with their delivery state, a form to
//! add one, and each one's failures with replay (from a failure or from a time) and removal.

use super::form::{AdminForm, Confirmed, Posted};
use super::layout::{self, when};
use super::operator::Operator;
use super::page::{refused_form, see_other, PageResult};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::{AppState, Error, Path};
use shortlink_model::schema::WholeNumber;
use shortlink_webhooks::service::{FailureView, ReplayRequest};
use shortlink_webhooks::subscription::{SubscriptionRequest, SubscriptionView};

/// The add form, as sent: lists as comma-separated text.
#[derive(Debug, Default, Deserialize)]
pub struct WebhookForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    secret: String,
    #[serde(default)]
    campaigns: String,
    #[serde(default)]
    tags: String,
    include_bots: Option<String>,
    #[serde(default)]
    batch_size: String,
    #[serde(default)]
    batch_ms: String,
}

fn list(text: &str) -> Vec<String> {
    (text.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

impl WebhookForm {
    fn request(&self) -> Result<SubscriptionRequest, Error> {
        let number = |text: &str, field: &str| -> Result<Option<WholeNumber>, Error> {
            match text.trim() {
                "" => Ok(None),
                n => n.parse().map(|n| Some(WholeNumber(n))).map_err(|_| {
                    Error::invalid("invalid_batch", format!("{field} must be a whole number"))
                }),
            }
        };
        Ok(SubscriptionRequest {
            name: Some(self.name.trim().to_owned()).filter(|n| !n.is_empty()),
            url: self.url.trim().to_owned(),
            secret: self.secret.clone(),
            campaigns: list(&self.campaigns),
            tags: list(&self.tags),
            include_bots: self.include_bots.is_some(),
            // The API's default (yes): the form has no box for it yet.
            link_events: None,
            batch_size: number(&self.batch_size, "batch size")?,
            batch_ms: number(&self.batch_ms, "batch wait")?,
        })
    }
}

pub async fn page(State(state): State<AppState>, operator: Operator) -> PageResult {
    operator.require_admin()?;
    let webhooks = state.webhooks.list(operator.workspace).await?;
    Ok(render(&operator, &webhooks, &WebhookForm::default(), None))
}

pub async fn create(
    State(state): State<AppState>,
    operator: Operator,
    Posted(form, origin, ..): AdminForm<WebhookForm>,
) -> PageResult {
    // The workspace's quota of subscriptions, as for the API's: the service checks it.
    let budget = shortlink_api::budget_of(&state, operator.workspace).await?;
    let created = match form.request() {
        Ok(request) => {
            (state.webhooks.create(&budget, request, &origin).await).map_err(Error::from)
        }
        Err(error) => Err(error),
    };
    match created {
        Ok(view) => Ok(see_other(&format!("/console/webhooks/{}", view.id))),
        Err(error) => {
            let webhooks = state.webhooks.list(operator.workspace).await?;
            Ok(refused_form(error, |message| {
                render(&operator, &webhooks, &form, Some(message))
            }))
        }
    }
}

fn state_of(w: &SubscriptionView) -> Markup {
    html! {
        @match w.failing_since {
            None => "delivering",
            Some(since) => {
                "failing since " (when(Some(since))) ", " (w.attempts) " attempts"
                @if let Some(error) = &w.last_error { ": " (error) }
            }
        }
    }
}

fn render(
    operator: &Operator,
    webhooks: &[SubscriptionView],
    form: &WebhookForm,
    error: Option<String>,
) -> Response {
    let body = html! {
        h1 { "Click webhooks" }
        p { "Every click the filter admits is POSTed, signed (" code { "X-Shortlink-Signature" }
            "), in batches, at least once, in the order the clicks were stored; receivers "
            "de-duplicate by the event's " code { "id" } "." }
        div.wide { table {
            thead { tr {
                th scope="col" { "Name" } th scope="col" { "URL" } th scope="col" { "Filter" }
                th.num scope="col" { "Delivered" } th scope="col" { "State" }
            } }
            tbody {
                @for w in webhooks {
                    tr {
                        td { a href={ "/console/webhooks/" (w.id) } { (w.name) } }
                        td { (w.url) }
                        td { (filter(w)) }
                        td.num { (w.delivered) }
                        td { (state_of(w)) }
                    }
                }
                @if webhooks.is_empty() { tr { td colspan="5" { "No webhook yet." } } }
            }
        } }
        h2 { "Add a webhook" }
        @if let Some(error) = &error { p.error role="alert" { (error) } }
        form.stack method="post" action="/console/webhooks" {
            (layout::csrf(operator))
            label for="url" { "URL (http:// or https://, a public host)" }
            input #url type="url" name="url" required value=(form.url);
            label for="secret" { "Secret (16 to 256 visible characters; signs every POST, not shown again)" }
            input #secret type="password" name="secret" required minlength="16" maxlength="256" autocomplete="off";
            label for="name" { "Name (optional)" }
            input #name name="name" maxlength="100" value=(form.name);
            label for="campaigns" { "Campaigns (comma-separated; empty with no tags: every click)" }
            input #campaigns name="campaigns" value=(form.campaigns);
            label for="tags" { "Tags (comma-separated)" }
            input #tags name="tags" value=(form.tags);
            label { input type="checkbox" name="include_bots" value="1" checked[form.include_bots.is_some()]; " Bots and link previews too" }
            label for="batch_size" { "Events per POST at most (1 to 1000, default 100)" }
            input #batch_size type="number" name="batch_size" min="1" max="1000" value=(form.batch_size);
            label for="batch_ms" { "Wait for a fuller batch, ms (0 to 60000, default 1000)" }
            input #batch_ms type="number" name="batch_ms" min="0" max="60000" value=(form.batch_ms);
            button type="submit" { "Add webhook" }
        }
    };
    layout::page(operator, "Webhooks", body).into_response()
}

fn filter(w: &SubscriptionView) -> String {
    let mut parts = Vec::new();
    if !w.campaigns.is_empty() {
        parts.push(format!("campaigns {}", w.campaigns.join(", ")));
    }
    if !w.tags.is_empty() {
        parts.push(format!("tags {}", w.tags.join(", ")));
    }
    if parts.is_empty() {
        parts.push("every link".into());
    }
    parts.push(
        if w.include_bots {
            "bots too"
        } else {
            "people only"
        }
        .into(),
    );
    parts.join("; ")
}

pub async fn detail(
    State(state): State<AppState>,
    operator: Operator,
    Path(id): Path<String>,
) -> PageResult {
    operator.require_admin()?;
    let webhook = state.webhooks.get(operator.workspace, &id).await?;
    let failures = state.webhooks.failures(operator.workspace, &id).await?;
    Ok(render_detail(&operator, &webhook, &failures, None))
}

fn render_detail(
    operator: &Operator,
    w: &SubscriptionView,
    failures: &[FailureView],
    error: Option<String>,
) -> Response {
    let action = |path: &str| format!("/console/webhooks/{}{path}", w.id);
    let body = html! {
        h1 { "Webhook " (w.name) }
        @if let Some(error) = &error { p.error role="alert" { (error) } }
        dl {
            dt { "URL" } dd { (w.url) }
            dt { "Secret" } dd { (w.secret_hint) }
            dt { "Filter" } dd { (filter(w)) }
            dt { "Batches" } dd { "up to " (w.batch_size) " events, waiting up to " (w.batch_ms) " ms" }
            dt { "Delivered" } dd { (w.delivered) }
            dt { "State" } dd { (state_of(w)) }
            dt { "Next event" } dd { code { (w.cursor) } }
        }
        h2 { "Given up after the retry window" }
        div.wide { table {
            thead { tr {
                th scope="col" { "When" } th.num scope="col" { "Events" } th scope="col" { "Error" } th scope="col" { "" }
            } }
            tbody {
                @for f in failures {
                    tr {
                        td { (when(Some(f.failed_at))) }
                        td.num { (f.events) }
                        td { (f.error) }
                        td { form method="post" action=(action("/replay")) {
                            (layout::csrf(operator))
                            input type="hidden" name="failure" value=(f.id);
                            button type="submit" { "Replay from here" }
                        } }
                    }
                }
                @if failures.is_empty() { tr { td colspan="4" { "None." } } }
            }
        } }
        h2 { "Replay from a time" }
        form.stack method="post" action=(action("/replay")) {
            (layout::csrf(operator))
            label for="from" { "Every click stored at or after (RFC 3339, UTC)" }
            input #from name="from" required placeholder="2026-11-25T08:00:00Z";
            button type="submit" { "Replay" }
        }
        h2 { "Remove" }
        form method="post" action=(action("/delete")) {
            (layout::csrf(operator))
            button type="submit" { "Remove this webhook" }
        }
    };
    layout::page(operator, &format!("Webhook {}", w.name), body).into_response()
}

#[derive(Debug, Default, Deserialize)]
pub struct ReplayForm {
    from: Option<String>,
    failure: Option<i64>,
}

pub async fn replay(
    State(state): State<AppState>,
    operator: Operator,
    Path(id): Path<String>,
    Posted(form, ..): AdminForm<ReplayForm>,
) -> PageResult {
    let from = match form.from.as_deref().map(str::trim) {
        None => Ok(None),
        Some(text) => text.parse::<DateTime<Utc>>().map(Some).map_err(|_| {
            Error::invalid(
                "invalid_replay",
                "the time is not RFC 3339, e.g. 2026-11-25T08:00:00Z",
            )
        }),
    };
    let replayed = match from {
        Ok(from) => {
            let request = ReplayRequest {
                from,
                failure: form.failure,
            };
            state
                .webhooks
                .replay(operator.workspace, &id, request)
                .await
                .map_err(Error::from)
        }
        Err(error) => Err(error),
    };
    match replayed {
        Ok(_) => Ok(see_other(&format!("/console/webhooks/{id}"))),
        Err(error) => {
            let webhook = state.webhooks.get(operator.workspace, &id).await?;
            let failures = state.webhooks.failures(operator.workspace, &id).await?;
            Ok(refused_form(error, |message| {
                render_detail(&operator, &webhook, &failures, Some(message))
            }))
        }
    }
}

pub async fn delete(
    State(state): State<AppState>,
    operator: Operator,
    Path(id): Path<String>,
    Posted(_, origin, ..): AdminForm<Confirmed>,
) -> PageResult {
    state
        .webhooks
        .delete(operator.workspace, &id, &origin)
        .await?;
    Ok(see_other("/console/webhooks"))
}
