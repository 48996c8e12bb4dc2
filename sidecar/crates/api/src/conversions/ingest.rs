//! Taking conversions in: the JSON shapes, the refusals as API errors, and the NDJSON batch.

use crate::ndjson::{self, Ingest};
use crate::{AppState, Error, ErrorBody, InWorkspace, Result};
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shortlink_model::schema::{optional_printable, printable};
use shortlink_model::WorkspaceId;
use shortlink_visits::conversions::input::{MAX_CLICK_ID, MAX_EVENT_ID, MAX_NAME};
use shortlink_visits::conversions::{Conversion, NewConversion, RawConversion, Recorded, Refusal};
use utoipa::openapi::schema::Schema;
use utoipa::ToSchema;

/// Most lines in one NDJSON request, and the longest line (a conversion is a few hundred bytes).
pub const MAX_LINES: usize = 100_000;
pub const MAX_LINE_BYTES: usize = 4096;

/// Lines stored together: the store takes them a thousand a transaction, two transactions at
/// once (`shortlink_visits::conversions`), so a page holds several of those.
const BATCH: usize = 10_000;

/// A conversion: the click (`click_id`, or `code` + `ref`), what happened, and the sender's
/// idempotency key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversionRequest {
    #[schema(schema_with = click_id_schema)]
    pub click_id: Option<String>,
    /// With `ref`, instead of `click_id`: the latest human visit of this per-recipient link at
    /// or before `converted_at`.
    pub code: Option<String>,
    #[serde(rename = "ref")]
    #[schema(rename = "ref")]
    pub recipient_ref: Option<String>,
    #[schema(schema_with = name_schema)]
    pub name: String,
    /// Exact decimal, with `currency` (both or neither, else 422 `invalid_value` /
    /// `invalid_currency`): a string (`"19.99"`) or a non-negative number; at most the
    /// currency's minor-unit digits after the point (`JPY` 0, `EUR` 2, `BHD` 3), else 422
    /// `invalid_value`.
    #[schema(schema_with = value_schema)]
    pub value: Option<serde_json::Value>,
    /// ISO 4217, a currency with a minor unit.
    #[schema(schema_with = currency_schema)]
    pub currency: Option<String>,
    #[schema(schema_with = event_id_schema)]
    pub event_id: String,
    /// When it happened (default: now). Not before the click (422 `before_click`), not after
    /// its attribution window (422 `outside_window`), at most 5 minutes in the future (422
    /// `invalid_converted_at`).
    pub converted_at: Option<DateTime<Utc>>,
}

// The text fields' schemas, from the limits the checks use
// (`shortlink_visits::conversions::input`); a schema function carries the field's description.

fn click_id_schema() -> Schema {
    let description = "The click's id: what the landing page got in the link's \
        `click_id_param`. Exactly one of `click_id` and `code` + `ref` (else 422 `invalid_click`).";
    optional_printable(1, MAX_CLICK_ID, description).into()
}

fn name_schema() -> Schema {
    let description =
        format!("`lead`, `purchase`, `signup`, anything: 1 to {MAX_NAME} characters, no control characters.");
    printable(1, MAX_NAME, &description).into()
}

fn event_id_schema() -> Schema {
    let description = format!(
        "The sender's id of this conversion (an order number): a repeat answers the first \
         conversion and never counts twice. 1 to {MAX_EVENT_ID} characters, no control characters."
    );
    printable(1, MAX_EVENT_ID, &description).into()
}

/// `value`: a plain decimal string, a non-negative number, or null.
fn value_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[0-9]{1,14}(\\.[0-9]{1,4})?$"))
                .examples([serde_json::json!("19.99")]),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0.0))
                .maximum(Some(1e14)),
        )
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .into()
}

/// `currency`: the ISO 4217 codes with a minor unit, or null.
fn currency_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    let mut codes: Vec<serde_json::Value> = (shortlink_visits::conversions::currency_codes())
        .map(serde_json::Value::from)
        .collect();
    codes.push(serde_json::Value::Null);
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(codes))
        .examples([serde_json::json!("EUR")])
        .into()
}

/// A stored conversion, with the click's attributes copied from the visit.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversionView {
    /// `cv_…`: its id in the visit feed and on webhooks.
    pub id: String,
    pub event_id: String,
    pub click_id: String,
    pub code: String,
    pub campaign: Option<String>,
    #[serde(rename = "ref")]
    #[schema(rename = "ref")]
    pub recipient_ref: Option<String>,
    /// `<rule>` or `<rule>.<variant>` that answered the click; `null`: the link's own target.
    pub rule: Option<String>,
    pub short_domain: Option<String>,
    pub device: Option<String>,
    pub country: Option<String>,
    pub clicked_at: DateTime<Utc>,
    pub name: String,
    /// Exact decimal text (`"19.99"`).
    pub value: Option<String>,
    pub currency: Option<String>,
    pub converted_at: DateTime<Utc>,
    /// True when an earlier request with this `event_id` stored it (this one stored nothing).
    pub duplicate: bool,
}

impl ConversionView {
    pub fn new(conversion: Conversion, duplicate: bool) -> Self {
        let (value, currency) = match conversion.value_text() {
            Some((value, currency)) => (Some(value), Some(currency.to_owned())),
            None => (None, None),
        };
        ConversionView {
            id: conversion.id,
            event_id: conversion.event_id,
            click_id: conversion.click_id,
            code: conversion.code,
            campaign: conversion.campaign,
            recipient_ref: conversion.recipient_ref,
            rule: conversion.rule,
            short_domain: conversion.short_domain,
            device: conversion.device,
            country: conversion.country,
            clicked_at: conversion.clicked_at,
            name: conversion.name,
            value,
            currency,
            converted_at: conversion.converted_at,
            duplicate,
        }
    }
}

fn refusal(refusal: Refusal) -> Error {
    Error::Request {
        status: StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::BAD_REQUEST),
        code: refusal.code(),
        message: refusal.message().to_owned(),
    }
}

/// The value as decimal text: a JSON string as given, a JSON number as serde_json writes it
/// (the shortest text that reads back as the same number: `19.99` stays `19.99`).
fn value_text(value: serde_json::Value) -> std::result::Result<String, Refusal> {
    match value {
        serde_json::Value::String(text) => Ok(text),
        serde_json::Value::Number(number) => Ok(number.to_string()),
        _ => Err(Refusal::InvalidValue),
    }
}

/// The request's fields checked (no I/O yet).
fn check(request: ConversionRequest, now: DateTime<Utc>) -> Result<NewConversion> {
    let raw = RawConversion {
        click_id: request.click_id,
        code: request.code,
        recipient_ref: request.recipient_ref,
        name: Some(request.name),
        value: request.value.map(value_text).transpose().map_err(refusal)?,
        currency: request.currency,
        event_id: Some(request.event_id),
        converted_at: request.converted_at,
    };
    raw.check(now).map_err(refusal)
}

async fn record(
    state: &AppState,
    workspace: WorkspaceId,
    request: ConversionRequest,
) -> Result<Recorded> {
    let now = shortlink_store::now();
    let new = check(request, now)?;
    let store = state.analytics.store.conversions();
    store
        .record(workspace, &new, state.analytics.attribution_window, now)
        .await?
        .map_err(refusal)
}

/// Record conversions: one JSON object, answered 201 (stored now) or 200 (`duplicate`: the
/// conversion an earlier request with this `event_id` stored); or with `Content-Type:
/// application/x-ndjson`, one object per line (at most 100,000), answered with one line each, in
/// order: `{index, status, conversion | error}`.
#[utoipa::path(post, path = "/api/v1/conversions", tag = "conversions",
    request_body(content = ConversionRequest,
        description = "one object, or one per line with `Content-Type: application/x-ndjson`"),
    responses(
        (status = 201, description = "stored", body = ConversionView),
        (status = 200, description = "a repeat of an `event_id`: the first conversion, \
            `duplicate` true; NDJSON: one `{index, status, conversion | error}` per line", body = ConversionView),
        (status = 400, description = "`malformed_json`: not a `ConversionRequest`", body = ErrorBody),
        (status = 404, description = "`unknown_click`: no such click in this workspace", body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "what no schema can state: `invalid_click` (not exactly one \
            of `click_id` and `code` + `ref`), `invalid_value` and `invalid_currency` (not both \
            or neither; more decimals than the currency has), `invalid_converted_at` (in the \
            future), `before_click`, `outside_window` (the attribution window, \
            `--attribution-window`); and `invalid_name`, `invalid_event_id`", body = ErrorBody),
    ))]
pub async fn post_conversions(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    headers: HeaderMap,
    body: Body,
) -> Result<Response> {
    let limits = ndjson::Limits {
        lines: MAX_LINES,
        line_bytes: MAX_LINE_BYTES,
        body_bytes: MAX_LINES * MAX_LINE_BYTES,
    };
    match ndjson::ingest(&headers, body, limits).await? {
        Ingest::One(bytes) => {
            let request: ConversionRequest = parse(&bytes)?;
            let recorded = record(&state, workspace, request).await?;
            let status = match recorded.duplicate {
                true => StatusCode::OK,
                false => StatusCode::CREATED,
            };
            let view = ConversionView::new(recorded.conversion, recorded.duplicate);
            Ok((status, axum::Json(view)).into_response())
        }
        Ingest::Lines(lines) => {
            let texts: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
            let mut out = Vec::with_capacity(texts.len() * 400);
            for (n, chunk) in texts.chunks(BATCH).enumerate() {
                answer_lines(&state, workspace, (n * BATCH) as i64, chunk, &mut out).await?;
            }
            Ok(ndjson::answer(out))
        }
    }
}

fn parse(bytes: &[u8]) -> Result<ConversionRequest> {
    serde_json::from_slice(bytes).map_err(|error| Error::Request {
        status: StatusCode::BAD_REQUEST,
        code: "malformed_json",
        message: error.to_string(),
    })
}

/// Records NDJSON lines (numbered from `first`) and appends one answer line each to `out`, in
/// order: `{index, status, conversion | error}`; returns their statuses. The lines that pass
/// the checks are stored together (`ConversionStore::record_batch`). Errs when the database
/// fails: the rest would fail alike, and the sender retries the batch (what went in answers as
/// duplicates). Also `conversions import`.
pub async fn answer_lines(
    state: &AppState,
    workspace: WorkspaceId,
    first: i64,
    lines: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result<Vec<u16>> {
    let now = shortlink_store::now();
    let checked: Vec<Result<NewConversion>> = (lines.iter())
        .map(|line| parse(line).and_then(|request| check(request, now)))
        .collect();
    let valid: Vec<NewConversion> = (checked.iter())
        .filter_map(|c| c.as_ref().ok().cloned())
        .collect();
    let store = state.analytics.store.conversions();
    let recorded = (store.record_batch(workspace, &valid, state.analytics.attribution_window, now))
        .await?
        .into_iter()
        .map(|recorded| recorded.map_err(refusal));
    let answers = ndjson::in_line_order(checked, recorded)?;
    let mut statuses = Vec::with_capacity(lines.len());
    for (offset, answer) in answers.into_iter().enumerate() {
        let answer = answer.map(|r| (ConversionView::new(r.conversion, r.duplicate), r.duplicate));
        statuses.push(ndjson::write_line(
            out,
            first + offset as i64,
            "conversion",
            answer,
        )?);
    }
    Ok(statuses)
}
