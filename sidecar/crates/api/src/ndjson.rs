//! The ingests that take one JSON object or NDJSON (conversions, delivery receipts): the body read
//! by its media type, NDJSON line by line (whole lines cut from the stream as it arrives, bounded
//! in number and length, blank lines skipped), and the NDJSON answer.

use crate::{Error, Result};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::StreamExt;

pub const CONTENT_TYPE: &str = "application/x-ndjson";

/// How much NDJSON an ingest reads: lines, bytes a line and bytes in all (the body's whole size,
/// blank lines included, counted as it arrives: a body past it is refused once that much has
/// been read, never held).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub lines: usize,
    pub line_bytes: usize,
    pub body_bytes: usize,
}

/// An ingest's body.
pub enum Ingest {
    /// `application/json`: one object.
    One(Bytes),
    /// NDJSON: its non-blank lines.
    Lines(Vec<Vec<u8>>),
}

/// The body as its `Content-Type` says: one JSON object (413 past the API's body limit), or
/// NDJSON lines (see [`read_lines`]); 415 for anything else.
pub async fn ingest(headers: &HeaderMap, body: Body, limits: Limits) -> Result<Ingest> {
    match media_type(headers).as_deref() {
        Some("application/json") => axum::body::to_bytes(body, crate::MAX_BODY_BYTES)
            .await
            .map(Ingest::One)
            .map_err(|_| Error::Request {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                code: "payload_too_large",
                message: format!("a JSON body is at most {} bytes", crate::MAX_BODY_BYTES),
            }),
        Some(CONTENT_TYPE) => Ok(Ingest::Lines(read_lines(body, limits).await?)),
        _ => Err(Error::Request {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: "unsupported_media_type",
            message: format!("send application/json or {CONTENT_TYPE}"),
        }),
    }
}

/// An NDJSON answer of these lines.
pub fn answer(lines: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(lines));
    (response.headers_mut()).insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// The request's media type, lower-case, without parameters.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    (headers.get(header::CONTENT_TYPE))
        .and_then(|value| value.to_str().ok())
        .map(|value| {
            (value.split(';').next().unwrap_or(""))
                .trim()
                .to_ascii_lowercase()
        })
}

/// The body's non-blank lines, trimmed; 413 past the limits' lines, a line's bytes or the body's.
pub async fn read_lines(body: Body, limits: Limits) -> Result<Vec<Vec<u8>>> {
    let Limits {
        lines: max_lines,
        line_bytes: max_bytes,
        body_bytes,
    } = limits;
    let too_much = |message: String| Error::Request {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        code: "payload_too_large",
        message,
    };
    let mut lines = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut read = 0usize;
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| Error::Request {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_body",
            message: "the body could not be read".into(),
        })?;
        read = read.saturating_add(chunk.len());
        if read > body_bytes {
            return Err(too_much(format!("the body is at most {body_bytes} bytes")));
        }
        pending.extend_from_slice(&chunk);
        // Cut every whole line out of what arrived, then keep only the rest (one copy per
        // chunk, not one per line).
        let mut start = 0;
        while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
            push(&mut lines, &pending[start..start + end], max_bytes).map_err(too_much)?;
            start += end + 1;
        }
        pending.drain(..start);
        if pending.len() > max_bytes {
            return Err(too_much(format!("a line is at most {max_bytes} bytes")));
        }
        if lines.len() > max_lines {
            return Err(too_much(format!("at most {max_lines} lines")));
        }
    }
    push(&mut lines, &pending, max_bytes).map_err(too_much)?;
    if lines.len() > max_lines {
        return Err(too_much(format!("at most {max_lines} lines")));
    }
    Ok(lines)
}

fn push(lines: &mut Vec<Vec<u8>>, line: &[u8], max_bytes: usize) -> Result<(), String> {
    let text = line.trim_ascii();
    if text.len() > max_bytes {
        return Err(format!("a line is at most {max_bytes} bytes"));
    }
    if !text.is_empty() {
        lines.push(text.to_vec());
    }
    Ok(())
}
