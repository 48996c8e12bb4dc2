//! Another shortener's links, read page by page: what every source yields ([`SourceLink`],
//! [`SourceVisit`]) whatever its format, and the [`Source`] each format implements.
//!
//! Versions covered and what each field means: docs/MIGRATING.md.

mod args;
mod bitly;
mod csv;
mod fetch;
mod item;
mod kutt;
mod shlink;
mod time;
mod yourls;

pub use args::SourceArgs;
pub use item::{Item, Source, SourceLink, SourceVisit};

use crate::cli::error::BoxError;

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
