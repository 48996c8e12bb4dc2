//! `/console/workspace`, the active workspace's own page (its admins only, as
//! `GET /api/v1/workspace` and `/api/v1/keys`): its name and slug, its quotas (the operator's to
//! change, shown here), and its keys, which its admins create and revoke.

use super::form::{AdminForm, Confirmed, Posted};
use super::keys::{self, KeyForm};
use super::layout;
use super::operator::Operator;
use super::page::{refused_form, see_other, PageResult};
use super::session::Sessions;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use maud::{html, Markup};
use shortlink_api::{AppState, Error, Path};
use shortlink_store::{ApiKey, Quotas, Workspace};
use std::sync::Arc;

const KEYS: &str = "/console/workspace/keys";

pub async fn page(State(state): State<AppState>, operator: Operator) -> PageResult {
    operator.require_admin()?;
    let shown = load(&state, &operator).await?;
    Ok(render(&state, &operator, &shown, &KeyForm::default(), None))
}

/// One quota: the workspace's own value, or the setting's that applies in its place.
fn quota(own: Option<u64>, setting: u64) -> Markup {
    let limit = |n: u64| {
        if n == 0 {
            "unlimited".to_owned()
        } else {
            n.to_string()
        }
    };
    html! {
        @match own {
            Some(n) => (limit(n)),
            None => { (limit(setting)) " " span.hint { "(setting default)" } }
        }
    }
}

/// The quotas; `used`: today's links, when read (see [`links_used_today`]).
pub(super) fn quotas_list(state: &AppState, quotas: &Quotas, used: Option<u64>) -> Markup {
    let settings = &state.limits.settings;
    html! {
        dl {
            dt { "Links per day (UTC)" }
            dd {
                (quota(quotas.links_per_day, settings.links_per_day))
                @if let Some(used) = used { ", " (used) " used today" }
            }
            dt { "Recipients per compose" } dd { (quota(quotas.compose_recipients, settings.compose_recipients)) }
            dt { "Webhook subscriptions" } dd { (quota(quotas.webhooks, settings.webhooks)) }
            dt { "Highest rate of a key" }
            dd {
                @match (quotas.key_rate_per_second, quotas.key_rate_burst) {
                    (None, None) => "no ceiling",
                    (rate, burst) => {
                        (rate.map_or("any".to_owned(), |r| format!("{r} a second")))
                        ", burst " (burst.map_or("any".to_owned(), |b| b.to_string()))
                    }
                }
            }
        }
    }
}

/// Today's links of `workspace` against its daily quota: one read of the limiter's count in
/// Redis, only counted while a quota applies (`None` then, or when Redis does not answer: the
/// page does not wait on it).
pub(super) async fn links_used_today(state: &AppState, workspace: &Workspace) -> Option<u64> {
    let per_day = (workspace.quotas.links_per_day).unwrap_or(state.limits.settings.links_per_day);
    if per_day == 0 {
        return None;
    }
    let used = state
        .limits
        .quotas
        .links_used_today(workspace.id.get())
        .await;
    used.ok()
}

/// What the page shows: the workspace, today's links and its keys.
type Shown = (Workspace, Option<u64>, Vec<ApiKey>);

async fn load(state: &AppState, operator: &Operator) -> Result<Shown, Error> {
    let storage = state.links.storage();
    let workspace = (storage.workspace(operator.workspace).await?).ok_or(Error::NotFound)?;
    let keys = storage.list_api_keys(Some(operator.workspace)).await?;
    let used = links_used_today(state, &workspace).await;
    Ok((workspace, used, keys))
}

fn render(
    state: &AppState,
    operator: &Operator,
    (workspace, used, keys): &Shown,
    form: &KeyForm,
    error: Option<String>,
) -> Response {
    let body = html! {
        h1 { "Workspace " (workspace.name) }
        dl {
            dt { "Slug" } dd { code { (workspace.slug) } " (nginx's host map names the workspace by it)" }
            dt { "Created" } dd { (layout::when(Some(workspace.created_at))) }
        }
        h2 { "Quotas" }
        (quotas_list(state, &workspace.quotas, *used))
        p.hint { "Quotas are the operator's to change." }
        h2 { "API keys" }
        (keys::table(keys, KEYS))
        h2 { "Create a key" }
        (keys::create_form(&operator.csrf, KEYS, form, error.as_deref()))
    };
    layout::page(operator, "Workspace", body).into_response()
}

pub async fn create_key(
    State(state): State<AppState>,
    operator: Operator,
    Posted(form, origin, ..): AdminForm<KeyForm>,
) -> PageResult {
    match keys::create(&state, operator.workspace, &form, &origin).await {
        Ok((key, secret)) => {
            let body = keys::created(&key, &secret, "/console/workspace");
            Ok(layout::page(&operator, "Key created", body).into_response())
        }
        Err(error) => {
            let shown = load(&state, &operator).await?;
            Ok(refused_form(error, |message| {
                render(&state, &operator, &shown, &form, Some(message))
            }))
        }
    }
}

pub async fn revoke_confirm(
    State(state): State<AppState>,
    operator: Operator,
    Path(id): Path<i64>,
) -> PageResult {
    operator.require_admin()?;
    let key = keys::find(&state, operator.workspace, id).await?;
    let action = format!("{KEYS}/{id}/revoke");
    let body = keys::revoke_confirm(&operator.csrf, &key, &action, "/console/workspace");
    Ok(layout::page(&operator, "Revoke key", body).into_response())
}

/// Revokes the key; sessions signed in with it leave this workspace (this one too, if it is
/// the key this session uses: the redirect then lands on the session's next workspace).
pub async fn revoke(
    State(state): State<AppState>,
    Extension(console): Extension<Arc<Sessions>>,
    operator: Operator,
    Path(id): Path<i64>,
    Posted(_, origin, ..): AdminForm<Confirmed>,
) -> PageResult {
    let key = keys::revoke(&state, operator.workspace, id, &origin).await?;
    console.end_sessions_of(&key.key_hash);
    Ok(see_other("/console/workspace"))
}
