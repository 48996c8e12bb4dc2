//! `PUT/GET/DELETE /api/v1/gateway`: the workspace's SMS gateway (Kannel's `sendsms`), set by
//! its admin. The password is never given to the API: the gateway names a file in the
//! workspace's own directory of the operator's `--gateway-secrets-dir`,
//! `<dir>/<workspace slug>/<file>` (a file name, no path; a slug never changes), read at each
//! send job. No name a workspace gives reaches another workspace's file, and the answer to a
//! name that is not in its own directory is one and the same whether or not another workspace
//! has such a file.
//!
//! The gateway's URL reaches what the operator's gateway policy allows
//! (`shortlink_messaging::gateway::ready`), checked here and again at each connection.

use crate::{AppState, Error, ErrorBody, InWorkspace, Json, Recorder, Result};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_model::schema::WholeNumber;
use shortlink_model::WorkspaceId;
use shortlink_store::audit::Changes;
use shortlink_visits::deliveries::GatewayConfig;
use utoipa::ToSchema;

/// The workspace's gateway as its admin sets it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewayRequest {
    /// Kannel's `sendsms` URL (`http://kannel:13013/cgi-bin/sendsms`): http or https, no query.
    pub url: String,
    /// The `sendsms-user`'s `username` (1 to 128 printable characters).
    pub username: String,
    /// The name of the file holding its password, in the workspace's own directory of the
    /// operator's `--gateway-secrets-dir` (`<dir>/<workspace slug>/<name>`; `[A-Za-z0-9_.-]`,
    /// 1 to 255, not starting with a dot). A trailing newline is dropped.
    pub password_file: String,
    /// Kannel's `from` (1 to 32 printable characters).
    pub from: String,
    /// Where the gateway reaches this sidecar's `/callbacks/` (the `dlr-url`'s base, e.g.
    /// `https://api.example`): http or https, no query.
    pub callback_base: String,
    #[schema(schema_with = per_second_schema)]
    pub per_second: Option<WholeNumber>,
    #[schema(schema_with = attempts_schema)]
    pub attempts: Option<WholeNumber>,
    #[schema(schema_with = backoff_schema)]
    pub backoff_ms: Option<WholeNumber>,
    #[schema(schema_with = timeout_schema)]
    pub timeout_ms: Option<WholeNumber>,
    #[schema(schema_with = reports_hours_schema)]
    pub reports_hours: Option<WholeNumber>,
}

/// A number setting: its bounds, its default, and what it is (for the schema and the 422).
struct Setting {
    min: i64,
    max: i64,
    default: i64,
    code: &'static str,
    unit: &'static str,
}

const PER_SECOND: Setting = Setting {
    min: 1,
    max: 1000,
    default: 10,
    code: "invalid_per_second",
    unit: "",
};
const ATTEMPTS: Setting = Setting {
    min: 1,
    max: 10,
    default: 3,
    code: "invalid_attempts",
    unit: "",
};
const BACKOFF_MS: Setting = Setting {
    min: 0,
    max: 60_000,
    default: 1000,
    code: "invalid_backoff",
    unit: " ms",
};
const TIMEOUT_MS: Setting = Setting {
    min: 100,
    max: 60_000,
    default: 10_000,
    code: "invalid_timeout",
    unit: " ms",
};
const REPORTS_HOURS: Setting = Setting {
    min: 1,
    max: 720,
    default: 72,
    code: "invalid_reports_hours",
    unit: " hours",
};

impl Setting {
    fn bounds(&self) -> String {
        format!("{} to {}{}", self.min, self.max, self.unit)
    }

    /// JSON Schema's integers may be written `7.0`: read as whole numbers, then bounded.
    fn read(&self, value: Option<WholeNumber>) -> Result<i64> {
        let value = value.map_or(self.default, |n| n.0);
        match (self.min..=self.max).contains(&value) {
            true => Ok(value),
            false => Err(Error::invalid(self.code, self.bounds())),
        }
    }

    fn schema(&self, what: &str) -> utoipa::openapi::schema::Schema {
        use utoipa::openapi::schema::{SchemaType, Type};
        let description = format!("{what} ({}; default {}).", self.bounds(), self.default);
        let (min, max) = (self.min as u64, self.max as u64);
        (shortlink_model::schema::integer(min, max, &description))
            .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
            .into()
    }
}

fn per_second_schema() -> utoipa::openapi::schema::Schema {
    PER_SECOND.schema("Messages per second handed to the gateway")
}

fn attempts_schema() -> utoipa::openapi::schema::Schema {
    ATTEMPTS.schema("Tries of a message while the gateway fails transiently (no connection, a 5xx)")
}

fn backoff_schema() -> utoipa::openapi::schema::Schema {
    BACKOFF_MS.schema("The wait before the second try, doubling after")
}

fn timeout_schema() -> utoipa::openapi::schema::Schema {
    TIMEOUT_MS.schema(
        "The longest wait for one hand-off's answer; a hand-off without an answer by then is \
         recorded `unknown` and never sent again: the gateway may have it",
    )
}

fn reports_hours_schema() -> utoipa::openapi::schema::Schema {
    REPORTS_HOURS.schema(
        "How long after a send job ends its reports may still come (the SMSC's validity \
         period): then the job's callback token is revoked",
    )
}

/// The workspace's gateway (never the password).
#[derive(Debug, Serialize, ToSchema)]
pub struct GatewayView {
    pub kind: String,
    pub url: String,
    pub username: String,
    pub password_file: String,
    pub from: String,
    pub callback_base: String,
    pub per_second: u32,
    pub attempts: u32,
    pub backoff_ms: u64,
    pub timeout_ms: u64,
    pub reports_hours: u32,
    pub updated_at: DateTime<Utc>,
}

impl From<GatewayConfig> for GatewayView {
    fn from(c: GatewayConfig) -> Self {
        GatewayView {
            kind: c.kind,
            url: c.url,
            username: c.username,
            password_file: c.password_file,
            from: c.sender,
            callback_base: c.callback_base,
            per_second: c.per_second,
            attempts: c.attempts,
            backoff_ms: c.backoff_ms,
            timeout_ms: c.timeout_ms,
            reports_hours: c.reports_hours,
            updated_at: c.updated_at,
        }
    }
}

fn not_found() -> Error {
    Error::Request {
        status: StatusCode::NOT_FOUND,
        code: "no_gateway",
        message: "the workspace has no gateway (PUT /api/v1/gateway)".into(),
    }
}

/// Set the workspace's gateway, replacing any: compose sends through it (`send=true`).
#[utoipa::path(put, path = "/api/v1/gateway", tag = "deliveries",
    request_body = GatewayRequest,
    responses(
        (status = 200, body = GatewayView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 403, description = "`gateways_disabled`: the deployment has no \
            --gateway-secrets-dir; or a key whose role is not admin", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_url` (not an http(s) URL, or an address gateways may \
            not reach), `invalid_callback_base`, `invalid_username`, `invalid_from`, \
            `invalid_password_file` (not a plain file name, or no readable file of that name in \
            the workspace's own directory: one answer either way), `invalid_per_second`, \
            `invalid_attempts`, `invalid_backoff`, `invalid_timeout`, `invalid_reports_hours`", body = ErrorBody),
    ))]
pub async fn put_gateway(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    Json(request): Json<GatewayRequest>,
) -> Result<Json<GatewayView>> {
    let config = checked(&state, workspace, request)?;
    let messaging = &state.messaging;
    messaging
        .reachable(&config.url, "invalid_url", true)
        .await?;
    (messaging.reachable(&config.callback_base, "invalid_callback_base", false)).await?;
    messaging.password(workspace, &config.password_file).await?;
    state
        .analytics
        .store
        .gateways()
        .put_gateway(&config)
        .await?;
    let changes = Changes::new()
        .set("url", config.url.clone())
        .set("username", config.username.clone())
        .set("password_file", config.password_file.clone())
        .set("per_second", i64::from(config.per_second));
    let entry = origin.entry("gateway.set", "kannel", changes);
    state.links.storage().append_audit(&entry).await?;
    Ok(Json(config.into()))
}

/// The workspace's gateway.
#[utoipa::path(get, path = "/api/v1/gateway", tag = "deliveries",
    responses(
        (status = 200, body = GatewayView),
        (status = 404, description = "`no_gateway`", body = ErrorBody),
    ))]
pub async fn get_gateway(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<GatewayView>> {
    let config = state.analytics.store.gateways().gateway(workspace).await?;
    Ok(Json(config.ok_or_else(not_found)?.into()))
}

/// Remove the workspace's gateway: compose sends no more (jobs running finish).
#[utoipa::path(delete, path = "/api/v1/gateway", tag = "deliveries",
    responses((status = 204), (status = 404, description = "`no_gateway`", body = ErrorBody)))]
pub async fn delete_gateway(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
) -> Result<StatusCode> {
    let gateways = state.analytics.store.gateways();
    if !gateways.delete_gateway(workspace).await? {
        return Err(not_found());
    }
    let entry = origin.entry("gateway.delete", "kannel", Changes::new());
    state.links.storage().append_audit(&entry).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// 1 to `max` characters, none a control character or a space at either end.
fn printable(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.chars().count() <= max
        && !text.chars().any(char::is_control)
        && text.trim() == text
}

fn checked(state: &AppState, workspace: WorkspaceId, r: GatewayRequest) -> Result<GatewayConfig> {
    // The deployment's choice, not the request's fault: refused as forbidden, whatever the body.
    if state.messaging.secrets_dir.is_none() {
        return Err(Error::Request {
            status: StatusCode::FORBIDDEN,
            code: "gateways_disabled",
            message: "this deployment sends through no gateway (the operator sets \
                      --gateway-secrets-dir)"
                .into(),
        });
    }
    let url = state.messaging.http_url(&r.url, "invalid_url", true)?;
    let base = (state.messaging).http_url(&r.callback_base, "invalid_callback_base", false)?;
    if !printable(&r.username, 128) {
        return Err(Error::invalid(
            "invalid_username",
            "1 to 128 printable characters",
        ));
    }
    if !printable(&r.from, 32) {
        return Err(Error::invalid(
            "invalid_from",
            "1 to 32 printable characters",
        ));
    }
    let file = &r.password_file;
    let plain = (1..=255).contains(&file.len())
        && !file.starts_with('.')
        && (file.bytes()).all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if !plain {
        return Err(Error::invalid(
            "invalid_password_file",
            "a file name in the workspace's secrets directory: [A-Za-z0-9_.-], not starting \
             with a dot",
        ));
    }
    let per_second = PER_SECOND.read(r.per_second)?;
    let attempts = ATTEMPTS.read(r.attempts)?;
    let backoff_ms = BACKOFF_MS.read(r.backoff_ms)?;
    let timeout_ms = TIMEOUT_MS.read(r.timeout_ms)?;
    let reports_hours = REPORTS_HOURS.read(r.reports_hours)?;
    Ok(GatewayConfig {
        workspace,
        kind: "kannel".into(),
        url: url.to_string(),
        username: r.username,
        password_file: r.password_file,
        sender: r.from,
        callback_base: base.as_str().trim_end_matches('/').to_owned(),
        // Within the bounds above, so they fit.
        per_second: per_second as u32,
        attempts: attempts as u32,
        backoff_ms: backoff_ms as u64,
        timeout_ms: timeout_ms as u64,
        reports_hours: reports_hours as u32,
        updated_at: shortlink_store::now(),
    })
}
