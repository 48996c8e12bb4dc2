//! A workspace's quotas as they apply to a request (issue 53): its own where the operator set
//! them, else the settings'. Links per day are counted in Redis, shared by every sidecar
//! (`shortlink_core::limits::Quotas`); recipients and webhooks are checked against counts. The
//! budget itself, and the checks, are the core's ([`Budget`]): the service's writes take one,
//! so the console's forms count against the same quotas as these routes.
//!
//! Where a request is cut: a single create is refused whole (429 `quota_exceeded`); a batch or a
//! compose reserves each group of chunks (up to 8,000 links) before issuing it, in order, so a
//! JSON array (at most 10,000 items) of up to a group is refused whole before anything is issued,
//! and a longer one is cut at the first group that does not fit: that group's items and every
//! later one are answered `quota_exceeded`, nothing of them issued, what came before stays.

use super::{AppState, InWorkspace, Result};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
pub use shortlink_core::limits::Budget;
use shortlink_core::service::WorkspaceError;
use shortlink_model::WorkspaceId;
use shortlink_store::Quotas;

/// `workspace`'s budget as stored now: for a console session, whose sign-in did not read the
/// workspace's quotas as a key's request does.
pub async fn budget_of(state: &AppState, workspace: WorkspaceId) -> Result<Budget> {
    let stored =
        (state.links.storage().workspace(workspace).await?).ok_or(WorkspaceError::NotFound)?;
    Ok(state.limits.budget(workspace, stored.quotas))
}

impl FromRequestParts<AppState> for Budget {
    type Rejection = super::Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self> {
        let InWorkspace(workspace) = InWorkspace::from_request_parts(parts, state).await?;
        // Read with the key (`auth`): the workspace's quotas as stored.
        let own = parts
            .extensions
            .get::<Quotas>()
            .copied()
            .unwrap_or_default();
        Ok(state.limits.budget(workspace, own))
    }
}
