//! What the storage holds: links, their flags and states, list cursors, API keys and their roles.

use super::error::{StorageError, StorageResult};
use chrono::{DateTime, Utc};
use shortlink_model::{Link, LinkState, WorkspaceId};

/// Where a link came from in a request sent with an `Idempotency-Key`: the key's row and the
/// item's index (0 for a single create). Unique, so a retry can find what was committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub batch_id: i64,
    pub index: i64,
}

/// A link to insert, with its slot if the request had an idempotency key.
#[derive(Debug, Clone)]
pub struct NewRow {
    pub link: Link,
    pub slot: Option<Slot>,
}

/// Which links a listing, export or count covers; `None` fields do not filter. Made for one
/// workspace ([`LinkFilter::in_workspace`]) or, by the jobs that tend the whole installation,
/// for all ([`LinkFilter::all_workspaces`]): there is no filter that forgot to say.
#[derive(Debug, Clone)]
pub struct LinkFilter {
    workspace: Option<WorkspaceId>,
    pub campaign: Option<String>,
    pub recipient_ref: Option<String>,
    /// Links carrying this tag.
    pub tag: Option<String>,
    /// Links in this state at `now`.
    pub state: Option<(LinkState, DateTime<Utc>)>,
    /// Links with this text in their code, target, recipient reference, campaign or tags, any
    /// case (the console's search; each backend's index: the `link_search` migrations).
    pub search: Option<String>,
}

impl LinkFilter {
    /// Every link of `workspace`.
    pub fn in_workspace(workspace: WorkspaceId) -> Self {
        Self::of(Some(workspace))
    }

    /// Every link of the installation: resync, refill, the operator's export.
    pub fn all_workspaces() -> Self {
        Self::of(None)
    }

    fn of(workspace: Option<WorkspaceId>) -> Self {
        Self {
            workspace,
            campaign: None,
            recipient_ref: None,
            tag: None,
            state: None,
            search: None,
        }
    }

    /// The workspace it is limited to; `None` for the whole installation.
    pub fn workspace(&self) -> Option<WorkspaceId> {
        self.workspace
    }
}

/// Per-campaign aggregates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CampaignStats {
    pub links: i64,
    pub live: i64,
    pub expired: i64,
    pub revoked: i64,
    /// Sum of `visit_count`.
    pub visits: i64,
}

/// The row of an idempotency key, claimed or found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub id: i64,
    pub request_hash: String,
    /// This call inserted it: no link can have its slots yet (unless a concurrent request with the
    /// same key races, which the slots' unique index settles).
    pub fresh: bool,
}

/// What the URL-hash index holds: the first 16 hex digits (64 bits) of the hash. A quarter of the
/// full hash's size, so batch inserts dirty (and write to the WAL) far fewer index pages; lookups
/// compare the full hash on the few rows it finds.
pub(crate) fn url_hash_prefix(url_hash: &str) -> &str {
    url_hash.get(..16).unwrap_or(url_hash)
}

/// Tags as stored: a JSON array, or NULL for none.
pub(crate) fn tags_column(tags: &[String]) -> Option<String> {
    (!tags.is_empty()).then(|| serde_json::to_string(tags).unwrap_or_else(|_| "[]".into()))
}

pub(crate) fn parse_tags(text: Option<String>) -> StorageResult<Vec<String>> {
    match text {
        None => Ok(Vec::new()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|_| StorageError::Corrupt(format!("tags {text:?} in the database"))),
    }
}

/// Position in the newest-first listing: the last link of the previous page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    pub created_at: DateTime<Utc>,
    pub code: String,
}

impl ListCursor {
    /// Ends `page`, read with one row more than `limit` (that row tells whether another page
    /// follows), at `limit` rows: the next page's cursor, `None` on the last page.
    pub fn after_page(page: &mut Vec<Link>, limit: usize) -> Option<String> {
        if page.len() <= limit {
            return None;
        }
        page.truncate(limit);
        let last = page.last()?;
        let next = ListCursor {
            created_at: last.created_at,
            code: last.code.clone(),
        };
        Some(next.encode())
    }

    /// Opaque to clients: `<unix microseconds>.<code>`.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.created_at.timestamp_micros(), self.code)
    }

    pub fn decode(text: &str) -> Option<Self> {
        let (micros, code) = text.split_once('.')?;
        let created_at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
        // Any code a link can have: ours, or an imported one (`.` and `~` too; the first `.`
        // ends the time, so a code's own dots stay in the code).
        let valid_code = shortcode::is_imported_charset(code.as_bytes());
        valid_code.then(|| ListCursor {
            created_at,
            code: code.to_owned(),
        })
    }
}

/// What an API key may do (`api_keys.role`). A new role is a variant here, an arm in
/// `http::auth::permits` and a wider CHECK in a migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Every route (what every key could do before roles existed).
    Admin,
    /// Creates, changes and revokes links; reads links, campaigns and statistics.
    Issuer,
    /// Reads links, campaigns and statistics; changes nothing.
    Viewer,
    /// `GET /api/v1/resolve/{code}` only: nginx's fallback.
    Resolve,
    /// Manages workspaces (create, rename, suspend, delete, quotas) and their keys; acts in no
    /// workspace, so it reads and changes no link.
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Issuer => "issuer",
            Role::Viewer => "viewer",
            Role::Resolve => "resolve",
            Role::Operator => "operator",
        }
    }

    /// What the role allows, for people (error messages, `keys list`).
    pub fn scope(self) -> &'static str {
        match self {
            Role::Admin => "may use every route",
            Role::Issuer => "may create, change, revoke and read links and read statistics",
            Role::Viewer => "may only read links, campaigns and statistics",
            Role::Resolve => "may only resolve codes (GET /api/v1/resolve/{code})",
            Role::Operator => "may only manage workspaces and their keys",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = StorageError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "admin" => Ok(Role::Admin),
            "issuer" => Ok(Role::Issuer),
            "viewer" => Ok(Role::Viewer),
            "resolve" => Ok(Role::Resolve),
            "operator" => Ok(Role::Operator),
            other => Err(StorageError::Corrupt(format!("API key role {other:?}"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: i64,
    pub name: String,
    pub role: Role,
    /// The workspace it acts in; `None` for an operator key.
    pub workspace: Option<KeyWorkspace>,
    /// Its own request rate, instead of the installation's default.
    pub rate: Option<KeyRate>,
    /// SHA-256 (hex) of the key; the key itself is never stored.
    pub key_hash: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A key's own request rate: `per_second` on average, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRate {
    pub per_second: u64,
    pub burst: u64,
}

/// The workspace of a key, as its lookup reads it (one join, so authenticating a request stays
/// one query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWorkspace {
    pub id: WorkspaceId,
    pub slug: String,
    /// What people call it (the console names it so).
    pub name: String,
    pub suspended: bool,
    pub quotas: crate::workspace::Quotas,
}
