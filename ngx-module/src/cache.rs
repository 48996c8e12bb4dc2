//! Per-worker cache of decoded link records.
//!
//! Two generations instead of a true LRU: new entries go to `young`; when it is full, `old` is
//! dropped and `young` becomes `old`. A hit in `old` moves the entry back to `young`. That keeps
//! hot codes, bounds memory to `capacity` entries, costs O(1) per operation, and needs no
//! linked list. A hit allocates nothing: lookups borrow the code and moves reuse the key.
//! Keys hash with foldhash (randomly seeded per process): a few times cheaper than std's SipHash
//! for keys this short, while seeding keeps collisions from being planned in advance. Keys of up
//! to [`INLINE_KEY`] bytes (every generated code, most aliases) live inside the table, so a probe
//! compares bytes already in the bucket instead of following a pointer: a hit then touches two
//! cache lines of the table and the target, and a cache miss of the CPU's on each costs more
//! than the rest of the probe.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::mem;

use foldhash::fast::RandomState;

use crate::record::Link;

/// What a lookup resolved to, as cached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    Link(Link),
    /// No such key in Redis; cached only for the short negative TTL.
    Missing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    pub capacity: usize,
    pub ttl_ms: u64,
    pub negative_ttl_ms: u64,
}

struct Entry {
    value: Cached,
    stored_at: u64,
}

/// Longest key stored inline: with the length byte, as large as the boxed form (24 bytes).
const INLINE_KEY: usize = 22;

/// A cache key: the code's bytes, inline when short.
#[derive(Clone)]
enum Key {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Boxed(Box<[u8]>),
}

impl Key {
    fn new(code: &[u8]) -> Self {
        match <u8>::try_from(code.len()) {
            Ok(len) if code.len() <= INLINE_KEY => {
                let mut bytes = [0; INLINE_KEY];
                bytes[..code.len()].copy_from_slice(code);
                Key::Inline { len, bytes }
            }
            _ => Key::Boxed(code.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Boxed(bytes) => bytes,
        }
    }
}

// Hash and equality are those of the bytes, as `Borrow<[u8]>` requires: lookups borrow the code.
impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

pub struct Cache {
    young: HashMap<Key, Entry, RandomState>,
    old: HashMap<Key, Entry, RandomState>,
    generation: usize,
    config: CacheConfig,
}

impl Cache {
    pub fn new(config: CacheConfig) -> Self {
        let generation = (config.capacity / 2).max(1);
        Self {
            // Reserved up front so neither the hot path nor rotation reallocates.
            young: HashMap::with_capacity_and_hasher(generation, RandomState::default()),
            old: HashMap::with_capacity_and_hasher(generation, RandomState::default()),
            generation,
            config,
        }
    }

    pub fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cached answer for `code` if it is still fresh at `now_ms`.
    pub fn get(&mut self, code: &[u8], now_ms: u64) -> Option<&Cached> {
        let config = self.config;
        if let Some(entry) = self.young.get(code) {
            let entry: *const Entry = entry;
            // SAFETY: `entry` points into `young`, which this path returns without touching
            // again, so the reference stays valid for the borrow of `self` it is returned with.
            // The pointer only works around today's borrow checker, which would extend the
            // borrow over the mutations of the other path (NLL "problem case #3") and so force
            // a second hash and probe on every hit.
            let entry = unsafe { &*entry };
            // A stale young entry stays until the lookup that follows this miss replaces it.
            return entry.is_fresh(&config, now_ms).then_some(&entry.value);
        }
        let (key, entry) = self.old.remove_entry(code)?;
        if !entry.is_fresh(&config, now_ms) {
            return None;
        }
        self.make_room();
        let slot = self.young.entry(key).or_insert(entry);
        Some(&slot.value)
    }

    pub fn insert(&mut self, code: &[u8], value: Cached, now_ms: u64) {
        if ttl_for(&self.config, &value) == 0 {
            return;
        }
        self.old.remove(code);
        if !self.young.contains_key(code) {
            self.make_room();
        }
        self.young.insert(
            Key::new(code),
            Entry {
                value,
                stored_at: now_ms,
            },
        );
    }

    fn make_room(&mut self) {
        if self.young.len() >= self.generation {
            // Reuse the old table's allocation for the next young generation.
            self.old.clear();
            mem::swap(&mut self.young, &mut self.old);
        }
    }
}

fn ttl_for(config: &CacheConfig, value: &Cached) -> u64 {
    match value {
        Cached::Link(_) => config.ttl_ms,
        Cached::Missing => config.negative_ttl_ms,
    }
}

impl Entry {
    fn is_fresh(&self, config: &CacheConfig, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.stored_at) < ttl_for(config, &self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(capacity: usize) -> Cache {
        Cache::new(CacheConfig {
            capacity,
            ttl_ms: 10_000,
            negative_ttl_ms: 1_000,
        })
    }

    fn link(n: u8) -> Cached {
        Cached::Link(Link::Live {
            status: 302,
            expires_at: 0,
            forward_query: false,
            target: vec![b'a' + n].into(),
        })
    }

    #[test]
    fn hit_until_ttl_then_miss() {
        let mut c = cache(10);
        c.insert(b"abc", link(1), 0);
        assert_eq!(c.get(b"abc", 9_999), Some(&link(1)));
        assert_eq!(c.get(b"abc", 10_000), None);
    }

    #[test]
    fn misses_use_the_negative_ttl() {
        let mut c = cache(10);
        c.insert(b"nope", Cached::Missing, 100);
        assert_eq!(c.get(b"nope", 1_099), Some(&Cached::Missing));
        assert_eq!(c.get(b"nope", 1_100), None);
    }

    #[test]
    fn zero_ttl_disables_that_kind() {
        let mut c = Cache::new(CacheConfig {
            capacity: 10,
            ttl_ms: 10,
            negative_ttl_ms: 0,
        });
        c.insert(b"nope", Cached::Missing, 0);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn size_is_bounded() {
        let mut c = cache(100);
        for i in 0..10_000u32 {
            c.insert(&i.to_be_bytes(), link(0), 0);
            assert!(c.len() <= 100);
        }
    }

    #[test]
    fn hot_entries_survive_rotation() {
        let mut c = cache(4); // generations of 2
        c.insert(b"hot", link(1), 0);
        for i in 0..50u32 {
            c.insert(&i.to_be_bytes(), link(2), 0);
            assert_eq!(c.get(b"hot", 1), Some(&link(1)), "after {i} inserts");
        }
    }

    #[test]
    fn short_and_long_keys_are_kept_apart() {
        let mut c = cache(100);
        let long = [b'x'; INLINE_KEY + 1];
        let keys = [&b"abc"[..], &long[..INLINE_KEY], &long[..], &[]];
        for (i, key) in keys.iter().enumerate() {
            c.insert(key, link(i as u8), 0);
        }
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(c.get(key, 1), Some(&link(i as u8)), "{} bytes", key.len());
        }
        assert_eq!(c.get(b"abcd", 1), None);
        assert_eq!(c.get(&long[..INLINE_KEY - 1], 1), None);
    }

    #[test]
    fn reinsert_replaces() {
        let mut c = cache(4);
        c.insert(b"a", link(1), 0);
        c.insert(b"b", link(1), 0);
        c.insert(b"c", link(1), 0); // rotates: a, b are old
        c.insert(b"a", link(3), 5);
        assert_eq!(c.get(b"a", 6), Some(&link(3)));
        assert!(c.len() <= 4);
    }
}
