//! Another shortener's links, read page by page: what every source yields ([`SourceLink`],
//! [`SourceVisit`]) whatever its format, and the [`Source`] each format implements.
//!
//! Versions covered and what each field means: docs/MIGRATING.md.

mod bitly;
mod csv;
mod fetch;
mod kutt;
mod shlink;
mod time;
mod yourls;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::path::PathBuf;

/// Any error of a source, said as it is (the command's own error type, defined here so that
/// the importer's files need nothing of the subcommands' module).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
    pub outbound: crate::outbound::Policy,
}

/// The shorteners `import --from` reads (`shortlink`, our own export, is read by `own`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceKind {
    /// Our own CSV or NDJSON (what `export` writes); new codes for rows without one.
    Shortlink,
    /// YOURLS 1.9: its MySQL/MariaDB database (`--source-database`).
    Yourls,
    /// Shlink 4.x: REST API v3 (`--source-url`, `--source-key`) or its CSV export (FILE).
    Shlink,
    /// Kutt v2/v3: API v2 (`--source-url`, `--source-key`).
    Kutt,
    /// Bitly: API v4 (`--source-key`, `--bitly-group`) or its CSV export (FILE).
    Bitly,
    /// A CSV with a header: code, url, domain, created_at, expires_at, title, tags, visits.
    Csv,
}

impl SourceKind {
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Shortlink => "shortlink",
            SourceKind::Yourls => "yourls",
            SourceKind::Shlink => "shlink",
            SourceKind::Kutt => "kutt",
            SourceKind::Bitly => "bitly",
            SourceKind::Csv => "csv",
        }
    }
}

/// One link as the old shortener had it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceLink {
    /// Exactly as sent: case, length and `.`/`~` kept.
    pub code: String,
    /// The domain it was sent on; empty when the source does not say (then `--source-domain`).
    pub domain: String,
    pub target: String,
    pub created_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub valid_since: Option<DateTime<Utc>>,
    pub max_visits: Option<i64>,
    pub title: Option<String>,
    pub tags: Vec<String>,
    /// The source's visit total.
    pub visits: i64,
    /// Whether the old shortener appended the short URL's query to the target.
    pub forward_query: bool,
    /// The status the old shortener answered.
    pub redirect: u16,
    /// Protected by a password we cannot carry over (Kutt keeps a bcrypt hash we never see).
    pub password: bool,
    /// The old shortener no longer redirects it (Kutt's banned links): imported revoked, so it
    /// answers 410 rather than working again.
    pub revoked: bool,
}

/// One recorded visit of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceVisit {
    /// Stable across runs: the source's id, or one derived from the visit's fields.
    pub id: String,
    pub at: DateTime<Utc>,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    pub referrer: Option<String>,
    /// ISO 3166 alpha-2, when the source located the visit.
    pub country: Option<String>,
    pub region: Option<String>,
    pub city: Option<String>,
}

/// A row the source could not give as a link, with its place (line, id) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub at: String,
    pub message: String,
}

pub type Item = Result<SourceLink, Unreadable>;

#[async_trait]
pub trait Source: Send {
    /// The next page of links; `None` once every link was given.
    async fn next_page(&mut self) -> Result<Option<Vec<Item>>, BoxError>;

    /// How many links there are, when the source says (for the progress bar).
    fn total(&self) -> Option<u64> {
        None
    }

    /// The individual visits of a link, where the source keeps them (YOURLS's log, Shlink's
    /// visits); otherwise only its total is known.
    async fn visits(&mut self, _link: &SourceLink) -> Result<Vec<SourceVisit>, BoxError> {
        Ok(Vec::new())
    }
}

/// Opens the source `kind` names, from a file or from its API or database.
pub async fn open(kind: SourceKind, args: &SourceArgs) -> Result<Box<dyn Source>, BoxError> {
    let file = args.file.as_deref();
    Ok(match (kind, file) {
        (SourceKind::Csv, Some(file)) => Box::new(csv::CsvSource::generic(file)?),
        (SourceKind::Shlink, Some(file)) => Box::new(csv::CsvSource::shlink(file)?),
        (SourceKind::Bitly, Some(file)) => Box::new(csv::CsvSource::bitly(file)?),
        (SourceKind::Shlink, None) => Box::new(shlink::ShlinkApi::new(args)?),
        (SourceKind::Kutt, None) => Box::new(kutt::KuttApi::new(args)?),
        (SourceKind::Bitly, None) => Box::new(bitly::BitlyApi::new(args)?),
        (SourceKind::Yourls, None) => Box::new(yourls::YourlsDb::connect(args).await?),
        (SourceKind::Csv, None) => return Err("--from csv needs a FILE".into()),
        (SourceKind::Kutt | SourceKind::Yourls, Some(_)) => {
            return Err(format!(
                "--from {} reads its API or database, not a file",
                kind.name()
            )
            .into())
        }
        (SourceKind::Shortlink, _) => return Err("--from shortlink is read by `own`".into()),
    })
}

/// A visit id for sources without one: the link and the visit's fields, with `n` telling apart
/// identical visits of the same link (their order in the source), so ids stay the same when the
/// source gains visits between two runs.
pub fn derived_visit_id(source: &str, code: &str, fields: &[&str], n: usize) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update(field.as_bytes());
        hasher.update([0]);
    }
    let digest = crate::validate::hex(&hasher.finalize()[..12]);
    format!("import:{source}:{code}:{digest}:{n}")
}
