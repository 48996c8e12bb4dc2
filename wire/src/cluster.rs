//! Redis Cluster's key space, as the module and the sidecar must both see it.
//!
//! A cluster refuses a command whose keys live in different hash slots, and the module's lookup
//! is one `MGET` of a link record and the projection marker. So on a cluster the marker is kept
//! once per slot, under a key whose hash tag puts it in the same slot as the records it vouches
//! for; it then moves with its slot when the cluster is resharded, and a node that loses its data
//! loses exactly the markers of the slots it served. The visit stream is split the same way:
//! [`EVENT_STREAMS`] streams whose tags spread them over the slot range, so that every primary
//! takes a share of the writes.
//!
//! One Redis (or a primary with replicas) keeps the plain key names of docs/ARCHITECTURE.md.

use std::sync::OnceLock;

/// The number of hash slots of every Redis Cluster.
pub const SLOTS: u16 = 16384;

use crate::keys::RESYNC_TOKEN;
pub use crate::keys::{EVENT_STREAM_PREFIX, MARKER_PREFIX};

/// How many visit streams a cluster has. Enough that three to a dozen primaries each hold some;
/// few enough that the consumer's round over all of them stays one short pass.
pub const EVENT_STREAMS: u16 = 16;

/// The hash slot of `key` (CRC16/XMODEM of the key, or of its first non-empty `{tag}`, mod 16384).
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The part of `key` that is hashed: the content of the first `{...}` if it is not empty, else
/// the whole key (Redis Cluster specification, "Hash tags").
fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// CRC16/XMODEM (polynomial 0x1021, initial 0), the checksum Redis Cluster hashes keys with.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        let mut crc = crc ^ (u16::from(byte) << 8);
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
        crc
    })
}

/// The shortest hash tag (in a fixed enumeration order) whose keys land in `slot`: the same on
/// every machine, so module and sidecar name the same marker.
pub fn slot_tag(slot: u16) -> &'static str {
    &tags()[usize::from(slot % SLOTS)]
}

/// The projection marker key that vouches for the records of `slot`.
pub fn marker_key(slot: u16) -> String {
    format!("{MARKER_PREFIX}{{{}}}", slot_tag(slot))
}

/// The resync token key of `slot` (see [`crate::keys::RESYNC_TOKEN`]).
pub fn token_key(slot: u16) -> String {
    format!("{RESYNC_TOKEN}:{{{}}}", slot_tag(slot))
}

/// The marker key in the same slot as `key` (for the module's `MGET <record> <marker>`).
pub fn marker_key_for(key: &[u8]) -> String {
    marker_key(key_slot(key))
}

/// The visit stream number `index` (of [`EVENT_STREAMS`]): its tag is the one of the slot at
/// `index / EVENT_STREAMS` of the slot range, so the streams spread evenly over the slots.
pub fn event_stream_key(index: u16) -> String {
    let slot =
        (u32::from(index % EVENT_STREAMS) * u32::from(SLOTS) / u32::from(EVENT_STREAMS)) as u16;
    format!("{EVENT_STREAM_PREFIX}{{{}}}", slot_tag(slot))
}

/// All visit stream keys of a cluster, in index order.
pub fn event_stream_keys() -> Vec<String> {
    (0..EVENT_STREAMS).map(event_stream_key).collect()
}

/// The tag table: for each slot, the first string of the enumeration (lengths 1, 2, … over
/// `[0-9a-z]`) that hashes there. Built once, in about a millisecond.
fn tags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut tags = vec![String::new(); usize::from(SLOTS)];
        let mut missing = tags.len();
        let mut candidate = vec![0usize];
        while missing > 0 {
            let tag: Vec<u8> = candidate.iter().map(|&i| ALPHABET[i]).collect();
            let slot = usize::from(crc16(&tag) % SLOTS);
            if tags[slot].is_empty() {
                tags[slot] = String::from_utf8(tag).expect("ASCII");
                missing -= 1;
            }
            next_candidate(&mut candidate, ALPHABET.len());
        }
        tags
    })
}

/// The next string of the enumeration: counts in base `radix`, growing a digit when all are
/// spent (0, 1, …, z, 00, 01, …).
fn next_candidate(digits: &mut Vec<usize>, radix: usize) {
    for digit in digits.iter_mut().rev() {
        *digit += 1;
        if *digit < radix {
            return;
        }
        *digit = 0;
    }
    digits.insert(0, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }

    #[test]
    fn every_slot_has_a_marker_in_that_slot() {
        for slot in 0..SLOTS {
            assert_eq!(key_slot(marker_key(slot).as_bytes()), slot);
        }
        let record = b"sl:c:aB3xY9";
        assert_eq!(
            key_slot(marker_key_for(record).as_bytes()),
            key_slot(record)
        );
    }

    #[test]
    fn tags_are_short_and_stable() {
        assert!((0..SLOTS).all(|slot| slot_tag(slot).len() <= 4));
        // The table is part of the contract: these names are in Redis of running clusters.
        assert_eq!(marker_key(key_slot(b"0")), "sl:meta:projection:{0}");
    }

    #[test]
    fn event_streams_spread_over_the_slot_range() {
        let keys = event_stream_keys();
        assert_eq!(keys.len(), usize::from(EVENT_STREAMS));
        let slots: Vec<u16> = keys.iter().map(|k| key_slot(k.as_bytes())).collect();
        for (index, slot) in slots.iter().enumerate() {
            let start = index as u32 * u32::from(SLOTS) / u32::from(EVENT_STREAMS);
            assert_eq!(u32::from(*slot), start);
        }
    }
}
