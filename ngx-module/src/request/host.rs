//! Membership of the request's host in the domain pool.

/// Whether `host` (a `Host` header value, maybe with a port) is one of the names in `pool`, a
/// whitespace-separated list. Case-insensitive, port and trailing dot ignored on both sides.
pub fn in_pool(host: &[u8], pool: &[u8]) -> bool {
    PoolSet::parse(pool).contains(host)
}

/// A pool parsed once: its names normalised (lower case, no port, no trailing dot), so that a
/// request only normalises its own host and compares lengths, then bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolSet {
    names: Vec<Box<[u8]>>,
}

impl PoolSet {
    pub fn parse(pool: &[u8]) -> Self {
        let names = pool
            .split(|b| b.is_ascii_whitespace())
            .map(normalize)
            .filter(|name| !name.is_empty())
            .map(|name| name.to_ascii_lowercase().into_boxed_slice())
            .collect();
        Self { names }
    }

    pub fn contains(&self, host: &[u8]) -> bool {
        // nginx hands over `headers_in.server` lower-cased, without port or trailing dot: an
        // exact compare settles nearly all, and only a miss pays for normalising.
        if !host.is_empty() && self.names.iter().any(|name| **name == *host) {
            return true;
        }
        let host = normalize(host);
        !host.is_empty()
            && self.names.iter().any(|name| {
                name.len() == host.len() && (**name == *host || name.eq_ignore_ascii_case(host))
            })
    }
}

/// Pools parsed per distinct value, for a `shortlink_pool` that names a variable: the value is
/// compared byte for byte (never by address alone, as request memory is reused) with the few
/// values seen last, and only parsed when it is new.
#[derive(Debug, Default)]
pub struct PoolMemo {
    entries: Vec<(Box<[u8]>, PoolSet)>,
    next: usize,
}

/// Distinct pool values remembered per worker; a configuration rarely has more than one or two.
const MEMO_ENTRIES: usize = 8;

impl PoolMemo {
    pub fn contains(&mut self, pool: &[u8], host: &[u8]) -> bool {
        if let Some((_, set)) = self.entries.iter().find(|(text, _)| **text == *pool) {
            return set.contains(host);
        }
        let set = PoolSet::parse(pool);
        let found = set.contains(host);
        let entry = (pool.into(), set);
        if self.entries.len() < MEMO_ENTRIES {
            self.entries.push(entry);
        } else {
            self.entries[self.next] = entry;
            self.next = (self.next + 1) % MEMO_ENTRIES;
        }
        found
    }
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
    fn memo_reparses_only_new_values() {
        let mut memo = PoolMemo::default();
        assert!(memo.contains(b"a.example b.example", b"b.example"));
        assert!(!memo.contains(b"a.example b.example", b"c.example"));
        assert!(memo.contains(b"c.example", b"c.example"));
        assert_eq!(memo.entries.len(), 2);
        for i in 0..(3 * MEMO_ENTRIES) {
            let pool = format!("h{i}.example");
            assert!(memo.contains(pool.as_bytes(), pool.as_bytes()));
            assert!(!memo.contains(pool.as_bytes(), b"a.example"));
            assert!(memo.entries.len() <= MEMO_ENTRIES);
        }
    }

    #[test]
    fn ipv6_literals() {
        assert!(in_pool(b"[::1]:8080", b"[::1]"));
        assert!(!in_pool(b"[::1]", b"[::2]"));
    }
}
