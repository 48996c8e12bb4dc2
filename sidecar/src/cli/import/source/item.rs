//! What every source yields whatever its format ([`SourceLink`], [`SourceVisit`], or a row it
//! could not read) and the [`Source`] trait each format implements: a file of its own, so the
//! sources need nothing of `mod.rs`, which opens them.

use crate::cli::error::BoxError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

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
    let digest = shortlink_model::validate::hex(&hasher.finalize()[..12]);
    format!("import:{source}:{code}:{digest}:{n}")
}
