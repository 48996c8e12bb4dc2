//! Compose's hand-off to a real SMS gateway over HTTP (issue 68, docs/DELIVERIES.md "Sending
//! through Kannel"): the workspace's gateway ([`settings`]) and what a send job recorded per
//! recipient (`GET /api/v1/gateway/jobs/{job}`, here). The jobs themselves are
//! `shortlink_messaging::gateway`'s. Admin keys only, as compose.

pub(crate) mod settings;

use crate::{AppState, Error, ErrorBody, InWorkspace, Json, Path, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Serialize;
use shortlink_visits::deliveries::{SendOutcome, SendRecord};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/gateway",
            get(settings::get_gateway)
                .put(settings::put_gateway)
                .delete(settings::delete_gateway),
        )
        .route("/gateway/jobs/{job}", get(send_job))
}

/// A send job and its records so far.
#[derive(Debug, Serialize, ToSchema)]
pub struct SendJobView {
    pub id: String,
    pub campaign: Option<String>,
    /// The id of the Kannel callback token its `dlr-url`s carry.
    pub callback_token_id: String,
    pub created_at: DateTime<Utc>,
    /// When its last recipient was recorded; `null` while it sends.
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it stopped before its last recipient, if it did.
    pub stopped: Option<String>,
    /// Since when it holds its messages back because its callback base
    /// (`<callback_base>/callbacks/ping`) does not answer: nothing is handed to the gateway
    /// while its reports could not come back. `null` while it sends.
    pub waiting_for_callback_since: Option<DateTime<Utc>>,
    /// Recipients by outcome.
    pub outcomes: BTreeMap<SendOutcome, u64>,
    pub recipients: Vec<SendRecord>,
}

/// A compose request's send job (its id is in the compose answer's summary, `send_job`): per
/// recipient what its hand-off came to.
#[utoipa::path(get, path = "/api/v1/gateway/jobs/{job}", tag = "deliveries",
    params(("job" = String, Path)),
    responses((status = 200, body = SendJobView),
        (status = 404, description = "`not_found`: no job of this workspace has this id", body = ErrorBody)))]
pub async fn send_job(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(id): Path<String>,
) -> Result<Json<SendJobView>> {
    let gateways = state.analytics.store.gateways();
    let job = (gateways.job(workspace, &id).await?).ok_or(Error::Request {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: "no send job has this id".into(),
    })?;
    let recipients = gateways.sends(workspace, &id).await?;
    let mut outcomes = BTreeMap::new();
    for recipient in &recipients {
        *outcomes.entry(recipient.outcome).or_default() += 1;
    }
    Ok(Json(SendJobView {
        id: job.id,
        campaign: job.campaign,
        callback_token_id: job.callback_token_id,
        created_at: job.created_at,
        finished_at: job.finished_at,
        stopped: job.stopped,
        waiting_for_callback_since: job.waiting_since,
        outcomes,
        recipients,
    }))
}
