//! The deployment's webhook settings, checked when read from the configuration. Below the
//! service, the deliverer and the client that use them.

use super::event::Privacy;
use shortlink_config::{Config, ConfigError};
use std::path::PathBuf;
use std::time::Duration;

/// The deployment's webhook settings, from the configuration.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Whether this process delivers.
    pub deliver: bool,
    pub allow_private: bool,
    /// `--outbound-proxy`.
    pub proxy: Option<url::Url>,
    pub ca: Option<PathBuf>,
    pub retry_window: Duration,
    pub timeout: Duration,
    pub lease: Duration,
    pub poll: Duration,
    pub privacy: Privacy,
}

impl WebhookSettings {
    pub fn from_config(config: &Config) -> Result<Self, ConfigError> {
        let problem = |text: &str| Err(ConfigError::ClickWebhooks(text.into()));
        if config.webhook_lease < Duration::from_secs(1) {
            return problem("--webhook-lease must be at least 1s");
        }
        if config.webhook_timeout.is_zero() || config.webhook_timeout * 2 > config.webhook_lease {
            // The lease is renewed once half of it has passed: a POST longer than the other half
            // could outlive it and let another sidecar send the same batch meanwhile.
            return problem(
                "--webhook-timeout must be above 0 and at most half of --webhook-lease",
            );
        }
        if config.webhook_poll.is_zero() {
            return problem("--webhook-poll must be above 0");
        }
        if let Some(ca) = &config.webhook_ca {
            // Read now: a file that cannot be used would only show on the first https:// POST.
            shortlink_core::outbound::tls::verifying_config(Some(ca), "--webhook-ca")
                .map_err(ConfigError::ClickWebhooks)?;
        }
        Ok(Self {
            deliver: config.webhooks,
            allow_private: config.webhook_allow_private,
            proxy: config.outbound_proxy.clone(),
            ca: config.webhook_ca.clone(),
            retry_window: config.webhook_retry_window,
            timeout: config.webhook_timeout,
            lease: config.webhook_lease,
            poll: config.webhook_poll,
            privacy: Privacy {
                include_ip: config.webhook_include_ip,
            },
        })
    }
}
