//! GETs of a source's API: its authentication header, `429 Too Many Requests` waited out as
//! `Retry-After` says, a server error retried a few times, any other answer an error. Through
//! the outbound rules of [`shortlink_core::outbound`] (public addresses only unless
//! `--import-allow-private`, no redirects, no proxy from the environment), and only to the
//! origin of `--source-url`: a pagination link elsewhere is refused, never followed with the key.
//! Errors say the status and never quote the answer (they are shown on the console's progress
//! page); the start of the answer goes to the log only.

use crate::cli::error::BoxError;
use shortlink_core::outbound::{self, Policy};
use std::time::Duration;

/// Tries per request: rate limits and server errors are waited out this many times.
const TRIES: u32 = 6;
/// Longest `Retry-After` honoured; a longer one is waited this long and asked again.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Largest answer read: a page of links is a few hundred kilobytes.
const MAX_BODY: usize = 32 << 20;

pub struct Fetch {
    client: reqwest::Client,
    policy: Policy,
    /// The source's origin (scheme, host, port): every request stays on it.
    origin: url::Origin,
    /// The authentication header, its name and value.
    auth: Option<(&'static str, String)>,
}

impl Fetch {
    /// A client for the source at `base` (its API's URL).
    pub fn new(
        base: &str,
        auth: Option<(&'static str, String)>,
        policy: &Policy,
    ) -> Result<Self, BoxError> {
        let url = url::Url::parse(base).map_err(|e| format!("--source-url {base}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("--source-url {base}: http:// or https:// only").into());
        }
        policy
            .check(&url)
            .map_err(|host| refused(&host, "--source-url"))?;
        let client = policy
            .client(None, "--source-url")?
            .timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!(
                "shortlink-sidecar/",
                env!("CARGO_PKG_VERSION"),
                " import"
            ))
            .build()?;
        Ok(Self {
            client,
            policy: policy.clone(),
            origin: url.origin(),
            auth,
        })
    }

    /// GETs `url` and parses its JSON answer.
    pub async fn json(&self, url: &str) -> Result<serde_json::Value, BoxError> {
        let body = self.get(url).await?;
        serde_json::from_slice(&body).map_err(|e| {
            tracing::warn!(%url, answer = %excerpt(&body), "source answer is not JSON");
            format!("GET {url}: the answer is not JSON ({e})").into()
        })
    }

    /// `url` when it is on the source's origin and allowed by the policy.
    fn checked(&self, url: &str) -> Result<url::Url, BoxError> {
        let parsed = url::Url::parse(url).map_err(|e| format!("GET {url}: {e}"))?;
        if parsed.origin() != self.origin {
            return Err(format!(
                "GET {url}: not on the source's origin {}; not followed",
                self.origin.ascii_serialization()
            )
            .into());
        }
        self.policy
            .check(&parsed)
            .map_err(|host| refused(&host, url))?;
        Ok(parsed)
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, BoxError> {
        let parsed = self.checked(url)?;
        let mut tries = 0;
        loop {
            tries += 1;
            let mut request = self
                .client
                .get(parsed.clone())
                .header("Accept", "application/json");
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
                Err(error) => {
                    return Err(format!("GET {url}: {}", outbound::describe(&error)).into())
                }
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
            tracing::warn!(%url, %status, answer = %excerpt(&body), "source refused");
            if status.is_redirection() {
                return Err(format!(
                    "GET {url}: {status}; redirects are not followed (give the final URL)"
                )
                .into());
            }
            return Err(format!("GET {url}: {status}").into());
        }
    }
}

fn refused(host: &str, what: &str) -> BoxError {
    format!("{what}: {host} is not a public address (--import-allow-private lifts this)").into()
}

/// `Retry-After` in seconds (the HTTP-date form is rare in APIs: then our own backoff).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse().ok().map(Duration::from_secs)
}

fn backoff(tries: u32) -> Duration {
    Duration::from_millis(500 << tries.min(6))
}

/// The start of an answer, on one line, for the log.
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
