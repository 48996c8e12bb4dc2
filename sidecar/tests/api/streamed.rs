//! Streamed requests and answers (a batch's, a compose's). A body sent in [`Parts`] lets a test act
//! between two parts knowing exactly which lines the server had: it can act only on what it was
//! sent. An NDJSON [`Answer`] is read a line at a time: a test that reads part of it, acts, then
//! reads on holds the job back meanwhile (the server writes only so far ahead of an unread answer).

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The sending end of a request body that goes out a part at a time; dropping it ends the body.
pub struct Parts(mpsc::Sender<Vec<u8>>);

impl Parts {
    pub async fn send(&self, part: Vec<u8>) {
        self.0.send(part).await.expect("the request still sending");
    }
}

/// Starts `request` with a body sent in parts; its response comes once the body has ended (the
/// server answers a streamed job only then).
pub fn send_in_parts(request: reqwest::RequestBuilder) -> (Parts, JoinHandle<reqwest::Response>) {
    let (sender, receiver) = mpsc::channel::<Vec<u8>>(1);
    let body = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let part = receiver.recv().await?;
        Some((Ok::<_, std::io::Error>(part), receiver))
    });
    let request = request.body(reqwest::Body::wrap_stream(body));
    let response = tokio::spawn(async move { request.send().await.expect("the request") });
    (Parts(sender), response)
}

/// An NDJSON answer read line by line as it streams.
pub struct Answer {
    response: reqwest::Response,
    pending: Vec<u8>,
    lines: Vec<Value>,
    ended: bool,
}

impl Answer {
    pub async fn new(response: reqwest::Response) -> Self {
        if response.status() != 200 {
            panic!("{}: {}", response.status(), response.text().await.unwrap());
        }
        Answer {
            response,
            pending: Vec::new(),
            lines: Vec::new(),
            ended: false,
        }
    }

    /// Reads until at least `count` lines are in, or the answer ends.
    pub async fn read_until(&mut self, count: usize) {
        while self.lines.len() < count && !self.ended {
            match self.response.chunk().await.unwrap() {
                None => self.ended = true,
                Some(bytes) => {
                    self.pending.extend_from_slice(&bytes);
                    while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = self.pending.drain(..=end).collect();
                        self.lines.push(serde_json::from_slice(&line).unwrap());
                    }
                }
            }
        }
    }

    pub async fn read_to_end(mut self) -> Vec<Value> {
        self.read_until(usize::MAX).await;
        assert!(self.pending.is_empty(), "a line cut short");
        self.lines
    }
}
