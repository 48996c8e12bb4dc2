//! Liveness and readiness, outside `/api/v1` and without auth.

use super::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok`, `ready` or `unavailable`.
    status: &'static str,
    /// `ok` or `unavailable` (readiness only).
    #[serde(skip_serializing_if = "Option::is_none")]
    database: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    redis: Option<&'static str>,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "health", security(()),
    responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        database: None,
        redis: None,
    })
}

/// The database and Redis both answer.
#[utoipa::path(get, path = "/readyz", tag = "health", security(()),
    responses((status = 200, body = Health), (status = 503, body = Health)))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let (database, redis) = tokio::join!(
        state.links.storage().ping(),
        state.links.projection().ping()
    );
    let word = |ok: bool| if ok { "ok" } else { "unavailable" };
    let ready = database.is_ok() && redis.is_ok();
    if let Err(error) = &database {
        tracing::debug!(%error, "readiness: database");
    }
    if let Err(error) = &redis {
        tracing::debug!(%error, "readiness: redis");
    }
    (
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(Health {
            status: if ready { "ready" } else { "unavailable" },
            database: Some(word(database.is_ok())),
            redis: Some(word(redis.is_ok())),
        }),
    )
}
