//! The audit log (a workspace's admin: its chain; the operator: every chain, as
//! `GET /api/v1/audit`): newest first, the API's filters as a form, and a link to the next
//! (older) page. And what console changes record as their origin.

use super::audit_changes;
use super::layout::{self, when};
use super::operator::{InstanceOperator, Operator};
use super::page::{PageError, PageResult};
use super::session::Person;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::Extension;
use chrono::{DateTime, Utc};
use maud::html;
use serde::Deserialize;
use shortlink_api::{AppState, Error, Query};
use shortlink_store::audit::{Actor, AuditFilter, Origin, RequestInfo, INSTALLATION_CHAIN};
use shortlink_store::Role;
use std::collections::HashMap;

/// Rows per page.
const PAGE: u32 = 50;

/// The origin of a console change: the signed-in person, and the request as nginx tagged it.
pub fn origin(operator: &Operator, request: RequestInfo) -> Origin {
    Origin {
        workspace_id: operator.workspace.get(),
        actor: Actor::console(operator.name.clone()),
        request,
    }
}

/// The origin of an operator's change in the console: its chain is the installation's (the
/// service files a change to a workspace's keys in that workspace's chain).
pub fn operator_origin(operator: &InstanceOperator, request: RequestInfo) -> Origin {
    Origin {
        workspace_id: INSTALLATION_CHAIN,
        actor: Actor::console(operator.key.name.clone()),
        request,
    }
}

/// The request's id and client (`shortlink_api::request_id` puts it on every request).
pub type Tagged = Extension<RequestInfo>;

/// The filter form, as sent: empty fields do not filter.
#[derive(Debug, Default, Deserialize)]
pub struct AuditForm {
    #[serde(default)]
    action: String,
    #[serde(default)]
    actor: String,
    #[serde(default)]
    object: String,
    /// RFC 3339.
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    after: Option<i64>,
}

fn text(value: &str) -> Option<String> {
    Some(value.trim().to_owned()).filter(|v| !v.is_empty())
}

fn time(value: &str, field: &str) -> Result<Option<i64>, Error> {
    match value.trim() {
        "" => Ok(None),
        v => DateTime::parse_from_rfc3339(v)
            .map(|at| Some(at.with_timezone(&Utc).timestamp_millis()))
            .map_err(|_| {
                Error::invalid(
                    "invalid_time",
                    format!("{field} must be a time like 2026-11-26T08:00:00Z"),
                )
            }),
    }
}

pub async fn page(
    State(state): State<AppState>,
    person: Person,
    Query(form): Query<AuditForm>,
) -> PageResult {
    // A workspace's admin reads its chain only; the operator every chain, each row with its own.
    let (chain, slugs) = match &person {
        Person::Workspace(operator) if operator.role != Role::Admin => {
            return Err(PageError(Error::Forbidden(operator.role)));
        }
        Person::Workspace(operator) => (Some(operator.workspace.get()), None),
        Person::Instance(_) => {
            let workspaces = state.links.storage().workspaces().await?;
            let slugs: HashMap<i64, String> = (workspaces.into_iter())
                .map(|workspace| (workspace.id.get(), workspace.slug))
                .collect();
            (None, Some(slugs))
        }
    };
    let filter = AuditFilter {
        workspace_id: chain,
        action: text(&form.action),
        actor: text(&form.actor),
        object: text(&form.object),
        since_ms: time(&form.since, "since")?,
        until_ms: time(&form.until, "until")?,
        before_id: form.after,
        limit: PAGE,
    };
    let rows = state.links.storage().list_audit(&filter).await?;
    let next = (rows.len() == PAGE as usize)
        .then(|| rows.last().map(|row| row.id))
        .flatten()
        .map(|after| {
            let query = [
                ("action", form.action.as_str()),
                ("actor", form.actor.as_str()),
                ("object", form.object.as_str()),
                ("since", form.since.as_str()),
                ("until", form.until.as_str()),
            ];
            let mut url = url::form_urlencoded::Serializer::new(String::new());
            for (name, value) in query.iter().filter(|(_, v)| !v.trim().is_empty()) {
                url.append_pair(name, value);
            }
            url.append_pair("after", &after.to_string());
            format!("/console/audit?{}", url.finish())
        });
    let body = html! {
        h1 { "Audit log" }
        p { "Every change, newest first: who, what, and each changed field before and after "
            "(secrets never). " code { "shortlink-sidecar audit verify" } " checks the rows' hash chain." }
        form.inline method="get" action="/console/audit" {
            label { "Action" input name="action" placeholder="webhook.*" value=(form.action); }
            label { "Actor" input name="actor" placeholder="key:3 or a name" value=(form.actor); }
            label { "Object" input name="object" value=(form.object); }
            label { "Since" input name="since" placeholder="2026-11-26T00:00:00Z" value=(form.since); }
            label { "Until" input name="until" value=(form.until); }
            button type="submit" { "Filter" }
        }
        div.wide { table {
            thead { tr {
                th scope="col" { "When" }
                @if slugs.is_some() { th scope="col" { "Workspace" } }
                th scope="col" { "Actor" } th scope="col" { "Action" }
                th scope="col" { "Object" } th scope="col" { "Changes" } th scope="col" { "Request" }
            } }
            tbody {
                @for row in &rows {
                    tr {
                        td { (when(DateTime::from_timestamp_millis(row.at_ms))) }
                        @if let Some(slugs) = &slugs { td { (chain_name(slugs, row.workspace_id)) } }
                        td { (row.actor_kind) " " (row.actor_name)
                            @if let Some(id) = row.actor_id { " (" (id) ")" } }
                        td { (action_name(&row.action)) br; small.hint { code { (row.action) } } }
                        td { (row.object) }
                        td {
                            @if let Some(size) = row.batch_size { p.batch { (batch_line(&row.action, size)) } }
                            // A batch row's size says what it did; "none" beside it contradicted it.
                            @if row.batch_size.is_none() || !matches!(row.changes.trim(), "" | "{}") {
                                (audit_changes::render(&row.changes))
                            }
                        }
                        td { (row.request_id.as_deref().unwrap_or("-"))
                            @if let Some(addr) = &row.client_addr { br; (addr) } }
                    }
                }
                @if rows.is_empty() { tr { td colspan="7" { "No row matches." } } }
            }
        } }
        @if let Some(next) = &next { p { a href=(next) { "Next page (older)" } } }
    };
    Ok(match &person {
        Person::Workspace(operator) => layout::page(operator, "Audit log", body),
        Person::Instance(operator) => layout::operator_page(operator, "Audit log", body),
    }
    .into_response())
}

/// A chain's name on the operator's page: its workspace's slug, the installation's, or the id
/// of a workspace deleted since (its rows went with it, but not the installation's record).
fn chain_name(slugs: &HashMap<i64, String>, chain: i64) -> String {
    match slugs.get(&chain) {
        Some(slug) => slug.clone(),
        None if chain == INSTALLATION_CHAIN => "(installation)".into(),
        None => format!("#{chain}"),
    }
}

/// An audit action in an operator's words; the stored name (what the filter takes) is shown
/// beside it.
fn action_name(action: &str) -> &str {
    match action {
        "link.create" => "Link created",
        "link.update" => "Link changed",
        "link.revoke" => "Link revoked",
        "links.batch" => "Links created in a batch",
        "links.compose" => "Messages composed",
        "links.reissue" => "Links re-issued on another domain",
        "import.run" => "Links imported",
        "key.create" => "API key created",
        "key.revoke" => "API key revoked",
        "workspace.create" => "Workspace created",
        "workspace.update" => "Workspace changed",
        "workspace.delete" => "Workspace deleted",
        "webhook.create" => "Webhook added",
        "webhook.update" => "Webhook changed",
        "webhook.delete" => "Webhook removed",
        "domain.drain" => "Domain drained",
        "domain.restore" => "Domain restored",
        "domain.pin" => "Domain pinned",
        "gateway.set" => "SMS gateway set",
        "gateway.delete" => "SMS gateway removed",
        "callback_token.create" => "Receipt token created",
        "callback_token.revoke" => "Receipt token revoked",
        "not_found_redirects.set" => "Not-found redirects set",
        "retention.set" => "Retention changed",
        "subject.erase" => "A person's data erased",
        other => other,
    }
}

/// What a row's batch size counts, by action (a batch, an import, a re-issue: links made).
fn batch_line(action: &str, size: i64) -> String {
    let links = if size == 1 { "link" } else { "links" };
    match action {
        "links.compose" => format!("{size} messages"),
        "links.reissue" => format!("{size} {links} re-issued"),
        "import.run" => format!("{size} {links} imported"),
        _ => format!("{size} {links} created"),
    }
}
