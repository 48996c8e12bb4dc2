//! The ingests that take one JSON object or NDJSON (conversions, delivery receipts): the body read
//! by its media type, NDJSON line by line (whole lines cut from the stream as it arrives, bounded
//! in number and length, blank lines skipped), and the NDJSON answer.

use crate::{Error, ErrorDetail, Result};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::StreamExt;
use serde::ser::{Serialize, SerializeMap, Serializer};

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
/// Each line's answer, in order: the store's for a line that passed the checks (`stored` holds
/// one per such line, in their order), the check's refusal for the others.
pub fn in_line_order<C, R>(
    checked: Vec<Result<C>>,
    stored: impl IntoIterator<Item = Result<R>>,
) -> Result<Vec<Result<R>>> {
    let mut stored = stored.into_iter();
    (checked.into_iter())
        .map(|checked| match checked {
            Ok(_) => stored
                .next()
                .ok_or_else(|| Error::Internal("a batch answer is missing".into())),
            Err(error) => Ok(Err(error)),
        })
        .collect()
}

/// One line of an NDJSON answer, `{index, status, <item> | error}`: 201 for an item stored now,
/// 200 for one an earlier request stored (`duplicate`), the error's status otherwise. Written to
/// `out` with its newline; returns the status.
pub fn write_line<T: Serialize>(
    out: &mut Vec<u8>,
    index: i64,
    item_name: &'static str,
    answer: Result<(T, bool)>,
) -> Result<u16> {
    let line = match answer {
        Ok((item, duplicate)) => Line {
            index,
            status: if duplicate { 200 } else { 201 },
            item: Some((item_name, item)),
            error: None,
        },
        Err(error) => Line {
            index,
            status: error.status_code().as_u16(),
            item: None,
            error: Some(ErrorDetail {
                code: error.code().to_owned(),
                message: error.message(),
            }),
        },
    };
    serde_json::to_writer(&mut *out, &line).map_err(|error| Error::Internal(Box::new(error)))?;
    out.push(b'\n');
    Ok(line.status)
}

struct Line<T> {
    index: i64,
    status: u16,
    item: Option<(&'static str, T)>,
    error: Option<ErrorDetail>,
}

impl<T: Serialize> Serialize for Line<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("index", &self.index)?;
        map.serialize_entry("status", &self.status)?;
        if let Some((name, item)) = &self.item {
            map.serialize_entry(name, item)?;
        }
        if let Some(error) = &self.error {
            map.serialize_entry("error", error)?;
        }
        map.end()
    }
}

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
