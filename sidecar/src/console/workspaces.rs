//! `/console/workspaces`, the operator's pages (an operator key's session only): every
//! workspace with its state and quotas; create, rename, quotas, suspend and resume, delete with
//! its data (typed slug to confirm), and each workspace's keys, its first admin key included.
//! The changes are the service's, as the API's `/api/v1/workspaces` routes make them, so the
//! checks and the audit rows are the same.

use super::form::{Confirmed, OperatorForm, Posted};
use super::keys::{self, KeyForm};
use super::layout::{self, when};
use super::operator::InstanceOperator;
use super::page::{refused_form, see_other, PageResult};
use super::session::Sessions;
use super::workspace::{links_used_today, quotas_list};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::{AppState, Error, Path};
use shortlink_core::service::keys::MAX_RATE;
use shortlink_store::{self, ApiKey, Quotas, Workspace, WorkspaceChange, DEFAULT_SLUG};
use std::sync::Arc;

const BASE: &str = "/console/workspaces";

fn csrf_field(operator: &InstanceOperator) -> Markup {
    html! { input type="hidden" name="csrf" value=(operator.csrf); }
}

/// The quota fields, as sent: empty for the setting's default.
#[derive(Debug, Default, Deserialize)]
pub struct QuotaFields {
    #[serde(default)]
    links_per_day: String,
    #[serde(default)]
    compose_recipients: String,
    #[serde(default)]
    webhooks: String,
    #[serde(default)]
    key_rate_per_second: String,
    #[serde(default)]
    key_rate_burst: String,
}

impl QuotaFields {
    fn of(quotas: &Quotas) -> Self {
        let text = |value: Option<u64>| value.map(|n| n.to_string()).unwrap_or_default();
        QuotaFields {
            links_per_day: text(quotas.links_per_day),
            compose_recipients: text(quotas.compose_recipients),
            webhooks: text(quotas.webhooks),
            key_rate_per_second: text(quotas.key_rate_per_second),
            key_rate_burst: text(quotas.key_rate_burst),
        }
    }

    fn quotas(&self) -> Result<Quotas, Error> {
        let number = |text: &str| -> Result<Option<u64>, Error> {
            match text.trim() {
                "" => Ok(None),
                n => n
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= i64::MAX as u64)
                    .map(Some)
                    .ok_or_else(|| {
                        Error::invalid(
                            "invalid_quota",
                            "a quota is a whole number (0: unlimited), or empty for the setting",
                        )
                    }),
            }
        };
        // What the API's quotas take: a ceiling of 0 would be a rate of none.
        let ceiling = |text: &str, field: &str| -> Result<Option<u64>, Error> {
            match text.trim() {
                "" => Ok(None),
                n => n
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=MAX_RATE).contains(n))
                    .map(Some)
                    .ok_or_else(|| {
                        Error::invalid(
                            "invalid_quota",
                            format!("{field} is 1 to {MAX_RATE}, or empty for no ceiling"),
                        )
                    }),
            }
        };
        Ok(Quotas {
            links_per_day: number(&self.links_per_day)?,
            compose_recipients: number(&self.compose_recipients)?,
            webhooks: number(&self.webhooks)?,
            key_rate_per_second: ceiling(&self.key_rate_per_second, "the keys' rate ceiling")?,
            key_rate_burst: ceiling(&self.key_rate_burst, "the keys' burst ceiling")?,
        })
    }

    fn inputs(&self) -> Markup {
        html! {
            label for="q-links" { "Links per day (empty: the setting's; 0: unlimited)" }
            input #q-links type="number" min="0" name="links_per_day" value=(self.links_per_day);
            label for="q-compose" { "Recipients per compose" }
            input #q-compose type="number" min="0" name="compose_recipients" value=(self.compose_recipients);
            label for="q-webhooks" { "Webhook subscriptions" }
            input #q-webhooks type="number" min="0" name="webhooks" value=(self.webhooks);
            label for="q-key-rate" { "Highest rate of a key, requests per second (empty: no ceiling)" }
            input #q-key-rate type="number" min="1" max=(MAX_RATE) name="key_rate_per_second" value=(self.key_rate_per_second);
            label for="q-key-burst" { "Highest burst of a key" }
            input #q-key-burst type="number" min="1" max=(MAX_RATE) name="key_rate_burst" value=(self.key_rate_burst);
        }
    }
}

fn state_of(workspace: &Workspace) -> Markup {
    html! {
        @match workspace.suspended_at {
            Some(at) => span.state-revoked { "suspended " (when(Some(at))) },
            None => span.state-live { "active" },
        }
    }
}

/// The create form, as sent.
#[derive(Debug, Default, Deserialize)]
pub struct CreateForm {
    #[serde(default)]
    slug: String,
    #[serde(default)]
    name: String,
    #[serde(flatten)]
    quotas: QuotaFields,
}

pub async fn list(State(state): State<AppState>, operator: InstanceOperator) -> PageResult {
    let workspaces = state.links.storage().workspaces().await?;
    Ok(render_list(
        &state,
        &operator,
        &workspaces,
        &CreateForm::default(),
        None,
    ))
}

fn render_list(
    state: &AppState,
    operator: &InstanceOperator,
    workspaces: &[Workspace],
    form: &CreateForm,
    error: Option<String>,
) -> Response {
    let body = html! {
        h1 { "Workspaces" }
        div.wide { table {
            thead { tr {
                th scope="col" { "Slug" } th scope="col" { "Name" } th scope="col" { "State" }
                th scope="col" { "Quotas" } th scope="col" { "Created" }
            } }
            tbody {
                @for w in workspaces {
                    tr {
                        td { a href={ (BASE) "/" (w.slug) } { (w.slug) } }
                        td { (w.name) }
                        td { (state_of(w)) }
                        td { (quotas_list(state, &w.quotas, None)) }
                        td { (when(Some(w.created_at))) }
                    }
                }
            }
        } }
        h2 { "Create a workspace" }
        @if let Some(error) = &error { p.error role="alert" { (error) } }
        form.stack method="post" action=(BASE) {
            (csrf_field(operator))
            label for="slug" { "Slug (1 to 32 of a-z and 0-9 in words joined by '-'; never changes)" }
            input #slug name="slug" required maxlength="32" pattern="[a-z0-9]+(-[a-z0-9]+)*" value=(form.slug);
            label for="name" { "Name (default: the slug)" }
            input #name name="name" maxlength=(shortlink_store::MAX_NAME_LEN) value=(form.name);
            (form.quotas.inputs())
            button type="submit" { "Create workspace" }
        }
        p.hint { "Then map its short domains to the slug in nginx's " code { "domains.conf" }
            " (docs/WORKSPACES.md), and give it its first admin key on its page." }
    };
    layout::operator_page(operator, "Workspaces", body).into_response()
}

pub async fn create(
    State(state): State<AppState>,
    operator: InstanceOperator,
    Posted(form, origin, ..): OperatorForm<CreateForm>,
) -> PageResult {
    let slug = form.slug.trim();
    let created = async {
        // The service checks the name, as the API's.
        let name = if form.name.trim().is_empty() {
            slug
        } else {
            &form.name
        };
        let quotas = form.quotas.quotas()?;
        Ok::<_, Error>(
            (state.links)
                .create_workspace(slug, name, quotas, &origin)
                .await?,
        )
    }
    .await;
    match created {
        Ok(workspace) => Ok(see_other(&format!("{BASE}/{}", workspace.slug))),
        Err(error) => {
            let workspaces = state.links.storage().workspaces().await?;
            Ok(refused_form(error, |message| {
                render_list(&state, &operator, &workspaces, &form, Some(message))
            }))
        }
    }
}

/// The workspace with this slug; a missing one answers the 404 page.
async fn by_slug(state: &AppState, slug: &str) -> Result<Workspace, Error> {
    (state.links.storage().workspace_by_slug(slug).await?).ok_or(Error::NotFound)
}

/// What a workspace's page shows: the workspace, today's links and its keys.
type Shown = (Workspace, Option<u64>, Vec<ApiKey>);

async fn load(state: &AppState, slug: &str) -> Result<Shown, Error> {
    let workspace = by_slug(state, slug).await?;
    let keys = (state.links.storage())
        .list_api_keys(Some(workspace.id))
        .await?;
    let used = links_used_today(state, &workspace).await;
    Ok((workspace, used, keys))
}

pub async fn detail(
    State(state): State<AppState>,
    operator: InstanceOperator,
    Path(slug): Path<String>,
) -> PageResult {
    let shown = load(&state, &slug).await?;
    Ok(render_detail(
        &state,
        &operator,
        &shown,
        &KeyForm::default(),
        None,
    ))
}

fn render_detail(
    state: &AppState,
    operator: &InstanceOperator,
    (w, used, keys): &Shown,
    key_form: &KeyForm,
    error: Option<String>,
) -> Response {
    let here = format!("{BASE}/{}", w.slug);
    let body = html! {
        h1 { "Workspace " (w.name) }
        @if let Some(error) = &error { p.error role="alert" { (error) } }
        dl {
            dt { "Slug" } dd { code { (w.slug) } }
            dt { "State" } dd { (state_of(w)) }
            dt { "Created" } dd { (when(Some(w.created_at))) }
        }
        (quotas_list(state, &w.quotas, *used))
        h2 { "Rename and quotas" }
        form.stack method="post" action={ (here) "/change" } {
            (csrf_field(operator))
            label for="rename" { "Name" }
            input #rename name="name" required maxlength=(shortlink_store::MAX_NAME_LEN) value=(w.name);
            (QuotaFields::of(&w.quotas).inputs())
            button type="submit" { "Save" }
        }
        h2 { @if w.suspended_at.is_some() { "Resume" } @else { "Suspend" } }
        form method="post" action={ (here) "/suspend" } {
            (csrf_field(operator))
            @if w.suspended_at.is_some() {
                input type="hidden" name="suspended" value="false";
                p { "Its keys are refused; its links keep answering." }
                button type="submit" { "Resume " (w.slug) }
            } @else {
                input type="hidden" name="suspended" value="true";
                p { "Refuses its keys (API and console) until resumed; its links keep answering." }
                button.danger type="submit" { "Suspend " (w.slug) }
            }
        }
        h2 { "API keys" }
        (keys::table(keys, &format!("{here}/keys")))
        h2 { "Create a key" }
        @if keys.is_empty() { p { "A new workspace's first admin key is how it is handed over." } }
        (keys::create_form(&operator.csrf, &format!("{here}/keys"), key_form, None))
        @if w.slug != DEFAULT_SLUG {
            h2 { "Delete" }
            p { a href={ (here) "/delete" } { "Delete " (w.slug) " with all its data…" } }
        }
    };
    layout::operator_page(operator, &format!("Workspace {}", w.slug), body).into_response()
}

/// Rename and quotas, as sent.
#[derive(Debug, Default, Deserialize)]
pub struct ChangeForm {
    #[serde(default)]
    name: String,
    #[serde(flatten)]
    quotas: QuotaFields,
}

pub async fn change(
    State(state): State<AppState>,
    operator: InstanceOperator,
    Path(slug): Path<String>,
    Posted(form, origin, ..): OperatorForm<ChangeForm>,
) -> PageResult {
    let workspace = by_slug(&state, &slug).await?;
    let change = (|| {
        Ok::<_, Error>(WorkspaceChange {
            name: Some(form.name.clone()),
            suspended_at: None,
            quotas: Some(form.quotas.quotas()?),
        })
    })();
    let changed = match change {
        Ok(change) => (state.links)
            .change_workspace(workspace.id, &change, &origin)
            .await
            .map_err(Error::from),
        Err(error) => Err(error),
    };
    match changed {
        Ok(_) => Ok(see_other(&format!("{BASE}/{slug}"))),
        Err(error) => {
            let shown = load(&state, &slug).await?;
            Ok(refused_form(error, |message| {
                render_detail(
                    &state,
                    &operator,
                    &shown,
                    &KeyForm::default(),
                    Some(message),
                )
            }))
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct SuspendForm {
    suspended: Option<bool>,
}

pub async fn suspend(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    Posted(form, origin, ..): OperatorForm<SuspendForm>,
) -> PageResult {
    let workspace = by_slug(&state, &slug).await?;
    let suspended = form
        .suspended
        .ok_or_else(|| Error::invalid("invalid_body", "suspended must be true or false"))?;
    let change = WorkspaceChange {
        suspended_at: Some(suspended.then(shortlink_store::now)),
        ..WorkspaceChange::default()
    };
    (state.links)
        .change_workspace(workspace.id, &change, &origin)
        .await
        .map_err(Error::from)?;
    Ok(see_other(&format!("{BASE}/{slug}")))
}

pub async fn delete_confirm(
    State(state): State<AppState>,
    operator: InstanceOperator,
    Path(slug): Path<String>,
) -> PageResult {
    let w = by_slug(&state, &slug).await?;
    Ok(render_delete(&operator, &w, None))
}

fn render_delete(operator: &InstanceOperator, w: &Workspace, error: Option<String>) -> Response {
    let here = format!("{BASE}/{}", w.slug);
    let body = html! {
        h1 { "Delete workspace " (w.slug) "?" }
        @if let Some(error) = &error { p.error role="alert" { (error) } }
        p { "Its links stop answering (404) everywhere, and its keys, webhooks, visits and audit "
            "chain go with it. The installation's log keeps the record that it was deleted. "
            "This cannot be undone." }
        form.stack method="post" action={ (here) "/delete" } {
            (csrf_field(operator))
            label for="confirm" { "Type the slug, " code { (w.slug) } ", to confirm" }
            input #confirm name="confirm" required autocomplete="off";
            button.danger type="submit" { "Delete " (w.slug) " and all its data" }
        }
        p { a href=(here) { "Cancel" } }
    };
    layout::operator_page(operator, "Delete workspace", body).into_response()
}

#[derive(Debug, Deserialize)]
pub struct DeleteForm {
    #[serde(default)]
    confirm: String,
}

pub async fn delete(
    State(state): State<AppState>,
    Extension(console): Extension<Arc<Sessions>>,
    operator: InstanceOperator,
    Path(slug): Path<String>,
    Posted(form, origin, ..): OperatorForm<DeleteForm>,
) -> PageResult {
    let w = by_slug(&state, &slug).await?;
    if form.confirm.trim() != w.slug {
        let error = Error::invalid(
            "confirmation_mismatch",
            "the typed slug does not match; nothing was deleted",
        );
        return Ok(refused_form(error, |message| {
            render_delete(&operator, &w, Some(message))
        }));
    }
    let keys = state.links.storage().list_api_keys(Some(w.id)).await?;
    (state.links)
        .delete_workspace(w.id, &origin)
        .await
        .map_err(Error::from)?;
    // Its keys are gone: so are the console sessions' places in it.
    for key in &keys {
        console.end_sessions_of(&key.key_hash);
    }
    Ok(see_other(BASE))
}

pub async fn create_key(
    State(state): State<AppState>,
    operator: InstanceOperator,
    Path(slug): Path<String>,
    Posted(form, origin, ..): OperatorForm<KeyForm>,
) -> PageResult {
    let workspace = by_slug(&state, &slug).await?;
    match keys::create(&state, workspace.id, &form, &origin).await {
        Ok((key, secret)) => {
            let body = keys::created(&key, &secret, &format!("{BASE}/{slug}"));
            Ok(layout::operator_page(&operator, "Key created", body).into_response())
        }
        Err(error) => {
            let shown = load(&state, &slug).await?;
            Ok(refused_form(error, |message| {
                render_detail(&state, &operator, &shown, &form, Some(message))
            }))
        }
    }
}

pub async fn revoke_confirm(
    State(state): State<AppState>,
    operator: InstanceOperator,
    Path((slug, id)): Path<(String, i64)>,
) -> PageResult {
    let workspace = by_slug(&state, &slug).await?;
    let key = keys::find(&state, workspace.id, id).await?;
    let here = format!("{BASE}/{slug}");
    let action = format!("{here}/keys/{id}/revoke");
    let body = keys::revoke_confirm(&operator.csrf, &key, &action, &here);
    Ok(layout::operator_page(&operator, "Revoke key", body).into_response())
}

pub async fn revoke(
    State(state): State<AppState>,
    Extension(console): Extension<Arc<Sessions>>,
    // Signed in before the path is read: a stranger is sent to sign in, never told the id is bad.
    _operator: InstanceOperator,
    Path((slug, id)): Path<(String, i64)>,
    Posted(_, origin, ..): OperatorForm<Confirmed>,
) -> PageResult {
    let workspace = by_slug(&state, &slug).await?;
    let key = keys::revoke(&state, workspace.id, id, &origin).await?;
    console.end_sessions_of(&key.key_hash);
    Ok(see_other(&format!("{BASE}/{slug}")))
}
