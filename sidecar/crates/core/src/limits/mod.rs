//! Rate limits and quotas shared by every sidecar through Redis (issue 53, "Quotas and rate
//! limits"; docs/SECURITY.md, "Rate limits and quotas"):
//!
//! - [`rate`]: requests per second with a burst, per API key (GCRA, one script per request);
//! - [`quota`]: per workspace, links per UTC day reserved before anything is issued, and plain
//!   checks of recipients per compose and webhook subscriptions.
//!
//! Both run one script on one key (hash-tagged: one slot on a cluster) on a connection of their
//! own ([`connection`]), so a limiter stuck on Redis never holds the write-through's connection.

mod budget;
mod connection;
mod limit;
pub mod quota;
pub mod rate;
mod settings;

pub use budget::Budget;
pub use connection::LimitsUnavailable;
pub use limit::{refused, unavailable, Limit};
pub use quota::{check_recipients, check_webhooks, Quota, QuotaError, Quotas, Reservation};
pub use rate::{Decision, RateLimiter};
pub use settings::LimitSettings;

use crate::primary::Primary;
use shortlink_model::WorkspaceId;
use std::sync::Arc;
use std::time::Duration;

/// The per-key limiter and the quotas, on one connection to Redis.
pub struct Limits {
    pub settings: LimitSettings,
    pub rate: RateLimiter,
    pub quotas: Quotas,
}

impl Limits {
    /// On `primary` (a `Primary` of their own), each script allowed `timeout`.
    pub fn new(primary: Primary, timeout: Duration, settings: LimitSettings) -> Self {
        let connection = Arc::new(connection::LimitsConnection::new(primary, timeout));
        Self {
            settings,
            rate: RateLimiter::new(Arc::clone(&connection)),
            quotas: Quotas::new(connection),
        }
    }

    /// `workspace`'s budget from its stored quotas (`own`), the settings filling what it
    /// leaves unset: what every request of the workspace's keys and console sessions counts
    /// against.
    pub fn budget(&self, workspace: WorkspaceId, own: shortlink_store::Quotas) -> Budget {
        Budget::new(self.quotas.clone(), &self.settings, workspace, own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limits_interval_and_window() {
        let limit = Limit::new(50, 100);
        assert_eq!(limit.interval_micros(), 20_000);
        assert_eq!(limit.window_secs(), 2);
        assert_eq!(Limit::new(3, 1).window_secs(), 1);
        assert_eq!(Limit::new(1, 10).window_secs(), 10);
        assert_eq!(Limit::new(7, 0).burst, 1);
        assert!(Limit::OFF.is_off() && !limit.is_off());
    }
}
