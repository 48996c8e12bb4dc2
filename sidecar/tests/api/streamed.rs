//! A streamed NDJSON answer (a batch's, a compose's), read a line at a time: a test that reads
//! part of it, acts, then reads on holds the job back meanwhile (the server writes only so far
//! ahead of an unread answer).

use serde_json::Value;

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
