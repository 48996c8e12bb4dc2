//! The sidecar's REST API, as a test client.

use std::time::Duration;

use serde_json::Value;

/// How long a streamed batch or campaign may take to answer in full.
const BULK_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Api {
    base: String,
    key: String,
    client: reqwest::blocking::Client,
}

impl Api {
    pub fn new(origin: String, key: &str) -> Self {
        Api {
            base: format!("{origin}/api/v1"),
            key: key.to_owned(),
            client: crate::http_client(),
        }
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.client.get(self.url(path)))
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.client.post(self.url(path)).json(body))
    }

    /// Posts `body` as NDJSON (a batch) and returns the status and the answer's lines as JSON.
    pub fn post_ndjson(&self, path: &str, body: String) -> (u16, Vec<Value>) {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(&self.key)
            .header("content-type", "application/x-ndjson")
            // A campaign-sized stream outlasts the client's 10 s on a loaded machine.
            .timeout(BULK_TIMEOUT)
            .body(body)
            .send()
            .expect("reach the API");
        let status = response.status().as_u16();
        let text = response
            .text()
            .unwrap_or_else(|e| panic!("read the NDJSON answer of {path}: {e}"));
        let lines = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {text}")))
            .collect();
        (status, lines)
    }

    /// GETs an NDJSON answer (the visit feed) and returns its lines as JSON.
    pub fn get_ndjson(&self, path: &str) -> Vec<Value> {
        let response = (self.client.get(self.url(path)))
            .bearer_auth(&self.key)
            .send()
            .expect("reach the API");
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        let text = response.text().expect("read the NDJSON answer");
        (text.lines())
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {text}")))
            .collect()
    }

    pub fn patch(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.client.patch(self.url(path)).json(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.client.put(self.url(path)).json(body))
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        self.send(self.client.delete(self.url(path)))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn send(&self, request: reqwest::blocking::RequestBuilder) -> (u16, Value) {
        let response = request
            .bearer_auth(&self.key)
            .send()
            .expect("reach the API");
        let status = response.status().as_u16();
        let text = response.text().unwrap_or_default();
        let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, json)
    }
}
