//! The `import` and `verify-import` flags that say where a source is read from: a leaf of its
//! own, which the sources read and `mod.rs` hands to the one it opens.

use std::path::PathBuf;

/// Where another shortener's links are read from (`import` and `verify-import`).
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// The source's export file, when it is read from one (set from `import FILE`).
    #[arg(skip)]
    pub file: Option<PathBuf>,
    /// The source's base URL: Shlink's or Kutt's server, Bitly's API (default
    /// https://api-ssl.bitly.com).
    #[arg(long, env = "SHORTLINK_IMPORT_SOURCE_URL")]
    pub source_url: Option<String>,
    /// The source's API key (Shlink `X-Api-Key`, Kutt `X-API-KEY`) or token (Bitly).
    #[arg(long, env = "SHORTLINK_IMPORT_SOURCE_KEY", hide_env_values = true)]
    pub source_key: Option<String>,
    /// YOURLS's database, `mysql://user:password@host:port/yourls`.
    #[arg(long, env = "SHORTLINK_IMPORT_SOURCE_DATABASE", hide_env_values = true)]
    pub source_database: Option<String>,
    /// YOURLS's table prefix (`YOURLS_DB_PREFIX`).
    #[arg(long, env = "SHORTLINK_IMPORT_TABLE_PREFIX", default_value = "yourls_")]
    pub table_prefix: String,
    /// Bitly's group GUID whose links are read.
    #[arg(long, env = "SHORTLINK_IMPORT_BITLY_GROUP")]
    pub bitly_group: Option<String>,
    /// The domain of links whose source does not name one (YOURLS's site, Shlink's default
    /// domain, a CSV without a domain column).
    #[arg(long, env = "SHORTLINK_IMPORT_SOURCE_DOMAIN")]
    pub source_domain: Option<String>,
    /// Whether every link appends the short URL's query to its target, whatever the source's
    /// own behaviour (default: the source's; Shlink's per link).
    #[arg(long, env = "SHORTLINK_IMPORT_FORWARD_QUERY")]
    pub forward_query: Option<bool>,
    /// Links asked per page of the source's API.
    #[arg(long, env = "SHORTLINK_IMPORT_PAGE_SIZE", default_value_t = 100)]
    pub page_size: u32,
    /// Where the source's API may be reached (set from `--import-allow-private` and
    /// `--outbound-proxy`).
    #[arg(skip)]
    pub outbound: shortlink_core::outbound::Policy,
}
