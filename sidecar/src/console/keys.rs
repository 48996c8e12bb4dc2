//! A workspace's API keys as the console shows and changes them: the list, the create form, the
//! answer that shows a new key once, and the revoke confirmation. Shared by the workspace
//! admin's page ([`super::workspace`]) and the operator's ([`super::workspaces`]); the changes
//! themselves are the keys service's, as for `POST /api/v1/keys`, so checks and audit rows are
//! the API's.

use super::layout::when;
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::{generate_api_key, hash_api_key, AppState, Error};
use shortlink_core::service::keys::{self, NewKey};
use shortlink_model::WorkspaceId;
use shortlink_store::audit::Origin;
use shortlink_store::{ApiKey, KeyRate, Role};

/// The create form, as sent.
#[derive(Debug, Default, Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    per_second: String,
    #[serde(default)]
    burst: String,
}

impl KeyForm {
    /// The key to make, or why not (the API's codes: `invalid_role`, `invalid_rate`; its name
    /// is the keys service's check, as the API's).
    fn checked(&self, workspace: WorkspaceId) -> Result<NewKey<'_>, Error> {
        let name = &self.name;
        let role = match self.role.as_str() {
            "admin" => Role::Admin,
            "issuer" => Role::Issuer,
            "viewer" => Role::Viewer,
            _ => {
                return Err(Error::invalid(
                    "invalid_role",
                    "a role is admin, issuer or viewer",
                ))
            }
        };
        let bad_rate = || {
            Error::invalid(
                "invalid_rate",
                "a rate and its burst are whole numbers, both given or neither",
            )
        };
        let number = |text: &str| -> Result<Option<u64>, Error> {
            match text.trim() {
                "" => Ok(None),
                n => n.parse().map(Some).map_err(|_| bad_rate()),
            }
        };
        // Their range (at least 1, within the workspace's ceilings) is the keys service's check.
        let rate = match (number(&self.per_second)?, number(&self.burst)?) {
            (None, None) => None,
            (Some(per_second), Some(burst)) => Some(KeyRate { per_second, burst }),
            _ => return Err(bad_rate()),
        };
        Ok(NewKey {
            name,
            role,
            workspace: Some(workspace),
            rate,
        })
    }
}

/// Makes the key the form describes in `workspace`; returns it with the key itself, which is
/// shown once and never stored.
pub async fn create(
    state: &AppState,
    workspace: WorkspaceId,
    form: &KeyForm,
    origin: &Origin,
) -> Result<(ApiKey, String), Error> {
    let new = form.checked(workspace)?;
    let key = generate_api_key().map_err(|e| Error::Internal(Box::new(e)))?;
    let storage = state.links.storage();
    let created = keys::create(storage.as_ref(), new, &hash_api_key(&key), origin).await?;
    Ok((created, key))
}

/// Revokes key `id` of `workspace`; 404 when it has none with this id.
pub async fn revoke(
    state: &AppState,
    workspace: WorkspaceId,
    id: i64,
    origin: &Origin,
) -> Result<ApiKey, Error> {
    let storage = state.links.storage();
    (keys::revoke(storage.as_ref(), Some(workspace), id, origin).await?).ok_or(Error::NotFound)
}

/// Key `id` of `workspace`, for the revoke confirmation.
pub async fn find(state: &AppState, workspace: WorkspaceId, id: i64) -> Result<ApiKey, Error> {
    let keys = state.links.storage().list_api_keys(Some(workspace)).await?;
    keys.into_iter()
        .find(|key| key.id == id)
        .ok_or(Error::NotFound)
}

fn csrf_field(csrf: &str) -> Markup {
    html! { input type="hidden" name="csrf" value=(csrf); }
}

/// The keys with a revoke link each (`base`: the keys' path, e.g. `/console/workspace/keys`).
pub fn table(keys: &[ApiKey], base: &str) -> Markup {
    html! {
        div.wide { table {
            thead { tr {
                th scope="col" { "Id" } th scope="col" { "Name" } th scope="col" { "Role" }
                th scope="col" { "Own rate" } th scope="col" { "Created" } th scope="col" { "Revoked" }
                th scope="col" { "" }
            } }
            tbody {
                @for key in keys {
                    tr {
                        td.num { (key.id) }
                        td { (key.name) }
                        td { (key.role.as_str()) }
                        td { @match key.rate {
                            Some(rate) => { (rate.per_second) "/s, burst " (rate.burst) }
                            None => "setting's",
                        } }
                        td { (when(Some(key.created_at))) }
                        td { (when(key.revoked_at)) }
                        td { @if key.revoked_at.is_none() && key.role != Role::Resolve {
                            a href={ (base) "/" (key.id) "/revoke" } { "Revoke…" }
                        } }
                    }
                }
                @if keys.is_empty() { tr { td colspan="7" { "No key yet." } } }
            }
        } }
        p.hint { "Only a key's SHA-256 is stored: no part of it can be shown again. Its id is in "
            "the audit log's rows of what it did." }
    }
}

/// The create form, posting to `action`; `form` refills a refused one.
pub fn create_form(csrf: &str, action: &str, form: &KeyForm, error: Option<&str>) -> Markup {
    html! {
        @if let Some(error) = error { p.error role="alert" { (error) } }
        form.stack method="post" action=(action) {
            (csrf_field(csrf))
            label for="key-name" { "Name (what it is for, e.g. the campaign tool using it)" }
            input #key-name name="name" required maxlength=(shortlink_store::MAX_NAME_LEN) value=(form.name);
            label for="key-role" { "Role" }
            select #key-role name="role" {
                @for (role, what) in [
                    ("admin", "admin: everything in the workspace, its keys too"),
                    ("issuer", "issuer: create and change links"),
                    ("viewer", "viewer: read only"),
                ] {
                    option value=(role) selected[form.role == role] { (what) }
                }
            }
            label for="key-rate" { "Own rate, requests per second (optional; at most the workspace's ceiling)" }
            input #key-rate type="number" name="per_second" min="1" max=(keys::MAX_RATE) value=(form.per_second);
            label for="key-burst" { "Burst (with a rate: 1 to " (keys::MAX_RATE) ")" }
            input #key-burst type="number" name="burst" min="1" max=(keys::MAX_RATE) value=(form.burst);
            button type="submit" { "Create key" }
        }
    }
}

/// The answer to a created key: the key, this once, with a copy button.
pub fn created(key: &ApiKey, secret: &str, back: &str) -> Markup {
    html! {
        h1 { "Key " (key.name) " created" }
        p.ok role="status" { "Copy the key now: it is shown only this once." }
        p { code #new-key.short { (secret) } " "
            button type="button" data-copy="new-key" hidden { "Copy" } }
        p { "Role " (key.role.as_str()) ", id " (key.id) ". Send it as "
            code { "Authorization: Bearer <key>" } ", or sign in to the console with it." }
        p { a href=(back) { "Back" } }
    }
}

/// The revoke confirmation, posting to `action`.
pub fn revoke_confirm(csrf: &str, key: &ApiKey, action: &str, back: &str) -> Markup {
    html! {
        h1 { "Revoke key " (key.name) "?" }
        p { "Requests with it are refused from then on, and console sessions signed in with it "
            "leave its workspace. This cannot be undone." }
        form method="post" action=(action) {
            (csrf_field(csrf))
            button.danger type="submit" { "Revoke " (key.name) }
            " " a href=(back) { "Cancel" }
        }
    }
}
