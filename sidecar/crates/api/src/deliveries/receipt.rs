//! A receipt as the API takes it (`POST /api/v1/deliveries`) and answers it, checked into the
//! store's [`NewReceipt`]; and recording one, which the native callbacks share.

use super::proof::admit_one;
use crate::{AppState, Error, Result};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_messaging::receipts::{self, Report, MAX_NAME};
use shortlink_model::schema::{optional_printable, printable};
use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::model::{
    MAX_CARRIER, MAX_ERROR_CODE, MAX_ERROR_TEXT, MAX_MESSAGE_ID,
};
use shortlink_visits::deliveries::{
    DeliveryState, Gateway, Invalid, NewReceipt, Recorded, Refusal,
};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::ToSchema;

/// A delivery receipt: the link (exactly one of `code`, `short_url`, `campaign` + `ref`), the
/// gateway's message id and what it says happened. Values are read as strings and checked
/// after, so that a refusal names the field (422 `invalid_<field>`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveryRequest {
    #[schema(schema_with = code_schema)]
    pub code: Option<String>,
    #[schema(schema_with = short_url_schema)]
    pub short_url: Option<String>,
    #[schema(schema_with = campaign_schema)]
    pub campaign: Option<String>,
    #[serde(rename = "ref")]
    #[schema(rename = "ref", schema_with = ref_schema)]
    pub recipient_ref: Option<String>,
    #[schema(schema_with = message_id_schema)]
    pub message_id: String,
    #[schema(schema_with = state_schema)]
    pub state: String,
    #[schema(schema_with = error_code_schema)]
    pub error_code: Option<String>,
    #[schema(schema_with = error_text_schema)]
    pub error_text: Option<String>,
    #[schema(schema_with = carrier_schema)]
    pub carrier: Option<String>,
    /// The gateway's time of the report, RFC 3339 (default: now). A time outside [now − 31
    /// days, now + 5 minutes] is not believed: the receipt is taken at the time received.
    #[schema(format = DateTime)]
    pub at: Option<String>,
}

// The fields' schemas, from the limits the checks use (`shortlink_messaging::receipts`,
// `shortlink_visits::deliveries::model`); a schema function carries the field's description.

fn code_schema() -> Schema {
    optional_printable(1, MAX_NAME, "The link's code.").into()
}

fn short_url_schema() -> Schema {
    let description = "Instead of `code`: the short URL sent (its host is kept as the message's \
        short domain, for the funnel's breakdown and the drain on rejections; a host that is not \
        one of the workspace's domains is refused, 422 `foreign_domain`).";
    optional_printable(1, MAX_NAME, description).into()
}

fn campaign_schema() -> Schema {
    let description = "With `ref`, instead of `code`: the campaign's per-recipient link.";
    optional_printable(1, MAX_NAME, description).into()
}

fn ref_schema() -> Schema {
    optional_printable(1, MAX_NAME, "With `campaign`: the recipient's reference.").into()
}

fn message_id_schema() -> Schema {
    let description = format!(
        "The gateway's id of the message: with `state`, the idempotency key (a repeat answers \
         the first receipt, `duplicate` true). 1 to {MAX_MESSAGE_ID} characters, no control \
         characters."
    );
    printable(1, MAX_MESSAGE_ID, &description).into()
}

/// `state`: the seven states.
fn state_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(DeliveryState::ALL.map(DeliveryState::as_str)))
        .description(Some(
            "`submitted`, `delivered`, `failed`, `rejected`, `expired`, `buffered` or `unknown`.",
        ))
        .examples([serde_json::json!("delivered")])
        .into()
}

fn error_code_schema() -> Schema {
    let description = format!(
        "The gateway's or carrier's error code, at most {MAX_ERROR_CODE} characters (empty: none)."
    );
    optional_printable(0, MAX_ERROR_CODE, &description).into()
}

fn error_text_schema() -> Schema {
    let description = format!(
        "The gateway's text (kept to {MAX_ERROR_TEXT} characters, control characters as spaces)."
    );
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .description(Some(description))
        .into()
}

fn carrier_schema() -> Schema {
    let description = format!(
        "The carrier: MCC-MNC (`23410`) or a name, at most {MAX_CARRIER} characters (empty: none)."
    );
    optional_printable(0, MAX_CARRIER, &description).into()
}

/// A stored receipt, and the message's current state after it.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryView {
    pub code: String,
    pub message_id: String,
    pub state: String,
    pub error_code: Option<String>,
    pub error_text: Option<String>,
    pub carrier: Option<String>,
    pub at: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
    /// `api`, `kannel`, `twilio` or `vonage`.
    pub gateway: String,
    /// What the funnel counts the message as now: a final state is never replaced by a
    /// non-final one, and among finals the later `at` wins.
    pub current_state: String,
    /// True when an earlier report stored this `message_id` and `state` (this one stored nothing).
    pub duplicate: bool,
}

impl From<Recorded> for DeliveryView {
    fn from(recorded: Recorded) -> Self {
        let r = recorded.receipt;
        DeliveryView {
            code: r.code,
            message_id: r.message_id,
            state: r.state.as_str().into(),
            error_code: r.error_code,
            error_text: r.error_text,
            carrier: r.carrier,
            at: r.at,
            received_at: r.received_at,
            gateway: r.gateway.as_str().into(),
            current_state: recorded.current.as_str().into(),
            duplicate: recorded.duplicate,
        }
    }
}

pub(crate) fn invalid(invalid: Invalid) -> Error {
    let code = match invalid.field {
        "message_id" => "invalid_message_id",
        "state" => "invalid_state",
        "error_code" => "invalid_error_code",
        "carrier" => "invalid_carrier",
        "at" => "invalid_at",
        "short_url" => "invalid_short_url",
        _ => "invalid_link",
    };
    Error::invalid(code, invalid.message)
}

pub(crate) fn refusal(refusal: Refusal) -> Error {
    match refusal {
        Refusal::UnknownLink => Error::Request {
            status: StatusCode::NOT_FOUND,
            code: "unknown_link",
            message: refusal.to_string(),
        },
    }
}

impl DeliveryRequest {
    /// The report it is: the state and the time read from their text.
    fn into_report(self) -> Result<Report, Invalid> {
        let state = DeliveryState::parse(&self.state).ok_or_else(|| {
            Invalid::new(
                "state",
                "`state` is one of submitted, delivered, failed, rejected, expired, buffered, \
                 unknown",
            )
        })?;
        let at = (self.at.as_deref())
            .map(|text| DateTime::parse_from_rfc3339(text.trim()))
            .transpose()
            .map_err(|_| Invalid::new("at", "`at` is an RFC 3339 time"))?;
        Ok(Report {
            code: self.code,
            short_url: self.short_url,
            campaign: self.campaign,
            recipient_ref: self.recipient_ref,
            error_code: self.error_code,
            error_text: self.error_text,
            carrier: self.carrier,
            at: at.map(|at| at.with_timezone(&Utc)),
            ..Report::new(self.message_id, state)
        })
    }
}

/// The request's fields checked (no I/O yet), as a gateway's report is.
pub fn check(
    request: DeliveryRequest,
    gateway: Gateway,
    now: DateTime<Utc>,
) -> Result<NewReceipt, Invalid> {
    receipts::check(request.into_report()?, gateway, now)
}

/// Records one checked receipt in `workspace`, answered 201 (stored) or 200 (a duplicate); 422
/// `foreign_domain` for a host not the workspace's.
pub async fn record(
    state: &AppState,
    workspace: WorkspaceId,
    mut new: NewReceipt,
) -> Result<Response> {
    admit_one(state, workspace, &mut new).await?;
    let now = shortlink_store::now();
    let store = state.analytics.store.deliveries();
    let answer = (store
        .record_receipts(workspace, std::slice::from_ref(&new), now)
        .await?)
        .into_iter()
        .next()
        .ok_or_else(|| Error::Internal("a receipt's answer is missing".into()))?;
    answer_one(state, workspace, &new, answer).await
}

/// The answer to one receipt recorded (or refused), handed to the drain's watch first.
pub(crate) async fn answer_one(
    state: &AppState,
    workspace: WorkspaceId,
    new: &NewReceipt,
    answer: Result<Recorded, Refusal>,
) -> Result<Response> {
    let answer = answer.map_err(refusal)?;
    watch(state, workspace, [(new, &answer)]).await;
    let status = match answer.duplicate {
        true => StatusCode::OK,
        false => StatusCode::CREATED,
    };
    Ok((status, axum::Json(DeliveryView::from(answer))).into_response())
}

/// Hands receipts just stored to the domains' drain on rejections (a count in memory per
/// receipt, [`shortlink_domains::receipt_drain`]).
pub async fn watch<'a>(
    state: &AppState,
    workspace: WorkspaceId,
    stored: impl IntoIterator<Item = (&'a NewReceipt, &'a Recorded)>,
) {
    // Known after the request's authentication (or the callback token's first use): no query.
    let slugs = state.links.slugs();
    match slugs
        .record_workspace(state.links.storage().as_ref(), workspace)
        .await
    {
        Ok(name) => state.domains.receipts_stored(name.slug().as_str(), stored),
        Err(error) => tracing::warn!(%error, "delivery receipts: workspace not named; not watched"),
    }
}
