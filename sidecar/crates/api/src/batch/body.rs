//! Reading a batch body into chunks of raw items: a JSON array read whole, or NDJSON lines
//! read as they arrive (through a [`spool`]).

use super::limits::{CHUNK, MAX_JSON_BYTES, MAX_JSON_ITEMS, MAX_LINE_BYTES, MAX_NDJSON_ITEMS};
use super::links::CreateLinkRequest;
use super::spool::{self, SpoolError};
use crate::error::{Error, Result};
use axum::body::Body;
use axum::http::StatusCode;
use futures_util::{stream, Stream};
use std::pin::Pin;
use tokio::sync::{mpsc, oneshot};

pub(crate) type SpoolResult = std::result::Result<(), SpoolError>;

/// One item as read, not yet parsed.
pub(crate) enum RawItem {
    Line(Vec<u8>),
    Value(serde_json::Value),
    /// A line longer than [`MAX_LINE_BYTES`].
    TooLong,
    /// The line after the last one allowed.
    TooMany,
}

pub(crate) struct RawChunk {
    /// Index of the first item.
    pub first: i64,
    pub items: Vec<RawItem>,
}

pub(crate) type ChunkStream = Pin<Box<dyn Stream<Item = RawChunk> + Send>>;

/// A JSON array body, read whole (it is bounded), cut into chunks.
pub(crate) async fn json_chunks(body: Body) -> Result<ChunkStream> {
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

/// How a streamed body is cut into items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// One item a line (NDJSON).
    Lines,
    /// One item a CSV record: a line break inside a quoted field belongs to the field (RFC 4180),
    /// as a spreadsheet writes a cell with several lines.
    CsvRecords,
}

/// An NDJSON (or CSV) body of at most `max_items` items: read into a [`spool`] as fast as it arrives, and cut into chunks by a task
/// that hands over one chunk at a time (at most two waiting), so a slow writer slows the cutting
/// rather than filling memory. The receiver is told when the body has been read in full (or the
/// reading stopped): the answer must not start before (see [`spool`]).
pub(crate) fn ndjson_chunks(
    body: Body,
    framing: Framing,
    max_items: usize,
) -> (ChunkStream, oneshot::Receiver<SpoolResult>) {
    let (mut reader, body_read) = spool::spool(body);
    let (sender, receiver) = mpsc::channel::<RawChunk>(2);
    tokio::spawn(async move {
        let mut lines = LineSplitter::new(framing);
        let mut items = Vec::with_capacity(CHUNK);
        let mut first = 0i64;
        let mut count = 0usize;
        let mut done = false;
        while !done {
            let mut read = Vec::new();
            match reader.next().await {
                Some(Ok(bytes)) => lines.feed(&bytes, &mut read),
                // The body broke off: what was read is taken, the partial line is not.
                Some(Err(())) => break,
                None => {
                    lines.finish(&mut read);
                    done = true;
                }
            }
            for item in read {
                if count == max_items {
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
        // Stop reading the body (past the last line allowed, the rest is not read).
        drop(reader);
        if !items.is_empty() {
            let _ = sender.send(RawChunk { first, items }).await;
        }
    });
    let chunks = Box::pin(stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    }));
    (chunks, body_read)
}

/// Cuts a byte stream into non-blank items (lines, or CSV records) of at most
/// [`MAX_LINE_BYTES`].
struct LineSplitter {
    framing: Framing,
    pending: Vec<u8>,
    overlong: bool,
    /// Inside a quoted CSV field: a line break there does not end the record. An escaped quote
    /// (`""`) toggles twice, so counting quotes is enough.
    quoted: bool,
}

impl LineSplitter {
    fn new(framing: Framing) -> Self {
        LineSplitter {
            framing,
            pending: Vec::new(),
            overlong: false,
            quoted: false,
        }
    }

    fn feed(&mut self, mut data: &[u8], out: &mut Vec<RawItem>) {
        while let Some(at) = self.item_end(data) {
            self.push(&data[..at]);
            self.end_line(out);
            data = &data[at + 1..];
        }
        self.push(data);
    }

    /// Where the current item ends in `data` (its line break), if it does; keeps the quote
    /// state of the bytes scanned.
    fn item_end(&mut self, data: &[u8]) -> Option<usize> {
        if self.framing == Framing::Lines {
            return data.iter().position(|&b| b == b'\n');
        }
        for (at, &byte) in data.iter().enumerate() {
            match byte {
                b'"' => self.quoted = !self.quoted,
                b'\n' if !self.quoted => return Some(at),
                _ => {}
            }
        }
        None
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
        self.quoted = false;
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
pub(crate) fn parse(item: RawItem) -> Result<CreateLinkRequest> {
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

pub(crate) fn item_json_error(error: serde_json::Error) -> Error {
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
pub(crate) fn canonical(item: &RawItem) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[&[u8]]) -> Vec<String> {
        items(Framing::Lines, input)
    }

    fn items(framing: Framing, input: &[&[u8]]) -> Vec<String> {
        let mut splitter = LineSplitter::new(framing);
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

    #[test]
    fn csv_records_keep_quoted_line_breaks_across_frames() {
        let body: [&[u8]; 3] = [
            b"phone,note\r\n0612,\"two\r\nlines\"\r\n0613,\"say \"\"hi",
            b"\"\"\n and \"\n",
            b"0614,plain",
        ];
        assert_eq!(
            items(Framing::CsvRecords, &body),
            [
                "phone,note\r",
                "0612,\"two\r\nlines\"\r",
                "0613,\"say \"\"hi\"\"\n and \"",
                "0614,plain"
            ]
        );
        // As lines, the same body breaks inside the quotes.
        assert_eq!(lines(&body).len(), 6);
    }
}
