//! `/api/v1/retention`: how long the key's workspace keeps raw visits, conversions and webhook
//! failures, per campaign where it differs, and whether its visitors' addresses are truncated
//! (issue 56, docs/PRIVACY.md "Retention"). Admin keys only. `null` takes the next level: a
//! campaign's the workspace's, the workspace's the installation's flags.

use super::{AppState, Error, ErrorBody, InWorkspace, Json, Recorder, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::{Deserialize, Serialize};
use shortlink_core::service::accept;
use shortlink_model::schema::WholeNumber;
use shortlink_store::audit::Changes;
use shortlink_visits::retention::{CampaignRetention, RetentionPolicy, WorkspaceRetention};
use utoipa::ToSchema;

pub fn router() -> Router<AppState> {
    Router::new().route("/retention", get(get_retention).put(put_retention))
}

/// Longest retention accepted, in days (a century).
const MAX_DAYS: i64 = 36_500;
/// Campaigns with a policy of their own, at most.
const MAX_CAMPAIGNS: usize = 1000;

/// One campaign's retention: `null` takes the workspace's.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignRetentionView {
    /// As a link's campaign. Named twice, the last one counts.
    #[schema(schema_with = shortlink_model::schema::campaign)]
    pub campaign: String,
    #[schema(schema_with = days_schema)]
    pub visits_days: Option<WholeNumber>,
    #[schema(schema_with = days_schema)]
    pub conversions_days: Option<WholeNumber>,
}

/// A workspace's retention policy, whole (a `PUT` replaces it).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionView {
    /// Raw visits, in days; `null`: `--visit-retention` (kept forever if unset).
    #[schema(schema_with = days_schema)]
    pub visits_days: Option<WholeNumber>,
    /// Conversions, in days; `null`: kept.
    #[schema(schema_with = days_schema)]
    pub conversions_days: Option<WholeNumber>,
    /// Webhook failures kept for replay, in days; `null`: kept until replayed or deleted.
    #[schema(schema_with = days_schema)]
    pub webhook_failures_days: Option<WholeNumber>,
    /// Truncate visitors' addresses (IPv4 /24, IPv6 /48) when stored; `null`: `--anonymize-ip`.
    pub anonymize_ip: Option<bool>,
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub campaigns: Vec<CampaignRetentionView>,
}

impl From<RetentionPolicy> for RetentionView {
    fn from(p: RetentionPolicy) -> Self {
        Self {
            visits_days: p.workspace.visits_days.map(WholeNumber),
            conversions_days: p.workspace.conversions_days.map(WholeNumber),
            webhook_failures_days: p.workspace.webhook_failures_days.map(WholeNumber),
            anonymize_ip: p.workspace.anonymize_ip,
            campaigns: (p.campaigns.into_iter())
                .map(|c| CampaignRetentionView {
                    campaign: c.campaign,
                    visits_days: c.visits_days.map(WholeNumber),
                    conversions_days: c.conversions_days.map(WholeNumber),
                })
                .collect(),
        }
    }
}

/// A number of days, 1 to 36,500, or null.
fn days_schema() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{SchemaType, Type};
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .minimum(Some(1))
        .maximum(Some(MAX_DAYS))
        .into()
}

/// A refused value: 422, the message naming the field, as a link's fields are refused.
fn invalid(message: String) -> Error {
    Error::Request {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        code: "invalid_retention",
        message,
    }
}

fn days(field: &str, value: Option<WholeNumber>) -> Result<Option<i64>> {
    match value.map(|days| days.0) {
        Some(days) if !(1..=MAX_DAYS).contains(&days) => Err(invalid(format!(
            "{field} must be between 1 and {MAX_DAYS} days, or null"
        ))),
        other => Ok(other),
    }
}

impl TryFrom<RetentionView> for RetentionPolicy {
    type Error = Error;

    fn try_from(v: RetentionView) -> Result<Self> {
        if v.campaigns.len() > MAX_CAMPAIGNS {
            return Err(invalid(format!("campaigns: at most {MAX_CAMPAIGNS}")));
        }
        // By name, the last one counting: the stored rows are one per campaign.
        let mut named = std::collections::BTreeMap::new();
        for c in v.campaigns {
            // A link's campaign rule, so that every campaign a link can carry can have a policy.
            accept::meta(Some(c.campaign.clone()), "invalid_retention", "campaign")
                .map_err(|refused| invalid(refused.to_string()))?;
            let retention = CampaignRetention {
                visits_days: days("visits_days", c.visits_days)?,
                conversions_days: days("conversions_days", c.conversions_days)?,
                campaign: c.campaign.clone(),
            };
            named.insert(c.campaign, retention);
        }
        let campaigns = named.into_values().collect();
        Ok(RetentionPolicy {
            workspace: WorkspaceRetention {
                visits_days: days("visits_days", v.visits_days)?,
                conversions_days: days("conversions_days", v.conversions_days)?,
                webhook_failures_days: days("webhook_failures_days", v.webhook_failures_days)?,
                anonymize_ip: v.anonymize_ip,
            },
            campaigns,
        })
    }
}

/// The workspace's retention policy.
#[utoipa::path(get, path = "/api/v1/retention", tag = "subjects",
    responses((status = 200, body = RetentionView)))]
pub async fn get_retention(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
) -> Result<Json<RetentionView>> {
    let policy = state.analytics.store.retention().policy(workspace).await?;
    Ok(Json(policy.into()))
}

/// Replaces the workspace's retention policy. The cleanup job applies it at its next run
/// (`--cleanup-every`); the change is recorded in the audit log (`retention.set`).
#[utoipa::path(put, path = "/api/v1/retention", tag = "subjects",
    request_body = RetentionView,
    responses(
        (status = 200, body = RetentionView),
        (status = 400, description = "`malformed_json`", body = ErrorBody),
        (status = 422, description = "`invalid_retention`: a value out of its range, named", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_body`: not a policy", body = ErrorBody),
    ))]
pub async fn put_retention(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    Json(view): Json<RetentionView>,
) -> Result<Json<RetentionView>> {
    let policy = RetentionPolicy::try_from(view)?;
    let store = state.analytics.store.retention();
    let before = store.policy(workspace).await?;
    store.set_policy(workspace, &policy).await?;
    let json = |p: &RetentionPolicy| {
        serde_json::to_value(RetentionView::from(p.clone())).unwrap_or_default()
    };
    let changes = Changes::new().diff("policy", json(&before), json(&policy));
    let entry = origin.entry("retention.set", "retention", changes);
    state.links.storage().append_audit(&entry).await?;
    Ok(Json(policy.into()))
}
