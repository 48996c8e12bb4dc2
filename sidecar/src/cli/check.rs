//! `check-config`: every problem of the settings that needs no server, all at once. The parts
//! own their checks; this asks each of them, from above.

use super::error::BoxError;
use shortlink_config::redact::redact_url;
use shortlink_config::{Config, ConfigError};
use shortlink_domains::health::HealthSettings;

/// A file's own problems were reported while parsing (crate::config_file); these are the
/// settings' problems once merged.
pub fn check_config(config: &Config) -> Result<(), BoxError> {
    let problems = problems(config);
    let source = match &config.config_file {
        Some(file) => file.display().to_string(),
        None => "flags and environment (no --config file)".to_owned(),
    };
    if problems.is_empty() {
        println!("{source}: ok");
        return Ok(());
    }
    let list: Vec<String> = problems.iter().map(|p| format!("\n  {p}")).collect();
    Err(format!(
        "{} problem(s) in the settings ({source}):{}",
        problems.len(),
        list.concat()
    )
    .into())
}

/// Every problem of the settings that needs no server, all at once (`check-config`);
/// start-up checks the same (crate::build_state) and then the database and Redis.
pub fn problems(config: &Config) -> Vec<ConfigError> {
    let mut problems = Vec::new();
    if let Err(e) = config.code_scheme() {
        problems.push(e);
    }
    if shortlink_store::Backend::from_url(&config.database_url).is_none() {
        problems.push(ConfigError::DatabaseUrl(redact_url(&config.database_url)));
    }
    if let Err(e) = shortlink_api::proxy_secret::ProxySecret::from_config(config) {
        problems.push(e);
    }
    if !(1..=1_000_000).contains(&config.sequence_block) {
        problems.push(ConfigError::SequenceBlock);
    }
    if let Some(Err(e)) = config
        .public_base_url
        .as_deref()
        .map(shortlink_model::validate::public_base)
    {
        problems.push(ConfigError::PublicBase(e));
    }
    if let Err(value) = shortlink_model::validate::normalize_hosts(&config.short_domains) {
        problems.push(ConfigError::Host {
            flag: "--short-domains",
            value,
        });
    }
    if let Err(value) = shortlink_model::validate::UrlPolicy::new(
        config.max_url_length,
        &config.allow_hosts,
        &config.block_hosts,
    ) {
        problems.push(ConfigError::Host {
            flag: "--allow-hosts/--block-hosts",
            value,
        });
    }
    if let Err(e) = crate::threats::from_config(config) {
        problems.push(e);
    }
    if let Err(e) = shortlink_visits::hosting_list(config) {
        problems.push(ConfigError::HostingNetworks(e.to_string()));
    }
    if config
        .bootstrap_api_key
        .as_ref()
        .is_some_and(|key| key.trim().len() < 32)
    {
        problems.push(ConfigError::BootstrapKey);
    }
    // Webhook URL and secret, probe flags that go together, CA files (read here too).
    if let Err(e) = HealthSettings::from_config(config, Vec::new()) {
        problems.push(e);
    }
    if let Err(e) = shortlink_webhooks::WebhookSettings::from_config(config) {
        problems.push(e);
    }
    for address in &config.redis_sentinels {
        if shortlink_core::primary::parse_sentinel_address(address).is_err() {
            problems.push(ConfigError::Sentinel(redact_url(address)));
        }
    }
    if let Err(e) = shortlink_core::primary::check_cluster_seeds(config) {
        problems.push(e);
    }
    problems
}
