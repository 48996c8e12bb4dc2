//! What a refusal by a limit says over HTTP: `429` with `Retry-After`, and the `RateLimit-Policy`
//! and `RateLimit` fields of draft-ietf-httpapi-ratelimit-headers-11. A leaf of its own: the
//! error type carries it and the limiter makes it ([`super::rate_limit`]).

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use std::time::Duration;

const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// One policy's state as the headers give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitHeaders {
    pub policy: &'static str,
    pub quota: u64,
    /// `w`: seconds; `None` for a count that no time window renews.
    pub window: Option<u64>,
    pub remaining: u64,
    /// `t`: seconds until the quota is whole again; `None` when no wait renews it.
    pub reset: Option<u64>,
}

impl RateLimitHeaders {
    /// `RateLimit-Policy`'s member.
    pub fn policy_value(&self) -> String {
        let mut value = format!("\"{}\";q={}", self.policy, self.quota);
        if let Some(window) = self.window {
            value.push_str(&format!(";w={window}"));
        }
        value
    }

    /// `RateLimit`'s member.
    pub fn limit_value(&self) -> String {
        let mut value = format!("\"{}\";r={}", self.policy, self.remaining);
        if let Some(reset) = self.reset {
            value.push_str(&format!(";t={reset}"));
        }
        value
    }

    pub fn apply(&self, headers: &mut HeaderMap) {
        for (name, value) in [
            (&RATELIMIT_POLICY, self.policy_value()),
            (&RATELIMIT, self.limit_value()),
        ] {
            // Policy names are ours and numbers are digits: always a valid value.
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name.clone(), value);
            }
        }
    }
}

/// A refusal by a limit: what [`super::Error::RateLimited`] carries.
#[derive(Debug)]
pub struct Throttled {
    /// `rate_limited` (the key's rate) or `quota_exceeded` (a workspace's quota).
    pub code: &'static str,
    pub message: String,
    pub headers: RateLimitHeaders,
    /// `Retry-After`, whole seconds; `None` when waiting will not help.
    pub retry_after: Option<u64>,
}

impl Throttled {
    pub(crate) fn apply(&self, headers: &mut HeaderMap) {
        self.headers.apply(headers);
        if let Some(seconds) = self.retry_after {
            headers.insert(axum::http::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
    }
}

/// Whole seconds, rounded up (a client waiting the rounded-down value would be refused again).
pub fn whole_seconds(duration: Duration) -> u64 {
    duration.as_micros().div_ceil(1_000_000) as u64
}
