//! The per-key rate limit on `/api/v1` (after authentication: it needs the key), and the HTTP
//! form of every limit's answer: `429` with `Retry-After`, and on every answer of a limited key
//! the `RateLimit-Policy` and `RateLimit` fields of draft-ietf-httpapi-ratelimit-headers-11
//! (structured-field lists: `"<policy>";q=<quota>;w=<window s>` and
//! `"<policy>";r=<remaining>;t=<s until reset>`).
//!
//! `GET /api/v1/resolve/{code}` is never limited: it is nginx's fallback while Redis misses a
//! link, and a click must not get a 429 because the API is busy.
//!
//! The count is shared through Redis (`shortlink_core::limits::rate`: one script per request, or
//! per few requests a sidecar takes at once for a large burst).
//!
//! When the limiter's Redis fails, the request goes through unlimited (fail-open) and
//! `shortlink_rate_limiter_errors_total` counts it: every write needs that Redis anyway and fails
//! on its own, while reads from SQL (stats, lists, exports) keep working through an outage.

use super::throttle::{whole_seconds, RateLimitHeaders, Throttled};
use super::{ApiKeyId, AppState, Error};
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use shortlink_core::limits::{Limit, LimitsUnavailable, Quota, QuotaError};
use shortlink_store::{ApiKey, KeyRate, Quotas};

/// Not limited: nginx's fallback.
const RESOLVE_ROUTE: &str = "/api/v1/resolve/{code}";

/// The policy name of the per-key limit in the headers.
const API_KEY_POLICY: &str = "api-key";

/// The rate a key is held to: its own (`api_keys.rate_per_second`, `rate_burst`), else the
/// settings', within its workspace's ceilings.
pub fn key_limit(state: &AppState, own: Option<KeyRate>, workspace: Option<Quotas>) -> Limit {
    let limit = match own {
        Some(rate) => Limit::new(
            u32::try_from(rate.per_second).unwrap_or(u32::MAX),
            u32::try_from(rate.burst).unwrap_or(u32::MAX),
        ),
        None => state.limits.settings.api_key,
    };
    within_ceilings(limit, workspace.unwrap_or_default())
}

/// `limit` clamped at use to the workspace's ceilings: a key stored before the ceilings were
/// set or lowered, or one with no rate of its own while the installation's is off, gets the
/// ceiling; it is never refused for it (its rate stays stored as it was).
fn within_ceilings(limit: Limit, ceilings: Quotas) -> Limit {
    let ceiling = |value: Option<u64>| value.map(|v| u32::try_from(v).unwrap_or(u32::MAX));
    let per_second = match (ceiling(ceilings.key_rate_per_second), limit.is_off()) {
        (Some(highest), true) => highest,
        (Some(highest), false) => limit.per_second.min(highest),
        (None, _) => limit.per_second,
    };
    let burst = match ceiling(ceilings.key_rate_burst) {
        Some(highest) => limit.burst.min(highest),
        None => limit.burst,
    };
    Limit::new(per_second, burst)
}

/// Whether the route is limited (all of `/api/v1` but nginx's fallback).
fn limited(request: &Request) -> bool {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    route != Some(RESOLVE_ROUTE)
}

/// After the key check: counts the request against its key's rate, answers 429 past it, and
/// puts the key's `RateLimit-Policy` and `RateLimit` on every answer.
pub async fn limit_api_key(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let key = request.extensions().get::<ApiKeyId>().copied();
    let (Some(key), true) = (key, limited(&request)) else {
        return next.run(request).await;
    };
    let extensions = request.extensions();
    let limit = key_limit(
        &state,
        extensions.get::<KeyRate>().copied(),
        extensions.get::<Quotas>().copied(),
    );
    match admit(&state, key.0, limit).await {
        Err(refused) => refused.into_response(),
        Ok(None) => next.run(request).await,
        Ok(Some(headers)) => {
            let mut response = next.run(request).await;
            headers.apply(response.headers_mut());
            response
        }
    }
}

/// Counts one request of `key` (an API key's, or a console session's: the same key, the same
/// count) against its rate, within its workspace's ceilings: the console's forms go through
/// this as the API's routes do.
pub async fn admit_key(state: &AppState, key: &ApiKey) -> Result<(), Error> {
    let ceilings = key.workspace.as_ref().map(|workspace| workspace.quotas);
    let limit = key_limit(state, key.rate, ceilings);
    admit(state, key.id, limit).await.map(|_| ())
}

/// One request of `key` against `limit`: the fields to answer with (`None`: not limited, or
/// the limiter's Redis failed and the request passes, counted), or the 429.
async fn admit(
    state: &AppState,
    key: i64,
    limit: Limit,
) -> Result<Option<RateLimitHeaders>, Error> {
    if limit.is_off() {
        return Ok(None);
    }
    let decision = match state.limits.rate.check(key, limit).await {
        Ok(decision) => decision,
        Err(error) => {
            shortlink_core::limits::unavailable(API_KEY_POLICY);
            if let LimitsUnavailable::Redis(error) = error {
                tracing::warn!(%error, "rate limiter: redis failed; requests pass unlimited");
            }
            return Ok(None);
        }
    };
    let headers = RateLimitHeaders {
        policy: API_KEY_POLICY,
        quota: u64::from(limit.burst),
        window: Some(limit.window_secs()),
        remaining: decision.remaining,
        reset: Some(whole_seconds(decision.reset)),
    };
    if !decision.allowed {
        return Err(Error::RateLimited(Box::new(Throttled {
            code: "rate_limited",
            message: format!(
                "this API key may send {} requests per second ({} at once); retry later",
                limit.per_second, limit.burst
            ),
            headers,
            retry_after: Some(whole_seconds(decision.retry_after).max(1)),
        })));
    }
    Ok(Some(headers))
}

impl From<QuotaError> for Error {
    fn from(error: QuotaError) -> Self {
        match error {
            QuotaError::Exceeded {
                quota,
                limit,
                used,
                retry_after,
            } => {
                let message = match quota {
                    Quota::LinksPerDay => format!(
                        "this request would take the workspace past its {limit} links per UTC \
                         day ({used} used); nothing was created"
                    ),
                    Quota::ComposeRecipients => {
                        format!("a compose may have at most {limit} recipients")
                    }
                    Quota::Webhooks => {
                        format!("the workspace may have at most {limit} webhook subscriptions")
                    }
                };
                let retry_after = retry_after.map(whole_seconds);
                Error::RateLimited(Box::new(Throttled {
                    code: "quota_exceeded",
                    message,
                    headers: RateLimitHeaders {
                        policy: quota.name(),
                        quota: limit,
                        window: quota.window_secs(),
                        remaining: limit.saturating_sub(used),
                        reset: retry_after,
                    },
                    retry_after,
                }))
            }
            QuotaError::Unavailable(LimitsUnavailable::Redis(error)) => {
                Error::RedisUnavailable(error)
            }
            QuotaError::Unavailable(LimitsUnavailable::Paused) => {
                Error::RedisUnavailable(shortlink_core::primary::ProjectionError::NoPrimary(
                    "redis failed less than a second ago",
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;
    use std::time::Duration;

    #[test]
    fn fields_follow_the_drafts_structured_syntax() {
        let headers = RateLimitHeaders {
            policy: "api-key",
            quota: 100,
            window: Some(2),
            remaining: 57,
            reset: Some(1),
        };
        assert_eq!(headers.policy_value(), r#""api-key";q=100;w=2"#);
        assert_eq!(headers.limit_value(), r#""api-key";r=57;t=1"#);
        let count = RateLimitHeaders {
            policy: "webhooks",
            quota: 10,
            window: None,
            remaining: 0,
            reset: None,
        };
        assert_eq!(count.policy_value(), r#""webhooks";q=10"#);
        assert_eq!(count.limit_value(), r#""webhooks";r=0"#);
        let mut map = HeaderMap::new();
        headers.apply(&mut map);
        assert_eq!(map["ratelimit-policy"], r#""api-key";q=100;w=2"#);
        assert_eq!(map["ratelimit"], r#""api-key";r=57;t=1"#);
    }

    #[test]
    fn ceilings_clamp_a_keys_rate_at_use() {
        let ceilings = Quotas {
            key_rate_per_second: Some(10),
            key_rate_burst: Some(20),
            ..Quotas::default()
        };
        // Stored before the ceiling was lowered: held to it.
        assert_eq!(
            within_ceilings(Limit::new(500, 1000), ceilings),
            Limit::new(10, 20)
        );
        // Below the ceilings: as it is.
        assert_eq!(
            within_ceilings(Limit::new(5, 8), ceilings),
            Limit::new(5, 8)
        );
        // No limit of its own (the installation's is off): the ceiling.
        assert_eq!(
            within_ceilings(Limit::new(0, 100), ceilings),
            Limit::new(10, 20)
        );
        // No ceilings: as it is, off included.
        assert!(within_ceilings(Limit::new(0, 100), Quotas::default()).is_off());
    }

    #[test]
    fn seconds_round_up() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1000)), 1);
        assert_eq!(whole_seconds(Duration::from_millis(1001)), 2);
    }

    #[test]
    fn a_day_quota_answers_with_its_headers_and_retry_after() {
        let error: Error = QuotaError::Exceeded {
            quota: Quota::LinksPerDay,
            limit: 1000,
            used: 990,
            retry_after: Some(Duration::from_millis(3_600_500)),
        }
        .into();
        let response = error.into_response();
        assert_eq!(response.status(), 429);
        let headers = response.headers();
        assert_eq!(headers["retry-after"], "3601");
        assert_eq!(
            headers["ratelimit-policy"],
            r#""links-per-day";q=1000;w=86400"#
        );
        assert_eq!(headers["ratelimit"], r#""links-per-day";r=10;t=3601"#);
    }
}
