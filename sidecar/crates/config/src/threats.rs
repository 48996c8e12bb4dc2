//! Threat feeds (issue 79): which lists every new link's target is checked against.

use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct ThreatConfig {
    /// Threat feeds every new link's target is checked against, comma-separated `name=format:source`: format `urlhaus-csv`, `urls` (OpenPhish, PhishTank URL lists), `phishtank-csv` or `hosts` (`host`, `0.0.0.0 host`, `||host^`), source an http(s) URL or a file (e.g. `urlhaus=urlhaus-csv:https://urlhaus.abuse.ch/downloads/csv_recent/`). None by default: the project ships no feed.
    #[arg(
        long,
        env = "SHORTLINK_THREAT_FEEDS",
        value_delimiter = ',',
        global = true
    )]
    pub threat_feeds: Vec<String>,

    /// How often each feed is fetched again (a conditional request: unchanged feeds cost a 304). A link a feed lists later is quarantined within this interval and the sweep: 45 s keeps it within a minute.
    #[arg(long, env = "SHORTLINK_THREAT_REFRESH", default_value = "45s", value_parser = humantime::parse_duration, global = true)]
    pub threat_refresh: Duration,

    /// A feed larger than this many bytes is refused (the previous copy keeps answering).
    #[arg(
        long,
        env = "SHORTLINK_THREAT_MAX_BYTES",
        default_value_t = 256 << 20,
        global = true
    )]
    pub threat_max_bytes: u64,

    /// More URL shorteners' hosts a target may not point through (comma-separated), beside the built-in list (bit.ly, tinyurl.com, t.co...).
    #[arg(
        long,
        env = "SHORTLINK_THREAT_SHORTENERS",
        value_delimiter = ',',
        global = true
    )]
    pub threat_shorteners: Vec<String>,

    /// The brands' own hosts (comma-separated): a target whose host reads the same with confusable letters (punycode `brаnd.example`, `rnybank` for `mybank`) is refused.
    #[arg(
        long,
        env = "SHORTLINK_THREAT_BRAND_HOSTS",
        value_delimiter = ',',
        global = true
    )]
    pub threat_brand_hosts: Vec<String>,

    /// Google Web Risk API key: every new target is also looked up with `uris:search` (one HTTPS request per create; off when unset).
    #[arg(
        long,
        env = "SHORTLINK_THREAT_WEBRISK_KEY",
        global = true,
        hide_env_values = true
    )]
    pub threat_webrisk_key: Option<String>,
}
