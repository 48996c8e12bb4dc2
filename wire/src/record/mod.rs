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
//! | state | `L` live, `R` revoked, `Q` quarantined |
//! | status | `301`, `302`, `307` or `308` for `L`; `410` for `R`; `451` for `Q` |
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
//! field). A quarantined link ([`Record::Quarantined`]) is written as a tombstone is, with state
//! `Q` and status 451: `1|Q|451|0|0|` ([`QUARANTINED`]) for `default`, `2|Q|451|0|0|` + `\n` +
//! `w` for another workspace; a reader predating quarantines meets a state it does not know,
//! "not mine", so the fallback (which knows) answers it. A reader predating workspaces meets a field it does not know, so such a record is
//! "not mine" to it: it never answers another workspace's code as if it were `default`'s.
//!
//! Versions: the first field names the layout. A reader meeting a version it does not know gets
//! [`RecordError::Version`] ("not mine") and must treat it like a Redis failure (the module
//! then answers with its fallback), never as a 404: during a rolling upgrade a newer sidecar may
//! write a version an older module cannot read yet.

mod answer;
pub mod extras;
mod link;
pub mod password;
mod workspace;

pub use crate::target::is_valid_target;
pub use answer::{
    not_yet_page, quarantine_page, Answer, Checked, Chosen, LinkView, LIFECYCLE_STATUS,
    NOT_YET_STATUS,
};
pub use extras::Extras;
pub use link::{
    decode, Link, Record, RecordError, FLAG_FORWARD_QUERY, MAX_RECORD_BYTES, QUARANTINED,
    QUARANTINE_STATUS, REVOKED_STATUS, TOMBSTONE, VERSION, VERSION_EXTRAS,
};
pub use workspace::{InvalidWorkspaceName, WorkspaceName};

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
