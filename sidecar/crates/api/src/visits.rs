//! `GET /api/v1/visits`: the resumable visit feed, for pulling every click into a warehouse. The
//! same events as the click webhooks, in the same order, as NDJSON.

use super::{AppState, Error, ErrorBody, InWorkspace, Query, Result};
use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;
use shortlink_webhooks::feed::FeedFilter;
use shortlink_webhooks::Cursor;
use utoipa::IntoParams;

pub fn router() -> Router<AppState> {
    Router::new().route("/visits", get(visit_feed))
}

/// The cursor to resume from after this page (also each event's `cursor`).
pub const CURSOR_HEADER: &str = "x-shortlink-cursor";

const DEFAULT_LIMIT: u32 = 1000;
const MAX_LIMIT: u32 = 10_000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FeedParams {
    /// Resume after this cursor (an event's `cursor`, or the previous page's
    /// `X-Shortlink-Cursor`); from the start of the feed without it.
    #[param(pattern = "^[0-9]{1,18}-[0-9]{1,18}$")]
    pub after: Option<String>,
    /// Only visits of links in this campaign.
    pub campaign: Option<String>,
    /// Only visits of links with this recipient reference.
    #[serde(rename = "ref")]
    #[param(rename = "ref")]
    pub recipient_ref: Option<String>,
    /// Events at most, 1..=10000 (default 1000).
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<u32>,
}

/// Stored visits in the order they were stored, one JSON object (`FeedEvent`) per line. A page
/// may hold fewer than `limit` events (the end of the feed, or a filter that skipped many): go on
/// from `X-Shortlink-Cursor` until a page is empty. A visit stored later never appears before
/// the cursor of one already read.
#[utoipa::path(get, path = "/api/v1/visits", tag = "visits", params(FeedParams),
    responses(
        (status = 200, description = "`application/x-ndjson`: one `FeedEvent` per line",
            headers(("X-Shortlink-Cursor" = String, description = "resume from here"))),
        (status = 400, description = "`invalid_cursor`, `invalid_query`", body = ErrorBody),
    ))]
pub async fn visit_feed(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Query(params): Query<FeedParams>,
) -> Result<Response> {
    let after = match params.after.as_deref() {
        None => Cursor::default(),
        Some(text) => text.parse().map_err(|()| Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_cursor",
            message: "after is not a cursor from this API".into(),
        })?,
    };
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::bad_query(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    let mut filter = FeedFilter::of(workspace);
    filter.campaigns = params.campaign.into_iter().collect();
    filter.recipient_ref = params.recipient_ref;
    filter.include_bots = true;
    let page = state.webhooks.feed(after, &filter, limit as usize).await?;
    let mut body = Vec::with_capacity(page.events.len() * 512);
    for event in &page.events {
        serde_json::to_writer(&mut body, event).map_err(|e| Error::Internal(Box::new(e)))?;
        body.push(b'\n');
    }
    let cursor =
        HeaderValue::from_str(&page.next.to_string()).map_err(|e| Error::Internal(Box::new(e)))?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-ndjson"),
            ),
            (HeaderName::from_static(CURSOR_HEADER), cursor),
        ],
        body,
    )
        .into_response())
}
