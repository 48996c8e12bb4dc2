//! Membership of the request's host in the domain pool.

/// Whether `host` (a `Host` header value, maybe with a port) is one of the names in `pool`, a
/// whitespace-separated list. Case-insensitive, port and trailing dot ignored on both sides.
pub fn in_pool(host: &[u8], pool: &[u8]) -> bool {
    let host = normalize(host);
    !host.is_empty()
        && pool
            .split(|b| b.is_ascii_whitespace())
            .any(|name| normalize(name).eq_ignore_ascii_case(host))
}

fn normalize(name: &[u8]) -> &[u8] {
    let name = strip_port(name);
    name.strip_suffix(b".").unwrap_or(name)
}

fn strip_port(name: &[u8]) -> &[u8] {
    if name.first() == Some(&b'[') {
        // IPv6 literal: the port, if any, follows the closing bracket.
        return match name.iter().position(|&b| b == b']') {
            Some(end) => &name[..=end],
            None => name,
        };
    }
    match name.iter().rposition(|&b| b == b':') {
        Some(colon) if name[colon + 1..].iter().all(u8::is_ascii_digit) => &name[..colon],
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &[u8] = b"s1.example  s2.example\tS3.Example";

    #[test]
    fn matches_any_listed_name() {
        assert!(in_pool(b"s1.example", POOL));
        assert!(in_pool(b"s2.example", POOL));
        assert!(in_pool(b"s3.example", POOL));
        assert!(!in_pool(b"s4.example", POOL));
        assert!(!in_pool(b"example", POOL));
        assert!(!in_pool(b"x.s1.example", POOL));
    }

    #[test]
    fn case_port_and_trailing_dot_do_not_matter() {
        assert!(in_pool(b"S1.EXAMPLE", POOL));
        assert!(in_pool(b"s1.example:8080", POOL));
        assert!(in_pool(b"s1.example.", POOL));
        assert!(in_pool(b"s1.example.:443", POOL));
        assert!(in_pool(b"s1.example", b"s1.example:443"));
    }

    #[test]
    fn empty_host_or_pool_never_matches() {
        assert!(!in_pool(b"", POOL));
        assert!(!in_pool(b"s1.example", b""));
        assert!(!in_pool(b"s1.example", b"   "));
        assert!(!in_pool(b":80", b" "));
    }

    #[test]
    fn ipv6_literals() {
        assert!(in_pool(b"[::1]:8080", b"[::1]"));
        assert!(!in_pool(b"[::1]", b"[::2]"));
    }
}
