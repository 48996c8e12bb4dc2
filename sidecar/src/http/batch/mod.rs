//! `POST /api/v1/links/batch`: many links in one request, for campaigns.
//!
//! The body is a JSON array (at most [`MAX_JSON_ITEMS`] items) or an NDJSON stream
//! (`Content-Type: application/x-ndjson`, at most [`MAX_NDJSON_ITEMS`] lines). Each item is what
//! `POST /links` takes and is checked the same way; the answer has one result per item, in order:
//! `{"index":i,"status":201,"link":{...}}` or `{"index":i,"status":422,"error":{...}}`. A bad item
//! never fails the others.
//!
//! Both ways are streamed: the body is read as fast as the client sends it (kept in a spool, see
//! [`spool`] for why), a task cuts it into items and checks them [`CHUNK`] at a time ([`PARALLEL_CHUNKS`]
//! chunks on blocking threads), keeping up to [`CHECKED_AHEAD`] checked chunks ready; the writer
//! takes them in groups of up to [`GROUP_CHUNKS`]: codes from the issuer's batch reserve, one
//! bulk insert per chunk in one transaction, each chunk's Redis `MULTI` sent while the next
//! chunk is inserted, then the commit (see [`crate::service::LinkService::create_chunks`]); the
//! next group is prepared meanwhile. A group's results are rendered (on a blocking thread) and
//! sent as soon as it is committed, in order, but never before the whole body has been read:
//! until then up to [`HELD_FRAMES`] chunks' results wait, and the writing with them. Memory is
//! bounded by the chunks in flight, however long the batch.
//!
//! With an `Idempotency-Key`, every link records its item's index; a retry (also after a crash in
//! the middle of the first attempt) answers the items already committed from SQL and creates only
//! the missing ones.

mod body;
mod spool;

use super::links::{self, LinkView};
use super::{ApiKeyId, AppState, DomainContext, Error, ErrorDetail, Result};
use crate::service::{self, Claim, ItemFailure, ItemOutcome};
use crate::storage::Backend;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use body::RawChunk;
use futures_util::{stream, Stream, StreamExt};
use serde::Serialize;
use std::pin::Pin;

pub fn router() -> Router<AppState> {
    Router::new().route("/links/batch", post(create_batch))
}

/// Items per chunk: one bulk insert, one Redis `MULTI`.
pub const CHUNK: usize = 1000;
/// Chunks checked (parsed, validated) at once, in parallel blocking tasks: a few, as each
/// thread brings its own allocator arena (peak memory), and checking is not the bottleneck.
pub const PARALLEL_CHUNKS: usize = 4;
/// Most chunks per group: one transaction and one response frame. A group takes the chunks
/// already checked, so a small batch never waits for more.
pub const GROUP_CHUNKS: usize = 8;
/// Checked chunks kept waiting for the writer: a group's worth, so a full group is ready when
/// the previous one is handed to its transaction.
pub const CHECKED_AHEAD: usize = GROUP_CHUNKS;
/// Groups written at once on PostgreSQL (concurrent transactions). Two: one commits while the
/// other inserts; with four, full groups (8,000 rows each) took more memory and were no faster
/// (the server is the bottleneck).
pub const PARALLEL_GROUPS: usize = 2;
/// Groups written at once on SQLite: two. Their transactions queue for the one write
/// connection, so the second only gets ready (plan, codes, rows) while the first writes, and
/// starts inserting the moment it commits. More would only wait longer, and under load could
/// outwait the pool's acquire timeout (503).
pub const PARALLEL_GROUPS_SQLITE: usize = 2;
/// Chunks' results held while the body is still being read (about 400 KB each): the writing
/// waits once they are full, the reading of the body does not.
pub const HELD_FRAMES: usize = 2 * GROUP_CHUNKS;
/// Groups rendered at once (after their commit).
const PARALLEL_RENDERS: usize = 2;
/// Room reserved per rendered result: a created link's NDJSON line is ~400 bytes (the bench's
/// items: 404 with the newline, and a short URL adds its length), so it is rarely outgrown.
const RESULT_BYTES: usize = 512;
/// Most items in a JSON array body.
pub const MAX_JSON_ITEMS: usize = 10_000;
/// Most lines in an NDJSON body.
pub const MAX_NDJSON_ITEMS: usize = 1_000_000;
/// Largest JSON array body: the item limit times a generous item.
pub const MAX_JSON_BYTES: usize = 80 * 1024 * 1024;
/// Longest NDJSON line (one item).
pub const MAX_LINE_BYTES: usize = super::MAX_BODY_BYTES;

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
        description = "a JSON array of `CreateLinkRequest` items, or one item per line with \
            `Content-Type: application/x-ndjson`; an item that is not a valid `CreateLinkRequest` \
            is answered 422 in its own result, the others are created"),
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
            let (chunks, body_read) = body::ndjson_chunks(body);
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
    // Chunks are checked in parallel tasks, then written in groups of those ready (one
    // transaction each, see `LinkService::create_chunks`), then answered in order.
    let parallel_groups = match state.links.storage().backend() {
        Backend::Sqlite => PARALLEL_GROUPS_SQLITE,
        Backend::Postgres | Backend::Mysql => PARALLEL_GROUPS,
    };
    let checked = check_ahead(
        stream::iter(first).chain(chunks),
        state.clone(),
        domains.clone(),
    );
    let writer = state;
    let results = checked
        .ready_chunks(GROUP_CHUNKS)
        .map(move |group| tokio::spawn(write_group(writer.clone(), group, claim)))
        .buffered(parallel_groups)
        .map(move |written| {
            let domains = domains.clone();
            tokio::task::spawn_blocking(move || {
                written
                    .and_then(|group| group)
                    .map(|group| render_group(group, &domains, format))
            })
        })
        .buffered(PARALLEL_RENDERS)
        .flat_map(|joined| {
            stream::iter(match joined {
                Ok(Ok(frames)) => frames.into_iter().map(Ok).collect(),
                Ok(Err(error)) | Err(error) => {
                    tracing::error!(%error, "batch chunk task failed");
                    vec![Err(std::io::Error::other("batch chunk failed"))]
                }
            })
        });
    let results = run_ahead(results, HELD_FRAMES);
    if let Some(body_read) = body_read {
        // The answer starts once the body is in (nginx would stop passing the rest of it).
        match body_read.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(body_error(error)),
            Err(_) => return Err(Error::Internal("the batch body reader stopped".into())),
        }
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

/// Drives `results` in a task of its own, `held` items ahead of whoever reads them: the batch
/// goes on being written while its answer cannot start yet, up to that many results.
fn run_ahead<T: Send + 'static>(
    results: impl Stream<Item = T> + Send + 'static,
    held: usize,
) -> impl Stream<Item = T> + Send + 'static {
    let (sender, receiver) = tokio::sync::mpsc::channel(held);
    tokio::spawn(async move {
        let mut results = std::pin::pin!(results);
        while let Some(result) = results.next().await {
            if sender.send(result).await.is_err() {
                // The answer was dropped (client gone): stop writing.
                return;
            }
        }
    });
    stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|result| (result, receiver))
    })
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
                      Idempotency-Key to finish the batch"
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

/// Checks chunks in parallel tasks, ahead of the writer: a task pulls the body's chunks and
/// keeps up to [`CHECKED_AHEAD`] checked ones waiting, so while a group is written the next one
/// is read and checked, and the writer finds a full group ready. Driven by the writer's pulls
/// alone, checking would only start on the chunks the body reader had ready, and groups would
/// stay small (more, costlier commits).
fn check_ahead(
    chunks: impl Stream<Item = RawChunk> + Send + 'static,
    state: AppState,
    domains: DomainContext,
) -> Pin<Box<dyn Stream<Item = CheckResult> + Send>> {
    let (sender, receiver) = tokio::sync::mpsc::channel::<CheckResult>(CHECKED_AHEAD);
    tokio::spawn(async move {
        let mut checked = std::pin::pin!(chunks
            .map(move |chunk| {
                let (state, domains) = (state.clone(), domains.clone());
                tokio::task::spawn_blocking(move || check_chunk(&state, &domains, chunk))
            })
            .buffered(PARALLEL_CHUNKS));
        while let Some(chunk) = checked.next().await {
            if sender.send(chunk).await.is_err() {
                // The answer was dropped (client gone): stop reading.
                return;
            }
        }
    });
    Box::pin(stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    }))
}

type CheckResult = std::result::Result<CheckedChunk, tokio::task::JoinError>;

/// A chunk after checking: every item's index with its verdict, and the valid items.
struct CheckedChunk {
    checked: Vec<(i64, std::result::Result<(), Error>)>,
    valid: Vec<(i64, service::NewLink)>,
}

/// Parses and validates a chunk's items.
fn check_chunk(state: &AppState, domains: &DomainContext, chunk: RawChunk) -> CheckedChunk {
    let mut checked = Vec::with_capacity(chunk.items.len());
    let mut valid = Vec::with_capacity(chunk.items.len());
    for (offset, item) in chunk.items.into_iter().enumerate() {
        let index = chunk.first + offset as i64;
        match body::parse(item).and_then(|request| links::new_link(state, domains, request)) {
            Ok(new) => {
                valid.push((index, new));
                checked.push((index, Ok(())));
            }
            Err(error) => checked.push((index, Err(error))),
        }
    }
    CheckedChunk { checked, valid }
}

/// A written group: per chunk, the checked items and the outcomes of the valid ones.
type WrittenGroup = Vec<(
    Vec<(i64, std::result::Result<(), Error>)>,
    Vec<(i64, ItemOutcome)>,
)>;

/// Writes a group of checked chunks in one transaction. A chunk task that failed fails the
/// answer (the body stream breaks off).
async fn write_group(
    state: AppState,
    group: Vec<CheckResult>,
    claim: Option<Claim>,
) -> std::result::Result<WrittenGroup, tokio::task::JoinError> {
    let mut checked = Vec::with_capacity(group.len());
    let mut valid = Vec::with_capacity(group.len());
    for chunk in group {
        let chunk = chunk?;
        checked.push(chunk.checked);
        valid.push(chunk.valid);
    }
    let outcomes = state.links.create_chunks(valid, claim).await;
    Ok(checked.into_iter().zip(outcomes).collect())
}

/// Every item's result of a written group, in order: one frame per chunk. One buffer for the
/// whole group (400 bytes reserved a result) outgrew its estimate and doubled while the old
/// one was still held: 9.6 MB at once for 8,000 results, twice over with two renders in
/// flight, the largest transient allocation of a batch (heaptrack).
fn render_group(group: WrittenGroup, domains: &DomainContext, format: Format) -> Vec<Vec<u8>> {
    group
        .into_iter()
        .map(|(checked, outcomes)| {
            let mut out = Vec::with_capacity(checked.len() * RESULT_BYTES);
            render(&mut out, checked, outcomes, domains, format);
            out
        })
        .collect()
}

/// Appends the results of a chunk's items.
fn render(
    out: &mut Vec<u8>,
    checked: Vec<(i64, std::result::Result<(), Error>)>,
    outcomes: Vec<(i64, ItemOutcome)>,
    domains: &DomainContext,
    format: Format,
) {
    let mut outcomes = outcomes.into_iter();
    for (index, checked) in checked {
        let result = match checked {
            Err(error) => error_result(index, &error),
            Ok(()) => match outcomes.next() {
                Some((_, ItemOutcome::Created(link))) => ItemResult {
                    index: {
                        crate::metrics::links_created("batch", 1);
                        domains.count_issued(&link.code, link.campaign.as_deref());
                        index
                    },
                    status: StatusCode::CREATED.as_u16(),
                    link: Some(LinkView::new(*link, domains)),
                    error: None,
                },
                Some((_, ItemOutcome::Existing(link))) => ItemResult {
                    index,
                    status: StatusCode::OK.as_u16(),
                    link: Some(LinkView::new(*link, domains)),
                    error: None,
                },
                Some((_, ItemOutcome::Failed(failure))) => {
                    error_result(index, &failure_error(failure))
                }
                None => error_result(index, &failure_error(ItemFailure::Internal)),
            },
        };
        match format {
            Format::Ndjson => {}
            Format::Json if index > 0 => out.push(b','),
            Format::Json => {}
        }
        if serde_json::to_writer(&mut *out, &result).is_err() {
            out.extend_from_slice(b"{}");
        }
        if format == Format::Ndjson {
            out.push(b'\n');
        }
    }
}

fn error_result(index: i64, error: &Error) -> ItemResult {
    crate::metrics::api_error(error.code());
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

/// The error a failed item answers.
pub(crate) fn failure_error(failure: ItemFailure) -> Error {
    let (status, code, message) = match failure {
        ItemFailure::CodeTaken => return Error::CodeTaken,
        ItemFailure::IdempotencyMismatch => (
            StatusCode::CONFLICT,
            "idempotency_mismatch",
            "this item differs from the one sent first with this Idempotency-Key",
        ),
        ItemFailure::RedisUnavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "redis_unavailable",
            "redis is unavailable, this item was not stored; retry later",
        ),
        ItemFailure::DatabaseUnavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            "the database is unavailable, this item was not stored; retry later",
        ),
        ItemFailure::CodesExhausted => (
            StatusCode::SERVICE_UNAVAILABLE,
            "codes_exhausted",
            "no generated codes are left at this code length",
        ),
        ItemFailure::Internal => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        ),
    };
    Error::Request {
        status,
        code,
        message: message.into(),
    }
}
