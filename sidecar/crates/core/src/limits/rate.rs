//! Requests per second with a burst, per API key: GCRA ("generic cell rate algorithm", the
//! password budgets' approach, `shortlink_wire::record::password`), one integer per key in Redis,
//! read and written by one script on Redis's clock. Every sidecar on the same Redis therefore
//! draws on the same budget, and no clock skew between them matters.
//!
//! A round trip to Redis per request would cost a create about a tenth of its time, so a sidecar
//! takes a key's requests from Redis a few at a time ([`lease_size`]: a tenth of the burst, at
//! most 1,000) and hands them out itself for up to [`LEASE_LIFETIME`]. Redis never grants more
//! than the budget, so all sidecars together never let more through than one limiter would;
//! what one sidecar holds unused is missing to the others for at most that second, so with S
//! sidecars a key gets at least `burst - S * (lease - 1)` at once. A burst under 20 leases one
//! request at a time: exact, a round trip each.

use super::connection::{LimitsConnection, LimitsUnavailable};
use super::limit::{refused, Limit};
use crate::sync::LockOrRecover;
use shortlink_wire::keys::api_key_rate_key;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a sidecar keeps requests it took from Redis and did not use yet.
pub const LEASE_LIFETIME: Duration = Duration::from_secs(1);

/// Requests taken from Redis at once for `limit`.
pub fn lease_size(limit: Limit) -> u64 {
    (u64::from(limit.burst) / 10).clamp(1, 1000)
}

/// `EVALSHA <GCRA> 1 <key> <interval µs> <burst> <n>`: the key holds the "theoretical arrival
/// time" (TAT, µs of Redis's clock): when the budget would be full again with every request so
/// far spread at one per interval. A request fits when at most `burst - 1` intervals are still
/// owed (TAT - now <= (burst - 1) * interval); each one granted moves the TAT one interval on. A
/// fresh key (or one expired, which happens exactly when the budget is full) lets `burst`
/// requests through at once, then one per interval. Up to `n` are granted, as many as fit.
///
/// The reply: `{granted (0..n), remaining after them, ms until the budget is full, ms until the
/// next request fits (0 when granted)}`. Microseconds: Lua's doubles hold them exactly (2^53 µs is 285
/// years), and a limit of thousands per second needs finer than milliseconds.
const GCRA: &str = r"
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, burst, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or 0) or 0, now)
local fit = math.floor((now + burst * interval - tat) / interval)
if fit < 1 then
  return {0, 0, math.ceil((tat - now) / 1000),
    math.ceil((tat - now - (burst - 1) * interval) / 1000)}
end
local granted = math.min(n, fit)
tat = tat + granted * interval
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX',
  string.format('%d', math.ceil((tat - now) / 1000)))
return {granted, fit - granted, math.ceil((tat - now) / 1000), 0}
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

/// Requests of one key this sidecar took from Redis and has not handed out yet.
struct Lease {
    limit: Limit,
    left: u64,
    taken_at: Instant,
    /// What Redis said when they were taken.
    remaining: u64,
    reset: Duration,
}

/// The per-key limiter. Cheap to share (`Arc`); one Redis connection of its own.
pub struct RateLimiter {
    connection: Arc<LimitsConnection>,
    script: redis::Script,
    leases: Mutex<HashMap<i64, Lease>>,
    /// One lease taken from Redis at a time per key: concurrent requests of the key wait for it
    /// and share it, instead of each asking Redis and being refused while the budget sits in a
    /// lease not installed yet.
    gates: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
}

impl RateLimiter {
    pub(super) fn new(connection: Arc<LimitsConnection>) -> Self {
        Self {
            connection,
            script: redis::Script::new(GCRA),
            leases: Mutex::default(),
            gates: Mutex::default(),
        }
    }

    fn gate(&self, key_id: i64) -> Arc<tokio::sync::Mutex<()>> {
        let mut gates = self.gates.lock_or_recover();
        Arc::clone(gates.entry(key_id).or_default())
    }

    /// Counts one request of API key `key_id` against `limit` (never [`Limit::is_off`]).
    pub async fn check(&self, key_id: i64, limit: Limit) -> Result<Decision, LimitsUnavailable> {
        if let Some(decision) = self.take_leased(key_id, limit) {
            return Ok(decision);
        }
        let gate = self.gate(key_id);
        let _turn = gate.lock().await;
        // Taken by the request ahead of this one meanwhile.
        if let Some(decision) = self.take_leased(key_id, limit) {
            return Ok(decision);
        }
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(api_key_rate_key(key_id))
            .arg(limit.interval_micros())
            .arg(limit.burst)
            .arg(lease_size(limit));
        let (granted, remaining, reset_ms, retry_ms): (u64, u64, u64, u64) =
            self.connection.invoke(&invocation).await?;
        let reset = Duration::from_millis(reset_ms);
        if granted == 0 {
            // Concurrent requests of the key may have taken the rest for this sidecar meanwhile.
            if let Some(decision) = self.take_leased(key_id, limit) {
                return Ok(decision);
            }
            refused("api-key");
            return Ok(Decision {
                allowed: false,
                remaining: 0,
                reset,
                retry_after: Duration::from_millis(retry_ms),
            });
        }
        if granted > 1 {
            let mut leases = self.leases.lock_or_recover();
            match leases.get_mut(&key_id) {
                // Concurrent requests that each took a lease: the requests add up, none is lost
                // (they were counted in Redis).
                Some(lease)
                    if lease.limit == limit && lease.taken_at.elapsed() < LEASE_LIFETIME =>
                {
                    lease.left += granted - 1;
                    lease.remaining = remaining;
                    lease.reset = reset;
                }
                _ => {
                    let lease = Lease {
                        limit,
                        left: granted - 1,
                        taken_at: Instant::now(),
                        remaining,
                        reset,
                    };
                    leases.insert(key_id, lease);
                }
            }
        }
        Ok(Decision {
            allowed: true,
            remaining: remaining + granted - 1,
            reset,
            retry_after: Duration::ZERO,
        })
    }

    /// One request out of the key's lease, if it has one still good for `limit`.
    fn take_leased(&self, key_id: i64, limit: Limit) -> Option<Decision> {
        let mut leases = self.leases.lock_or_recover();
        let lease = leases.get_mut(&key_id)?;
        let age = lease.taken_at.elapsed();
        if lease.left == 0 || lease.limit != limit || age >= LEASE_LIFETIME {
            leases.remove(&key_id);
            return None;
        }
        lease.left -= 1;
        Some(Decision {
            allowed: true,
            remaining: lease.remaining + lease.left,
            reset: lease.reset.saturating_sub(age),
            retry_after: Duration::ZERO,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bursts_lease_one_request_at_a_time() {
        assert_eq!(lease_size(Limit::new(1, 10)), 1);
        assert_eq!(lease_size(Limit::new(50, 19)), 1);
        assert_eq!(lease_size(Limit::new(50, 100)), 10);
        assert_eq!(lease_size(Limit::new(1_000_000, 1_000_000)), 1000);
    }
}
