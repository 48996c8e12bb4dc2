//! GETs of a source's API: its authentication header, `429 Too Many Requests` waited out as
//! `Retry-After` says, a server error retried a few times, any other answer an error that quotes
//! the start of the page (an HTML login or error page says more than its status).

use super::BoxError;
use std::time::Duration;

/// Tries per request: rate limits and server errors are waited out this many times.
const TRIES: u32 = 6;
/// Longest `Retry-After` honoured; a longer one is waited this long and asked again.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Largest answer read: a page of links is a few hundred kilobytes.
const MAX_BODY: usize = 32 << 20;

pub struct Fetch {
    client: reqwest::Client,
    /// The authentication header, its name and value.
    auth: Option<(&'static str, String)>,
}

impl Fetch {
    pub fn new(auth: Option<(&'static str, String)>) -> Result<Self, BoxError> {
        let tls = crate::domains::certificate::verifying_config(None, "--source-url")?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!(
                "shortlink-sidecar/",
                env!("CARGO_PKG_VERSION"),
                " import"
            ))
            .build()?;
        Ok(Self { client, auth })
    }

    /// GETs `url` and parses its JSON answer.
    pub async fn json(&self, url: &str) -> Result<serde_json::Value, BoxError> {
        let body = self.get(url).await?;
        serde_json::from_slice(&body).map_err(|e| {
            format!(
                "GET {url}: the answer is not JSON ({e}): {}",
                excerpt(&body)
            )
            .into()
        })
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, BoxError> {
        let mut tries = 0;
        loop {
            tries += 1;
            let mut request = self.client.get(url).header("Accept", "application/json");
            if let Some((name, value)) = &self.auth {
                request = request.header(*name, value);
            }
            let response = match request.send().await {
                Ok(response) => response,
                Err(error) if tries < TRIES => {
                    tracing::warn!(%url, %error, "source request failed; retrying");
                    tokio::time::sleep(backoff(tries)).await;
                    continue;
                }
                Err(error) => return Err(format!("GET {url}: {error}").into()),
            };
            let status = response.status();
            let wait = retry_after(response.headers());
            let body = response.bytes().await?;
            if body.len() > MAX_BODY {
                return Err(format!("GET {url}: answer over {MAX_BODY} bytes").into());
            }
            if status.is_success() {
                return Ok(body.to_vec());
            }
            let retry = status.as_u16() == 429 || status.is_server_error();
            if retry && tries < TRIES {
                let wait = wait.unwrap_or_else(|| backoff(tries)).min(MAX_WAIT);
                tracing::warn!(%url, %status, ?wait, "source asked to wait; retrying");
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(format!("GET {url}: {status}: {}", excerpt(&body)).into());
        }
    }
}

/// `Retry-After` in seconds (the HTTP-date form is rare in APIs: then our own backoff).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse().ok().map(Duration::from_secs)
}

fn backoff(tries: u32) -> Duration {
    Duration::from_millis(500 << tries.min(6))
}

/// The start of an answer, on one line, for an error message.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `base` without its trailing slash, so paths can be appended.
pub fn base(url: &str) -> String {
    url.trim_end_matches('/').to_owned()
}

/// Percent-encodes a path segment or query value.
pub fn escape(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
