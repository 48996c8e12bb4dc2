//! `/api/v1/webhooks`: click webhook subscriptions (admin keys only), their failures and replay.

use super::{AppState, Budget, Error, ErrorBody, InWorkspace, Json, Path, Recorder, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use shortlink_webhooks::service::{FailureView, ReplayRequest};
use shortlink_webhooks::subscription::{SubscriptionRequest, SubscriptionView};
use shortlink_webhooks::WebhookError;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/webhooks", get(list_webhooks).post(create_webhook))
        .route(
            "/webhooks/{id}",
            get(get_webhook).put(replace_webhook).delete(delete_webhook),
        )
        .route("/webhooks/{id}/failures", get(webhook_failures))
        .route("/webhooks/{id}/replay", post(replay_webhook))
}

impl From<WebhookError> for Error {
    fn from(error: WebhookError) -> Self {
        match error {
            WebhookError::Invalid(invalid) => invalid.into(),
            WebhookError::NotFound => Error::Request {
                status: StatusCode::NOT_FOUND,
                code: "not_found",
                message: "no webhook has this id".into(),
            },
            WebhookError::Storage(storage) => storage.into(),
            WebhookError::Quota(quota) => quota.into(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<SubscriptionView>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct FailureList {
    pub failures: Vec<FailureView>,
}

/// Subscribe: from now on, every visit the filter admits is POSTed to `url`, signed, in batches.
#[utoipa::path(post, path = "/api/v1/webhooks", tag = "webhooks", request_body = SubscriptionRequest,
    responses(
        (status = 201, description = "subscribed; the secret is not shown again", body = SubscriptionView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_url`, `unsupported_scheme`, `url_too_long`, `own_domain`, \
            `host_not_allowed`, `private_address` (loopback, private or link-local, unless the deployment \
            allows them), `invalid_body`; values outside the schema: `invalid_secret`, \
            `invalid_name`, `invalid_filter`, `invalid_batch`", body = ErrorBody),
    ))]
pub async fn create_webhook(
    State(state): State<AppState>,
    budget: Budget,
    Recorder(origin): Recorder,
    Json(request): Json<SubscriptionRequest>,
) -> Result<(StatusCode, Json<SubscriptionView>)> {
    let view = state.webhooks.create(&budget, request, &origin).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Every subscription with its delivery state.
#[utoipa::path(get, path = "/api/v1/webhooks", tag = "webhooks",
    responses((status = 200, body = WebhookList)))]
pub async fn list_webhooks(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<WebhookList>> {
    Ok(Json(WebhookList {
        webhooks: state.webhooks.list(workspace).await?,
    }))
}

#[utoipa::path(get, path = "/api/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = String, Path)),
    responses((status = 200, body = SubscriptionView), (status = 404, body = ErrorBody)))]
pub async fn get_webhook(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(id): Path<String>,
) -> Result<Json<SubscriptionView>> {
    Ok(Json(state.webhooks.get(workspace, &id).await?))
}

/// Replace what a subscription is, secret included (its place in the feed stays).
#[utoipa::path(put, path = "/api/v1/webhooks/{id}", tag = "webhooks", request_body = SubscriptionRequest,
    params(("id" = String, Path)),
    responses(
        (status = 200, body = SubscriptionView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "as for a create", body = ErrorBody),
    ))]
pub async fn replace_webhook(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(id): Path<String>,
    Recorder(origin): Recorder,
    Json(request): Json<SubscriptionRequest>,
) -> Result<Json<SubscriptionView>> {
    Ok(Json(
        state
            .webhooks
            .replace(workspace, &id, request, &origin)
            .await?,
    ))
}

/// Unsubscribe: nothing more is sent (a POST in flight may still arrive).
#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = String, Path)),
    responses((status = 204, description = "deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(id): Path<String>,
    Recorder(origin): Recorder,
) -> Result<StatusCode> {
    state.webhooks.delete(workspace, &id, &origin).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The events given up on after the retry window (newest first, at most 100 ranges).
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/failures", tag = "webhooks",
    params(("id" = String, Path)),
    responses((status = 200, body = FailureList), (status = 404, body = ErrorBody)))]
pub async fn webhook_failures(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(id): Path<String>,
) -> Result<Json<FailureList>> {
    Ok(Json(FailureList {
        failures: state.webhooks.failures(workspace, &id).await?,
    }))
}

/// Deliver again from a time or from a failure's first event, and everything after it.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/replay", tag = "webhooks", request_body = ReplayRequest,
    params(("id" = String, Path)),
    responses(
        (status = 200, description = "the subscription, its cursor moved back", body = SubscriptionView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_replay` (neither or both of `from` and `failure`, as \
            the schema says), `unknown_failure` (a `failure` this webhook does not have: no schema can \
            know), `invalid_body`", body = ErrorBody),
    ))]
pub async fn replay_webhook(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(id): Path<String>,
    Json(request): Json<ReplayRequest>,
) -> Result<Json<SubscriptionView>> {
    Ok(Json(state.webhooks.replay(workspace, &id, request).await?))
}
