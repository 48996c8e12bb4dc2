//! The link record, version 1, as the sidecar writes it to `sl:c:<code>`:
//! `1|<state>|<status>|<expires_at>|<flags>|<target>` (see docs/ARCHITECTURE.md).

use std::fmt;

/// Flag bit 1: append the short URL's query string to the target.
pub const FLAG_FORWARD_QUERY: u32 = 1;

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
    if fields.next() != Some(b"1") {
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
        b"R" if status == 410 => Ok(Link::Revoked),
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
