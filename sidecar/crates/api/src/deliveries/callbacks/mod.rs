//! Gateways' native callbacks, for the gateways that cannot send a bearer header: the
//! workspace's callback token is in the path (`/callbacks/{token}/{gateway}`), outside `/api/v1`
//! and its API-key layer, on the API listener. An unknown or revoked token, or one made for
//! another gateway, answers 404 and touches nothing; a token names its workspace, so a link of
//! another workspace answers as a missing one (404 `unknown_link`). A suspended workspace's
//! callbacks answer 403 `workspace_suspended`, and a token is held to `--callback-rate` (429).
//!
//! Each gateway's report is read by `shortlink_messaging::receipts` (its `kannel`, `twilio` and
//! `vonage`), then checked and recorded as `POST /api/v1/deliveries` records one (its answer
//! too). What a gateway says of the recipient (the destination number) is never read.

mod limit;
mod schema;
pub mod strikes;

use super::proof::admit_one;
use super::receipt::{answer_one, invalid, refusal};
use crate::{hash_api_key, AppState, Error, ErrorBody, Path, Result};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use shortlink_messaging::receipts::params::Params;
use shortlink_messaging::receipts::{check, kannel, twilio, vonage, Report};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageError;
use shortlink_visits::deliveries::{CallbackToken, Gateway, Invalid, NewReceipt, Refusal};
use std::sync::Arc;
use strikes::Caller;
use subtle::ConstantTimeEq;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/callbacks/{token}/kannel", get(kannel_dlr))
        .route(
            "/callbacks/{token}/twilio",
            axum::routing::post(twilio_status),
        )
        .route(
            "/callbacks/{token}/vonage",
            get(vonage_get).post(vonage_post),
        )
        // A send job hands messages over only while this answers (`shortlink_messaging::gateway`'s callback probe).
        .route("/callbacks/ping", get(ping))
}

/// The callback base answers: a send job may hand messages over (their reports can come back).
#[utoipa::path(get, path = "/callbacks/ping", tag = "deliveries", security(()),
    responses((status = 204, description = "the callbacks are served here")))]
pub async fn ping() -> StatusCode {
    StatusCode::NO_CONTENT
}

/// `path` as logs may show it: a callback's token (its credential) replaced by `…`.
pub fn loggable_path(path: &str) -> std::borrow::Cow<'_, str> {
    match (path.strip_prefix("/callbacks/")).and_then(|rest| rest.split_once('/')) {
        Some((_, gateway)) => format!("/callbacks/…/{gateway}").into(),
        None => path.into(),
    }
}

fn no_callback() -> Error {
    Error::Request {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: "no callback answers at this path".into(),
    }
}

/// The live token `token` of `gateway`, or 404; 403 while its workspace is suspended, 429 past
/// its rate ([`limit`]). A token no workspace ever had counts against the caller's address
/// ([`strikes`]): a spent address is refused before its token is hashed.
async fn token_of(
    state: &AppState,
    caller: &Caller,
    token: &str,
    gateway: Gateway,
) -> Result<CallbackToken> {
    let unknown = &state.unknown_tokens;
    caller.admit(unknown)?;
    // Longer than any token made: refused unhashed.
    if token.len() > 128 {
        caller.strike(unknown);
        return Err(no_callback());
    }
    let hash = hash_api_key(token);
    let found = state
        .analytics
        .store
        .callback_tokens()
        .token_for_callback(&hash)
        .await?;
    if found.is_none() {
        caller.strike(unknown);
    }
    let (found, suspended) = found
        .filter(|(t, _)| bool::from(t.token_hash.as_bytes().ct_eq(hash.as_bytes())))
        .filter(|(t, _)| t.revoked_at.is_none() && t.gateway == gateway)
        .ok_or_else(no_callback)?;
    limit::admit(state, &found, suspended).await?;
    Ok(found)
}

/// Checks and records a gateway's report on `token`. A send job's token takes only the reports
/// its own `dlr-url`s carry, signed (`signature`, [`super::signed`]): their short domain is the
/// one signed. Any other token's report names a domain of its workspace or none.
async fn receive(
    state: &AppState,
    token: &CallbackToken,
    request: Result<Report, Invalid>,
    signature: Option<&str>,
) -> Result<Response> {
    let now = shortlink_store::now();
    if let Ok(Report {
        code: Some(_),
        short_url: Some(_),
        ..
    }) = &request
    {
        return Err(Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_link",
            message: "name the link by exactly one of `code` and `short_url`, not both".into(),
        });
    }
    let mut new = request
        .and_then(|request| check(request, token.gateway, now))
        .map_err(|error| {
            // A report that names no link is about a link nobody has here.
            if error.field == "link" {
                return refusal(Refusal::UnknownLink);
            }
            // A gateway's report that cannot be read is the sender's URL or the gateway's
            // fields: 400, naming the field.
            let error = invalid(error);
            Error::Request {
                status: StatusCode::BAD_REQUEST,
                code: error.code(),
                message: error.message(),
            }
        })?;
    match kannel::job_of(token) {
        Some(job) if !kannel::verify(&state.messaging.dlr_key, job, &new, signature) => {
            return Err(Error::Request {
                status: StatusCode::FORBIDDEN,
                code: "invalid_signature",
                message: "this callback takes its send job's reports only: `sig` is missing or \
                          does not match the message"
                    .into(),
            })
        }
        Some(_) => {}
        None => admit_one(state, token.workspace, &mut new).await?,
    }
    record_grouped(state, token.workspace, new).await
}

/// Records a callback's checked receipt with the others waiting in its workspace: answered 201
/// (stored) or 200 (a duplicate) as `POST /api/v1/deliveries` answers one receipt.
async fn record_grouped(
    state: &AppState,
    workspace: WorkspaceId,
    new: NewReceipt,
) -> Result<Response> {
    let answer = (state.receipt_groups)
        .record(&state.analytics.store, workspace, new.clone())
        .await
        .ok_or_else(|| Error::Internal("the receipts' writer stopped before answering".into()))?
        .map_err(shared_error)?;
    answer_one(state, workspace, &new, answer).await
}

/// Each callback of a failed group gets its own copy of the error: 503 while the database is
/// unavailable (a gateway retries), 500 otherwise.
fn shared_error(error: Arc<StorageError>) -> Error {
    match &*error {
        StorageError::Unavailable(_) => Error::DatabaseUnavailable(StorageError::Unavailable(
            sqlx::Error::Io(std::io::Error::other(error.to_string())),
        )),
        _ => Error::Internal(Box::new(error)),
    }
}

/// Kannel's `dlr-url` report (`shortlink_messaging::receipts::kannel` has the template and what is read).
#[utoipa::path(get, path = "/callbacks/{token}/kannel", tag = "deliveries", security(()),
    params(("token" = String, Path, description = "a callback token made for `kannel`"),
        schema::KannelQuery),
    responses(
        (status = 201, description = "stored", body = super::receipt::DeliveryView),
        (status = 200, description = "a repeat: stored before", body = super::receipt::DeliveryView),
        (status = 400, description = "`invalid_state` (`type`), `invalid_at` (`ts`), `invalid_message_id`, \
            `invalid_link` (both `code` and `short_url`), …", body = ErrorBody),
        (status = 404, description = "`not_found`: no live token; `unknown_link`: no link of the \
            token's workspace has the code, or none is named", body = ErrorBody),
        (status = 403, description = "`workspace_suspended`: the token's workspace is suspended; \
            `invalid_signature`: a send job's token without its `dlr-url`'s valid `sig`", body = ErrorBody),
        (status = 422, description = "`foreign_domain`: the `short_url`'s host is not a domain of \
            the token's workspace", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the token's `--callback-rate` is spent", body = ErrorBody),
    ))]
pub async fn kannel_dlr(
    State(state): State<AppState>,
    caller: Caller,
    Path(token): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let token = token_of(&state, &caller, &token, Gateway::Kannel).await?;
    let params = Params::from_query(query.as_deref().unwrap_or_default());
    let signature = params.get("sig");
    receive(&state, &token, kannel::report(&params), signature).await
}

/// Twilio's status callback (a form POST; `shortlink_messaging::receipts::twilio` says what is read and signed).
#[utoipa::path(post, path = "/callbacks/{token}/twilio", tag = "deliveries", security(()),
    params(("token" = String, Path, description = "a callback token made for `twilio`"),
        schema::CodeQuery),
    request_body(content_type = "application/x-www-form-urlencoded", content = schema::TwilioForm,
        description = "Twilio's fields: `MessageSid`, `MessageStatus`, `ErrorCode`, …"),
    responses(
        (status = 201, description = "stored", body = super::receipt::DeliveryView),
        (status = 200, description = "a repeat: stored before", body = super::receipt::DeliveryView),
        (status = 400, description = "`invalid_state`, `invalid_message_id`, …", body = ErrorBody),
        (status = 403, description = "`invalid_signature`: `X-Twilio-Signature` missing or wrong; `workspace_suspended`", body = ErrorBody),
        (status = 404, description = "`not_found`: no live token; `unknown_link`: no link of the \
            token's workspace has the code, or none is named", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the token's `--callback-rate` is spent", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 415, description = "not a form", body = ErrorBody),
    ))]
pub async fn twilio_status(
    State(state): State<AppState>,
    caller: Caller,
    Path(token): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Result<Response> {
    let token = token_of(&state, &caller, &token, Gateway::Twilio).await?;
    if crate::ndjson::media_type(&headers).as_deref() != Some("application/x-www-form-urlencoded") {
        return Err(Error::Request {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: "unsupported_media_type",
            message: "send application/x-www-form-urlencoded".into(),
        });
    }
    let form = Params::from_query(&String::from_utf8_lossy(&body));
    if let Some(stored) = &token.twilio_auth_token {
        let presented = (headers.get("x-twilio-signature"))
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default();
        // A secret that does not open (its row altered or copied) verifies nothing.
        let opened = (state.messaging.sealer)
            .open(token.workspace, &token.id, stored)
            .inspect_err(
                |_| tracing::error!(token = %token.id, "a Twilio auth token does not open"),
            );
        let urls = signed_urls(&headers, &uri);
        let verified =
            opened.is_ok_and(|secret| twilio::verify(&secret, &urls, &form.0, presented));
        if !verified {
            return Err(Error::Request {
                status: StatusCode::FORBIDDEN,
                code: "invalid_signature",
                message: "X-Twilio-Signature is missing or does not match".into(),
            });
        }
    }
    let query = Params::from_query(uri.query().unwrap_or_default());
    receive(&state, &token, twilio::report(&form, &query), None).await
}

/// The URLs Twilio may have signed for this request. nginx's API server forwards the host and
/// scheme (`X-Forwarded-Host`, `X-Forwarded-Proto`) when it sets them; without, both schemes,
/// each with and without its default port, as Twilio's own libraries accept.
fn signed_urls(headers: &HeaderMap, uri: &Uri) -> Vec<String> {
    let header = |name| headers.get(name).and_then(|value| value.to_str().ok());
    let host = header("x-forwarded-host")
        .or_else(|| header(header::HOST.as_str()))
        .unwrap_or_default();
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let schemes: Vec<&str> = match header("x-forwarded-proto") {
        Some(proto) => vec![proto],
        None => vec!["https", "http"],
    };
    let mut urls = Vec::new();
    for scheme in schemes {
        let port = if scheme == "https" { ":443" } else { ":80" };
        let bare = host.strip_suffix(port).unwrap_or(host);
        urls.push(format!("{scheme}://{bare}{path}"));
        urls.push(format!("{scheme}://{bare}{port}{path}"));
    }
    urls.dedup();
    urls
}

/// Vonage's delivery receipt as a GET query (`shortlink_messaging::receipts::vonage` says what is read).
#[utoipa::path(get, path = "/callbacks/{token}/vonage", tag = "deliveries", security(()),
    params(("token" = String, Path, description = "a callback token made for `vonage`"),
        schema::VonageReceipt, schema::CodeQuery),
    responses(
        (status = 201, description = "stored", body = super::receipt::DeliveryView),
        (status = 200, description = "a repeat: stored before", body = super::receipt::DeliveryView),
        (status = 400, description = "`invalid_state`, `invalid_message_id`, …", body = ErrorBody),
        (status = 404, description = "`not_found`: no live token; `unknown_link`: no link of the \
            token's workspace has the code, or none is named", body = ErrorBody),
        (status = 403, description = "`workspace_suspended`: the token's workspace is suspended", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the token's `--callback-rate` is spent", body = ErrorBody),
    ))]
pub async fn vonage_get(
    State(state): State<AppState>,
    caller: Caller,
    Path(token): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response> {
    let token = token_of(&state, &caller, &token, Gateway::Vonage).await?;
    let params = Params::from_query(query.as_deref().unwrap_or_default());
    receive(&state, &token, vonage::report(&params, &params), None).await
}

/// Vonage's delivery receipt as a JSON POST.
#[utoipa::path(post, path = "/callbacks/{token}/vonage", tag = "deliveries", security(()),
    params(("token" = String, Path, description = "a callback token made for `vonage`"),
        schema::CodeQuery),
    request_body(content = schema::VonageReceipt, description = "Vonage's DLR fields: \
        `messageId`, `status`, `err-code`, `network-code`, `message-timestamp`, `client-ref`, …"),
    responses(
        (status = 201, description = "stored", body = super::receipt::DeliveryView),
        (status = 200, description = "a repeat: stored before", body = super::receipt::DeliveryView),
        (status = 400, description = "`malformed_json`, `invalid_state`, `invalid_message_id`, …", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 404, description = "`not_found`: no live token; `unknown_link`: no link of the \
            token's workspace has the code, or none is named", body = ErrorBody),
        (status = 403, description = "`workspace_suspended`: the token's workspace is suspended", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the token's `--callback-rate` is spent", body = ErrorBody),
    ))]
pub async fn vonage_post(
    State(state): State<AppState>,
    caller: Caller,
    Path(token): Path<String>,
    uri: Uri,
    body: Bytes,
) -> Result<Response> {
    let token = token_of(&state, &caller, &token, Gateway::Vonage).await?;
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&body)
        .map_err(|error| Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "malformed_json",
            message: format!("a Vonage receipt is a JSON object: {error}"),
        })?;
    // Vonage sends every field as a string. Of the fields read, another type is refused; the
    // others (`price`…) are never looked at.
    let mut fields = Vec::new();
    for (name, value) in object {
        match value {
            serde_json::Value::String(text) => fields.push((name, text)),
            serde_json::Value::Null => {}
            _ if vonage::FIELDS.contains(&name.as_str()) => {
                return Err(Error::Request {
                    status: StatusCode::BAD_REQUEST,
                    code: "malformed_json",
                    message: format!("`{name}` is a string"),
                })
            }
            _ => {}
        }
    }
    let query = Params::from_query(uri.query().unwrap_or_default());
    receive(
        &state,
        &token,
        vonage::report(&Params(fields), &query),
        None,
    )
    .await
}

#[cfg(test)]
mod tests {
    #[test]
    fn logs_never_show_a_token() {
        let path = super::loggable_path("/callbacks/slc_0123/kannel");
        assert_eq!(path, "/callbacks/…/kannel");
        assert_eq!(super::loggable_path("/api/v1/links"), "/api/v1/links");
    }
}
