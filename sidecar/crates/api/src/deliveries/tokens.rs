//! `/api/v1/callback-tokens`: the tokens a gateway's native callback carries in its URL's path
//! (gateways that cannot send a bearer header). Admin keys only (`auth` lists these routes for
//! no narrower role). A token is shown once, when made; the database keeps its SHA-256, as for
//! API keys. Making and revoking one appends an audit row, as for keys.

use crate::{hash_api_key, AppState, Error, ErrorBody, InWorkspace, Json, Path, Recorder, Result};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_model::schema;
use shortlink_store::audit::Changes;
use shortlink_store::MAX_NAME_LEN;
use shortlink_visits::deliveries::{new_token_id, CallbackToken, Gateway};
use utoipa::openapi::schema::{Schema, SchemaType, Type};
use utoipa::ToSchema;

/// The gateways with a native callback.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CallbackGateway {
    Kannel,
    Twilio,
    Vonage,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCallbackToken {
    #[schema(schema_with = name_schema)]
    pub name: String,
    pub gateway: CallbackGateway,
    #[schema(schema_with = auth_token_schema)]
    pub twilio_auth_token: Option<String>,
}

/// The longest Twilio auth token taken (Twilio's are 32 hex digits).
const MAX_AUTH_TOKEN: usize = 256;

fn name_schema() -> Schema {
    let description = format!("For people: 1 to {MAX_NAME_LEN} printable characters.");
    schema::name(MAX_NAME_LEN, &description).into()
}

fn auth_token_schema() -> Schema {
    let description = "Twilio only: the account's auth token. When given, every callback must \
        carry a valid `X-Twilio-Signature` (403 `invalid_signature` otherwise). Never shown back.";
    let token = schema::name(MAX_AUTH_TOKEN, description);
    token
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .into()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CallbackTokenView {
    /// `cbt_…`
    pub id: String,
    pub name: String,
    pub gateway: String,
    /// Only in the answer that made it: the token, and the callback path carrying it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_path: Option<String>,
    /// Whether Twilio's signature is checked.
    pub signed: bool,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl From<CallbackToken> for CallbackTokenView {
    fn from(t: CallbackToken) -> Self {
        CallbackTokenView {
            id: t.id,
            name: t.name,
            gateway: t.gateway.as_str().into(),
            token: None,
            callback_path: None,
            signed: t.twilio_auth_token.is_some(),
            created_at: t.created_at,
            revoked_at: t.revoked_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CallbackTokenList {
    pub tokens: Vec<CallbackTokenView>,
}

/// 1 to `max` characters, not only spaces, no control characters (the schema's pattern), with
/// surrounding ASCII spaces dropped.
fn printable(text: &str, max: usize) -> Option<&str> {
    let text = text.trim_matches(|c: char| c.is_ascii_whitespace());
    (!text.is_empty() && text.chars().count() <= max && !text.chars().any(char::is_control))
        .then_some(text)
}

/// Make a callback token for one gateway; the token is in `token`, shown only this once.
#[utoipa::path(post, path = "/api/v1/callback-tokens", tag = "deliveries",
    request_body = CreateCallbackToken,
    responses(
        (status = 201, description = "made: `token` and `callback_path` are shown only now", body = CallbackTokenView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_name`, `invalid_twilio_auth_token` (blank, \
            too long, or given for another gateway than Twilio), `invalid_body`", body = ErrorBody),
    ))]
pub async fn create_token(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    Json(request): Json<CreateCallbackToken>,
) -> Result<(StatusCode, Json<CallbackTokenView>)> {
    let name = shortlink_store::display_name(&request.name)
        .ok_or_else(|| Error::invalid("invalid_name", shortlink_store::NAME_RULE))?;
    let gateway = match request.gateway {
        CallbackGateway::Kannel => Gateway::Kannel,
        CallbackGateway::Twilio => Gateway::Twilio,
        CallbackGateway::Vonage => Gateway::Vonage,
    };
    let twilio_auth_token = match (&request.twilio_auth_token, gateway) {
        (None, _) => None,
        (Some(secret), Gateway::Twilio) => {
            Some(printable(secret, MAX_AUTH_TOKEN).ok_or_else(|| {
                Error::invalid(
                    "invalid_twilio_auth_token",
                    format!("`twilio_auth_token` is 1 to {MAX_AUTH_TOKEN} printable characters"),
                )
            })?)
        }
        (Some(_), _) => {
            return Err(Error::invalid(
                "invalid_twilio_auth_token",
                "`twilio_auth_token` is for the `twilio` gateway only",
            ))
        }
    };
    let token = shortlink_messaging::gateway::ready::new_callback_token()?;
    let id = new_token_id()?;
    let sealer = &state.messaging.sealer;
    let twilio_auth_token =
        (twilio_auth_token.map(|secret| sealer.seal(workspace, &id, secret))).transpose()?;
    let stored = CallbackToken {
        id,
        workspace,
        name: name.to_owned(),
        gateway,
        token_hash: hash_api_key(&token),
        twilio_auth_token,
        created_at: shortlink_store::now(),
        revoked_at: None,
    };
    let tokens = state.analytics.store.callback_tokens();
    tokens.insert_token(&stored).await?;
    let changes = Changes::new()
        .set("name", stored.name.clone())
        .set("gateway", gateway.as_str())
        .set("signed", stored.twilio_auth_token.is_some());
    let entry = origin.entry("callback_token.create", &stored.id, changes);
    state.links.storage().append_audit(&entry).await?;
    let mut view = CallbackTokenView::from(stored);
    view.callback_path = Some(format!("/callbacks/{token}/{}", gateway.as_str()));
    view.token = Some(token);
    Ok((StatusCode::CREATED, Json(view)))
}

/// The workspace's callback tokens, revoked ones included (never the token itself).
#[utoipa::path(get, path = "/api/v1/callback-tokens", tag = "deliveries",
    responses((status = 200, body = CallbackTokenList)))]
pub async fn list_tokens(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<CallbackTokenList>> {
    let tokens = state
        .analytics
        .store
        .callback_tokens()
        .tokens(workspace)
        .await?;
    Ok(Json(CallbackTokenList {
        tokens: tokens.into_iter().map(CallbackTokenView::from).collect(),
    }))
}

/// Revoke a callback token: its callbacks answer 404 from then on and store nothing.
#[utoipa::path(delete, path = "/api/v1/callback-tokens/{id}", tag = "deliveries",
    params(("id" = String, Path)),
    responses((status = 200, body = CallbackTokenView), (status = 404, body = ErrorBody)))]
pub async fn revoke_token(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    Path(id): Path<String>,
) -> Result<Json<CallbackTokenView>> {
    let tokens = state.analytics.store.callback_tokens();
    let now = shortlink_store::now();
    let revoked = (tokens.revoke_token(workspace, &id, now).await?).ok_or(Error::Request {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: "no callback token has this id".into(),
    })?;
    // A token revoked before is answered as it is, with no second audit row.
    let revoked_now =
        revoked.revoked_at.map(|at| at.timestamp_millis()) == Some(now.timestamp_millis());
    if revoked_now {
        let entry = origin.entry("callback_token.revoke", &revoked.id, Changes::new());
        state.links.storage().append_audit(&entry).await?;
    }
    Ok(Json(revoked.into()))
}
