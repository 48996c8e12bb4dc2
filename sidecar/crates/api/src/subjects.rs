//! `/api/v1/subjects/*`: a data subject's export and erasure (issue 56, docs/PRIVACY.md), and the
//! workspace's erase requests. Admin keys only (`auth::READ_ROUTES` and `ISSUE_ROUTES` do not
//! list them): a recipient's data is the workspace's most personal. The ref is only ever in the
//! request body, never in a path or query string, where access logs would keep it.

use super::{AppState, Error, ErrorBody, InWorkspace, Json, Query, Recorder, Result};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use shortlink_visits::subjects::{Export, Selector, SubjectError, SubjectRequest, SubjectService};
use utoipa::{IntoParams, ToSchema};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/subjects/export", post(export_subject))
        .route("/subjects/erase", post(erase_subject))
        .route("/subjects/requests", get(list_requests))
}

/// Longest `ref`, `campaign`, `code` or `request_id`, in characters.
const MAX_FIELD: usize = 256;

/// A selector's text: 1 to 256 characters, no control character (as the schema says).
pub(crate) fn text() -> utoipa::openapi::Schema {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_FIELD))
        .pattern(Some(shortlink_model::schema::PRINTABLE))
        .into()
}

/// Every link of the workspace with this `ref`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ByRef {
    #[serde(rename = "ref")]
    #[schema(rename = "ref", schema_with = text)]
    pub recipient_ref: String,
}

/// The links of one campaign with this `ref`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ByCampaignRef {
    #[schema(schema_with = text)]
    pub campaign: String,
    #[serde(rename = "ref")]
    #[schema(rename = "ref", schema_with = text)]
    pub recipient_ref: String,
}

/// One link.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ByCode {
    #[schema(schema_with = text)]
    pub code: String,
}

/// Whose data: `ref` (every link with it), `campaign` + `ref`, or `code` (one link).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum SubjectSelector {
    CampaignRef(ByCampaignRef),
    Ref(ByRef),
    Code(ByCode),
}

/// An erase by `ref`; `request_id` is the caller's id of the request (a repeat with the same
/// id answers the first, and finishes it if it was cut short).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EraseByRef {
    #[schema(schema_with = text)]
    pub request_id: String,
    #[serde(rename = "ref")]
    #[schema(rename = "ref", schema_with = text)]
    pub recipient_ref: String,
}

/// An erase by `campaign` + `ref`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EraseByCampaignRef {
    #[schema(schema_with = text)]
    pub request_id: String,
    #[schema(schema_with = text)]
    pub campaign: String,
    #[serde(rename = "ref")]
    #[schema(rename = "ref", schema_with = text)]
    pub recipient_ref: String,
}

/// An erase by `code`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EraseByCode {
    #[schema(schema_with = text)]
    pub request_id: String,
    #[schema(schema_with = text)]
    pub code: String,
}

/// An erase: its id and whose data.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum EraseRequest {
    CampaignRef(EraseByCampaignRef),
    Ref(EraseByRef),
    Code(EraseByCode),
}

fn invalid(code: &'static str, message: &str) -> Error {
    Error::Request {
        status: StatusCode::BAD_REQUEST,
        code,
        message: message.into(),
    }
}

/// Each text of a request as its schema says: 1 to 256 characters, no control character.
fn checked(values: &[&str]) -> Result<()> {
    for value in values {
        let n = value.chars().count();
        if n == 0 || n > MAX_FIELD || value.chars().any(char::is_control) {
            return Err(invalid(
                "invalid_selector",
                "ref, campaign, code and request_id are 1 to 256 characters, none a control character",
            ));
        }
    }
    Ok(())
}

impl SubjectSelector {
    fn parse(self) -> Result<Selector> {
        Ok(match self {
            SubjectSelector::CampaignRef(s) => {
                checked(&[&s.campaign, &s.recipient_ref])?;
                Selector::CampaignRef {
                    campaign: s.campaign,
                    reference: s.recipient_ref,
                }
            }
            SubjectSelector::Ref(s) => {
                checked(&[&s.recipient_ref])?;
                Selector::Ref(s.recipient_ref)
            }
            SubjectSelector::Code(s) => {
                checked(&[&s.code])?;
                Selector::Code(s.code)
            }
        })
    }
}

impl EraseRequest {
    /// The request id and the selector.
    fn parse(self) -> Result<(String, Selector)> {
        let (id, selector) = match self {
            EraseRequest::CampaignRef(e) => (
                e.request_id,
                SubjectSelector::CampaignRef(ByCampaignRef {
                    campaign: e.campaign,
                    recipient_ref: e.recipient_ref,
                }),
            ),
            EraseRequest::Ref(e) => (
                e.request_id,
                SubjectSelector::Ref(ByRef {
                    recipient_ref: e.recipient_ref,
                }),
            ),
            EraseRequest::Code(e) => (e.request_id, SubjectSelector::Code(ByCode { code: e.code })),
        };
        checked(&[&id])?;
        Ok((id, selector.parse()?))
    }
}

fn service(state: &AppState) -> SubjectService {
    SubjectService::new(state.analytics.store.clone(), state.links.clone())
}

impl From<SubjectError> for Error {
    fn from(error: SubjectError) -> Self {
        match error {
            SubjectError::Storage(error) => error.into(),
            SubjectError::Service(error) => error.into(),
        }
    }
}

fn time(at: Option<DateTime<Utc>>) -> Value {
    at.map_or(Value::Null, |at| json!(at))
}

/// The export's lines: links, then visits, conversions, delivery receipts and the webhooks that
/// receive them.
fn lines(export: &Export, webhooks: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for link in &export.links {
        out.push(json!({
            "type": "link", "code": link.code, "url": link.target, "campaign": link.campaign,
            "ref": link.recipient_ref, "tags": link.tags, "created_at": link.created_at,
            "expires_at": time(link.expires_at), "revoked_at": time(link.revoked_at),
            "visit_count": link.visit_count, "last_visit_at": time(link.last_visit_at),
        }));
    }
    for v in &export.visits {
        out.push(json!({
            "type": "visit", "id": v.event_id, "code": v.code, "visited_at": v.visited_at,
            "status": v.status, "ip": v.ip, "browser": v.browser,
            "browser_version": v.browser_version, "os": v.os, "os_version": v.os_version,
            "device": v.device, "audience": v.audience, "agent": v.agent,
            "country": v.country, "region": v.region, "city": v.city, "isp": v.isp,
            "referrer_host": v.referrer_host, "short_domain": v.short_domain,
            "language": v.language, "rule": v.rule,
        }));
    }
    for c in &export.conversions {
        let value = c.value_text();
        out.push(json!({
            "type": "conversion", "id": c.id, "event_id": c.event_id, "click_id": c.click_id,
            "code": c.code, "campaign": c.campaign, "ref": c.recipient_ref, "rule": c.rule,
            "short_domain": c.short_domain, "device": c.device, "country": c.country,
            "clicked_at": c.clicked_at, "name": c.name,
            "value": value.as_ref().map(|(text, _)| text.clone()),
            "currency": value.as_ref().map(|(_, currency)| *currency),
            "converted_at": c.converted_at,
        }));
    }
    for r in &export.receipts {
        out.push(json!({
            "type": "delivery", "message_id": r.message_id, "code": r.code,
            "state": r.state.as_str(), "error_code": r.error_code, "error_text": r.error_text,
            "carrier": r.carrier, "at": r.at, "received_at": r.received_at,
            "gateway": r.gateway.as_str(),
        }));
    }
    out.extend(webhooks.iter().cloned());
    out
}

/// Every link, raw visit and conversion stored of one subject, and the click webhooks of the
/// workspace that are sent that subject's events (their receivers hold copies), as NDJSON: one
/// object per line, its kind in `type` (`link`, `visit`, `conversion`, `delivery`, `webhook`).
#[utoipa::path(post, path = "/api/v1/subjects/export", tag = "subjects",
    request_body = SubjectSelector,
    responses(
        (status = 200, description = "`application/x-ndjson`: one object per line"),
        (status = 400, description = "`invalid_selector`: a control character, or over 256 characters", body = ErrorBody),
        (status = 422, description = "`invalid_body`: no selector, or two", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
    ))]
pub async fn export_subject(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Json(body): Json<SubjectSelector>,
) -> Result<Response> {
    let selector = body.parse()?;
    let export = service(&state).export(workspace, &selector).await?;
    let mut webhooks = Vec::new();
    if !export.links.is_empty() {
        for hook in state.webhooks.list(workspace).await? {
            let receives = export.links.iter().any(|link| {
                (hook.campaigns.is_empty() && hook.tags.is_empty())
                    || (link.campaign.as_ref()).is_some_and(|c| hook.campaigns.contains(c))
                    || link.tags.iter().any(|t| hook.tags.contains(t))
            });
            if receives {
                let origin = (hook.url.parse::<url::Url>().ok())
                    .map(|url| url.origin().ascii_serialization());
                webhooks.push(json!({
                    "type": "webhook", "id": hook.id, "name": hook.name, "url_origin": origin,
                    "include_bots": hook.include_bots, "delivered": hook.delivered,
                }));
            }
        }
    }
    let mut body = Vec::new();
    for line in lines(&export, &webhooks) {
        serde_json::to_writer(&mut body, &line).map_err(|e| Error::Internal(Box::new(e)))?;
        body.push(b'\n');
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        )],
        body,
    )
        .into_response())
}

/// An erase request as stored: never the ref, only the selector's kind and what was done.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubjectRequestView {
    /// `sr_` and 16 hex digits: the audit row's object.
    pub id: String,
    pub request_id: String,
    /// `ref`, `campaign_ref` or `code`.
    pub selector: String,
    /// `running` (cut short: send it again) or `done`.
    pub state: String,
    /// Links whose ref was replaced by `tombstone`.
    pub links: i64,
    pub visits: i64,
    pub conversions: i64,
    /// What the links' `ref` is now: random, derived from nothing.
    pub tombstone: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<SubjectRequest> for SubjectRequestView {
    fn from(r: SubjectRequest) -> Self {
        let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or_default();
        Self {
            id: r.id,
            request_id: r.key,
            selector: r.selector,
            state: if r.done { "done" } else { "running" }.into(),
            links: r.links,
            visits: r.visits,
            conversions: r.conversions,
            tombstone: r.tombstone,
            created_at: at(r.created_ms),
            finished_at: r.finished_ms.map(at),
        }
    }
}

/// Erases one subject: their visits and conversions deleted (with the visitor-set rows and the
/// per-link rollups of their links), their links kept working with `ref` replaced by a
/// tombstone, and one audit row (`subject.erase`: the selector's kind and the counts). The same
/// `request_id` again answers this request, finishing it first if it was cut short.
#[utoipa::path(post, path = "/api/v1/subjects/erase", tag = "subjects",
    request_body = EraseRequest,
    responses(
        (status = 200, body = SubjectRequestView),
        (status = 400, description = "`invalid_selector`: a control character, or over 256 characters", body = ErrorBody),
        (status = 422, description = "`invalid_body`: no `request_id`, no selector, or two", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB", body = ErrorBody),
        (status = 415, description = "the body is not `application/json`", body = ErrorBody),
    ))]
pub async fn erase_subject(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Recorder(origin): Recorder,
    Json(body): Json<EraseRequest>,
) -> Result<Json<SubjectRequestView>> {
    let (key, selector) = body.parse()?;
    let done = service(&state)
        .erase(workspace, &key, &selector, &origin)
        .await?;
    Ok(Json(done.into()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RequestsQuery {
    /// Requests at most, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SubjectRequests {
    pub requests: Vec<SubjectRequestView>,
}

/// The workspace's erase requests, newest first.
#[utoipa::path(get, path = "/api/v1/subjects/requests", tag = "subjects",
    params(RequestsQuery),
    responses(
        (status = 200, body = SubjectRequests),
        (status = 400, description = "`invalid_query`", body = ErrorBody),
    ))]
pub async fn list_requests(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Query(query): Query<RequestsQuery>,
) -> Result<Json<SubjectRequests>> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(invalid("invalid_query", "limit must be between 1 and 500"));
    }
    let requests = service(&state).requests(workspace, limit).await?;
    Ok(Json(SubjectRequests {
        requests: requests.into_iter().map(Into::into).collect(),
    }))
}
