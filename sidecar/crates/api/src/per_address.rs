//! A budget per client address, kept in this sidecar's memory (GCRA: each address's "theoretical
//! arrival time", when its budget would be whole again): `burst` at once, then one per
//! `interval`. Used where a cost is this sidecar's own, so a budget per sidecar is the one that
//! matters: unknown callback tokens (`deliveries::callbacks::strikes`) and abuse reports
//! (`abuse::budgets`). The table holds at most [`MAX_ADDRESSES`]; past that (a flood from many
//! addresses at once), the addresses it cannot hold share one budget, so a flood is bounded as a
//! whole.

use crate::throttle::{whole_seconds, RateLimitHeaders, Throttled};
use crate::Error;
use shortlink_core::sync::LockOrRecover;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses remembered at most (a few MB at worst).
pub const MAX_ADDRESSES: usize = 65_536;

/// Where an address's count is kept: its /64 or IPv4 address, or the shared slot of everyone the
/// table cannot tell apart (no address, a full table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Client {
    V4(u32),
    V6(u64),
    Shared,
}

impl Client {
    pub(crate) fn of(addr: Option<&str>) -> Client {
        match addr
            .and_then(|a| a.parse::<IpAddr>().ok())
            .map(|ip| ip.to_canonical())
        {
            Some(IpAddr::V4(v4)) => Client::V4(u32::from(v4)),
            Some(IpAddr::V6(v6)) => Client::V6((u128::from(v6) >> 64) as u64),
            None => Client::Shared,
        }
    }
}

#[derive(Debug)]
pub struct AddressBudgets {
    burst: u32,
    interval: Duration,
    full_at: Mutex<HashMap<Client, Instant>>,
}

impl AddressBudgets {
    pub fn new(burst: u32, interval: Duration) -> Self {
        AddressBudgets {
            burst,
            interval,
            full_at: Mutex::default(),
        }
    }

    /// `None` while `client` has one left now; else how long until it has (the retry) and until
    /// its budget is whole (the reset).
    pub(crate) fn spent(&self, client: Client, now: Instant) -> Option<(Duration, Duration)> {
        let full_at = self.full_at.lock_or_recover();
        let client = slot(&full_at, client);
        let owed = full_at.get(&client)?.saturating_duration_since(now);
        // One fits while at most burst - 1 intervals are still owed.
        let allowed = self.interval * self.burst.saturating_sub(1);
        (owed > allowed).then(|| (owed - allowed, owed))
    }

    /// The 429 of an address past its budget (`spent`'s retry and reset), with the rate-limit
    /// headers under `policy`; `what` says what it sent too many of.
    pub(crate) fn refusal(
        &self,
        policy: &'static str,
        what: &str,
        (retry, reset): (Duration, Duration),
    ) -> Error {
        Error::RateLimited(Box::new(Throttled {
            code: "rate_limited",
            message: format!(
                "too many {what} from this address ({} at once, then one per {} s); retry later",
                self.burst,
                self.interval.as_secs()
            ),
            headers: RateLimitHeaders {
                policy,
                quota: u64::from(self.burst),
                window: Some((self.interval * self.burst).as_secs()),
                remaining: 0,
                reset: Some(whole_seconds(reset)),
            },
            retry_after: Some(whole_seconds(retry).max(1)),
        }))
    }

    /// Counts one against `client`'s budget.
    pub(crate) fn spend(&self, client: Client, now: Instant) {
        let mut full_at = self.full_at.lock_or_recover();
        if full_at.len() >= MAX_ADDRESSES && !full_at.contains_key(&client) {
            full_at.retain(|_, at| *at > now);
        }
        let client = slot(&full_at, client);
        let at = full_at.entry(client).or_insert(now);
        *at = (*at).max(now) + self.interval;
    }
}

/// `client`'s own slot, or the shared one while the table is full of others.
fn slot(full_at: &HashMap<Client, Instant>, client: Client) -> Client {
    if full_at.len() >= MAX_ADDRESSES && !full_at.contains_key(&client) {
        Client::Shared
    } else {
        client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_burst_then_one_per_interval_and_others_are_apart() {
        let interval = Duration::from_secs(6);
        let budgets = AddressBudgets::new(3, interval);
        let now = Instant::now();
        let guesser = Client::of(Some("203.0.113.9"));
        for _ in 0..3 {
            assert!(budgets.spent(guesser, now).is_none());
            budgets.spend(guesser, now);
        }
        let (retry, reset) = budgets.spent(guesser, now).expect("past the burst");
        assert_eq!((retry, reset), (interval, interval * 3));
        assert!(
            budgets.spent(guesser, now + interval).is_none(),
            "refilled by one"
        );
        assert!(budgets
            .spent(Client::of(Some("203.0.113.10")), now)
            .is_none());
        assert_eq!(
            Client::of(Some("2001:db8::1")),
            Client::of(Some("2001:db8::2")),
            "a /64"
        );
        assert_eq!(Client::of(None), Client::Shared);
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_its_ipv4() {
        assert_ne!(
            Client::of(Some("2001:db8::1")),
            Client::of(Some("2001:db8:0:1::1"))
        );
        assert_eq!(
            Client::of(Some("::ffff:203.0.113.9")),
            Client::of(Some("203.0.113.9"))
        );
        assert_eq!(Client::of(Some("not an address")), Client::Shared);
    }

    #[test]
    fn a_full_table_puts_new_addresses_in_one_shared_budget() {
        let interval = Duration::from_secs(6);
        let budgets = AddressBudgets::new(10, interval);
        let now = Instant::now();
        {
            let mut full_at = budgets.full_at.lock_or_recover();
            for n in 0..MAX_ADDRESSES as u32 {
                full_at.insert(Client::V4(n), now + interval * 10);
            }
        }
        let newcomer = Client::V4(u32::MAX);
        for _ in 0..10 {
            budgets.spend(newcomer, now);
        }
        let full_at = budgets.full_at.lock_or_recover();
        assert!(!full_at.contains_key(&newcomer));
        assert!(full_at.contains_key(&Client::Shared));
        drop(full_at);
        assert!(budgets.spent(Client::V4(u32::MAX - 1), now).is_some());
    }
}
