//! The workspace of each host, remembered per worker, so that a hot host's `shortlink_workspace`
//! costs a hash and a compare of its name instead of nginx's `map $host` (about 900 instructions,
//! 8-9% of a cached redirect; bench/results/redirect-2026-11-26-workspace-host.md).
//!
//! The rule this relies on: the value depends on the request's host and nothing else, as
//! `map $host $shortlink_workspace` does (the key is nginx's lower-cased `headers_in.server`,
//! which is what `$host` reads when the request has a host). A value built from anything else
//! (the URI, a header, `$http_host` with its port) would be answered from the first request of
//! that host. A reload that changes the map is seen: its new workers (or, with
//! `master_process off`, the new configuration, which replaces the worker state) start with an
//! empty table.
//!
//! Bounded: [`HOSTS`] names, the table's first; a host beyond them, a name longer than a DNS name,
//! or a request without a host (`$host` is then the server's name) is evaluated each time, and
//! the table never grows or evicts. With `shortlink_pool` only pool hosts get this far, so made-up
//! `Host` headers cannot take the places; without it they can, which costs speed, never a wrong
//! answer.

use super::workspace::HostWorkspace;

/// Names remembered per worker; a pool rarely holds more than a dozen domains (as the status
/// page's per-domain table, `status::domains::SLOTS`).
pub const HOSTS: usize = 64;
/// Longest host kept (a DNS name is at most 253 bytes).
pub const LONGEST_HOST: usize = 253;
/// Open addressing at most half full, so a probe always ends at an empty slot.
const SLOTS: usize = 2 * HOSTS;
const EMPTY: u8 = u8::MAX;

struct Entry {
    hash: u64,
    /// Which `shortlink_workspace` value this is ([`crate::conf::Dynamic::id`]): locations may
    /// name different ones.
    source: usize,
    host: Box<[u8]>,
    workspace: HostWorkspace,
}

pub struct HostWorkspaces {
    /// Indexes into `entries`, `EMPTY` where free.
    slots: [u8; SLOTS],
    /// Reserved whole up front: a new host allocates only its name, at most [`HOSTS`] times.
    entries: Vec<Entry>,
}

impl Default for HostWorkspaces {
    fn default() -> Self {
        Self {
            slots: [EMPTY; SLOTS],
            entries: Vec::with_capacity(HOSTS),
        }
    }
}

impl HostWorkspaces {
    /// The workspace of `host` under `source`: remembered, or `evaluate`d (and remembered while
    /// there is room).
    #[inline]
    pub fn get_or_evaluate(
        &mut self,
        source: usize,
        host: &[u8],
        evaluate: impl FnOnce() -> HostWorkspace,
    ) -> HostWorkspace {
        if host.is_empty() || host.len() > LONGEST_HOST {
            return evaluate();
        }
        let hash = hash(source, host);
        let mut slot = (hash >> (64 - SLOTS.trailing_zeros())) as usize;
        loop {
            let index = self.slots[slot];
            if index == EMPTY {
                break;
            }
            let entry = &self.entries[usize::from(index)];
            if entry.hash == hash && entry.source == source && *entry.host == *host {
                return entry.workspace;
            }
            slot = (slot + 1) % SLOTS;
        }
        let workspace = evaluate();
        if self.entries.len() < HOSTS {
            // `slot` is the empty one the probe ended at.
            self.slots[slot] = self.entries.len() as u8;
            self.entries.push(Entry {
                hash,
                source,
                host: host.into(),
                workspace,
            });
        }
        workspace
    }

    /// Hosts remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// FxHash's multiply-rotate over 8-byte words: a few instructions for a host name. Not keyed,
/// which is fine here: the table holds at most [`HOSTS`] names, so the longest probe is bounded
/// whatever names an attacker picks.
fn hash(source: usize, host: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(K);
    let word_at = |at: usize| {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(&host[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    let mut h = step(0, source as u64);
    let len = host.len();
    if len >= 8 {
        let mut at = 0;
        while at + 8 < len {
            h = step(h, word_at(at));
            at += 8;
        }
        // The last 8 bytes, overlapping the word before when the length is not a multiple of
        // 8: no copy of a partial word.
        h = step(h, word_at(len - 8));
    } else {
        let last = host
            .iter()
            .enumerate()
            .fold(0, |word, (i, &b)| word | u64::from(b) << (8 * i));
        h = step(h, last);
    }
    // The length too: "a" and "a\0" make the same word.
    step(h, len as u64)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn named(name: &str) -> HostWorkspace {
        HostWorkspace::of_value(name.as_bytes())
    }

    /// `table.get_or_evaluate` that says whether it evaluated.
    fn get(
        table: &mut HostWorkspaces,
        source: usize,
        host: &str,
        value: &str,
    ) -> (HostWorkspace, bool) {
        let evaluated = Cell::new(false);
        let workspace = table.get_or_evaluate(source, host.as_bytes(), || {
            evaluated.set(true);
            named(value)
        });
        (workspace, evaluated.get())
    }

    #[test]
    fn a_host_is_evaluated_once_then_remembered() {
        let mut table = HostWorkspaces::default();
        assert_eq!(
            get(&mut table, 1, "s1.brand-a.test", "brand-a"),
            (named("brand-a"), true)
        );
        // The map's answer is not asked again: what it said first stays.
        assert_eq!(
            get(&mut table, 1, "s1.brand-a.test", "other"),
            (named("brand-a"), false)
        );
        assert_eq!(
            get(&mut table, 1, "s1.brand-b.test", "brand-b"),
            (named("brand-b"), true)
        );
        assert_eq!(
            get(&mut table, 1, "s1.brand-a.test", "other"),
            (named("brand-a"), false)
        );
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn hosts_differing_in_a_byte_or_in_length_are_apart() {
        let mut table = HostWorkspaces::default();
        let hosts = [
            "a",
            "a\0",
            "b",
            "abcdefgh",
            "abcdefgh\0",
            "abcdefgi",
            "abcdefghi",
            "",
        ];
        for (n, host) in hosts.iter().enumerate().filter(|(_, h)| !h.is_empty()) {
            assert!(get(&mut table, 1, host, &format!("w{n}")).1, "{host:?}");
        }
        for (n, host) in hosts.iter().enumerate().filter(|(_, h)| !h.is_empty()) {
            assert_eq!(
                get(&mut table, 1, host, "x"),
                (named(&format!("w{n}")), false)
            );
        }
    }

    #[test]
    fn each_source_has_its_own_answer() {
        let mut table = HostWorkspaces::default();
        assert!(get(&mut table, 1, "s1.test", "brand-a").1);
        assert_eq!(
            get(&mut table, 2, "s1.test", "brand-b"),
            (named("brand-b"), true)
        );
        assert_eq!(
            get(&mut table, 1, "s1.test", "x"),
            (named("brand-a"), false)
        );
    }

    #[test]
    fn beyond_the_table_every_request_is_evaluated_and_the_first_hosts_stay() {
        let mut table = HostWorkspaces::default();
        let host = |n: usize| format!("s{n}.brand.test");
        for n in 0..HOSTS {
            assert!(get(&mut table, 1, &host(n), &format!("w{n}")).1);
        }
        for round in 0..2 {
            for n in HOSTS..HOSTS + 40 {
                let value = format!("w{n}-{round}");
                assert_eq!(get(&mut table, 1, &host(n), &value), (named(&value), true));
            }
        }
        assert_eq!(table.len(), HOSTS);
        for n in 0..HOSTS {
            assert_eq!(
                get(&mut table, 1, &host(n), "x"),
                (named(&format!("w{n}")), false)
            );
        }
    }

    #[test]
    fn no_host_or_an_overlong_one_is_evaluated_each_time() {
        let mut table = HostWorkspaces::default();
        let long = "a".repeat(LONGEST_HOST + 1);
        for host in ["", long.as_str()] {
            assert!(get(&mut table, 1, host, "brand-a").1);
            assert_eq!(
                get(&mut table, 1, host, "brand-b"),
                (named("brand-b"), true)
            );
        }
        let longest = "a".repeat(LONGEST_HOST);
        assert!(get(&mut table, 1, &longest, "brand-a").1);
        assert!(!get(&mut table, 1, &longest, "brand-b").1);
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn a_malformed_value_is_remembered_as_no_workspace() {
        let mut table = HostWorkspaces::default();
        assert_eq!(
            get(&mut table, 1, "s1.typo.test", "Brand A"),
            (HostWorkspace::Nothing, true)
        );
        assert_eq!(
            get(&mut table, 1, "s1.typo.test", "brand-a"),
            (HostWorkspace::Nothing, false)
        );
    }
}
