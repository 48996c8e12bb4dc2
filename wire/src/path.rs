//! Where the code sits in the request path.

/// How a location maps a path to a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A prefix location (`location /s/`): the code is everything after the prefix.
    Prefix(Vec<u8>),
    /// A regex or exact location: the code is the last path segment.
    LastSegment,
}

/// Whether one `/` after the code still names it (`shortlink_trailing_slash`).
///
/// Shlink can answer `/abc/` as `/abc`; links copied from its domain may carry the slash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrailingSlash {
    /// `/abc/` is no code (our own links never end in `/`).
    #[default]
    Refused,
    /// `/abc/` answers as `/abc`; `/abc//` and `/abc/x` still are no code. In a regex location
    /// (last segment) `/go/` then names the code `go`: a regex that needs a code segment after
    /// `/go/` keeps such paths out.
    Ignored,
}

/// The candidate code in a raw request URI (`r->unparsed_uri`, query string included).
///
/// The raw URI is used on purpose: nginx's normalised `r->uri` has `%`-escapes decoded and
/// slashes merged, which would let `/%61bc1234` or `//abc1234` alias a code. The code must be the
/// whole remainder of the path: no further `/` (but the one trailing slash `slash` may allow),
/// no `%`.
///
/// Always inlined: every redirect of the nginx module asks it once, and as a call its entry,
/// exit and two-word result were ~10 of a cached redirect's instructions (issue 82).
#[inline(always)]
pub fn extract<'a>(raw_uri: &'a [u8], route: &Route, slash: TrailingSlash) -> Option<&'a [u8]> {
    let code = match route {
        // A location prefix holds no `?`: if the URI starts with it, it lies within the path. One
        // pass then finds the code's end and refuses a `/` or `%` before the query.
        Route::Prefix(prefix) => {
            let rest = strip_short_prefix(raw_uri, prefix)?;
            let end = rest
                .iter()
                .position(|&b| ENDS_CODE[usize::from(b)])
                .unwrap_or(rest.len());
            match rest.get(end) {
                None | Some(b'?') => {}
                // Only the path's last byte: `/abc//` or `/abc/x` stay no code.
                Some(b'/')
                    if slash == TrailingSlash::Ignored
                        && matches!(rest.get(end + 1), None | Some(b'?')) => {}
                Some(_) => return None,
            }
            &rest[..end]
        }
        Route::LastSegment => {
            let mut path = match raw_uri.iter().position(|&b| b == b'?') {
                Some(q) => &raw_uri[..q],
                None => raw_uri,
            };
            if slash == TrailingSlash::Ignored {
                path = path.strip_suffix(b"/").unwrap_or(path);
            }
            let slash = path.iter().rposition(|&b| b == b'/')?;
            let code = &path[slash + 1..];
            if code.contains(&b'%') {
                return None;
            }
            code
        }
    };
    (!code.is_empty()).then_some(code)
}

/// The bytes that end a code in a prefix location's path: the query's `?`, or a `/` or `%` that
/// make the path no code. A table: one load a byte, where three compares were.
static ENDS_CODE: [bool; 256] = {
    let mut table = [false; 256];
    table[b'?' as usize] = true;
    table[b'/' as usize] = true;
    table[b'%' as usize] = true;
    table
};

/// `raw_uri` after `prefix`. A location's prefix is a few bytes (`/`, `/s/`): compared in line
/// rather than by a call to `memcmp`.
#[inline]
fn strip_short_prefix<'a>(raw_uri: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    let head = raw_uri.get(..prefix.len())?;
    head.iter()
        .zip(prefix)
        .all(|(a, b)| a == b)
        .then(|| &raw_uri[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(p: &str) -> Route {
        Route::Prefix(p.as_bytes().to_vec())
    }

    /// As our own locations read paths (no trailing slash).
    fn extract<'a>(raw_uri: &'a [u8], route: &Route) -> Option<&'a [u8]> {
        super::extract(raw_uri, route, TrailingSlash::Refused)
    }

    fn lenient<'a>(raw_uri: &'a [u8], route: &Route) -> Option<&'a [u8]> {
        super::extract(raw_uri, route, TrailingSlash::Ignored)
    }

    #[test]
    fn code_after_root_prefix() {
        assert_eq!(extract(b"/abc1234", &prefix("/")), Some(&b"abc1234"[..]));
        assert_eq!(
            extract(b"/abc1234?x=1&y", &prefix("/")),
            Some(&b"abc1234"[..])
        );
        assert_eq!(extract(b"/my-promo?", &prefix("/")), Some(&b"my-promo"[..]));
    }

    #[test]
    fn code_after_longer_prefix() {
        assert_eq!(
            extract(b"/s/abc1234", &prefix("/s/")),
            Some(&b"abc1234"[..])
        );
        assert_eq!(extract(b"/t/abc1234", &prefix("/s/")), None);
        assert_eq!(extract(b"/s/", &prefix("/s/")), None);
    }

    #[test]
    fn code_must_be_the_whole_remainder() {
        assert_eq!(extract(b"/abc1234/", &prefix("/")), None);
        assert_eq!(extract(b"/abc/1234", &prefix("/")), None);
        assert_eq!(extract(b"//abc1234", &prefix("/")), None);
        assert_eq!(extract(b"/", &prefix("/")), None);
    }

    #[test]
    fn escapes_are_refused_not_decoded() {
        assert_eq!(extract(b"/%61bc1234", &prefix("/")), None);
        assert_eq!(extract(b"/abc%2531234", &prefix("/")), None);
        assert_eq!(extract(b"/%73/abc1234", &prefix("/s/")), None);
    }

    #[test]
    fn last_segment_for_regex_locations() {
        assert_eq!(
            extract(b"/go/abc1234?q", &Route::LastSegment),
            Some(&b"abc1234"[..])
        );
        assert_eq!(extract(b"/go/", &Route::LastSegment), None);
        assert_eq!(extract(b"abc", &Route::LastSegment), None);
    }

    #[test]
    fn one_trailing_slash_is_ignored_where_allowed() {
        for route in [prefix("/"), Route::LastSegment] {
            assert_eq!(lenient(b"/abc/", &route), Some(&b"abc"[..]), "{route:?}");
            assert_eq!(
                lenient(b"/abc/?x=1", &route),
                Some(&b"abc"[..]),
                "{route:?}"
            );
            assert_eq!(lenient(b"/abc", &route), Some(&b"abc"[..]), "{route:?}");
            assert_eq!(lenient(b"/abc?x=/", &route), Some(&b"abc"[..]), "{route:?}");
            assert_eq!(extract(b"/abc/", &route), None, "{route:?}");
            assert_eq!(extract(b"/abc/?x=1", &route), None, "{route:?}");
        }
        assert_eq!(lenient(b"/s/abc/", &prefix("/s/")), Some(&b"abc"[..]));
        assert_eq!(lenient(b"/go/abc/", &Route::LastSegment), Some(&b"abc"[..]));
        // The last segment is the last one before the slash, whatever the location's regex.
        assert_eq!(lenient(b"/go/", &Route::LastSegment), Some(&b"go"[..]));
    }

    #[test]
    fn a_trailing_slash_bends_no_other_rule() {
        for route in [prefix("/"), Route::LastSegment] {
            // One slash only, and only after a code.
            assert_eq!(lenient(b"/abc//", &route), None, "{route:?}");
            assert_eq!(lenient(b"/abc//?x", &route), None, "{route:?}");
            assert_eq!(lenient(b"/", &route), None, "{route:?}");
            assert_eq!(lenient(b"//", &route), None, "{route:?}");
            // Escapes stay refused, the slash included.
            assert_eq!(lenient(b"/abc%2F", &route), None, "{route:?}");
            assert_eq!(lenient(b"/%61bc/", &route), None, "{route:?}");
        }
        let root = prefix("/");
        assert_eq!(lenient(b"/abc/x", &root), None);
        assert_eq!(lenient(b"/abc/x/", &root), None);
        assert_eq!(lenient(b"//abc/", &root), None);
        assert_eq!(lenient(b"/s/", &prefix("/s/")), None);
        assert_eq!(lenient(b"/s//", &prefix("/s/")), None);
    }
}
