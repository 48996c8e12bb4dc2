//! Workspaces (issue 53): who owns a link, a key, a webhook subscription.
//!
//! Every read or write of an owned object names its workspace with a [`WorkspaceId`]: the
//! storage and the service take one, so a query that forgot to filter does not compile. The few
//! jobs that act on the whole installation (resync, refill, export by the operator) say so with
//! [`LinkFilter::all_workspaces`](crate::LinkFilter::all_workspaces) or a method named for it.

use crate::error::{StorageError, StorageResult};
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;

/// The slug of the default workspace.
pub const DEFAULT_SLUG: &str = "default";

/// Longest slug: it rides in link records and nginx's host map.
pub const MAX_SLUG_LEN: usize = 32;

/// Whether `slug` may name a workspace: 1 to 32 of `a-z` and `0-9` in words joined by single
/// `-` (what nginx's map, the link record and a URL path all carry without escaping). A record
/// may name more (`--`, a trailing `-`): the sidecar keeps those for names no workspace can take.
pub fn is_valid_slug(slug: &str) -> bool {
    let bytes = slug.as_bytes();
    let word = |word: &str| {
        !word.is_empty() && (word.bytes()).all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (1..=MAX_SLUG_LEN).contains(&bytes.len()) && slug.split('-').all(word)
}

/// The longest name of a workspace, an API key or a callback token, in characters.
pub const MAX_NAME_LEN: usize = 200;
/// What a workspace's or an API key's name must be, said to whoever gave another.
pub const NAME_RULE: &str = "a name is 1 to 200 printable characters";

/// `name` without its surrounding ASCII white space, if it may name a workspace or an API key:
/// 1 to [`MAX_NAME_LEN`] characters, none a control character ([`NAME_RULE`]). Every way to make or rename
/// one (API, console, command line) reaches it through the services, so all refuse alike. Only
/// ASCII white space is trimmed: the API's schema admits a name of one no-break space.
pub fn display_name(name: &str) -> Option<&str> {
    let name = name.trim_matches(|c: char| c.is_ascii_whitespace());
    let fits = (1..=MAX_NAME_LEN).contains(&name.chars().count());
    let fits = fits && !name.chars().any(char::is_control);
    fits.then_some(name)
}

/// Per-workspace limits, set by the operator; `None` takes the installation's default (a
/// setting).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quotas {
    pub links_per_day: Option<u64>,
    pub compose_recipients: Option<u64>,
    pub webhooks: Option<u64>,
    /// The ceilings of the workspace's keys' rates (at least 1): the most an admin may give a
    /// key, and what every key is held to at use (`None`: the installation's rate only).
    pub key_rate_per_second: Option<u64>,
    pub key_rate_burst: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub id: WorkspaceId,
    /// Never changes: nginx's host map and the link records name the workspace by it.
    pub slug: String,
    /// What people see; may be renamed.
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// A suspended workspace's keys are refused; its links keep answering.
    pub suspended_at: Option<DateTime<Utc>>,
    pub quotas: Quotas,
}

/// A change to a workspace; `None` fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceChange {
    pub name: Option<String>,
    /// `Some(Some(at))` suspends, `Some(None)` resumes.
    pub suspended_at: Option<Option<DateTime<Utc>>>,
    /// Replaces the quotas as a whole.
    pub quotas: Option<Quotas>,
}

/// Whether a job may still write for its workspace and key, as its transaction reads them
/// ([`crate::LinkTx::standing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Live,
    KeyRevoked,
    WorkspaceSuspended,
    /// The workspace (and with it its keys) is gone.
    WorkspaceDeleted,
}

/// What deleting a workspace removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeletedWorkspace {
    pub links: u64,
    pub keys: u64,
    pub webhooks: u64,
}

/// A quota as stored; the API refuses values beyond `i64::MAX`, so saturating loses nothing.
pub(crate) fn quota_column(value: Option<u64>) -> Option<i64> {
    value.map(|value| i64::try_from(value).unwrap_or(i64::MAX))
}

pub(crate) fn quota_read(value: Option<i64>) -> StorageResult<Option<u64>> {
    value
        .map(|value| {
            u64::try_from(value)
                .map_err(|_| StorageError::Corrupt(format!("quota {value} in the database")))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        for good in ["default", "a", "brand-a", "0", "a-1-b", &"a".repeat(32)] {
            assert!(is_valid_slug(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "A",
            "a_b",
            "a.b",
            "a b",
            "é",
            &"a".repeat(33),
        ] {
            assert!(!is_valid_slug(bad), "{bad}");
        }
    }
}
