//! `GET /api/v1/audit`: the audit log, newest first, with filters and a cursor (admin keys only:
//! `auth::READ_ROUTES` does not list it). And [`Recorder`], what handlers that change something
//! take to record it.

use super::{AppState, Error, ErrorBody, InWorkspace, Json, Query, Result};
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_store::audit::{
    Actor, AuditFilter, AuditRecord, Origin, RequestInfo, INSTALLATION_CHAIN,
};
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new().route("/audit", get(list_audit))
}

/// Rows per page unless `limit` says otherwise, and at most.
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 500;

/// The origin of an authenticated request's changes: its key and its request id and client.
pub struct Recorder(pub Origin);

impl FromRequestParts<AppState> for Recorder {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self> {
        // Both are put there by layers every /api/v1 route is behind.
        let actor = parts
            .extensions
            .get::<Actor>()
            .cloned()
            .ok_or(Error::MissingApiKey)?;
        let request = parts
            .extensions
            .get::<RequestInfo>()
            .cloned()
            .unwrap_or_default();
        Ok(Recorder(Origin {
            // The key's workspace's chain; an operator key's changes are the installation's.
            workspace_id: (parts.extensions.get::<InWorkspace>())
                .map_or(INSTALLATION_CHAIN, |workspace| workspace.0.get()),
            actor,
            request,
        }))
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// An action (`webhook.create`), or a family (`webhook.*`).
    pub action: Option<String>,
    /// `key:<id>` for an API key, else the actor's name (a console user, the CLI's user).
    pub actor: Option<String>,
    /// A code, a key id, a subscription id.
    pub object: Option<String>,
    /// Rows at or after this time (RFC 3339).
    pub since: Option<DateTime<Utc>>,
    /// Rows before this time (RFC 3339).
    pub until: Option<DateTime<Utc>>,
    /// The cursor: rows older than this id (the previous page's `next`).
    pub after: Option<i64>,
    /// Rows per page, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// One audit row.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditRow {
    pub id: i64,
    pub workspace_id: i64,
    /// The row's place in its workspace's hash chain.
    pub seq: i64,
    pub at: DateTime<Utc>,
    /// `key`, `console`, `cli` or `system`.
    pub actor_kind: String,
    /// The API key's id for a key.
    pub actor_id: Option<i64>,
    pub actor_name: String,
    pub action: String,
    pub object: String,
    /// `{"field": [before, after]}`; secrets read `<redacted>` / `<changed>`.
    #[schema(value_type = Object)]
    pub changes: serde_json::Value,
    pub request_id: Option<String>,
    pub client_addr: Option<String>,
    pub batch_size: Option<i64>,
    pub idempotency_key: Option<String>,
    pub prev_hash: String,
    pub hash: String,
}

impl From<AuditRecord> for AuditRow {
    fn from(r: AuditRecord) -> Self {
        AuditRow {
            id: r.id,
            workspace_id: r.workspace_id,
            seq: r.seq,
            at: DateTime::from_timestamp_millis(r.at_ms).unwrap_or_default(),
            actor_kind: r.actor_kind,
            actor_id: r.actor_id,
            actor_name: r.actor_name,
            action: r.action,
            object: r.object,
            changes: serde_json::from_str(&r.changes).unwrap_or(serde_json::Value::Null),
            request_id: r.request_id,
            client_addr: r.client_addr,
            batch_size: r.batch_size,
            idempotency_key: r.idempotency_key,
            prev_hash: r.prev_hash,
            hash: r.hash,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    /// Newest first.
    pub rows: Vec<AuditRow>,
    /// The `after` of the next (older) page; absent on the last.
    pub next: Option<i64>,
}

/// The audit log, newest first (admin keys only).
#[utoipa::path(get, path = "/api/v1/audit", tag = "audit", params(AuditQuery),
    responses(
        (status = 200, body = AuditPage),
        (status = 400, description = "`invalid_query`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an admin key", body = ErrorBody),
    ))]
pub async fn list_audit(
    State(state): State<AppState>,
    workspace: Option<InWorkspace>,
    Query(query): Query<AuditQuery>,
) -> Result<Json<AuditPage>> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_query",
            message: format!("limit must be 1 to {MAX_LIMIT}"),
        });
    }
    let filter = AuditFilter {
        // A workspace's admin reads its chain; the operator (no workspace) every chain.
        workspace_id: workspace.map(|workspace| workspace.0.get()),
        action: query.action,
        actor: query.actor,
        object: query.object,
        since_ms: query.since.map(|at| at.timestamp_millis()),
        until_ms: query.until.map(|at| at.timestamp_millis()),
        before_id: query.after,
        limit,
    };
    let rows = state.links.storage().list_audit(&filter).await?;
    let next = (rows.len() == limit as usize)
        .then(|| rows.last().map(|row| row.id))
        .flatten();
    Ok(Json(AuditPage {
        rows: rows.into_iter().map(AuditRow::from).collect(),
        next,
    }))
}
