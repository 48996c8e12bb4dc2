//! Where the code sits in the request path.

/// How a location maps a path to a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A prefix location (`location /s/`): the code is everything after the prefix.
    Prefix(Vec<u8>),
    /// A regex or exact location: the code is the last path segment.
    LastSegment,
}

/// The candidate code in a raw request URI (`r->unparsed_uri`, query string included).
///
/// The raw URI is used on purpose: nginx's normalised `r->uri` has `%`-escapes decoded and
/// slashes merged, which would let `/%61bc1234` or `//abc1234` alias a code. The code must be the
/// whole remainder of the path: no further `/`, no `%`.
pub fn extract<'a>(raw_uri: &'a [u8], route: &Route) -> Option<&'a [u8]> {
    let code = match route {
        // A location prefix holds no `?`: if the URI starts with it, it lies within the path. One
        // pass then finds the code's end and refuses a `/` or `%` before the query.
        Route::Prefix(prefix) => {
            let rest = raw_uri.strip_prefix(prefix.as_slice())?;
            let end = rest
                .iter()
                .position(|&b| matches!(b, b'?' | b'/' | b'%'))
                .unwrap_or(rest.len());
            if rest.get(end).is_some_and(|&b| b != b'?') {
                return None;
            }
            &rest[..end]
        }
        Route::LastSegment => {
            let path = match raw_uri.iter().position(|&b| b == b'?') {
                Some(q) => &raw_uri[..q],
                None => raw_uri,
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(p: &str) -> Route {
        Route::Prefix(p.as_bytes().to_vec())
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
}
