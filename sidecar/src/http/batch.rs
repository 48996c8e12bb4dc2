//! `POST /api/v1/links/batch`: many links in one request, for campaigns.
//!
//! The body is a JSON array (at most [`MAX_JSON_ITEMS`] items) or an NDJSON stream
//! (`Content-Type: application/x-ndjson`, at most [`MAX_NDJSON_ITEMS`] lines). Each item is what
//! `POST /links` takes and is checked the same way; the answer has one result per item, in order:
//! `{"index":i,"status":201,"link":{...}}` or `{"index":i,"status":422,"error":{...}}`. A bad item
//! never fails the others.
//!
//! Both ways are streamed: a task reads and checks items [`CHUNK`] at a time ([`PARALLEL_CHUNKS`]
//! chunks on blocking threads), keeping up to [`CHECKED_AHEAD`] checked chunks ready; the writer
//! takes them in groups of up to [`GROUP_CHUNKS`]: codes from the issuer's batch reserve, one
//! bulk insert per chunk in one transaction, each chunk's Redis `MULTI` sent while the next
//! chunk is inserted, then the commit (see [`crate::service::LinkService::create_chunks`]); the
//! next group is prepared meanwhile. A group's results are rendered (on a blocking thread) and
//! sent as soon as it is committed, in order. Memory is bounded by the chunks in flight, however
//! long the batch.
//!
//! With an `Idempotency-Key`, every link records its item's index; a retry (also after a crash in
//! the middle of the first attempt) answers the items already committed from SQL and creates only
//! the missing ones.

use super::links::{self, CreateLinkRequest, LinkView};
use super::{ApiKeyId, AppState, DomainContext, Error, ErrorDetail, Result};
use crate::service::{self, Claim, ItemFailure, ItemOutcome};
use crate::storage::Backend;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
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

/// One item as read, not yet parsed.
enum RawItem {
    Line(Vec<u8>),
    Value(serde_json::Value),
    /// A line longer than [`MAX_LINE_BYTES`].
    TooLong,
    /// The line after the last one allowed.
    TooMany,
}

struct RawChunk {
    /// Index of the first item.
    first: i64,
    items: Vec<RawItem>,
}

type ChunkStream = Pin<Box<dyn Stream<Item = RawChunk> + Send>>;

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
    params(("Idempotency-Key" = Option<String>, Header, description = "makes retries safe")),
    request_body(content = Vec<CreateLinkRequest>,
        description = "a JSON array, or one item per line with `Content-Type: application/x-ndjson`"),
    responses(
        (status = 200, description = "`{\"results\":[{index, status, link | error}]}`, or one \
            such result per line for NDJSON"),
        (status = 400, body = super::ErrorBody), (status = 401, body = super::ErrorBody),
        (status = 413, description = "more than 10,000 items in a JSON array", body = super::ErrorBody),
        (status = 415, body = super::ErrorBody),
        (status = 422, description = "not an array, or the Idempotency-Key was used with another \
            request", body = super::ErrorBody),
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
    let mut chunks: ChunkStream = match format {
        Format::Json => json_chunks(body).await?,
        Format::Ndjson => ndjson_chunks(body),
    };
    let first = chunks.next().await;
    let claim = match &key {
        None => None,
        Some(key) => {
            let canonical: Vec<Vec<u8>> = first
                .iter()
                .flat_map(|chunk| chunk.items.iter())
                .map(canonical)
                .collect();
            let hash = service::request_hash("batch", canonical.iter().map(Vec::as_slice));
            Some(state.links.claim(key, &hash).await?)
        }
    };
    // Chunks are checked in parallel tasks, then written in groups of those ready (one
    // transaction each, see `LinkService::create_chunks`), then answered in order.
    let parallel_groups = match state.links.storage().backend() {
        Backend::Sqlite => PARALLEL_GROUPS_SQLITE,
        Backend::Postgres => PARALLEL_GROUPS,
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

/// A JSON array body, read whole (it is bounded), cut into chunks.
async fn json_chunks(body: Body) -> Result<ChunkStream> {
    let bytes = axum::body::to_bytes(body, MAX_JSON_BYTES)
        .await
        .map_err(|_| Error::Request {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "payload_too_large",
            message: format!("a JSON batch body is at most {MAX_JSON_BYTES} bytes; send NDJSON"),
        })?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|error| Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "malformed_json",
            message: error.to_string(),
        })?;
    let serde_json::Value::Array(items) = value else {
        return Err(Error::invalid(
            "invalid_body",
            "a JSON batch is an array of link objects",
        ));
    };
    if items.len() > MAX_JSON_ITEMS {
        return Err(Error::Request {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "batch_too_large",
            message: format!(
                "a JSON batch has at most {MAX_JSON_ITEMS} items; send larger ones as NDJSON"
            ),
        });
    }
    let mut chunks = Vec::with_capacity(items.len().div_ceil(CHUNK));
    let mut items = items.into_iter().map(RawItem::Value).peekable();
    let mut first = 0i64;
    while items.peek().is_some() {
        let chunk: Vec<RawItem> = items.by_ref().take(CHUNK).collect();
        let len = chunk.len() as i64;
        chunks.push(RawChunk {
            first,
            items: chunk,
        });
        first += len;
    }
    Ok(Box::pin(stream::iter(chunks)))
}

/// An NDJSON body, read as it arrives by a task that hands over one chunk at a time (at most
/// two waiting), so a slow writer slows the reading rather than filling memory.
fn ndjson_chunks(body: Body) -> ChunkStream {
    let (sender, receiver) = tokio::sync::mpsc::channel::<RawChunk>(2);
    tokio::spawn(async move {
        let mut data = body.into_data_stream();
        let mut lines = LineSplitter::default();
        let mut items = Vec::with_capacity(CHUNK);
        let mut first = 0i64;
        let mut count = 0usize;
        let mut done = false;
        while !done {
            let frame = match data.next().await {
                Some(Ok(frame)) => Some(frame),
                Some(Err(error)) => {
                    tracing::debug!(%error, "batch body read failed");
                    return;
                }
                None => None,
            };
            let mut read = Vec::new();
            match &frame {
                Some(frame) => lines.feed(frame, &mut read),
                None => {
                    lines.finish(&mut read);
                    done = true;
                }
            }
            for item in read {
                if count == MAX_NDJSON_ITEMS {
                    items.push(RawItem::TooMany);
                    done = true;
                    break;
                }
                count += 1;
                items.push(item);
                if items.len() == CHUNK {
                    let chunk = RawChunk {
                        first,
                        items: std::mem::replace(&mut items, Vec::with_capacity(CHUNK)),
                    };
                    first += CHUNK as i64;
                    if sender.send(chunk).await.is_err() {
                        return;
                    }
                }
            }
        }
        if !items.is_empty() {
            let _ = sender.send(RawChunk { first, items }).await;
        }
    });
    Box::pin(stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    }))
}

/// Cuts a byte stream into non-blank lines of at most [`MAX_LINE_BYTES`].
#[derive(Default)]
struct LineSplitter {
    pending: Vec<u8>,
    overlong: bool,
}

impl LineSplitter {
    fn feed(&mut self, mut data: &[u8], out: &mut Vec<RawItem>) {
        while let Some(at) = data.iter().position(|&b| b == b'\n') {
            self.push(&data[..at]);
            self.end_line(out);
            data = &data[at + 1..];
        }
        self.push(data);
    }

    fn finish(&mut self, out: &mut Vec<RawItem>) {
        self.end_line(out);
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.overlong {
            return;
        }
        if self.pending.len() + bytes.len() > MAX_LINE_BYTES {
            self.overlong = true;
            self.pending = Vec::new();
        } else {
            self.pending.extend_from_slice(bytes);
        }
    }

    fn end_line(&mut self, out: &mut Vec<RawItem>) {
        if std::mem::take(&mut self.overlong) {
            out.push(RawItem::TooLong);
        } else if !self.pending.trim_ascii().is_empty() {
            out.push(RawItem::Line(std::mem::take(&mut self.pending)));
        } else {
            self.pending.clear();
        }
    }
}

/// An item as a create request, or why it cannot be one.
fn parse(item: RawItem) -> Result<CreateLinkRequest> {
    match item {
        RawItem::Line(line) => serde_json::from_slice(&line).map_err(item_json_error),
        RawItem::Value(value) => serde_json::from_value(value).map_err(item_json_error),
        RawItem::TooLong => Err(Error::Request {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "item_too_large",
            message: format!("an NDJSON line is at most {MAX_LINE_BYTES} bytes"),
        }),
        RawItem::TooMany => Err(Error::Request {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "batch_too_large",
            message: format!("a batch has at most {MAX_NDJSON_ITEMS} lines; the rest was not read"),
        }),
    }
}

fn item_json_error(error: serde_json::Error) -> Error {
    use serde_json::error::Category;
    let (status, code) = match error.classify() {
        Category::Data => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body"),
        _ => (StatusCode::BAD_REQUEST, "malformed_json"),
    };
    Error::Request {
        status,
        code,
        message: error.to_string(),
    }
}

/// What identifies an item for its idempotency key: the parsed request in canonical form, or
/// the reason it could not be parsed.
fn canonical(item: &RawItem) -> Vec<u8> {
    let parsed = match item {
        RawItem::Line(line) => serde_json::from_slice::<CreateLinkRequest>(line).ok(),
        RawItem::Value(value) => serde_json::from_value::<CreateLinkRequest>(value.clone()).ok(),
        RawItem::TooLong | RawItem::TooMany => None,
    };
    match parsed {
        Some(request) => serde_json::to_vec(&request).unwrap_or_default(),
        None => match item {
            RawItem::Line(line) => [b"!".as_slice(), line].concat(),
            RawItem::Value(value) => [b"!".as_slice(), value.to_string().as_bytes()].concat(),
            RawItem::TooLong => b"!too long".to_vec(),
            RawItem::TooMany => b"!too many".to_vec(),
        },
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
        match parse(item).and_then(|request| links::new_link(state, domains, request)) {
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
                    index,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[&[u8]]) -> Vec<String> {
        let mut splitter = LineSplitter::default();
        let mut out = Vec::new();
        for part in input {
            splitter.feed(part, &mut out);
        }
        splitter.finish(&mut out);
        out.into_iter()
            .map(|item| match item {
                RawItem::Line(line) => String::from_utf8(line).unwrap(),
                RawItem::TooLong => "<too long>".into(),
                _ => "<other>".into(),
            })
            .collect()
    }

    #[test]
    fn ndjson_lines_across_frames() {
        assert_eq!(
            lines(&[b"{\"a\"", b":1}\n\n  \n{\"b\":2}\r\n{\"c\"", b":3}"]),
            ["{\"a\":1}", "{\"b\":2}\r", "{\"c\":3}"]
        );
        let long = vec![b'x'; MAX_LINE_BYTES + 1];
        assert_eq!(
            lines(&[b"{}\n", &long, b"\n{}"]),
            ["{}", "<too long>", "{}"]
        );
    }
}
