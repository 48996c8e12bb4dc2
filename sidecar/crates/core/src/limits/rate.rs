//! Requests per second with a burst, per API key: GCRA ("generic cell rate algorithm", the
//! password budgets' approach, `shortlink_wire::record::password`), one integer per key in Redis,
//! read and written by one script on Redis's clock. Every sidecar on the same Redis therefore
//! draws on the same budget, and no clock skew between them matters.

use super::connection::{LimitsConnection, LimitsUnavailable};
use super::Limit;
use shortlink_wire::keys::api_key_rate_key;
use std::sync::Arc;
use std::time::Duration;

/// `EVALSHA <GCRA> 1 <key> <interval µs> <burst>`: the key holds the "theoretical arrival time"
/// (TAT, µs of Redis's clock): when the budget would be full again with every request so far
/// spread at one per interval. A request is allowed when at most `burst - 1` intervals are still
/// owed (TAT - now <= (burst - 1) * interval); an allowed one moves the TAT one interval on. A
/// fresh key (or one expired, which happens exactly when the budget is full) lets `burst`
/// requests through at once, then one per interval.
///
/// The reply: `{allowed (0/1), remaining, ms until the budget is full, ms until the next request
/// is allowed (0 when allowed)}`. Microseconds: Lua's doubles hold them exactly (2^53 µs is 285
/// years), and a limit of thousands per second needs finer than milliseconds.
const GCRA: &str = r"
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or 0) or 0, now)
local wait = tat - now - (burst - 1) * interval
if wait > 0 then
  return {0, 0, math.ceil((tat - now) / 1000), math.ceil(wait / 1000)}
end
tat = tat + interval
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX',
  string.format('%d', math.ceil((tat - now) / 1000)))
return {1, math.floor((now + burst * interval - tat) / interval),
  math.ceil((tat - now) / 1000), 0}
";

/// What the limiter said about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Requests that could be sent at once after this one.
    pub remaining: u64,
    /// Until the whole burst is available again.
    pub reset: Duration,
    /// Until the next request is allowed (zero when this one was).
    pub retry_after: Duration,
}

/// The per-key limiter. Cheap to share (`Arc`); one Redis connection of its own.
pub struct RateLimiter {
    connection: Arc<LimitsConnection>,
    script: redis::Script,
}

impl RateLimiter {
    pub(super) fn new(connection: Arc<LimitsConnection>) -> Self {
        Self {
            connection,
            script: redis::Script::new(GCRA),
        }
    }

    /// Counts one request of API key `key_id` against `limit` (never [`Limit::is_off`]).
    pub async fn check(&self, key_id: i64, limit: Limit) -> Result<Decision, LimitsUnavailable> {
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(api_key_rate_key(key_id))
            .arg(limit.interval_micros())
            .arg(limit.burst);
        let (allowed, remaining, reset_ms, retry_ms): (u8, u64, u64, u64) =
            self.connection.invoke(&invocation).await?;
        if allowed != 1 {
            super::refused("api-key");
        }
        Ok(Decision {
            allowed: allowed == 1,
            remaining,
            reset: Duration::from_millis(reset_ms),
            retry_after: Duration::from_millis(retry_ms),
        })
    }
}
