//! What a callback must pass besides its token: its workspace not suspended (a suspended
//! workspace's callbacks answer as its keys do, 403 `workspace_suspended`, and store nothing),
//! and the per-token rate (`--callback-rate` a second, twice that at once; 429 past it).
//!
//! The rate is counted by the API keys' limiter (`rate_limit`), in a space of its own: a token's
//! count is kept under a negative id (API keys' ids are positive), so a token and a key never
//! share one.

use crate::throttle::{whole_seconds, RateLimitHeaders, Throttled};
use crate::{AppState, Error, Result};
use shortlink_core::limits::{Limit, LimitsUnavailable};
use shortlink_visits::deliveries::CallbackToken;

/// The policy name of the per-token limit in the headers.
const POLICY: &str = "callback-token";

/// Refuses the callback of `token` when its workspace is `suspended` (read with the token, in
/// the same query) or its rate is spent.
pub async fn admit(state: &AppState, token: &CallbackToken, suspended: bool) -> Result<()> {
    if suspended {
        return Err(Error::WorkspaceSuspended);
    }
    let rate = state.settings.callback_rate;
    if rate == 0 {
        return Ok(());
    }
    let limit = Limit::new(rate, rate.saturating_mul(2));
    let decision = match state.limits.rate.check(limiter_id(&token.id), limit).await {
        Ok(decision) => decision,
        // As the API keys' limit: a callback passes unlimited while the limiter's Redis fails.
        Err(error) => {
            shortlink_core::limits::unavailable(POLICY);
            if let LimitsUnavailable::Redis(error) = error {
                tracing::warn!(%error, "callback rate limiter: redis failed; callbacks pass");
            }
            return Ok(());
        }
    };
    if decision.allowed {
        return Ok(());
    }
    Err(Error::RateLimited(Box::new(Throttled {
        code: "rate_limited",
        message: format!(
            "this callback token may bring {rate} callbacks per second ({} at once); retry later",
            limit.burst
        ),
        headers: RateLimitHeaders {
            policy: POLICY,
            quota: u64::from(limit.burst),
            window: Some(limit.window_secs()),
            remaining: decision.remaining,
            reset: Some(whole_seconds(decision.reset)),
        },
        retry_after: Some(whole_seconds(decision.retry_after).max(1)),
    })))
}

/// The limiter's id of token `id` (`cbt_` and 16 hex digits): negative, never an API key's.
fn limiter_id(id: &str) -> i64 {
    let digits = id.strip_prefix("cbt_").unwrap_or(id);
    let n = u64::from_str_radix(digits, 16).unwrap_or_else(|_| {
        // Not a token id as made here: its bytes, folded.
        (id.bytes()).fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
    });
    -1 - i64::try_from(n >> 1).unwrap_or(i64::MAX - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokens_count_is_apart_from_every_keys() {
        assert_eq!(limiter_id("cbt_0000000000000000"), -1);
        assert!(limiter_id("cbt_ffffffffffffffff") < 0);
        assert!(limiter_id("not a token id") < 0);
        assert_ne!(
            limiter_id("cbt_0000000000000002"),
            limiter_id("cbt_0000000000000004")
        );
    }
}
