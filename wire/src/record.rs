//! The link record, version 1, as the sidecar writes it to `sl:c:<code>` ([`crate::keys`]). Both
//! halves are here, [`Record::encode`] for the sidecar and [`decode`] for the module, so they
//! cannot drift apart.
//!
//! One ASCII line, fields separated by `|`; the target is last and may itself contain `|`:
//! `1|<state>|<status>|<expires_at>|<flags>|<target>`.
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
//! Versions: the first field names the layout. A reader meeting a version it does not know gets
//! [`RecordError::Version`] ("not mine") and must treat it like a Redis failure (the module
//! then answers with its fallback), never as a 404: during a rolling upgrade a newer sidecar may
//! write a version an older module cannot read yet.

use std::fmt;

/// The record version this crate writes, and the only one it reads.
pub const VERSION: &str = "1";

/// Flag bit 1: append the short URL's query string to the target.
pub const FLAG_FORWARD_QUERY: u32 = 1;

/// The status a revoked link answers.
pub const REVOKED_STATUS: u16 = 410;

/// The tombstone of a revoked link: answers 410 forever, has no TTL.
pub const TOMBSTONE: &str = "1|R|410|0|0|";

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
    },
    Revoked,
}

impl Record<'_> {
    /// The value of the record's key.
    pub fn encode(&self) -> String {
        match self {
            Record::Live {
                status,
                expires_at,
                flags,
                target,
            } => format!("{VERSION}|L|{status}|{expires_at}|{flags}|{target}"),
            Record::Revoked => TOMBSTONE.to_owned(),
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
    },
    Revoked,
}

/// What a link means at a given moment.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer<'a> {
    Redirect {
        status: u16,
        target: &'a [u8],
        forward_query: bool,
    },
    Gone,
}

impl Link {
    pub fn answer(&self, now_unix: u64) -> Answer<'_> {
        match self {
            Link::Live { expires_at, .. } if *expires_at != 0 && *expires_at <= now_unix => {
                Answer::Gone
            }
            Link::Live {
                status,
                forward_query,
                target,
                ..
            } => Answer::Redirect {
                status: *status,
                target,
                forward_query: *forward_query,
            },
            Link::Revoked => Answer::Gone,
        }
    }
}

/// Why a value is not a usable record. Any of these is handled like a Redis failure: a reader
/// must never turn a value it does not understand into a redirect or a 404.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// A version this reader does not know: "not mine", written by a newer (or foreign) writer.
    Version,
    Fields,
    State,
    Status,
    ExpiresAt,
    Flags,
    Target,
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
        };
        f.write_str(what)
    }
}

pub fn decode(value: &[u8]) -> Result<Link, RecordError> {
    // The target is last and may itself contain '|'.
    let mut fields = value.splitn(6, |&b| b == b'|');
    if fields.next() != Some(VERSION.as_bytes()) {
        return Err(RecordError::Version);
    }
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
            })
        }
        b"R" if status == u64::from(REVOKED_STATUS) => Ok(Link::Revoked),
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
pub(crate) fn is_valid_target(target: &[u8]) -> bool {
    let scheme_ok =
        starts_with_ignore_case(target, b"https://") || starts_with_ignore_case(target, b"http://");
    scheme_ok && target.iter().all(|&b| b.is_ascii_graphic())
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() > prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
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
        assert_eq!(decode(b"1|R|410|0|0|"), Ok(Link::Revoked));
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
            }
            .encode();
            assert_eq!(
                decode(value.as_bytes()),
                Ok(live(
                    status,
                    expires_at as u64,
                    flags & FLAG_FORWARD_QUERY != 0,
                    target
                )),
                "{value}"
            );
        }
        assert_eq!(Record::Revoked.encode(), TOMBSTONE);
        assert_eq!(
            decode(Record::Revoked.encode().as_bytes()),
            Ok(Link::Revoked)
        );
    }

    #[test]
    fn a_newer_version_is_not_mine_whatever_follows() {
        // What a future writer might put there: a reader must not guess at it.
        for value in [
            "2|L|302|0|0|https://x/",
            "2|",
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
        assert_eq!(decode(b"2|L|302|0|0|https://x/"), Err(RecordError::Version));
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
        let link = live(302, 1000, false, "https://x.example/");
        assert!(matches!(
            link.answer(999),
            Answer::Redirect { status: 302, .. }
        ));
        assert_eq!(link.answer(1000), Answer::Gone);
        assert_eq!(link.answer(5000), Answer::Gone);
        let forever = live(301, 0, true, "https://x.example/");
        assert_eq!(
            forever.answer(u64::MAX),
            Answer::Redirect {
                status: 301,
                target: b"https://x.example/",
                forward_query: true
            }
        );
        assert_eq!(Link::Revoked.answer(0), Answer::Gone);
    }
}
