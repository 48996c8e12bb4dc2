//! `POST /api/v1/links/batch`: many links in one request, for campaigns.
//!
//! The body is a JSON array (at most [`MAX_JSON_ITEMS`](limits::MAX_JSON_ITEMS) items) or an
//! NDJSON stream (`Content-Type: application/x-ndjson`, at most [`MAX_NDJSON_ITEMS`] lines).
//! Each item is what `POST /links` takes and is checked the same way; the answer has one result
//! per item, in order: `{"index":i,"status":201,"link":{...}}` or
//! `{"index":i,"status":422,"error":{...}}`. A bad item never fails the others.
//!
//! Both ways are streamed: the body is read as fast as the client sends it (kept in a spool, see
//! [`spool`] for why), a task cuts it into items and checks them [`CHUNK`](limits::CHUNK) at a
//! time ([`PARALLEL_CHUNKS`](limits::PARALLEL_CHUNKS) chunks on blocking threads), keeping up to
//! [`CHECKED_AHEAD`](limits::CHECKED_AHEAD) checked chunks ready; the writer takes them in groups
//! of up to [`GROUP_CHUNKS`](limits::GROUP_CHUNKS): codes from the issuer's batch reserve, one
//! bulk insert per chunk in one transaction, each chunk's Redis `MULTI` sent while the next
//! chunk is inserted, then the commit (see
//! [`shortlink_core::service::LinkService::create_chunks`]); the next group is prepared meanwhile.
//! A group's results are rendered (on a blocking thread) and sent as soon as it is committed, in
//! order, but never before the whole body has been read:
//! until then up to [`HELD_FRAMES`](limits::HELD_FRAMES) chunks' results wait, and the writing
//! with them. Memory is bounded by the chunks in flight, however long the batch. The sizes are
//! [`limits`]'s.
//!
//! With an `Idempotency-Key`, every link records its item's index; a retry (also after a crash in
//! the middle of the first attempt) answers the items already committed from SQL and creates only
//! the missing ones.

pub(crate) mod body;
mod failure;
mod limits;
pub(crate) mod pipeline;
mod spool;

use super::links::{self, LinkView};
use super::{ApiKeyId, AppState, Budget, DomainContext, Error, ErrorDetail, Recorder, Result};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use body::RawItem;
pub use failure::failure_error;
use futures_util::{stream, StreamExt};
pub use limits::MAX_NDJSON_ITEMS;
use pipeline::{Answer, Checked, Items, Mode};
use serde::Serialize;
use shortlink_core::service::{self, ItemFailure};
use shortlink_model::WorkspaceId;
use std::sync::Arc;

pub fn router() -> Router<AppState> {
    Router::new().route("/links/batch", post(create_batch))
}

const NDJSON: &str = "application/x-ndjson";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Ndjson,
}

/// One item's answer.
#[derive(Serialize)]
struct ItemResult {
    index: i64,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    link: Option<LinkView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorDetail>,
}

/// Create links in bulk: a JSON array (≤ 10,000) or NDJSON (≤ 1,000,000 lines), answered in
/// order, one result per item (NDJSON answers are NDJSON, streamed).
#[utoipa::path(post, path = "/api/v1/links/batch", tag = "links",
    params(("Idempotency-Key" = Option<String>, Header, description = "makes retries safe; 1 to 255 visible ASCII characters", pattern = "^[!-~]{1,255}$")),
    // Items are checked one by one: an item that is not a `CreateLinkRequest` gets its own 422
    // result and the others go ahead, so the body's schema is "an array of anything".
    request_body(content = Vec<serde_json::Value>,
        description = "a JSON array of `CreateLinkRequest` items (at most 10,000), or one item \
            per line with `Content-Type: application/x-ndjson`; an item that is not a valid \
            `CreateLinkRequest` (`[[null, null]]` holds two such items), or whose target a threat \
            feed or the workspace's lists refuse (`unsafe_target`, naming the feed), is answered \
            422 in its own result, the others are created. No schema can say it: an `Idempotency-Key` sent \
            again with another body is 422 `idempotency_key_reused`"),
    responses(
        (status = 200, description = "`{\"results\":[{index, status, link | error}]}`, or one \
            such result per line for NDJSON"),
        (status = 400, body = super::ErrorBody), (status = 401, body = super::ErrorBody),
        (status = 413, description = "more than 10,000 items in a JSON array", body = super::ErrorBody),
        (status = 415, body = super::ErrorBody),
        (status = 422, description = "`invalid_body`: not an array; `idempotency_key_reused`: the \
            Idempotency-Key was used with another request", body = super::ErrorBody),
    ))]
pub async fn create_batch(
    State(state): State<AppState>,
    budget: Budget,
    Recorder(origin): Recorder,
    Extension(api_key): Extension<ApiKeyId>,
    headers: HeaderMap,
    domains: DomainContext,
    body: Body,
) -> Result<Response> {
    let format = format(&headers)?;
    let key = links::idempotency_key(&headers, api_key)?;
    let (mut chunks, body_read) = match format {
        Format::Json => (body::json_chunks(body).await?, None),
        Format::Ndjson => {
            let (chunks, body_read) =
                body::ndjson_chunks(body, body::Framing::Lines, MAX_NDJSON_ITEMS);
            (chunks, Some(body_read))
        }
    };
    let first = chunks.next().await;
    let claim = match &key {
        None => None,
        Some(key) => {
            let canonical: Vec<Vec<u8>> = first
                .iter()
                .flat_map(|chunk| chunk.items.iter())
                .map(body::canonical)
                .collect();
            let hash = service::request_hash("batch", canonical.iter().map(Vec::as_slice));
            Some(state.links.claim(key, &hash).await?)
        }
    };
    let items = Arc::new(LinkItems {
        state: state.clone(),
        workspace: budget.workspace(),
        domains: domains.clone(),
        format,
    });
    let chunks = stream::iter(first).chain(chunks);
    // One row for the whole request, with what it created and its key.
    let mut audit = origin.entry("links.batch", "", shortlink_store::audit::Changes::new());
    audit.idempotency_key = headers
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let job = Arc::new(service::Job::new(service::Authority::key(
        budget.workspace(),
        api_key.0,
    )));
    let results = pipeline::run(
        items,
        (state, budget, Some(audit)),
        domains,
        chunks,
        (claim, job),
        Mode::Write,
    );
    if let Some(body_read) = body_read {
        body_in(body_read).await?;
    }
    let (content_type, body) = match format {
        Format::Ndjson => (NDJSON, Body::from_stream(results)),
        Format::Json => {
            let open = stream::once(async { Ok(b"{\"results\":[".to_vec()) });
            let close = stream::once(async { Ok(b"]}\n".to_vec()) });
            (
                "application/json",
                Body::from_stream(open.chain(results).chain(close)),
            )
        }
    };
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response())
}

/// Waits until the body is in: the answer must not start before (nginx would stop passing the
/// rest of it, see [`spool`]).
pub(crate) async fn body_in(
    body_read: tokio::sync::oneshot::Receiver<body::SpoolResult>,
) -> Result<()> {
    match body_read.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(body_error(error)),
        Err(_) => Err(Error::Internal("the body reader stopped".into())),
    }
}

/// The answer to a body that could not be read in full. Groups already committed stay (each
/// is all or nothing); nothing was acknowledged, and a retry with the same `Idempotency-Key`
/// answers them without creating them twice.
fn body_error(error: spool::SpoolError) -> Error {
    match error {
        spool::SpoolError::Body(_) => Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "incomplete_body",
            message: "the request body broke off before its end; retry with the same \
                      Idempotency-Key to finish it"
                .into(),
        },
        spool::SpoolError::File(error) => Error::Internal(Box::new(error)),
    }
}

fn format(headers: &HeaderMap) -> Result<Format> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "application/json" => Ok(Format::Json),
        NDJSON | "application/jsonl" => Ok(Format::Ndjson),
        _ => Err(Error::Request {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: "unsupported_media_type",
            message: "send a JSON array as `application/json` or one item per line as \
                      `application/x-ndjson`"
                .into(),
        }),
    }
}

/// Batch items: create requests, answered `{index, status, link | error}`.
struct LinkItems {
    state: AppState,
    workspace: WorkspaceId,
    domains: DomainContext,
    format: Format,
}

impl Items for LinkItems {
    type Kept = ();
    const VIA: &'static str = "batch";

    fn check(&self, _index: i64, item: RawItem) -> Checked<()> {
        match body::parse(item).and_then(|request| {
            links::new_link(&self.state, self.workspace, &self.domains, request)
        }) {
            Ok(new) => Checked::Valid(new, ()),
            Err(error) => Checked::Refused(error, None),
        }
    }

    fn render(&self, out: &mut Vec<u8>, index: i64, answer: Answer<()>) {
        let result = match answer {
            Answer::Refused(error, _) => error_result(index, &error),
            Answer::Link { link, status, .. } => ItemResult {
                index,
                status: status.as_u16(),
                link: Some(LinkView::new(*link, &self.domains)),
                error: None,
            },
            // Batches always write.
            Answer::Planned(()) => error_result(index, &failure_error(ItemFailure::Internal)),
        };
        match self.format {
            Format::Json if index > 0 => out.push(b','),
            Format::Json | Format::Ndjson => {}
        }
        if serde_json::to_writer(&mut *out, &result).is_err() {
            out.extend_from_slice(b"{}");
        }
        if self.format == Format::Ndjson {
            out.push(b'\n');
        }
    }
}

fn error_result(index: i64, error: &Error) -> ItemResult {
    shortlink_core::metrics::api_error(error.code());
    ItemResult {
        index,
        status: error.status_code().as_u16(),
        link: None,
        error: Some(ErrorDetail {
            code: error.code().to_owned(),
            message: error.message(),
        }),
    }
}
