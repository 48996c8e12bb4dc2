//! Per-domain counters in the shared zone: a fixed table of host slots, claimed by the first
//! worker that counts a request for the host, plus one "other" slot for everything else (hosts
//! outside the pool, a full table, names too long to keep). The table never grows, so a flood of
//! made-up `Host` headers costs a bounded amount of memory and cardinality.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Host slots; a pool rarely holds more than a dozen domains.
pub const SLOTS: usize = 64;
/// Longest host name kept (DNS names are at most 253 bytes).
pub const MAX_NAME: usize = 253;
/// The label of the catch-all slot.
pub const OTHER: &str = "other";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainCounter {
    Requests,
    Redirects,
    NotFound,
    Gone,
    CacheHits,
    /// Every Redis failure a lookup met (error, timeout, lost projection, scheme mismatch).
    RedisErrors,
    Fallbacks,
}

pub const DOMAIN_COUNT: usize = 7;

/// Metric names (`shortlink_domain_<name>_total`) and their help lines.
pub const DOMAIN_METRICS: [(&str, &str); DOMAIN_COUNT] = [
    (
        "requests",
        "Requests that reached a shortlink location, by host.",
    ),
    ("redirects", "Redirects answered, by host."),
    ("not_found", "404 answers, by host."),
    ("gone", "410 answers (expired or disabled links), by host."),
    (
        "cache_hits",
        "Lookups answered from the worker cache, by host.",
    ),
    ("redis_errors", "Lookups that met a Redis failure, by host."),
    (
        "fallbacks",
        "Requests sent to the fallback location, by host.",
    ),
];

/// One host's counters (or "other"'s).
pub type Row = [AtomicU64; DOMAIN_COUNT];

pub trait RowBump {
    fn bump(&self, counter: DomainCounter);
}

impl RowBump for Row {
    #[inline]
    fn bump(&self, counter: DomainCounter) {
        self[counter as usize].fetch_add(1, Ordering::Relaxed);
    }
}

const EMPTY: u32 = 0;
const CLAIMED: u32 = 1;
const READY: u32 = 2;

#[repr(C)]
struct Slot {
    state: AtomicU32,
    len: AtomicU32,
    /// Written once by the claiming worker before `state` turns READY (release), read only
    /// after READY was seen (acquire), never written again.
    name: UnsafeCell<[u8; MAX_NAME]>,
    counts: [AtomicU64; DOMAIN_COUNT],
}

/// Lives in shared memory, zero-filled: every slot EMPTY and every count 0.
#[repr(C)]
pub struct DomainTable {
    other: [AtomicU64; DOMAIN_COUNT],
    slots: [Slot; SLOTS],
}

// SAFETY: the only non-atomic field, `name`, follows the publish-once protocol above.
unsafe impl Sync for DomainTable {}

/// The slot a request counts under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    Slot(usize),
    Other,
}

impl Domain {
    /// The number a host's memo cell keeps for it (never 0, which is "not found yet"). A host's
    /// row never changes once found: slots are claimed for good, and the table only fills.
    pub fn memo(self) -> u32 {
        match self {
            Domain::Other => 1,
            Domain::Slot(i) => i as u32 + 2,
        }
    }

    pub fn from_memo(memo: u32) -> Option<Self> {
        match memo {
            0 => None,
            1 => Some(Domain::Other),
            n => Some(Domain::Slot(n as usize - 2)),
        }
    }
}

impl DomainTable {
    /// The slot of `host` (already lower-cased by nginx), claiming a free one for a new host.
    /// Two workers claiming the same new host at once may each take a slot; the snapshot adds
    /// slots of the same name together.
    pub fn find(&self, host: &[u8]) -> Domain {
        if host.is_empty() || host.len() > MAX_NAME {
            return Domain::Other;
        }
        for (i, slot) in self.slots.iter().enumerate() {
            match slot.state.load(Ordering::Acquire) {
                READY if slot.name() == host => return Domain::Slot(i),
                READY | CLAIMED => continue,
                _ => {}
            }
            if slot
                .state
                .compare_exchange(EMPTY, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                // Lost the race: look at what the winner publishes on the next scan's worth.
                continue;
            }
            // SAFETY: this worker owns the slot between CLAIMED and READY; nobody reads the
            // name before READY.
            unsafe { (&mut *slot.name.get())[..host.len()].copy_from_slice(host) };
            slot.len.store(host.len() as u32, Ordering::Relaxed);
            slot.state.store(READY, Ordering::Release);
            return Domain::Slot(i);
        }
        Domain::Other
    }

    /// The counters of `domain`'s row, which a request keeps rather than finding them again
    /// for each of its counts.
    pub fn row(&self, domain: Domain) -> &Row {
        match domain {
            Domain::Slot(i) => &self.slots[i].counts,
            Domain::Other => &self.other,
        }
    }

    /// `(host, counts)` per published host in slot order (same-named slots merged), then "other".
    pub fn snapshot(&self) -> Vec<(String, [u64; DOMAIN_COUNT])> {
        let load = |counts: &[AtomicU64; DOMAIN_COUNT]| -> [u64; DOMAIN_COUNT] {
            std::array::from_fn(|i| counts[i].load(Ordering::Relaxed))
        };
        let mut rows: Vec<(String, [u64; DOMAIN_COUNT])> = Vec::new();
        for slot in &self.slots {
            if slot.state.load(Ordering::Acquire) != READY {
                continue;
            }
            let name = String::from_utf8_lossy(slot.name()).into_owned();
            let counts = load(&slot.counts);
            match rows.iter_mut().find(|(n, _)| *n == name) {
                Some((_, sum)) => sum.iter_mut().zip(counts).for_each(|(s, c)| *s += c),
                None => rows.push((name, counts)),
            }
        }
        rows.push((OTHER.to_owned(), load(&self.other)));
        rows
    }
}

impl Slot {
    fn name(&self) -> &[u8] {
        let len = (self.len.load(Ordering::Relaxed) as usize).min(MAX_NAME);
        // SAFETY: called only after READY was observed with acquire: the name is published and
        // never written again.
        unsafe { &(&*self.name.get())[..len] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Box<DomainTable> {
        // SAFETY: all-zero bytes are a valid table (atomics at 0, slots EMPTY), as in the zone.
        unsafe { Box::new(std::mem::zeroed()) }
    }

    #[test]
    fn hosts_get_their_own_slots_and_keep_them() {
        let t = table();
        let a = t.find(b"s1.example");
        let b = t.find(b"s2.example");
        assert_ne!(a, b);
        assert_eq!(t.find(b"s1.example"), a);
        t.row(a).bump(DomainCounter::Redirects);
        t.row(b).bump(DomainCounter::NotFound);
        t.row(Domain::Other).bump(DomainCounter::Requests);
        let rows = t.snapshot();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].0, "s1.example");
        assert_eq!(rows[0].1[DomainCounter::Redirects as usize], 1);
        assert_eq!(rows[0].1[DomainCounter::NotFound as usize], 0);
        assert_eq!(rows[1].1[DomainCounter::NotFound as usize], 1);
        assert_eq!(rows[2], (OTHER.to_owned(), [1, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn a_row_survives_its_memo() {
        for domain in [Domain::Other, Domain::Slot(0), Domain::Slot(SLOTS - 1)] {
            assert_ne!(domain.memo(), 0);
            assert_eq!(Domain::from_memo(domain.memo()), Some(domain));
        }
        assert_eq!(Domain::from_memo(0), None);
    }

    #[test]
    fn the_table_is_bounded() {
        let t = table();
        for i in 0..SLOTS {
            assert!(matches!(
                t.find(format!("h{i}.example").as_bytes()),
                Domain::Slot(_)
            ));
        }
        assert_eq!(t.find(b"one-too-many.example"), Domain::Other);
        assert_eq!(t.find(&[b'a'; MAX_NAME + 1]), Domain::Other);
        assert_eq!(t.find(b""), Domain::Other);
        assert_eq!(t.snapshot().len(), SLOTS + 1);
    }
}
