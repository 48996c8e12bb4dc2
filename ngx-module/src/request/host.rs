//! Membership of the request's host in the domain pool.

use std::cell::Cell;

/// Whether `host` (a `Host` header value, maybe with a port) is one of the names in `pool`, a
/// whitespace-separated list. Case-insensitive, port and trailing dot ignored on both sides.
pub fn in_pool(host: &[u8], pool: &[u8]) -> bool {
    PoolSet::parse(pool).contains(host)
}

/// A pool parsed once: its names normalised (lower case, no port, no trailing dot), so that a
/// request only normalises its own host and compares lengths, then bytes.
#[derive(Debug, Clone, Default)]
pub struct PoolSet {
    names: Vec<Box<[u8]>>,
    /// Per name, a number its user keeps for it in this process (0 until set): the status part's
    /// per-domain counter row, found once per worker instead of by a compare per request. A
    /// configuration's pool is the process's own copy (a worker's, after the fork; a reload
    /// makes new ones), so the cells are never shared between workers.
    memo: Box<[Cell<u32>]>,
}

impl PartialEq for PoolSet {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names
    }
}

impl Eq for PoolSet {}

/// Where the request's host stands with a pool.
#[derive(Debug, Clone, Copy)]
pub enum Membership<'a> {
    Outside,
    /// Listed as nginx hands it over (lower case, no port): the listed name's memo cell.
    Listed(&'a Cell<u32>),
    /// Listed once normalised.
    Inside,
}

impl Membership<'_> {
    pub fn inside(self) -> bool {
        !matches!(self, Membership::Outside)
    }
}

impl PoolSet {
    pub fn parse(pool: &[u8]) -> Self {
        let names = pool
            .split(|b| b.is_ascii_whitespace())
            .map(normalize)
            .filter(|name| !name.is_empty())
            .map(|name| name.to_ascii_lowercase().into_boxed_slice())
            .collect::<Vec<_>>();
        let memo = names.iter().map(|_| Cell::new(0)).collect();
        Self { names, memo }
    }

    pub fn contains(&self, host: &[u8]) -> bool {
        self.membership(host).inside()
    }

    #[inline]
    pub fn membership(&self, host: &[u8]) -> Membership<'_> {
        // nginx hands over `headers_in.server` lower-cased, without port or trailing dot: an
        // exact compare settles nearly all, and only a miss pays for normalising.
        if !host.is_empty() {
            if let Some(i) = self.names.iter().position(|name| **name == *host) {
                return Membership::Listed(&self.memo[i]);
            }
        }
        self.normalized_membership(host)
    }

    /// [`PoolSet::membership`] of a host not listed as it came: out of line, so that every
    /// request's exact compare is inlined into the pool check and carries none of this frame
    /// (issue 82: its entry and exit were ~20 instructions of a hot redirect).
    #[inline(never)]
    fn normalized_membership(&self, host: &[u8]) -> Membership<'_> {
        let host = normalize(host);
        let inside = !host.is_empty()
            && self.names.iter().any(|name| {
                name.len() == host.len() && (**name == *host || name.eq_ignore_ascii_case(host))
            });
        if inside {
            Membership::Inside
        } else {
            Membership::Outside
        }
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
        self.membership(pool, host).inside()
    }

    pub fn membership(&mut self, pool: &[u8], host: &[u8]) -> Membership<'_> {
        let at = match self.entries.iter().position(|(text, _)| **text == *pool) {
            Some(at) => at,
            None => self.remember(pool),
        };
        self.entries[at].1.membership(host)
    }

    /// Parses `pool` into an entry, in place of the oldest when the memo is full; its index.
    fn remember(&mut self, pool: &[u8]) -> usize {
        let entry = (pool.into(), PoolSet::parse(pool));
        if self.entries.len() < MEMO_ENTRIES {
            self.entries.push(entry);
            return self.entries.len() - 1;
        }
        let at = self.next;
        self.entries[at] = entry;
        self.next = (self.next + 1) % MEMO_ENTRIES;
        at
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
    fn a_listed_host_has_its_own_memo_cell() {
        let set = PoolSet::parse(POOL);
        let (Membership::Listed(a), Membership::Listed(b)) =
            (set.membership(b"s1.example"), set.membership(b"s2.example"))
        else {
            panic!("nginx's form of a listed host is listed");
        };
        a.set(7);
        assert_eq!(b.get(), 0);
        assert!(matches!(set.membership(b"s1.example"), Membership::Listed(c) if c.get() == 7));
        assert!(matches!(
            set.membership(b"S1.example:80"),
            Membership::Inside
        ));
        assert!(matches!(set.membership(b"s4.example"), Membership::Outside));
    }

    #[test]
    fn ipv6_literals() {
        assert!(in_pool(b"[::1]:8080", b"[::1]"));
        assert!(!in_pool(b"[::1]", b"[::2]"));
    }
}
