//! What stands on loopback at the far end of a send job: a gateway's `sendsms` that answers each
//! hand-off as its test says, and the reading of a request's target that it and the tests' own
//! fronts share.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// A gateway's answer to one request: its status line and body; `None` never answers, the
/// connection held open until the client closes it (a hand-off in flight).
pub(super) type Reply = Option<(&'static str, &'static str)>;

/// A gateway stand-in on loopback: keeps each request's target (`/cgi-bin/sendsms?…`) and
/// answers it with what `answer` says for it.
pub(super) struct StandIn {
    pub(super) url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl StandIn {
    pub(super) fn start(answer: impl Fn(&str) -> Reply + Send + Sync + 'static) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/cgi-bin/sendsms", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (seen, answer) = (Arc::clone(&requests), Arc::new(answer));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (seen, answer) = (Arc::clone(&seen), Arc::clone(&answer));
                std::thread::spawn(move || reply(stream, &seen, &*answer));
            }
        });
        StandIn { url, requests }
    }

    /// The requests' targets so far, in the order they came.
    pub(super) fn targets(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one request from `stream`, keeps its target in `seen` and answers it as `answer` says.
pub(super) fn reply(
    mut stream: TcpStream,
    seen: &Mutex<Vec<String>>,
    answer: &dyn Fn(&str) -> Reply,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let Some(target) = request_target(&mut reader) else {
        return;
    };
    seen.lock().unwrap().push(target.clone());
    match answer(&target) {
        Some((status, body)) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        // Held: read until the client gives up and closes.
        None => {
            let mut rest = String::new();
            while reader.read_line(&mut rest).is_ok_and(|n| n > 0) {}
        }
    }
}

/// Kannel's answer to a message it takes.
pub(super) fn accepted(_: &str) -> Reply {
    Some(("202 Accepted", "0: Accepted for delivery"))
}

/// The target (`/path?query`) of the request on `reader`, its header read up to the blank line
/// (the requests here are GETs: no body follows); `None` when no request line comes.
pub(super) fn request_target(reader: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        header.clear();
    }
    Some(line.split(' ').nth(1).unwrap_or_default().to_owned())
}
