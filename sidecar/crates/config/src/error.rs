//! The configuration's one error type: a setting that cannot work, named by its flag.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no code secret: set --code-secret / SHORTLINK_CODE_SECRET or --code-secret-file")]
    NoSecret,
    #[error("give either --code-secret or --code-secret-file, not both")]
    TwoSecrets,
    #[error("cannot read the code secret file {path}: {source}")]
    SecretFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("code scheme: {0}")]
    Scheme(shortcode::SchemeError),
    #[error("{0}")]
    ProxySecret(String),
    #[error("--public-base-url: {0}")]
    PublicBase(String),
    #[error("domain health: {0}")]
    Webhook(String),
    #[error("click webhooks: {0}")]
    ClickWebhooks(String),
    #[error("threat feeds: {0}")]
    ThreatFeed(String),
    /// The operator's hosting networks file (`--hosting-networks`), with the line at fault.
    #[error("{0}")]
    HostingNetworks(String),
    #[error("{flag}: {value:?} is not a host name")]
    Host { flag: &'static str, value: String },
    #[error(
        "--database-url {0:?}: use sqlite://..., postgres://... or mysql://... (mariadb://...)"
    )]
    DatabaseUrl(String),
    #[error("--sequence-block must be between 1 and 1000000")]
    SequenceBlock,
    #[error("--bootstrap-api-key must be at least 32 characters")]
    BootstrapKey,
    #[error("--redis-sentinels: {0:?} is neither host:port nor a redis:// URL")]
    Sentinel(String),
    /// `--redis-cluster` set with `--redis-sentinels`, empty, or with a seed that is no address.
    #[error("--redis-cluster: {0}")]
    Cluster(String),
}
