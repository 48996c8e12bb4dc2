//! Command-line and environment configuration: plain data. Each part validates the settings it
//! owns where it builds itself from them; the whole check (`check-config`) is in `cli::check`,
//! above every part, so no part's settings make the configuration depend on that part.
//!
//! Every option can be given as `--flag`, as the `SHORTLINK_*` variable named beside it, or as a key
//! of the TOML file named by `--config` (the sidecar's `config_file`); the flag wins over the variable, the
//! variable over the file. Options are global, so they may come before or after the subcommand.

#![deny(unsafe_code)]

mod error;
mod network;
pub mod redact;
mod threats;
mod visit_signals;

pub use error::ConfigError;
pub use network::Network;
pub use threats::ThreatConfig;
pub use visit_signals::VisitSignalsConfig;

use crate::redact::redact_url;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Settings shared by every subcommand.
#[derive(Clone, clap::Args)]
pub struct Config {
    /// TOML file with any of these settings, keys named as the flags with `_` (e.g. `redis_url`).
    #[arg(
        long = "config",
        id = "config_file",
        env = "SHORTLINK_CONFIG",
        global = true
    )]
    pub config_file: Option<PathBuf>,

    /// Address the HTTP API listens on; port 0 picks a free port (printed on start-up).
    #[arg(
        long,
        env = "SHORTLINK_LISTEN",
        default_value = "127.0.0.1:8700",
        global = true
    )]
    pub listen: SocketAddr,

    /// Address of the operator's metrics listener: `GET /metrics` (the Prometheus page, which
    /// names every workspace's domains) and nothing else; unset, no metrics are served. Keep it
    /// where the brands' tools cannot reach (never the API's address): nginx's status server
    /// passes it on to Prometheus.
    #[arg(long, env = "SHORTLINK_METRICS_LISTEN", global = true)]
    pub metrics_listen: Option<SocketAddr>,

    /// SQL database: `sqlite://path` (file and directory created on first run), `postgres://...` or
    /// `mysql://...` / `mariadb://...` (MariaDB 10.6+ or MySQL 8).
    #[arg(
        long,
        env = "SHORTLINK_DATABASE_URL",
        default_value = "sqlite://var/shortlink.db",
        global = true,
        hide_env_values = true
    )]
    pub database_url: String,

    /// Most connections the sidecar opens to the database.
    #[arg(
        long,
        env = "SHORTLINK_DB_MAX_CONNECTIONS",
        default_value_t = 16,
        global = true
    )]
    pub db_max_connections: u32,

    /// SQLite only: page cache of the one write connection, in MiB. Inserts land all over the primary-key B-trees; a cache holding their hot pages keeps visit batches and creates from re-reading them.
    #[arg(
        long,
        env = "SHORTLINK_SQLITE_WRITER_CACHE_MIB",
        default_value_t = 32,
        global = true
    )]
    pub sqlite_writer_cache_mib: u32,

    /// SQLite only: page cache of each read connection, in MiB (up to --db-max-connections for links and 8 for visits are open at once; one idle for a minute is closed). Point reads and stats need little: the kernel's page cache holds the file for all of them.
    #[arg(
        long,
        env = "SHORTLINK_SQLITE_READER_CACHE_MIB",
        default_value_t = 4,
        global = true
    )]
    pub sqlite_reader_cache_mib: u32,

    /// How long a request waits for a database connection before answering 503.
    #[arg(long, env = "SHORTLINK_DB_TIMEOUT", default_value = "3s", value_parser = humantime::parse_duration, global = true)]
    pub db_timeout: Duration,

    /// Redis that holds the `sl:c:<code>` projection read by the nginx module.
    #[arg(
        long,
        env = "SHORTLINK_REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        global = true,
        hide_env_values = true
    )]
    pub redis_url: String,

    /// Longest wait for one Redis connection attempt or reply before the write answers 503.
    #[arg(long, env = "SHORTLINK_REDIS_TIMEOUT", default_value = "1s", value_parser = humantime::parse_duration, global = true)]
    pub redis_timeout: Duration,

    /// Redis Sentinel addresses (comma-separated `host:port` or `redis://[:password@]host:port`): the primary is the one they name for --redis-sentinel-service, and is followed through failovers; --redis-url then gives only the database, credentials and TLS. Unset: --redis-url is the one Redis.
    #[arg(
        long,
        env = "SHORTLINK_REDIS_SENTINELS",
        value_delimiter = ',',
        global = true,
        hide_env_values = true
    )]
    pub redis_sentinels: Vec<String>,

    /// Redis Cluster seed nodes (comma-separated `host:port` or `redis://[:password@]host:port`): the projection, markers and visit streams are spread over the cluster's primaries (per-slot markers, 16 visit streams; docs/REDIS-CLUSTER.md). Exclusive with --redis-sentinels. Unset: --redis-url (or Sentinel) is the one primary.
    #[arg(
        long,
        env = "SHORTLINK_REDIS_CLUSTER",
        value_delimiter = ',',
        global = true,
        hide_env_values = true
    )]
    pub redis_cluster: Vec<String>,

    /// The service (master) name the sentinels monitor, as in `sentinel monitor <name> ...`.
    #[arg(
        long,
        env = "SHORTLINK_REDIS_SENTINEL_SERVICE",
        default_value = "shortlink",
        global = true
    )]
    pub redis_sentinel_service: String,

    /// Replicas that must hold each write (`WAIT`) before the API acknowledges it; fewer within --redis-wait-timeout answers 503 and undoes the write. 0 (the one-box default) sends no `WAIT`; with Sentinel use at least 1, or a failover may lose acknowledged links.
    #[arg(
        long,
        env = "SHORTLINK_REDIS_WAIT_REPLICAS",
        default_value_t = 0,
        global = true
    )]
    pub redis_wait_replicas: u32,

    /// Longest wait for --redis-wait-replicas replicas to acknowledge a write.
    #[arg(long, env = "SHORTLINK_REDIS_WAIT_TIMEOUT", default_value = "1s", value_parser = humantime::parse_duration, global = true)]
    pub redis_wait_timeout: Duration,

    /// How often the server checks that Redis still holds the whole projection (`sl:meta:projection`); when Redis lost its data, it is refilled from SQL.
    #[arg(long, env = "SHORTLINK_PROJECTION_CHECK_INTERVAL", default_value = "2s", value_parser = humantime::parse_duration, global = true)]
    pub projection_check_interval: Duration,

    /// Code secret as hex (at least 16 bytes); shared with every nginx module instance.
    #[arg(
        long,
        env = "SHORTLINK_CODE_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub code_secret: Option<String>,

    /// File holding the code secret as hex (alternative to `--code-secret`).
    #[arg(long, env = "SHORTLINK_CODE_SECRET_FILE", global = true)]
    pub code_secret_file: Option<PathBuf>,

    /// Digits in a generated code's body (4..=10); shared with the nginx module.
    #[arg(
        long,
        env = "SHORTLINK_CODE_LENGTH",
        default_value_t = shortcode::DEFAULT_BODY_LEN,
        global = true
    )]
    pub code_length: u8,

    /// Whether generated codes end in a check character; shared with the nginx module.
    #[arg(long, env = "SHORTLINK_CODE_CHECK", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub code_check: bool,

    /// Base of `short_url` when a request has no `X-Shortlink-Public-Base` header, e.g. `https://s.example`.
    #[arg(long, env = "SHORTLINK_PUBLIC_BASE_URL", global = true)]
    pub public_base_url: Option<String>,

    /// Secret nginx's API server sends as `X-Shortlink-Proxy-Secret` (16+ letters and digits): only requests carrying it add `X-Shortlink-Pool` and `X-Shortlink-Public-Base` names to the domain health job; unset, the job checks configured domains only.
    #[arg(
        long,
        env = "SHORTLINK_PROXY_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub proxy_secret: Option<String>,

    /// File holding the proxy secret (alternative to `--proxy-secret`; scripts/run and the Debian package write one).
    #[arg(long, env = "SHORTLINK_PROXY_SECRET_FILE", global = true)]
    pub proxy_secret_file: Option<PathBuf>,

    /// Our short domains (comma-separated): refused as targets, as are the hosts of a request's `X-Shortlink-Pool`.
    #[arg(
        long,
        env = "SHORTLINK_SHORT_DOMAINS",
        value_delimiter = ',',
        global = true
    )]
    pub short_domains: Vec<String>,

    /// API key stored (hashed) at start-up if absent, so a first deployment can be scripted.
    #[arg(
        long,
        env = "SHORTLINK_BOOTSTRAP_API_KEY",
        global = true,
        hide_env_values = true
    )]
    pub bootstrap_api_key: Option<String>,

    /// Longest accepted target URL, in bytes, before and after normalisation (punycode, percent-encoding);
    /// at most 8192, what the shipped nginx configurations carry (shortlink_wire::limits).
    #[arg(
        long,
        env = "SHORTLINK_MAX_URL_LENGTH",
        default_value_t = shortlink_wire::limits::TARGET_BYTES,
        value_parser = parse_max_url_length,
        global = true
    )]
    pub max_url_length: usize,

    /// If set, only targets on these hosts or their subdomains are accepted (comma-separated).
    #[arg(
        long,
        env = "SHORTLINK_ALLOW_HOSTS",
        value_delimiter = ',',
        global = true
    )]
    pub allow_hosts: Vec<String>,

    /// Targets on these hosts or their subdomains are refused (comma-separated); wins over the allowlist.
    #[arg(
        long,
        env = "SHORTLINK_BLOCK_HOSTS",
        value_delimiter = ',',
        global = true
    )]
    pub block_hosts: Vec<String>,

    #[command(flatten)]
    pub threats: ThreatConfig,

    /// Sequence numbers leased from the database at a time; a crash loses at most one block's rest.
    #[arg(
        long,
        env = "SHORTLINK_SEQUENCE_BLOCK",
        default_value_t = 1000,
        global = true
    )]
    pub sequence_block: u64,

    /// How long an expired link keeps answering 410 (its Redis TTL is `expires_at` + this), then 404.
    #[arg(long, env = "SHORTLINK_EXPIRED_GRACE", default_value = "7d", value_parser = humantime::parse_duration, global = true)]
    pub expired_grace: Duration,

    /// How long an `Idempotency-Key` is remembered (a retry after that creates new links); pruned hourly.
    #[arg(long, env = "SHORTLINK_IDEMPOTENCY_RETENTION", default_value = "7d", value_parser = humantime::parse_duration, global = true)]
    pub idempotency_retention: Duration,

    // --- Visit analytics (issue 4) ---
    /// City (or country) database in MaxMind format (`.mmdb`) for visit geo; a missing file leaves geo empty.
    #[arg(long, env = "SHORTLINK_GEOIP_DB", global = true)]
    pub geoip_db: Option<PathBuf>,

    /// City database for IPv6 addresses, when the data comes in one file per address family (as DB-IP Lite does).
    #[arg(long, env = "SHORTLINK_GEOIP_DB_IPV6", global = true)]
    pub geoip_db_ipv6: Option<PathBuf>,

    /// ISP or ASN database (`.mmdb`) for the `isp` of visits, when the city database has none.
    #[arg(long, env = "SHORTLINK_GEOIP_ISP_DB", global = true)]
    pub geoip_isp_db: Option<PathBuf>,

    #[command(flatten)]
    pub visit_signals: VisitSignalsConfig,

    /// Store visitor IPs truncated (IPv4 /24, IPv6 /48); geo and unique visitors still use the full address.
    #[arg(long, env = "SHORTLINK_ANONYMIZE_IP", global = true)]
    pub anonymize_ip: bool,

    /// Run the visit consumer inside `serve` (`--consumer false` when separate `consume` processes do it).
    #[arg(long, env = "SHORTLINK_CONSUMER", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub consumer: bool,

    /// This consumer's name in the group `sl-consumers`, unique per process (default: host name and PID).
    #[arg(long, env = "SHORTLINK_CONSUMER_NAME", global = true)]
    pub consumer_name: Option<String>,

    /// Visit events read, stored (one transaction) and acknowledged at a time, 1..=10000.
    #[arg(
        long,
        env = "SHORTLINK_CONSUMER_BATCH",
        default_value_t = 1000,
        global = true
    )]
    pub consumer_batch: usize,

    /// Events pending this long with a consumer (one that died) are claimed by another.
    #[arg(long, env = "SHORTLINK_CONSUMER_CLAIM_AFTER", default_value = "60s", value_parser = humantime::parse_duration, global = true)]
    pub consumer_claim_after: Duration,

    /// Count bots and link previews in `visit_count` and, by default, in stats clicks.
    #[arg(long, env = "SHORTLINK_COUNT_BOTS", global = true)]
    pub count_bots: bool,

    /// Expire live links with no visit for this long (e.g. `90d`); off unless set.
    #[arg(long, env = "SHORTLINK_EXPIRE_IDLE_AFTER", value_parser = humantime::parse_duration, global = true)]
    pub expire_idle_after: Option<Duration>,

    /// Delete raw visits older than this (e.g. `180d`; rollups stay); kept forever unless set.
    #[arg(long, env = "SHORTLINK_VISIT_RETENTION", value_parser = humantime::parse_duration, global = true)]
    pub visit_retention: Option<Duration>,

    /// How long after its click a conversion may come and still count for it (e.g. `7d`).
    #[arg(long, env = "SHORTLINK_ATTRIBUTION_WINDOW", default_value = "30d", value_parser = humantime::parse_duration, global = true)]
    pub attribution_window: Duration,

    /// Delete audit log rows older than this (e.g. `400d`) from the start of each chain, keeping
    /// the chain checkable from the last one deleted; `0` (the default) keeps them forever.
    #[arg(long, env = "SHORTLINK_AUDIT_RETENTION", default_value = "0", value_parser = humantime::parse_duration, global = true)]
    pub audit_retention: Duration,

    /// How often the expiry and retention jobs run (when either is set).
    #[arg(long, env = "SHORTLINK_CLEANUP_EVERY", default_value = "1h", value_parser = humantime::parse_duration, global = true)]
    pub cleanup_every: Duration,

    // --- Domain health (issue 20) ---
    /// How often the domain health job checks every short domain; 0 turns it off.
    #[arg(long, env = "SHORTLINK_DOMAIN_HEALTH_EVERY", default_value = "60s", value_parser = humantime::parse_duration, global = true)]
    pub domain_health_every: Duration,

    /// Traffic window: a domain is suspected blocked when its clicks over this window fall far below its share of the issued links while other domains get theirs.
    #[arg(long, env = "SHORTLINK_DOMAIN_HEALTH_WINDOW", default_value = "30m", value_parser = humantime::parse_duration, global = true)]
    pub domain_health_window: Duration,

    /// Half-life of the click curve: a link's human clicks are expected to halve with every such age after it is issued (SMS links are clicked mostly soon after sending); each domain's expected share of the window's clicks weighs its recently issued links by this curve.
    #[arg(long, env = "SHORTLINK_DOMAIN_HEALTH_CLICK_HALF_LIFE", default_value = "1h", value_parser = humantime::parse_duration, global = true)]
    pub domain_health_click_half_life: Duration,

    /// Links issued on a domain within the click curve's horizon (the window plus 8 half-lives) before its traffic is judged.
    #[arg(
        long,
        env = "SHORTLINK_DOMAIN_HEALTH_MIN_ISSUED",
        default_value_t = 50,
        global = true
    )]
    pub domain_health_min_issued: u64,

    /// Healthy checks in a row before a domain the health job drained takes new links again (issue 55); an operator's `POST /api/v1/domains/{domain}/restore` brings it back at once.
    #[arg(
        long,
        env = "SHORTLINK_DOMAIN_DRAIN_HEALTHY_CHECKS",
        default_value_t = 3,
        value_parser = clap::value_parser!(u32).range(1..),
        global = true
    )]
    pub domain_drain_healthy_checks: u32,

    /// Delivery receipts' window (issue 68): a domain whose final receipts on a carrier over it (or its last third or twelfth) fail far more often than the workspace's other domains' is drained at once; at most 10m (longer counts as 10m); 0 turns the drain on receipts off. Needs the health job (`--domain-health-every` not 0).
    #[arg(long, env = "SHORTLINK_DOMAIN_RECEIPTS_WINDOW", default_value = "60s", value_parser = humantime::parse_duration, global = true)]
    pub domain_receipts_window: Duration,

    /// Distinct links with a final receipt (each link counted once per window) a domain, and its peers together, need on a carrier within the judged time before the receipts judge it (docs/DELIVERIES.md, "Drain on rejections").
    #[arg(
        long,
        env = "SHORTLINK_DOMAIN_RECEIPTS_MIN",
        default_value_t = 20,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub domain_receipts_min: u64,

    /// DNS resolver the job asks (`ip:port`); the DNS probe is off unless set.
    #[arg(long, env = "SHORTLINK_DOMAIN_HEALTH_RESOLVER", global = true)]
    pub domain_health_resolver: Option<std::net::SocketAddr>,

    /// Addresses the short domains must resolve to (comma-separated IPv4).
    #[arg(
        long,
        env = "SHORTLINK_EDGE_ADDRESSES",
        value_delimiter = ',',
        global = true
    )]
    pub edge_addresses: Vec<std::net::Ipv4Addr>,

    /// The edge (nginx's redirect server, `ip:port`) the canary probe asks as if sent to each domain.
    #[arg(long, env = "SHORTLINK_CANARY_EDGE", global = true)]
    pub canary_edge: Option<std::net::SocketAddr>,

    /// Code of the canary link (on every domain); the canary probe is off unless set with --canary-target.
    #[arg(long, env = "SHORTLINK_CANARY_CODE", global = true)]
    pub canary_code: Option<String>,

    /// The `Location` the canary link must answer.
    #[arg(long, env = "SHORTLINK_CANARY_TARGET", global = true)]
    pub canary_target: Option<String>,

    /// The edge's HTTPS listener (`ip:port`) the certificate probe connects to, with each domain as SNI; the probe is off unless set.
    #[arg(long, env = "SHORTLINK_CERTIFICATE_EDGE", global = true)]
    pub certificate_edge: Option<std::net::SocketAddr>,

    /// PEM file of the roots the edge's certificates must chain to (default: the system's roots).
    #[arg(long, env = "SHORTLINK_CERTIFICATE_CA", global = true)]
    pub certificate_ca: Option<PathBuf>,

    /// A certificate expiring within this many days makes its domain degraded.
    #[arg(
        long,
        env = "SHORTLINK_CERTIFICATE_MIN_DAYS",
        default_value_t = 14,
        global = true
    )]
    pub certificate_min_days: u32,

    /// URL (http:// or https://) that receives a signed POST on every change of a domain's state.
    #[arg(long, env = "SHORTLINK_DOMAIN_WEBHOOK_URL", global = true)]
    pub domain_webhook_url: Option<String>,

    /// PEM roots an https:// webhook's certificate must chain to (default: the system's roots).
    #[arg(long, env = "SHORTLINK_DOMAIN_WEBHOOK_CA", global = true)]
    pub domain_webhook_ca: Option<PathBuf>,

    /// HMAC-SHA256 key of the webhook's `X-Shortlink-Signature` (required with --domain-webhook-url).
    #[arg(
        long,
        env = "SHORTLINK_DOMAIN_WEBHOOK_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub domain_webhook_secret: Option<String>,

    // --- Click webhooks and the visit feed (issue 36) ---
    /// Deliver click webhooks from this process (`--webhooks false` where another sidecar does; several may, sharing the work by lease).
    #[arg(long, env = "SHORTLINK_WEBHOOKS", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub webhooks: bool,

    /// Let webhook URLs reach loopback, private and link-local addresses (names resolving to them included); off, a subscription cannot point the sidecar at internal services.
    #[arg(long, env = "SHORTLINK_WEBHOOK_ALLOW_PRIVATE", global = true)]
    pub webhook_allow_private: bool,

    /// Let import sources (the console's and the `import` command's --source-url) reach loopback, private and link-local addresses (names resolving to them included); off, an import cannot point the sidecar at internal services.
    #[arg(long, env = "SHORTLINK_IMPORT_ALLOW_PRIVATE", global = true)]
    pub import_allow_private: bool,

    /// Proxy (http:// or https://) for webhook deliveries and import sources; without it the environment's HTTP_PROXY, HTTPS_PROXY and ALL_PROXY are ignored. Through it, names are resolved by the proxy, which must refuse internal addresses itself (address literals are still checked here).
    #[arg(long, env = "SHORTLINK_OUTBOUND_PROXY", global = true)]
    pub outbound_proxy: Option<url::Url>,

    /// PEM roots an https:// click webhook's certificate must chain to (default: the system's roots).
    #[arg(long, env = "SHORTLINK_WEBHOOK_CA", global = true)]
    pub webhook_ca: Option<PathBuf>,

    // --- SMS gateways compose sends through (issue 68) ---
    /// Directory of the SMS gateways' password files, one directory per workspace named by its slug (`<dir>/<slug>/<file>`): a workspace's gateway names a file in its own (a plain file name, never a path), read at each send, never stored in SQL. Unset, compose cannot send (`PUT /api/v1/gateway` answers 403 `gateways_disabled`).
    #[arg(long, env = "SHORTLINK_GATEWAY_SECRETS_DIR", global = true)]
    pub gateway_secrets_dir: Option<PathBuf>,

    /// Non-public networks gateway URLs (Kannel's sendsms) may reach, comma-separated CIDR (`10.0.0.0/8,127.0.0.1/32,fd00::/8`): a Kannel inside the deployment's network. Public addresses are always allowed; the sidecar's own listeners, its Redis and its database never are (nor any --gateway-deny), whatever this lists.
    #[arg(
        long,
        env = "SHORTLINK_GATEWAY_ALLOW_NETWORKS",
        value_delimiter = ',',
        global = true
    )]
    pub gateway_allow_networks: Vec<Network>,

    /// More listeners gateway URLs may never reach, comma-separated `address:port` (nginx's status and metrics listeners): refused even inside --gateway-allow-networks. An unspecified address (`0.0.0.0:9145`) stands for every non-public address on that port.
    #[arg(
        long,
        env = "SHORTLINK_GATEWAY_DENY",
        value_delimiter = ',',
        global = true
    )]
    pub gateway_deny: Vec<SocketAddr>,

    /// How long a sidecar's hold on a send job lasts unrenewed (renewed every third of it): then another sidecar, or this one restarted, takes the job over and sends what is left. Sidecars look for such jobs at start-up and every half of it.
    #[arg(long, env = "SHORTLINK_GATEWAY_LEASE", default_value = "30s", value_parser = humantime::parse_duration, global = true)]
    pub gateway_lease: Duration,

    /// Gateway callbacks (`/callbacks/{token}/…`) accepted per second per callback token, twice that at once; 0 turns the limit off. Gateways send reports in bursts: the default is generous.
    #[arg(
        long,
        env = "SHORTLINK_CALLBACK_RATE",
        default_value_t = 5000,
        global = true
    )]
    pub callback_rate: u32,

    /// How long a failing POST is retried (backoff from 1 s, doubling, at most 5 min apart) before its events are recorded as failed, kept for replay, and passed over.
    #[arg(long, env = "SHORTLINK_WEBHOOK_RETRY_WINDOW", default_value = "24h", value_parser = humantime::parse_duration, global = true)]
    pub webhook_retry_window: Duration,

    /// Longest wait for a receiver's answer to one POST; at most half of --webhook-lease.
    #[arg(long, env = "SHORTLINK_WEBHOOK_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration, global = true)]
    pub webhook_timeout: Duration,

    /// How long a sidecar's hold on a subscription lasts unrenewed (renewed every half of it); then another sidecar takes its delivery over.
    #[arg(long, env = "SHORTLINK_WEBHOOK_LEASE", default_value = "30s", value_parser = humantime::parse_duration, global = true)]
    pub webhook_lease: Duration,

    /// How often a delivery that has caught up looks for new visits.
    #[arg(long, env = "SHORTLINK_WEBHOOK_POLL", default_value = "250ms", value_parser = humantime::parse_duration, global = true)]
    pub webhook_poll: Duration,

    /// Put the visitor's address, as the visit store kept it (see --anonymize-ip), in feed and webhook events.
    #[arg(long, env = "SHORTLINK_WEBHOOK_INCLUDE_IP", global = true)]
    pub webhook_include_ip: bool,

    // --- Rate limits and quotas (issue 53; docs/SECURITY.md, "Rate limits and quotas") ---
    /// Requests per second each API key may send to /api/v1 (all sidecars on one Redis together; `GET /api/v1/resolve/{code}`, nginx's fallback, is never limited); 0 turns the limit off.
    #[arg(
        long,
        env = "SHORTLINK_API_RATE_LIMIT",
        default_value_t = 0,
        global = true
    )]
    pub api_rate_limit: u32,

    /// Requests an API key may send at once before --api-rate-limit paces it (at least 1).
    #[arg(
        long,
        env = "SHORTLINK_API_RATE_BURST",
        default_value_t = 100,
        global = true
    )]
    pub api_rate_burst: u32,

    /// Links a workspace may create per UTC day (creates, batches, composes, imports through the API); a request that does not fit is refused whole. 0: unlimited.
    #[arg(
        long,
        env = "SHORTLINK_WORKSPACE_LINKS_PER_DAY",
        default_value_t = 0,
        global = true
    )]
    pub workspace_links_per_day: u64,

    /// Most recipients one compose may have. 0: unlimited.
    #[arg(
        long,
        env = "SHORTLINK_WORKSPACE_COMPOSE_RECIPIENTS",
        default_value_t = 0,
        global = true
    )]
    pub workspace_compose_recipients: u64,

    /// Most click webhook subscriptions a workspace may have. 0: unlimited.
    #[arg(
        long,
        env = "SHORTLINK_WORKSPACE_WEBHOOKS",
        default_value_t = 0,
        global = true
    )]
    pub workspace_webhooks: u64,
}

// Secrets stay out of logs.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("metrics_listen", &self.metrics_listen)
            .field("database_url", &redact_url(&self.database_url))
            .field("redis_url", &redact_url(&self.redis_url))
            .field(
                "redis_sentinels",
                &self
                    .redis_sentinels
                    .iter()
                    .map(|s| redact_url(s))
                    .collect::<Vec<_>>(),
            )
            .field("redis_sentinel_service", &self.redis_sentinel_service)
            .field(
                "redis_cluster",
                &self
                    .redis_cluster
                    .iter()
                    .map(|s| redact_url(s))
                    .collect::<Vec<_>>(),
            )
            .field("redis_wait_replicas", &self.redis_wait_replicas)
            .field("redis_wait_timeout", &self.redis_wait_timeout)
            .field("projection_check_interval", &self.projection_check_interval)
            .field("code_length", &self.code_length)
            .field("code_check", &self.code_check)
            .field("public_base_url", &self.public_base_url)
            .field("short_domains", &self.short_domains)
            .field("max_url_length", &self.max_url_length)
            .field("allow_hosts", &self.allow_hosts)
            .field("block_hosts", &self.block_hosts)
            .field("threat_feeds", &self.threats.threat_feeds)
            .field("sequence_block", &self.sequence_block)
            .field("expired_grace", &self.expired_grace)
            .field("idempotency_retention", &self.idempotency_retention)
            .field("geoip_db", &self.geoip_db)
            .field("geoip_db_ipv6", &self.geoip_db_ipv6)
            .field("anonymize_ip", &self.anonymize_ip)
            .field("consumer", &self.consumer)
            .field("consumer_batch", &self.consumer_batch)
            .field("count_bots", &self.count_bots)
            .field("expire_idle_after", &self.expire_idle_after)
            .field("visit_retention", &self.visit_retention)
            .field("attribution_window", &self.attribution_window)
            .field("audit_retention", &self.audit_retention)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// The code secret from `--code-secret` or `--code-secret-file`, as raw bytes.
    pub fn code_secret(&self) -> Result<Vec<u8>, ConfigError> {
        let hex = match (&self.code_secret, &self.code_secret_file) {
            (Some(_), Some(_)) => return Err(ConfigError::TwoSecrets),
            (Some(hex), None) => hex.clone(),
            (None, Some(path)) => {
                std::fs::read_to_string(path).map_err(|source| ConfigError::SecretFile {
                    path: path.clone(),
                    source,
                })?
            }
            (None, None) => return Err(ConfigError::NoSecret),
        };
        shortcode::parse_hex_secret(&hex).map_err(ConfigError::Scheme)
    }

    /// Where the code secret comes from, for error messages (never the secret).
    pub fn secret_source(&self) -> String {
        match &self.code_secret_file {
            Some(path) => format!("--code-secret-file {}", path.display()),
            None => "--code-secret (SHORTLINK_CODE_SECRET)".to_owned(),
        }
    }

    /// The code scheme shared with the nginx module.
    pub fn code_scheme(&self) -> Result<shortcode::CodeScheme, ConfigError> {
        shortcode::CodeScheme::new(&self.code_secret()?, self.code_length, self.code_check)
            .map_err(ConfigError::Scheme)
    }
}

/// `--max-url-length`: a target longer than nginx's buffers carry would answer a click with 502
/// whenever Redis is away (the fallback proxies the sidecar's `Location`), so it is refused here.
fn parse_max_url_length(value: &str) -> Result<usize, String> {
    use shortlink_wire::limits::TARGET_BYTES_CEILING;
    let length: usize = value
        .parse()
        .map_err(|_| format!("{value:?} is not a number of bytes"))?;
    if !(1..=TARGET_BYTES_CEILING).contains(&length) {
        return Err(format!(
            "must be 1 to {TARGET_BYTES_CEILING} bytes: the shipped nginx configurations carry \
             answers sized for that (shortlink_wire::limits)"
        ));
    }
    Ok(length)
}
