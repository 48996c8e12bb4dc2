//! The limits the configuration gives, apart from the limiters that apply them.

use super::limit::Limit;
use shortlink_config::Config;

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
