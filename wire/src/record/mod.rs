//! The link record, as the sidecar writes it to `sl:c:<code>` ([`crate::keys`]). Both halves are
//! here, [`Record::encode`] for the sidecar and [`decode`] for the module and the sidecar's
//! fallback, so they cannot drift apart.
//!
//! **Version 1**, every plain link: one ASCII line, fields separated by `|`; the target is last
//! and may itself contain `|`: `1|<state>|<status>|<expires_at>|<flags>|<target>`.
//!
//! | field | meaning |
//! |---|---|
//! | `1` | format version ([`VERSION`]) |
//! | state | `L` live, `R` revoked |
//! | status | `301`, `302`, `307` or `308` for `L`; `410` for `R` |
//! | expires_at | Unix time in seconds after which the link is expired; `0` = never |
//! | flags | decimal bit set: `1` = append the short URL's query string ([`FLAG_FORWARD_QUERY`]) |
//! | target | absolute `http`/`https` URL, visible ASCII only (hosts as punycode, the rest percent-encoded); empty for `R` |
//!
//! Examples: `1|L|302|0|0|https://example.com/a?b=c`, `1|L|301|1798761600|1|https://shop.example/`,
//! `1|R|410|0|0|` ([`TOMBSTONE`]).
//!
//! **Version 2**, only for a live link with a lifecycle or rules ([`Extras`]): the same line with
//! `2` first, then `\n` and the extras' binary fields ([`extras`]). A plain link stays version 1,
//! so a module that predates version 2 still serves every plain link during an upgrade.
//!
//! **Workspaces**: a link of the workspace `default` names none, so its record keeps the bytes
//! above. A link of any other workspace names it in version 2's field `w` ([`extras`]): a live
//! one as one more extra (a plain link of another workspace is version 2 with that field only),
//! a revoked one as a version-2 tombstone, `2|R|410|0|0|` then `\n` and the field `w` (no other
//! field). A reader predating workspaces meets a field it does not know, so such a record is
//! "not mine" to it: it never answers another workspace's code as if it were `default`'s.
//!
//! Versions: the first field names the layout. A reader meeting a version it does not know gets
//! [`RecordError::Version`] ("not mine") and must treat it like a Redis failure (the module
//! then answers with its fallback), never as a 404: during a rolling upgrade a newer sidecar may
//! write a version an older module cannot read yet.

mod answer;
pub mod extras;
pub mod password;
mod workspace;

pub use answer::{
    not_yet_page, Answer, Checked, Chosen, LinkView, LIFECYCLE_STATUS, NOT_YET_STATUS,
};
pub use extras::Extras;
pub use workspace::{InvalidWorkspaceName, WorkspaceName};

use crate::rules::codec::RulesError;
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
            Record::RevokedIn(name) => {
                let mut out = format!("{VERSION_EXTRAS}|R|{REVOKED_STATUS}|0|0|\n").into_bytes();
                let only_workspace = Extras {
                    workspace: Some(*name),
                    ..Extras::default()
                };
                only_workspace.encode(&mut out);
                out
            }
        }
    }
}

/// A decoded record: what is cached, so a cache hit never parses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Live {
        status: u16,
        /// Unix seconds after which the link answers 410; 0 = never.
        expires_at: u64,
        forward_query: bool,
        target: Box<[u8]>,
        /// Lifecycle, rules and workspace (version 2); `None` for a plain link of `default`.
        /// Shared, not copied: the module's cache and the lookup answering the click hold the
        /// one decoded copy.
        extras: Option<Arc<Extras>>,
    },
    Revoked {
        /// `None`: the workspace `default`.
        workspace: Option<WorkspaceName>,
    },
}

impl Link {
    /// The link's workspace; `None`: `default`.
    pub fn workspace(&self) -> Option<&WorkspaceName> {
        match self {
            Link::Live { extras, .. } => extras.as_deref()?.workspace.as_ref(),
            Link::Revoked { workspace } => workspace.as_ref(),
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
            Link::Revoked { .. } => LinkView {
                revoked: true,
                status: REVOKED_STATUS,
                expires_at: 0,
                forward_query: false,
                target: &[],
                extras: None,
            },
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
            if !matches!(status, 301 | 302 | 307 | 308) {
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
        // Version 2 holds only the tombstones of other workspaces, naming nothing else.
        b"R" if extras
            .as_ref()
            .is_some_and(|extras| !extras.only_workspace() || extras.workspace.is_none()) =>
        {
            Err(RecordError::State)
        }
        b"R" if status == u64::from(REVOKED_STATUS) => Ok(Link::Revoked {
            workspace: extras.and_then(|extras| extras.workspace),
        }),
        b"R" => Err(RecordError::Status),
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

/// An absolute http(s) URL of visible ASCII: the value goes verbatim into a `Location` header,
/// so anything else (CR, LF, spaces, non-ASCII) must never get through.
///
/// Checked at every cache fill, once per URL of the record (a link with rules holds several), so
/// in two word-sized steps: the scheme compared as one 8-byte word with every byte's case bit
/// set, then every byte looked at without an early exit (the loop vectorises). Setting the case
/// bit turns only letters' capitals and two control bytes into the scheme's bytes, and the
/// second step refuses control bytes.
pub fn is_valid_target(target: &[u8]) -> bool {
    const CASE_BITS: u64 = 0x2020_2020_2020_2020;
    const HTTPS: u64 = u64::from_le_bytes(*b"https://");
    const HTTP: u64 = u64::from_le_bytes(*b"http://\0");
    const SEVEN_BYTES: u64 = 0x00ff_ffff_ffff_ffff;
    let Some(first) = target.first_chunk::<8>() else {
        return false;
    };
    let word = u64::from_le_bytes(*first) | CASE_BITS;
    let scheme_ok = (word == HTTPS && target.len() > 8)
        || (word & SEVEN_BYTES) == (HTTP | CASE_BITS) & SEVEN_BYTES;
    let invisible = target.iter().fold(0u8, |invisible, &b| {
        invisible | u8::from(!b.is_ascii_graphic())
    });
    scheme_ok && invisible == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(status: u16, expires_at: u64, forward_query: bool, target: &str) -> Link {
        Link::Live {
            status,
            expires_at,
            forward_query,
            target: target.as_bytes().into(),
            extras: None,
        }
    }

    /// The target check by its definition, against which the word-sized one is held: every
    /// byte value at every position of an http and an https URL, and every prefix.
    #[test]
    fn target_check_matches_its_definition() {
        let by_definition = |target: &[u8]| {
            let starts = |prefix: &[u8]| {
                target.len() > prefix.len() && target[..prefix.len()].eq_ignore_ascii_case(prefix)
            };
            (starts(b"https://") || starts(b"http://")) && target.iter().all(u8::is_ascii_graphic)
        };
        for url in [
            &b"https://a.example/x?y=1"[..],
            b"HTTP://b.example/",
            b"hTtP://c",
        ] {
            for end in 0..=url.len() {
                assert_eq!(is_valid_target(&url[..end]), by_definition(&url[..end]));
            }
            for at in 0..url.len().min(12) {
                for byte in 0..=255u8 {
                    let mut changed = url.to_vec();
                    changed[at] = byte;
                    assert_eq!(
                        is_valid_target(&changed),
                        by_definition(&changed),
                        "{}",
                        String::from_utf8_lossy(&changed)
                    );
                }
            }
        }
    }

    #[test]
    fn decodes_the_documented_examples() {
        assert_eq!(
            decode(b"1|L|302|0|0|https://example.com/a?b=c"),
            Ok(live(302, 0, false, "https://example.com/a?b=c"))
        );
        assert_eq!(
            decode(b"1|L|301|1798761600|1|https://shop.example/"),
            Ok(live(301, 1798761600, true, "https://shop.example/"))
        );
        assert_eq!(
            decode(b"1|R|410|0|0|"),
            Ok(Link::Revoked { workspace: None })
        );
    }

    #[test]
    fn what_is_encoded_decodes_to_the_same_link() {
        for (status, expires_at, flags, target) in [
            (302, 0, 0, "https://example.com/a?b=c"),
            (301, 1798761600, FLAG_FORWARD_QUERY, "https://shop.example/"),
            (307, 5, 6, "http://x.example/a|b"),
            (308, 0, 7, "HTTPS://X.EXAMPLE/"),
        ] {
            let value = Record::Live {
                status,
                expires_at,
                flags,
                target,
                extras: None,
            }
            .encode();
            assert_eq!(
                decode(&value),
                Ok(live(
                    status,
                    expires_at as u64,
                    flags & FLAG_FORWARD_QUERY != 0,
                    target
                )),
                "{}",
                String::from_utf8_lossy(&value)
            );
        }
        assert_eq!(Record::Revoked.encode(), TOMBSTONE.as_bytes());
        assert_eq!(
            decode(&Record::Revoked.encode()),
            Ok(Link::Revoked { workspace: None })
        );
    }

    #[test]
    fn a_newer_version_is_not_mine_whatever_follows() {
        // What a future writer might put there: a reader must not guess at it.
        for value in [
            "3|L|302|0|0|https://x/",
            "3|",
            "10|L|302|0|0|https://x/",
            "1x|R|410|0|0|",
        ] {
            assert_eq!(
                decode(value.as_bytes()),
                Err(RecordError::Version),
                "{value}"
            );
        }
    }

    #[test]
    fn target_may_contain_the_separator() {
        assert_eq!(
            decode(b"1|L|307|0|0|https://x.example/a|b"),
            Ok(live(307, 0, false, "https://x.example/a|b"))
        );
    }

    #[test]
    fn other_flag_bits_do_not_forward_the_query() {
        assert_eq!(
            decode(b"1|L|308|0|6|http://x.example/"),
            Ok(live(308, 0, false, "http://x.example/"))
        );
    }

    #[test]
    fn rejects_unknown_versions_and_garbage() {
        assert_eq!(decode(b"3|L|302|0|0|https://x/"), Err(RecordError::Version));
        assert_eq!(decode(b"https://example.com"), Err(RecordError::Version));
        assert_eq!(decode(b""), Err(RecordError::Version));
        assert_eq!(decode(b"1|L|302|0|0"), Err(RecordError::Fields));
        assert_eq!(decode(b"1|X|302|0|0|https://x/"), Err(RecordError::State));
        assert_eq!(decode(b"1|L|200|0|0|https://x/"), Err(RecordError::Status));
        assert_eq!(decode(b"1|L|410|0|0|https://x/"), Err(RecordError::Status));
        assert_eq!(decode(b"1|R|302|0|0|"), Err(RecordError::Status));
        assert_eq!(
            decode(b"1|L|302|-1|0|https://x/"),
            Err(RecordError::ExpiresAt)
        );
        assert_eq!(decode(b"1|L|302|0|x|https://x/"), Err(RecordError::Flags));
        assert_eq!(
            decode(b"1|L|302|0|99999999999|https://x/"),
            Err(RecordError::Flags)
        );
    }

    #[test]
    fn rejects_targets_that_are_unsafe_in_a_header() {
        for target in [
            "",
            "/relative",
            "ftp://x.example/",
            "https://",
            "https://x.example/a b",
            "https://x.example/\r\nSet-Cookie: a=b",
            "https://x.example/é",
        ] {
            let value = format!("1|L|302|0|0|{target}");
            assert_eq!(
                decode(value.as_bytes()),
                Err(RecordError::Target),
                "{target:?}"
            );
        }
    }

    #[test]
    fn expiry_is_judged_at_answer_time() {
        fn answer(link: &Link, now: u64) -> Answer<'_> {
            link.view().answer(now, no_click, no_country)
        }
        let link = live(302, 1000, false, "https://x.example/");
        assert!(matches!(
            answer(&link, 999),
            Answer::Redirect { status: 302, .. }
        ));
        assert_eq!(answer(&link, 1000), Answer::Gone);
        assert_eq!(answer(&link, 5000), Answer::Gone);
        let forever = live(301, 0, true, "https://x.example/");
        assert_eq!(
            answer(&forever, u64::MAX),
            Answer::Redirect {
                status: 301,
                target: b"https://x.example/",
                forward_query: true,
                chosen: None,
            }
        );
        assert_eq!(answer(&Link::Revoked { workspace: None }, 0), Answer::Gone);
    }

    fn no_click() -> crate::rules::Click<'static> {
        panic!("a plain link evaluates no rule")
    }

    fn no_country(_: std::net::IpAddr) -> Option<[u8; 2]> {
        panic!("a plain link looks up no country")
    }
}

#[cfg(test)]
mod extras_tests;

#[cfg(test)]
mod workspace_tests;
