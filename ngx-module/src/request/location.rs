//! The `Location` value of a redirect: the target, plus the short URL's query string when asked.

/// The pieces to concatenate, in order; empty pieces contribute nothing. Returned as parts so
/// the caller can size one allocation in the request pool and copy once.
pub fn parts<'a>(target: &'a [u8], query: Option<&'a [u8]>) -> [&'a [u8]; 4] {
    let query = match query {
        Some(q) if !q.is_empty() => q,
        _ => return [target, b"", b"", b""],
    };
    // The query belongs before any fragment of the target.
    let (base, fragment) = match target.iter().position(|&b| b == b'#') {
        Some(hash) => target.split_at(hash),
        None => (target, &b""[..]),
    };
    let separator: &[u8] = match base.iter().position(|&b| b == b'?') {
        None => b"?",
        Some(_) if base.ends_with(b"?") || base.ends_with(b"&") => b"",
        Some(_) => b"&",
    };
    [base, separator, query, fragment]
}

pub fn len(parts: &[&[u8]; 4]) -> usize {
    parts.iter().map(|p| p.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(target: &str, query: Option<&str>) -> String {
        let p = parts(target.as_bytes(), query.map(str::as_bytes));
        let s: Vec<u8> = p.concat();
        assert_eq!(s.len(), len(&p));
        String::from_utf8(s).unwrap()
    }

    #[test]
    fn without_query_the_target_is_unchanged() {
        assert_eq!(joined("https://x/a", None), "https://x/a");
        assert_eq!(joined("https://x/a", Some("")), "https://x/a");
    }

    #[test]
    fn joins_with_question_mark_or_ampersand() {
        assert_eq!(joined("https://x/a", Some("u=1")), "https://x/a?u=1");
        assert_eq!(
            joined("https://x/a?b=c", Some("u=1")),
            "https://x/a?b=c&u=1"
        );
        assert_eq!(joined("https://x/a?", Some("u=1")), "https://x/a?u=1");
        assert_eq!(
            joined("https://x/a?b=c&", Some("u=1")),
            "https://x/a?b=c&u=1"
        );
    }

    #[test]
    fn query_goes_before_the_fragment() {
        assert_eq!(
            joined("https://x/a#top", Some("u=1")),
            "https://x/a?u=1#top"
        );
        assert_eq!(
            joined("https://x/a?b#t?x", Some("u=1")),
            "https://x/a?b&u=1#t?x"
        );
    }
}
