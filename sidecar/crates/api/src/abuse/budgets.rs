//! Each client address's budget of abuse reports, in this sidecar's memory
//! ([`crate::per_address`], as unknown callback tokens are counted).

use crate::per_address::{AddressBudgets, Client};
use crate::Result;
use std::time::{Duration, Instant};

/// Reports an address may send at once.
pub const BURST: u32 = 5;
/// Then one per this long.
pub const INTERVAL: Duration = Duration::from_secs(60);
/// Each address's reports ([`AddressBudgets`]: [`BURST`], then one per [`INTERVAL`]).
#[derive(Debug)]
pub struct ReportBudgets(AddressBudgets);

impl Default for ReportBudgets {
    fn default() -> Self {
        ReportBudgets(AddressBudgets::new(BURST, INTERVAL))
    }
}

impl ReportBudgets {
    /// Spends one report of `client`'s, or 429 when it has none left now.
    pub(super) fn spend(&self, client: Client, now: Instant) -> Result<()> {
        if let Some(owed) = self.0.spent(client, now) {
            return Err(self.0.refusal("abuse-reports", "reports", owed));
        }
        self.0.spend(client, now);
        Ok(())
    }
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
