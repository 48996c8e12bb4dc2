//! HTTP/1.1 over a bare TcpStream: for requests an HTTP client refuses to send (invalid UTF-8 in
//! the path, NUL and control bytes, duplicate or conflicting headers, bodies that lie about their
//! type).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// What came back: status 0 when the server closed without a status line.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    /// Status line and headers, as text (lossy).
    pub head: String,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl RawResponse {
    /// A header's value (first match, name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// Sends `request` as is to 127.0.0.1:`port` and reads the reply until the server closes (send
/// `Connection: close`; the write side stays open, as nginx takes a half-close for an abort) or `timeout` passes between reads. A write the server refuses half-way (it
/// answered early and closed) is not an error: the answer is still read.
pub fn raw_http(port: u16, request: &[u8], timeout: Duration) -> RawResponse {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to 127.0.0.1");
    stream
        .set_read_timeout(Some(timeout))
        .expect("read timeout");
    stream
        .set_write_timeout(Some(timeout))
        .expect("write timeout");
    let _ = stream.write_all(request);
    let mut reply = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            // A reset after the answer (nginx closing with unread input) still leaves the answer.
            Err(_) => break,
        }
    }
    parse_response(&reply)
}

/// A reply as read from the socket (a cut-off chunked body keeps its complete chunks).
pub fn parse_response(reply: &[u8]) -> RawResponse {
    let split = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(reply.len());
    let head = String::from_utf8_lossy(&reply[..split]).into_owned();
    let body = reply.get(split + 4..).unwrap_or_default();
    let status = head
        .lines()
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let mut response = RawResponse {
        status,
        head,
        body: body.to_vec(),
    };
    if response
        .header("transfer-encoding")
        .is_some_and(|te| te.eq_ignore_ascii_case("chunked"))
    {
        response.body = dechunk(body);
    }
    response
}

fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..eol])
            .ok()
            .and_then(|line| usize::from_str_radix(line.split(';').next()?.trim(), 16).ok())
            .unwrap_or(0);
        body = &body[eol + 2..];
        if size == 0 || body.len() < size {
            break;
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).unwrap_or_default();
    }
    out
}
