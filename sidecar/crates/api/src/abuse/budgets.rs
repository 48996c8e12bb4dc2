//! Each client address's budget of abuse reports, in this sidecar's memory (as unknown callback
//! tokens are counted, `crate::deliveries::callbacks::strikes`).

use crate::deliveries::callbacks::strikes::Client;
use crate::throttle::{whole_seconds, RateLimitHeaders, Throttled};
use crate::{Error, Result};
use shortlink_core::sync::LockOrRecover;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Reports an address may send at once.
pub const BURST: u32 = 5;
/// Then one per this long.
pub const INTERVAL: Duration = Duration::from_secs(60);
/// Addresses remembered at most.
const MAX_ADDRESSES: usize = 65_536;

/// Each address's reports, as GCRA's "theoretical arrival time": when its budget would be whole
/// again.
#[derive(Debug, Default)]
pub struct ReportBudgets {
    full_at: Mutex<HashMap<Client, Instant>>,
}

impl ReportBudgets {
    /// Spends one report of `client`'s, or 429 when it has none left now.
    pub(super) fn spend(&self, client: Client, now: Instant) -> Result<()> {
        let mut full_at = self.full_at.lock_or_recover();
        if full_at.len() >= MAX_ADDRESSES && !full_at.contains_key(&client) {
            full_at.retain(|_, at| *at > now);
        }
        let client = if full_at.len() >= MAX_ADDRESSES && !full_at.contains_key(&client) {
            Client::Shared
        } else {
            client
        };
        let at = full_at.entry(client).or_insert(now);
        let owed = at.saturating_duration_since(now);
        let allowed = INTERVAL * (BURST - 1);
        if owed > allowed {
            return Err(refused(owed - allowed, owed));
        }
        *at = (*at).max(now) + INTERVAL;
        Ok(())
    }
}

fn refused(retry: Duration, reset: Duration) -> Error {
    Error::RateLimited(Box::new(Throttled {
        code: "rate_limited",
        message: format!(
            "too many reports from this address ({BURST} at once, then one per {} s); retry later",
            INTERVAL.as_secs()
        ),
        headers: RateLimitHeaders {
            policy: "abuse-reports",
            quota: u64::from(BURST),
            window: Some((INTERVAL * BURST).as_secs()),
            remaining: 0,
            reset: Some(whole_seconds(reset)),
        },
        retry_after: Some(whole_seconds(retry).max(1)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_burst_then_one_per_interval() {
        let budgets = ReportBudgets::default();
        let now = Instant::now();
        let visitor = Client::of(Some("203.0.113.9"));
        for _ in 0..BURST {
            assert!(budgets.spend(visitor, now).is_ok());
        }
        assert!(budgets.spend(visitor, now).is_err());
        assert!(budgets.spend(visitor, now + INTERVAL).is_ok());
        assert!(budgets.spend(Client::of(Some("203.0.113.10")), now).is_ok());
    }
}
