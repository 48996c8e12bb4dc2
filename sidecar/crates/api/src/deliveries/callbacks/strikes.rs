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
//! N budgets. The table holds at most `per_address::MAX_ADDRESSES` addresses; past that (a flood
//! from many addresses at once), the addresses it cannot hold share one budget, so the flood is
//! bounded as a whole. The client address comes from nginx's `X-Real-IP`, trusted only with the proxy
//! secret (`crate::request_id`); a request without one shares that same budget.
//!
//! A callback handler takes its [`Caller`]: [`Caller::admit`] refuses a spent address before the
//! token is hashed or looked up, and [`Caller::strike`] counts an unknown token against it. An
//! extractor rather than a layer: nothing runs for a callback beyond the table's lock.

use crate::per_address::{AddressBudgets, Client};
use crate::Error;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use shortlink_store::audit::RequestInfo;
use std::convert::Infallible;
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
/// Each address's unknown tokens ([`AddressBudgets`]: [`BURST`], then one per [`INTERVAL`]).
#[derive(Debug)]
pub struct UnknownTokens(AddressBudgets);

impl Default for UnknownTokens {
    fn default() -> Self {
        UnknownTokens(AddressBudgets::new(BURST, INTERVAL))
    }
}

impl UnknownTokens {
    fn admit_at(&self, client: Client, now: Instant) -> Result<(), Error> {
        match self.0.spent(client, now) {
            None => Ok(()),
            Some(owed) => {
                Err(self
                    .0
                    .refusal("callback-unknown-token", "unknown callback tokens", owed))
            }
        }
    }

    fn strike_at(&self, client: Client, now: Instant) {
        self.0.spend(client, now);
    }
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
}
