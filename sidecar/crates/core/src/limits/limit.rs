//! A rate and the counters of refusals: what the limiter, the quotas and their settings share
//! (a leaf, so neither imports the other through the module's root).

use metrics::counter;

/// A rate: `per_second` requests, up to `burst` at once. `per_second` 0 is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub per_second: u32,
    pub burst: u32,
}

impl Limit {
    /// A burst below one would refuse everything: it counts as one.
    pub fn new(per_second: u32, burst: u32) -> Self {
        Self {
            per_second,
            burst: burst.max(1),
        }
    }

    pub const OFF: Limit = Limit {
        per_second: 0,
        burst: 0,
    };

    pub fn is_off(self) -> bool {
        self.per_second == 0
    }

    /// The time one request's share of the budget takes to come back, in µs.
    pub fn interval_micros(self) -> u64 {
        1_000_000 / u64::from(self.per_second.max(1))
    }

    /// The window of `RateLimit-Policy` (`w`, whole seconds, at least 1): how long a spent
    /// burst takes to come back whole.
    pub fn window_secs(self) -> u64 {
        (self.interval_micros() * u64::from(self.burst))
            .div_ceil(1_000_000)
            .max(1)
    }
}

/// A request or reservation refused by `limit` (`api-key`, or a [`Quota::name`]).
pub fn refused(limit: &'static str) {
    counter!("shortlink_rate_limited_total", "limit" => limit).increment(1);
}

/// A limit not checked because Redis failed (or failed less than a second ago).
pub fn unavailable(limit: &'static str) {
    counter!("shortlink_rate_limiter_errors_total", "limit" => limit).increment(1);
}
