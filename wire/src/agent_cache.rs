//! A worker's memory of the user agents it judged (issue 78's capped-click budget): the
//! [`AgentPart`] of an agent, found by a hash of its raw bytes, so a repeated agent (phones'
//! agents repeat) costs a hash of its bytes instead of lower-casing it, a pass of the agent
//! table and a browser-version parse. Direct-mapped: a slot holds the last agent hashed to it.

use crate::agent::{self, MAX_AGENT};
use crate::verdict::{decide, AgentPart, Signals, Verdict};
use std::cell::Cell;

const SLOTS: usize = 256;

#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    part: Option<AgentPart>,
}

const EMPTY: Slot = Slot { key: 0, part: None };

/// See the module doc. One per thread (`Cell`s: an nginx worker is one thread, and nothing
/// here can panic).
pub struct AgentCache {
    slots: [Cell<Slot>; SLOTS],
}

impl AgentCache {
    pub const fn new() -> Self {
        AgentCache {
            slots: [const { Cell::new(EMPTY) }; SLOTS],
        }
    }

    /// The click-time verdict of a request with the raw user agent `ua` and `signals`: what
    /// [`crate::verdict::at_click`] answers for it.
    pub fn verdict(&self, ua: &[u8], signals: Signals) -> Verdict {
        let key = hash(ua);
        let slot = &self.slots[(key as usize) % SLOTS];
        let part = match slot.get() {
            Slot {
                key: held,
                part: Some(part),
            } if held == key => part,
            _ => {
                let mut lower = [0u8; MAX_AGENT];
                let part = AgentPart::of(agent::lowered(ua, &mut lower));
                slot.set(Slot {
                    key,
                    part: Some(part),
                });
                part
            }
        };
        decide(part, signals)
    }
}

impl Default for AgentCache {
    fn default() -> Self {
        Self::new()
    }
}

/// 64 bits of `bytes`, eight at a time (multiply-xorshift; the length mixed in first). Two
/// agents sharing a hash share a verdict's agent part: a client choosing its agent could only
/// get the part of another agent it could have sent itself.
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(K);
        h ^= h >> 29;
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::at_click;

    #[test]
    fn the_cache_answers_what_the_verdict_answers() {
        let cache = AgentCache::new();
        let agents: [&[u8]; 6] = [
            b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            b"WhatsApp/2.23.20.0 A",
            b"  Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 ",
            b"",
            b"curl/8.5.0",
            b"Mozilla/5.0 (compatible; Google-Safety; +http://www.google.com/bot.html)",
        ];
        let signals = [
            0,
            Signals::HEAD,
            Signals::NO_LANGUAGE,
            Signals::SECURE | Signals::NO_FETCH_MODE,
        ];
        // Twice over: the second round from the cache.
        for _ in 0..2 {
            for ua in agents {
                for bits in signals {
                    let signals = Signals::new(bits);
                    let mut lower = [0u8; MAX_AGENT];
                    let expected = at_click(agent::lowered(ua, &mut lower), signals);
                    assert_eq!(
                        cache.verdict(ua, signals),
                        expected,
                        "{:?}",
                        String::from_utf8_lossy(ua)
                    );
                }
            }
        }
    }

    #[test]
    fn the_hash_tells_agents_apart() {
        let agents: Vec<Vec<u8>> = (0..10_000)
            .map(|i| format!("Agent/{i}").into_bytes())
            .collect();
        let hashes: std::collections::HashSet<u64> = agents.iter().map(|a| hash(a)).collect();
        assert_eq!(hashes.len(), agents.len());
        assert_ne!(hash(b"ab"), hash(b"ab\0"));
    }
}
