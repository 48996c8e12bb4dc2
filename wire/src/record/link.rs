//! The record's layout (the module doc's two versions): [`Record::encode`] for the sidecar,
//! [`decode`] for the module and the sidecar's fallback.

use super::{is_valid_target, Extras, LinkView, WorkspaceName};
use crate::rules::codec::RulesError;
use crate::status::is_redirect_status;
use std::fmt;
use std::sync::Arc;

/// The record version of a plain link.
pub const VERSION: &str = "1";
/// The record version of a link with [`Extras`].
pub const VERSION_EXTRAS: &str = "2";

/// Flag bit 1: append the short URL's query string to the target.
pub const FLAG_FORWARD_QUERY: u32 = 1;

/// The status a revoked link answers.
pub const REVOKED_STATUS: u16 = 410;

/// The tombstone of a revoked link of the workspace `default`: answers 410 forever, has no TTL.
/// Another workspace's tombstone names it ([`Record::RevokedIn`]).
pub const TOMBSTONE: &str = "1|R|410|0|0|";

/// The status a quarantined link answers, with [`super::quarantine_page`]: 451, a refusal the
/// server chose to make (docs/SECURITY.md, "Quarantine"), never a success a filter or a preview
/// fetcher could take for the link's content.
pub const QUARANTINE_STATUS: u16 = 451;

/// The record of a quarantined link of the workspace `default` (another workspace's names it).
pub const QUARANTINED: &str = "1|Q|451|0|0|";

/// The largest record the sidecar writes ([`crate::limits::RECORD_BYTES`]).
pub const MAX_RECORD_BYTES: usize = crate::limits::RECORD_BYTES;

/// A record as the sidecar writes it. The target is written verbatim: the sidecar has
/// validated it (absolute http(s) URL of visible ASCII, see [`decode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    Live {
        /// 301, 302, 307 or 308.
        status: u16,
        /// Unix seconds after which the link answers 410; 0 = never.
        expires_at: i64,
        /// Flag bits ([`FLAG_FORWARD_QUERY`]); bits this version does not know are kept.
        flags: u32,
        target: &'a str,
        /// Lifecycle, rules and workspace; `None` or empty for a plain (version 1) link of
        /// the workspace `default`.
        extras: Option<&'a Extras>,
    },
    /// A revoked link of the workspace `default`: [`TOMBSTONE`].
    Revoked,
    /// A revoked link of this workspace (`default` gives [`TOMBSTONE`]).
    RevokedIn(WorkspaceName),
    /// A live link held back because a threat feed lists its target: answered like a revoke, with
    /// the warning page instead of a 410 ([`QUARANTINED`]; another workspace's names it). The
    /// link itself is kept: a release writes its live record again.
    Quarantined(Option<WorkspaceName>),
}

impl Record<'static> {
    /// The tombstone of a link of `workspace` (`None`: `default`).
    pub fn revoked(workspace: Option<WorkspaceName>) -> Self {
        match workspace {
            Some(name) => Record::RevokedIn(name),
            None => Record::Revoked,
        }
    }
}

impl Record<'_> {
    /// The value of the record's key.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Record::Live {
                status,
                expires_at,
                flags,
                target,
                extras,
            } => match extras.filter(|extras| !extras.is_empty()) {
                None => format!("{VERSION}|L|{status}|{expires_at}|{flags}|{target}").into_bytes(),
                Some(extras) => {
                    let mut out =
                        format!("{VERSION_EXTRAS}|L|{status}|{expires_at}|{flags}|{target}\n")
                            .into_bytes();
                    extras.encode(&mut out);
                    out
                }
            },
            Record::Revoked => TOMBSTONE.as_bytes().to_vec(),
            Record::RevokedIn(name) if name.is_default() => TOMBSTONE.as_bytes().to_vec(),
            Record::RevokedIn(name) => named(&format!("R|{REVOKED_STATUS}"), name),
            Record::Quarantined(Some(name)) if !name.is_default() => {
                named(&format!("Q|{QUARANTINE_STATUS}"), name)
            }
            Record::Quarantined(_) => QUARANTINED.as_bytes().to_vec(),
        }
    }
}

/// A version-2 record of `state|status` that names workspace `name` and nothing else.
fn named(state_status: &str, name: &WorkspaceName) -> Vec<u8> {
    let mut out = format!("{VERSION_EXTRAS}|{state_status}|0|0|\n").into_bytes();
    let only_workspace = Extras {
        workspace: Some(*name),
        ..Extras::default()
    };
    only_workspace.encode(&mut out);
    out
}

/// A decoded record: what is cached, so a cache hit never parses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Live {
        status: u16,
        /// Unix seconds after which the link answers 410; 0 = never.
        expires_at: u64,
        forward_query: bool,
        /// Shared like `extras`: a lookup's answer and the cache's copy are one allocation (the
        /// clone into the cache was an allocation, a copy and a free per lookup, issue 82).
        target: Arc<[u8]>,
        /// Lifecycle, rules and workspace (version 2); `None` for a plain link of `default`.
        /// Shared, not copied: the module's cache and the lookup answering the click hold the
        /// one decoded copy.
        extras: Option<Arc<Extras>>,
    },
    Revoked {
        /// `None`: the workspace `default`.
        workspace: Option<WorkspaceName>,
    },
    Quarantined {
        /// `None`: the workspace `default`.
        workspace: Option<WorkspaceName>,
    },
}

impl Link {
    /// The link's workspace; `None`: `default`.
    pub fn workspace(&self) -> Option<&WorkspaceName> {
        match self {
            Link::Live { extras, .. } => extras.as_deref()?.workspace.as_ref(),
            Link::Revoked { workspace } | Link::Quarantined { workspace } => workspace.as_ref(),
        }
    }

    pub fn view(&self) -> LinkView<'_> {
        match self {
            Link::Live {
                status,
                expires_at,
                forward_query,
                target,
                extras,
            } => LinkView {
                revoked: false,
                status: *status,
                expires_at: *expires_at,
                forward_query: *forward_query,
                target,
                extras: extras.as_deref(),
            },
            Link::Revoked { .. } => LinkView::ENDED,
            Link::Quarantined { .. } => LinkView::QUARANTINED,
        }
    }
}

/// Why a value is not a usable record. Any of these is handled like a Redis failure: a reader
/// must never turn a value it does not understand into a redirect or a 404.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// A version (or, in version 2, a field) this reader does not know: "not mine", written by
    /// a newer (or foreign) writer.
    Version,
    Fields,
    State,
    Status,
    ExpiresAt,
    Flags,
    Target,
    /// Version 2's fields are cut short, repeated or of the wrong size.
    Extras,
    /// Version 2's workspace is not `[a-z0-9][a-z0-9-]{0,31}`.
    Workspace,
    Rules(RulesError),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            RecordError::Version => "unknown record version",
            RecordError::Fields => "missing record fields",
            RecordError::State => "bad state",
            RecordError::Status => "bad status for state",
            RecordError::ExpiresAt => "bad expires_at",
            RecordError::Flags => "bad flags",
            RecordError::Target => "bad target URL",
            RecordError::Extras => "bad version 2 fields",
            RecordError::Workspace => "bad workspace name",
            RecordError::Rules(why) => return write!(f, "bad rules: {why}"),
        };
        f.write_str(what)
    }
}

pub fn decode(value: &[u8]) -> Result<Link, RecordError> {
    let version_end = value.iter().position(|&b| b == b'|').unwrap_or(value.len());
    let (line, extras) = match &value[..version_end] {
        v if v == VERSION.as_bytes() => (value, None),
        v if v == VERSION_EXTRAS.as_bytes() => {
            // A target never holds a line break: the first one ends the line.
            let end = value
                .iter()
                .position(|&b| b == b'\n')
                .ok_or(RecordError::Fields)?;
            let extras = Extras::decode(&value[end + 1..])?;
            (&value[..end], Some(Arc::new(extras)))
        }
        _ => return Err(RecordError::Version),
    };
    // The target is last and may itself contain '|'.
    let mut fields = line.splitn(6, |&b| b == b'|').skip(1);
    let mut next = || fields.next().ok_or(RecordError::Fields);
    let (state, status, expires_at, flags, target) = (next()?, next()?, next()?, next()?, next()?);

    let status = decimal(status).ok_or(RecordError::Status)?;
    let expires_at = decimal(expires_at).ok_or(RecordError::ExpiresAt)?;
    let flags = decimal(flags)
        .and_then(|f| u32::try_from(f).ok())
        .ok_or(RecordError::Flags)?;
    match state {
        b"L" => {
            if !is_redirect_status(status) {
                return Err(RecordError::Status);
            }
            if !is_valid_target(target) {
                return Err(RecordError::Target);
            }
            Ok(Link::Live {
                status: status as u16,
                expires_at,
                forward_query: flags & FLAG_FORWARD_QUERY != 0,
                target: target.into(),
                extras,
            })
        }
        // Version 2 holds only the tombstones (and quarantines) of other workspaces, naming
        // nothing else.
        b"R" | b"Q"
            if extras
                .as_ref()
                .is_some_and(|extras| !extras.only_workspace() || extras.workspace.is_none()) =>
        {
            Err(RecordError::State)
        }
        b"R" if status == u64::from(REVOKED_STATUS) => Ok(Link::Revoked {
            workspace: extras.and_then(|extras| extras.workspace),
        }),
        b"Q" if status == u64::from(QUARANTINE_STATUS) => Ok(Link::Quarantined {
            workspace: extras.and_then(|extras| extras.workspace),
        }),
        b"R" | b"Q" => Err(RecordError::Status),
        _ => Err(RecordError::State),
    }
}

fn decimal(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 19 || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    field.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}
