//! Unknown callback tokens, limited per client address (issue 77). Each unknown token costs a
//! hash and a read of the writer's database; a caller walking tokens would spend both without
//! end. So an address (an IPv4 address, an IPv6 /64, as the password budgets count clients) that
//! has presented [`BURST`] tokens no workspace ever had, then more than one per [`INTERVAL`],
//! gets 429 before its token is hashed or looked up, until its budget refills.
//!
//! Only a token with no row at all counts: a revoked token, or one made for another gateway, is
//! a gateway still calling with what it was once given (a Kannel shared by two brands keeps
//! calling with one brand's revoked token), never a guess, and must not lock out the other
//! brand's receipts from the same address. Right tokens never count.
//!
//! Kept in this sidecar's memory: the cost it bounds is this sidecar's own (its hashing, its
//! reads), so a budget per sidecar is the budget that matters; behind N sidecars an address gets
//! N budgets. The table holds at most [`MAX_ADDRESSES`] addresses; past that (a flood from many
//! addresses at once), the addresses it cannot hold share one budget, so the flood is bounded
//! as a whole. The client address comes from nginx's `X-Real-IP`, trusted only with the proxy
//! secret (`crate::request_id`); a request without one shares that same budget.
//!
//! A callback handler takes its [`Caller`]: [`Caller::admit`] refuses a spent address before the
//! token is hashed or looked up, and [`Caller::strike`] counts an unknown token against it. An
//! extractor rather than a layer: nothing runs for a callback beyond the table's lock.

use crate::throttle::{whole_seconds, RateLimitHeaders, Throttled};
use crate::Error;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use shortlink_core::sync::LockOrRecover;
use shortlink_store::audit::RequestInfo;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Who presents a callback token: its slot in this sidecar's table of unknown tokens.
pub struct Caller {
    client: Client,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        let addr = (parts.extensions.get::<RequestInfo>()).and_then(|i| i.client_addr.as_deref());
        Ok(Caller {
            client: Client::of(addr),
        })
    }
}

impl Caller {
    /// 429 if this caller has no unknown token left to present now.
    pub fn admit(&self, table: &UnknownTokens) -> Result<(), Error> {
        table.admit_at(self.client, Instant::now())
    }

    /// Counts one unknown token presented by this caller.
    pub fn strike(&self, table: &UnknownTokens) {
        table.strike_at(self.client, Instant::now());
    }
}

/// Unknown tokens an address may present at once.
pub const BURST: u32 = 10;
/// Then one per this long.
pub const INTERVAL: Duration = Duration::from_secs(6);
/// Addresses remembered at most (a few MB at worst).
pub const MAX_ADDRESSES: usize = 65_536;

/// Where an address's count is kept: its /64 or IPv4 address, or the shared slot of everyone the
/// table cannot tell apart.
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

/// Each address's unknown tokens, as GCRA's "theoretical arrival time": when its budget would
/// be whole again.
#[derive(Debug, Default)]
pub struct UnknownTokens {
    full_at: Mutex<HashMap<Client, Instant>>,
}

impl UnknownTokens {
    fn admit_at(&self, client: Client, now: Instant) -> Result<(), Error> {
        let full_at = self.full_at.lock_or_recover();
        let client = Self::slot(&full_at, client);
        let Some(&full_at) = full_at.get(&client) else {
            return Ok(());
        };
        // As GCRA: a strike fits while at most BURST - 1 intervals are still owed.
        let owed = full_at.saturating_duration_since(now);
        let allowed = INTERVAL * (BURST - 1);
        if owed <= allowed {
            return Ok(());
        }
        Err(refused(owed - allowed, owed))
    }

    fn strike_at(&self, client: Client, now: Instant) {
        let mut full_at = self.full_at.lock_or_recover();
        if full_at.len() >= MAX_ADDRESSES && !full_at.contains_key(&client) {
            full_at.retain(|_, at| *at > now);
        }
        let client = Self::slot(&full_at, client);
        let at = full_at.entry(client).or_insert(now);
        *at = (*at).max(now) + INTERVAL;
    }

    /// `client`'s own slot, or the shared one while the table is full of others.
    fn slot(full_at: &HashMap<Client, Instant>, client: Client) -> Client {
        if full_at.len() >= MAX_ADDRESSES && !full_at.contains_key(&client) {
            Client::Shared
        } else {
            client
        }
    }
}

fn refused(retry: Duration, reset: Duration) -> Error {
    Error::RateLimited(Box::new(Throttled {
        code: "rate_limited",
        message: format!(
            "too many unknown callback tokens from this address ({BURST} at once, then one per \
             {} s); retry later",
            INTERVAL.as_secs()
        ),
        headers: RateLimitHeaders {
            policy: "callback-unknown-token",
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
    fn an_address_gets_its_burst_then_one_per_interval_and_others_are_apart() {
        let table = UnknownTokens::default();
        let now = Instant::now();
        let guesser = Client::of(Some("203.0.113.9"));
        for _ in 0..BURST {
            assert!(table.admit_at(guesser, now).is_ok());
            table.strike_at(guesser, now);
        }
        assert!(table.admit_at(guesser, now).is_err(), "past the burst");
        assert!(
            table.admit_at(guesser, now + INTERVAL).is_ok(),
            "refilled by one"
        );
        let other = Client::of(Some("203.0.113.10"));
        assert!(table.admit_at(other, now).is_ok(), "another address");
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_its_ipv4() {
        assert_eq!(
            Client::of(Some("2001:db8::1")),
            Client::of(Some("2001:db8::ffff:1"))
        );
        assert_ne!(
            Client::of(Some("2001:db8::1")),
            Client::of(Some("2001:db8:0:1::1"))
        );
        assert_eq!(
            Client::of(Some("::ffff:203.0.113.9")),
            Client::of(Some("203.0.113.9"))
        );
        assert_eq!(Client::of(None), Client::Shared);
        assert_eq!(Client::of(Some("not an address")), Client::Shared);
    }

    #[test]
    fn a_full_table_puts_new_addresses_in_one_shared_budget() {
        let table = UnknownTokens::default();
        let now = Instant::now();
        {
            let mut full_at = table.full_at.lock_or_recover();
            for n in 0..MAX_ADDRESSES as u32 {
                full_at.insert(Client::V4(n), now + INTERVAL * BURST);
            }
        }
        let newcomer = Client::V4(u32::MAX);
        for _ in 0..BURST {
            table.strike_at(newcomer, now);
        }
        let full_at = table.full_at.lock_or_recover();
        assert!(!full_at.contains_key(&newcomer));
        assert!(full_at.contains_key(&Client::Shared));
        drop(full_at);
        assert!(table.admit_at(Client::V4(u32::MAX - 1), now).is_err());
    }
}
