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

pub use budget::Budget;
pub use connection::LimitsUnavailable;
pub use limit::{refused, unavailable, Limit};
pub use quota::{check_recipients, check_webhooks, Quota, QuotaError, Quotas, Reservation};
pub use rate::{Decision, RateLimiter};

use crate::primary::Primary;
use shortlink_config::Config;
use shortlink_store::WorkspaceId;
use std::sync::Arc;
use std::time::Duration;

/// The limits the settings give (per-key and per-workspace values stored in SQL replace them
/// where the caller has them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitSettings {
    /// `--api-rate-limit`, `--api-rate-burst`.
    pub api_key: Limit,
    /// `--workspace-links-per-day` (0: unlimited).
    pub links_per_day: u64,
    /// `--workspace-compose-recipients` (0: unlimited).
    pub compose_recipients: u64,
    /// `--workspace-webhooks` (0: unlimited).
    pub webhooks: u64,
}

impl LimitSettings {
    pub fn from_config(config: &Config) -> Self {
        Self {
            api_key: Limit::new(config.api_rate_limit, config.api_rate_burst),
            links_per_day: config.workspace_links_per_day,
            compose_recipients: config.workspace_compose_recipients,
            webhooks: config.workspace_webhooks,
        }
    }
}

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
