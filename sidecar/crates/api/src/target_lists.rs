//! A workspace's own block and allow lists of target hosts (issue 79): `GET/PUT
//! /api/v1/target-lists`, its admins' (an issuer's or viewer's key is refused). They apply to
//! its links only, within the operator's `--block-hosts`/`--allow-hosts`, and never let a target
//! a threat feed lists through (`shortlink_core::service::target_lists`).

use crate::{AppState, ErrorBody, InWorkspace, Json, Recorder, Result};
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use shortlink_core::service::target_lists::TargetLists;
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new().route("/target-lists", get(get_lists).put(put_lists))
}

/// Host names (lower case and punycode once stored); a host stands for its subdomains too.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetListsBody {
    /// Targets on these hosts are refused (`unsafe_target`, feed `workspace-block-list`).
    #[serde(default)]
    #[schema(schema_with = hosts)]
    pub block: Vec<String>,
    /// If not empty, only targets on these hosts are accepted (`unsafe_target`, feed
    /// `workspace-allow-list`); a target a threat feed lists stays refused.
    #[serde(default)]
    #[schema(schema_with = hosts)]
    pub allow: Vec<String>,
    /// A listed target (by a threat feed or these lists) is stored quarantined, pending review
    /// (`GET /api/v1/quarantines`, `POST /api/v1/links/{code}/release`), instead of refused.
    #[serde(default)]
    pub hold_for_review: bool,
}

fn hosts() -> utoipa::openapi::schema::Schema {
    shortlink_model::schema::host_list(shortlink_core::service::MAX_LIST_HOSTS)
}

fn body(lists: &TargetLists) -> TargetListsBody {
    TargetListsBody {
        block: lists.block.clone(),
        allow: lists.allow.clone(),
        hold_for_review: lists.hold_for_review,
    }
}

/// The workspace's block and allow lists.
#[utoipa::path(get, path = "/api/v1/target-lists", tag = "links",
    responses((status = 200, body = TargetListsBody)))]
pub async fn get_lists(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<TargetListsBody>> {
    Ok(Json(body(&*state.links.target_lists(workspace).await?)))
}

/// Replace the workspace's block and allow lists (audited; every sidecar applies them within
/// 5 s).
#[utoipa::path(put, path = "/api/v1/target-lists", tag = "links",
    request_body = TargetListsBody,
    responses(
        (status = 200, body = TargetListsBody),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 415, description = "not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_host`: an entry is not a host name (the message \
            names the list and the entry), or a list has more than 1000; `invalid_body`: not a \
            JSON object of these fields", body = ErrorBody),
    ))]
pub async fn put_lists(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    Json(request): Json<TargetListsBody>,
) -> Result<Json<TargetListsBody>> {
    let lists = TargetLists {
        block: request.block,
        allow: request.allow,
        hold_for_review: request.hold_for_review,
    }
    .normalized()
    .map_err(|(list, entry)| {
        crate::Error::invalid(
            "invalid_host",
            format!("{list}: {entry:?} is not a host name"),
        )
    })?;
    let stored = state
        .links
        .set_target_lists(workspace, lists, &origin)
        .await?;
    Ok(Json(body(&stored)))
}
