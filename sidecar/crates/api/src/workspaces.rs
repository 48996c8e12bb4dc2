//! Workspaces (issue 53): `/api/v1/workspaces…`, the operator's (create, rename, suspend, quotas,
//! delete with the data, and each workspace's keys), and `/api/v1/workspace` and `/api/v1/keys`,
//! a workspace's own view of itself and its keys.

use super::{
    generate_api_key, hash_api_key, AppState, Error, ErrorBody, InWorkspace, Json, Path, Recorder,
    Result,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get};
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_core::service::keys::{self, KeyError, NewKey, MAX_RATE};
use shortlink_core::service::WorkspaceError;
use shortlink_model::schema::{self, WholeNumber};
use shortlink_model::WorkspaceId;
use shortlink_store::audit::Origin;
use shortlink_store::{
    self as storage, ApiKey, KeyRate, Quotas, Role, Workspace, WorkspaceChange, MAX_NAME_LEN,
};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/workspaces", get(list_workspaces).post(create_workspace))
        .route(
            "/workspaces/{slug}",
            get(get_workspace)
                .patch(change_workspace)
                .delete(delete_workspace),
        )
        .route(
            "/workspaces/{slug}/keys",
            get(list_workspace_keys).post(create_workspace_key),
        )
        .route("/workspaces/{slug}/keys/{id}", delete(revoke_workspace_key))
        .route("/workspace", get(own_workspace))
        .route("/keys", get(list_keys).post(create_key))
        .route("/keys/{id}", delete(revoke_key))
}

impl From<WorkspaceError> for Error {
    fn from(error: WorkspaceError) -> Self {
        let (status, code) = match &error {
            WorkspaceError::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            WorkspaceError::SlugTaken => (StatusCode::CONFLICT, "slug_taken"),
            WorkspaceError::BadSlug => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_slug"),
            WorkspaceError::BadName => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_name"),
            WorkspaceError::DefaultKept => (StatusCode::CONFLICT, "default_workspace"),
            WorkspaceError::Service(_) => {
                let WorkspaceError::Service(service) = error else {
                    return Error::NotFound;
                };
                return service.into();
            }
        };
        Error::Request {
            status,
            code,
            message: error.to_string(),
        }
    }
}

impl From<KeyError> for Error {
    fn from(error: KeyError) -> Self {
        match error {
            KeyError::Rate(refused) => Error::invalid("invalid_rate", refused.to_string()),
            KeyError::BadName => Error::invalid("invalid_name", shortlink_store::NAME_RULE),
            KeyError::NoWorkspace => WorkspaceError::NotFound.into(),
            KeyError::Storage(error) => error.into(),
        }
    }
}

/// A workspace as the operator sees it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct WorkspaceView {
    /// Never changes: nginx's host map names the workspace by it.
    pub slug: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// Set while the workspace's keys are refused.
    pub suspended_at: Option<DateTime<Utc>>,
    pub quotas: QuotasView,
}

/// Per-workspace limits, the operator's to set; `null`: the installation's default.
#[derive(Serialize, Deserialize, Default, Clone, Copy, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotasView {
    /// Links created per UTC day.
    pub links_per_day: Option<u64>,
    /// Recipients of one compose.
    pub compose_recipients: Option<u64>,
    /// Webhook subscriptions.
    pub webhooks: Option<u64>,
    #[schema(schema_with = rate_ceiling_schema)]
    pub key_rate_per_second: Option<u64>,
    #[schema(schema_with = burst_ceiling_schema)]
    pub key_rate_burst: Option<u64>,
}

impl From<QuotasView> for Quotas {
    fn from(view: QuotasView) -> Self {
        Quotas {
            links_per_day: view.links_per_day,
            compose_recipients: view.compose_recipients,
            webhooks: view.webhooks,
            key_rate_per_second: view.key_rate_per_second,
            key_rate_burst: view.key_rate_burst,
        }
    }
}

impl From<Workspace> for WorkspaceView {
    fn from(workspace: Workspace) -> Self {
        let quotas = workspace.quotas;
        WorkspaceView {
            slug: workspace.slug,
            name: workspace.name,
            created_at: workspace.created_at,
            suspended_at: workspace.suspended_at,
            quotas: QuotasView {
                links_per_day: quotas.links_per_day,
                compose_recipients: quotas.compose_recipients,
                webhooks: quotas.webhooks,
                key_rate_per_second: quotas.key_rate_per_second,
                key_rate_burst: quotas.key_rate_burst,
            },
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct WorkspaceList {
    pub workspaces: Vec<WorkspaceView>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkspaceRequest {
    /// 1 to 32 of `a-z`, `0-9` and `-`, not starting with `-`; never changes.
    pub slug: String,
    #[schema(schema_with = workspace_name_schema)]
    pub name: Option<String>,
    #[serde(default)]
    pub quotas: QuotasView,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeWorkspaceRequest {
    #[schema(schema_with = workspace_name_schema)]
    pub name: Option<String>,
    /// `true` refuses the workspace's keys (its links keep answering); `false` accepts them again.
    pub suspended: Option<bool>,
    /// Replaces the quotas as a whole.
    pub quotas: Option<QuotasView>,
}

/// What deleting a workspace removed.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DeletedView {
    pub links: u64,
    pub keys: u64,
    pub webhooks: u64,
}

/// A key, never the key itself (except once, when created).
#[derive(Serialize, utoipa::ToSchema)]
pub struct KeyView {
    pub id: i64,
    pub name: String,
    /// `admin`, `issuer`, `viewer` or `resolve`.
    pub role: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Its own requests per second, if it has one (else the installation's).
    pub rate_per_second: Option<u64>,
    /// Only in the answer that created it: send it as `Authorization: Bearer <key>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl From<ApiKey> for KeyView {
    fn from(key: ApiKey) -> Self {
        KeyView {
            id: key.id,
            name: key.name,
            role: key.role.as_str().to_owned(),
            created_at: key.created_at,
            revoked_at: key.revoked_at,
            rate_per_second: key.rate.map(|rate| rate.per_second),
            key: None,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct KeyList {
    pub keys: Vec<KeyView>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    #[schema(schema_with = key_name_schema)]
    pub name: String,
    /// nginx's `resolve` key and operator keys are made with the CLI.
    pub role: KeyRole,
    /// Its own request rate instead of the installation's (`--api-rate-limit`).
    pub rate: Option<KeyRateRequest>,
}

/// The roles a workspace's admin may give.
#[derive(Deserialize, Clone, Copy, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeyRole {
    Admin,
    Issuer,
    Viewer,
}

/// Requests per second on average, up to `burst` at once: each at least 1 (a key has no "no
/// limit") and at most the workspace's ceiling (`key_rate_per_second`, `key_rate_burst`).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyRateRequest {
    #[schema(schema_with = rate_schema)]
    pub per_second: WholeNumber,
    #[schema(schema_with = rate_schema)]
    pub burst: WholeNumber,
}

// The fields' schemas, from the limits the checks use (`shortlink_store::MAX_NAME_LEN`, core's
// `keys::MAX_RATE`); a schema function carries the field's description.

fn workspace_name_schema() -> Schema {
    let description =
        format!("What people see (default: the slug); 1 to {MAX_NAME_LEN} printable characters.");
    let name = schema::name(MAX_NAME_LEN, &description);
    name.schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .into()
}

fn key_name_schema() -> Schema {
    let description = format!(
        "What the key is for, e.g. the campaign tool using it; 1 to {MAX_NAME_LEN} printable \
         characters."
    );
    schema::name(MAX_NAME_LEN, &description).into()
}

fn nullable(integer: ObjectBuilder) -> Schema {
    integer
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .into()
}

fn rate_ceiling_schema() -> Schema {
    nullable(schema::integer(
        1,
        MAX_RATE,
        &format!(
        "Ceiling of the workspace's keys' rates: the most requests per second an admin may give \
         a key (1 to {MAX_RATE}), and what every key is held to at use, one stored with more or \
         with none included; `null`: the installation's rate only."
    ),
    ))
}

fn burst_ceiling_schema() -> Schema {
    let description = format!("Ceiling of the keys' bursts, likewise (1 to {MAX_RATE}).");
    nullable(schema::integer(1, MAX_RATE, &description))
}

fn rate_schema() -> Schema {
    schema::integer(1, MAX_RATE, "1 or more, up to the workspace's ceiling.").into()
}

fn quotas_in_range(quotas: &QuotasView) -> Result<()> {
    let ceilings = [
        ("key_rate_per_second", quotas.key_rate_per_second),
        ("key_rate_burst", quotas.key_rate_burst),
    ];
    for (field, value) in ceilings {
        if value.is_some_and(|value| !(1..=MAX_RATE).contains(&value)) {
            return Err(Error::invalid(
                "invalid_quota",
                format!("quotas.{field} is 1 to {MAX_RATE} (null: no ceiling)"),
            ));
        }
    }
    let values = [
        quotas.links_per_day,
        quotas.compose_recipients,
        quotas.webhooks,
    ];
    if values
        .into_iter()
        .flatten()
        .any(|value| value > i64::MAX as u64)
    {
        return Err(Error::invalid(
            "invalid_quota",
            "a quota is at most 9223372036854775807",
        ));
    }
    Ok(())
}

/// The workspace with this slug; a missing one answers 404.
async fn by_slug(state: &AppState, slug: &str) -> Result<Workspace> {
    (state.links.storage().workspace_by_slug(slug).await?)
        .ok_or_else(|| WorkspaceError::NotFound.into())
}

/// Every workspace of the installation.
#[utoipa::path(get, path = "/api/v1/workspaces", tag = "workspaces",
    responses((status = 200, body = WorkspaceList), (status = 403, body = ErrorBody)))]
pub async fn list_workspaces(State(state): State<AppState>) -> Result<Json<WorkspaceList>> {
    let workspaces = state.links.storage().workspaces().await?;
    Ok(Json(WorkspaceList {
        workspaces: workspaces.into_iter().map(WorkspaceView::from).collect(),
    }))
}

/// Create a workspace; then map its short domains to its slug in nginx's `domains.conf`.
#[utoipa::path(post, path = "/api/v1/workspaces", tag = "workspaces",
    request_body = CreateWorkspaceRequest,
    responses(
        (status = 201, body = WorkspaceView),
        (status = 409, description = "`slug_taken`", body = ErrorBody),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_slug`, `invalid_name`, `invalid_quota`, `invalid_body`",
            body = ErrorBody),
    ))]
pub async fn create_workspace(
    State(state): State<AppState>,
    Recorder(origin): Recorder,
    Json(request): Json<CreateWorkspaceRequest>,
) -> Result<(StatusCode, Json<WorkspaceView>)> {
    let name = request.name.as_deref().unwrap_or(&request.slug);
    quotas_in_range(&request.quotas)?;
    let workspace = (state.links)
        .create_workspace(&request.slug, name, request.quotas.into(), &origin)
        .await?;
    Ok((StatusCode::CREATED, Json(workspace.into())))
}

#[utoipa::path(get, path = "/api/v1/workspaces/{slug}", tag = "workspaces",
    params(("slug" = String, Path)),
    responses((status = 200, body = WorkspaceView), (status = 404, body = ErrorBody)))]
pub async fn get_workspace(
    State(state): State<AppState>,
    Path(slug): Path<String>,
) -> Result<Json<WorkspaceView>> {
    Ok(Json(by_slug(&state, &slug).await?.into()))
}

/// Rename, suspend or resume, or set the quotas.
#[utoipa::path(patch, path = "/api/v1/workspaces/{slug}", tag = "workspaces",
    params(("slug" = String, Path)), request_body = ChangeWorkspaceRequest,
    responses(
        (status = 200, body = WorkspaceView), (status = 404, body = ErrorBody),
        (status = 422, description = "`invalid_name`, `invalid_quota`, `invalid_body`", body = ErrorBody),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
    ))]
pub async fn change_workspace(
    State(state): State<AppState>,
    Recorder(origin): Recorder,
    Path(slug): Path<String>,
    Json(request): Json<ChangeWorkspaceRequest>,
) -> Result<Json<WorkspaceView>> {
    if let Some(quotas) = &request.quotas {
        quotas_in_range(quotas)?;
    }
    let workspace = by_slug(&state, &slug).await?;
    let change = WorkspaceChange {
        name: request.name,
        suspended_at: request
            .suspended
            .map(|suspended| suspended.then(storage::now)),
        quotas: request.quotas.map(Quotas::from),
    };
    let changed = (state.links)
        .change_workspace(workspace.id, &change, &origin)
        .await?;
    Ok(Json(changed.into()))
}

/// Delete a workspace with everything it owns: its links stop answering (404), its keys and
/// webhooks go. The default workspace cannot be deleted.
#[utoipa::path(delete, path = "/api/v1/workspaces/{slug}", tag = "workspaces",
    params(("slug" = String, Path)),
    responses(
        (status = 200, body = DeletedView), (status = 404, body = ErrorBody),
        (status = 409, description = "`default_workspace`", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ))]
pub async fn delete_workspace(
    State(state): State<AppState>,
    Recorder(origin): Recorder,
    Path(slug): Path<String>,
) -> Result<Json<DeletedView>> {
    let workspace = by_slug(&state, &slug).await?;
    let deleted = state.links.delete_workspace(workspace.id, &origin).await?;
    // The orphan visits recorded under its name (shortlink_visits::orphans).
    (state.analytics.store.orphans())
        .delete_orphans_of(&workspace.slug)
        .await?;
    Ok(Json(DeletedView {
        links: deleted.links,
        keys: deleted.keys,
        webhooks: deleted.webhooks,
    }))
}

#[utoipa::path(get, path = "/api/v1/workspaces/{slug}/keys", tag = "workspaces",
    params(("slug" = String, Path)),
    responses((status = 200, body = KeyList), (status = 404, body = ErrorBody)))]
pub async fn list_workspace_keys(
    State(state): State<AppState>,
    Path(slug): Path<String>,
) -> Result<Json<KeyList>> {
    let workspace = by_slug(&state, &slug).await?;
    keys_of(&state, workspace.id).await
}

/// A key of the workspace: its first `admin` key is how the operator hands a workspace over.
#[utoipa::path(post, path = "/api/v1/workspaces/{slug}/keys", tag = "workspaces",
    params(("slug" = String, Path)), request_body = CreateKeyRequest,
    responses(
        (status = 201, description = "the key is in `key`, shown only this once", body = KeyView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "`invalid_name` (blank or with control characters), `invalid_rate` (a rate of 0, or above the workspace's ceiling), `invalid_body`", body = ErrorBody),
    ))]
pub async fn create_workspace_key(
    State(state): State<AppState>,
    Recorder(origin): Recorder,
    Path(slug): Path<String>,
    Json(request): Json<CreateKeyRequest>,
) -> Result<(StatusCode, Json<KeyView>)> {
    let workspace = by_slug(&state, &slug).await?;
    new_key(&state, workspace.id, request, &origin).await
}

#[utoipa::path(delete, path = "/api/v1/workspaces/{slug}/keys/{id}", tag = "workspaces",
    params(("slug" = String, Path), ("id" = i64, Path)),
    responses((status = 200, body = KeyView), (status = 404, body = ErrorBody)))]
pub async fn revoke_workspace_key(
    State(state): State<AppState>,
    Recorder(origin): Recorder,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Json<KeyView>> {
    let workspace = by_slug(&state, &slug).await?;
    revoke(&state, workspace.id, id, &origin).await
}

/// The workspace this key acts in.
#[utoipa::path(get, path = "/api/v1/workspace", tag = "keys",
    responses((status = 200, body = WorkspaceView)))]
pub async fn own_workspace(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<WorkspaceView>> {
    let workspace =
        (state.links.storage().workspace(workspace).await?).ok_or(Error::WorkspaceSuspended)?;
    Ok(Json(workspace.into()))
}

/// The keys of this key's workspace (admin keys only).
#[utoipa::path(get, path = "/api/v1/keys", tag = "keys",
    responses((status = 200, body = KeyList), (status = 403, body = ErrorBody)))]
pub async fn list_keys(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<KeyList>> {
    keys_of(&state, workspace).await
}

/// A key of this key's workspace (admin keys only).
#[utoipa::path(post, path = "/api/v1/keys", tag = "keys", request_body = CreateKeyRequest,
    responses(
        (status = 201, description = "the key is in `key`, shown only this once", body = KeyView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_name` (blank or with control characters), `invalid_rate` (a rate of 0, or above the workspace's ceiling), `invalid_body`", body = ErrorBody),
    ))]
pub async fn create_key(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    Json(request): Json<CreateKeyRequest>,
) -> Result<(StatusCode, Json<KeyView>)> {
    new_key(&state, workspace, request, &origin).await
}

/// Revoke a key of this key's workspace; requests with it are refused from then on.
#[utoipa::path(delete, path = "/api/v1/keys/{id}", tag = "keys", params(("id" = i64, Path)),
    responses((status = 200, body = KeyView), (status = 404, body = ErrorBody)))]
pub async fn revoke_key(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    Path(id): Path<i64>,
) -> Result<Json<KeyView>> {
    revoke(&state, workspace, id, &origin).await
}

async fn keys_of(state: &AppState, workspace: WorkspaceId) -> Result<Json<KeyList>> {
    let keys = state.links.storage().list_api_keys(Some(workspace)).await?;
    Ok(Json(KeyList {
        keys: keys.into_iter().map(KeyView::from).collect(),
    }))
}

async fn new_key(
    state: &AppState,
    workspace: WorkspaceId,
    request: CreateKeyRequest,
    origin: &Origin,
) -> Result<(StatusCode, Json<KeyView>)> {
    let role = match request.role {
        KeyRole::Admin => Role::Admin,
        KeyRole::Issuer => Role::Issuer,
        KeyRole::Viewer => Role::Viewer,
    };
    // Checked against the workspace's ceilings by the keys service; a negative number is
    // refused there as 0 is.
    let rate = request.rate.map(|rate| KeyRate {
        per_second: u64::try_from(rate.per_second.0).unwrap_or(0),
        burst: u64::try_from(rate.burst.0).unwrap_or(0),
    });
    let key = generate_api_key().map_err(|e| Error::Internal(Box::new(e)))?;
    let new = NewKey {
        name: &request.name,
        role,
        workspace: Some(workspace),
        rate,
    };
    let created = keys::create(
        state.links.storage().as_ref(),
        new,
        &hash_api_key(&key),
        origin,
    )
    .await?;
    let mut view = KeyView::from(created);
    view.key = Some(key);
    Ok((StatusCode::CREATED, Json(view)))
}

async fn revoke(
    state: &AppState,
    workspace: WorkspaceId,
    id: i64,
    origin: &Origin,
) -> Result<Json<KeyView>> {
    let revoked = keys::revoke(state.links.storage().as_ref(), Some(workspace), id, origin).await?;
    revoked.map(|key| Json(key.into())).ok_or(Error::Request {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: "no API key has this id".into(),
    })
}
