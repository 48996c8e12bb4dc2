//! A keyed permutation of `0..domain` for any `domain <= 2^64`.
//!
//! A balanced Feistel network permutes `0..2^(2h)`, the smallest even power of two that covers the
//! domain; cycle-walking (re-applying the network until the value falls back inside the domain) turns
//! that into a permutation of exactly `0..domain`. Because `2^(2h) < 4 * domain`, a walk takes fewer
//! than four steps on average. Being a permutation, distinct sequence numbers always give distinct
//! outputs: uniqueness needs no lookup.

use siphasher::sip::SipHasher24;
use std::hash::Hasher;

/// Rounds of the network. Four give a pseudo-random permutation (Luby-Rackoff); six leave a margin.
const ROUNDS: u8 = 6;

#[derive(Clone)]
pub(crate) struct Feistel {
    key: [u8; 16],
    domain: u64,
    half_bits: u32,
    half_mask: u64,
}

impl Feistel {
    /// `domain` must be at least 2.
    pub(crate) fn new(key: [u8; 16], domain: u64) -> Self {
        debug_assert!(domain >= 2);
        let bits = 64 - (domain - 1).leading_zeros();
        let half_bits = bits.div_ceil(2);
        let half_mask = (1u64 << half_bits) - 1;
        Self {
            key,
            domain,
            half_bits,
            half_mask,
        }
    }

    pub(crate) fn domain(&self) -> u64 {
        self.domain
    }

    /// Maps `x` (which must be `< domain`) to its image in `0..domain`.
    pub(crate) fn permute(&self, mut x: u64) -> u64 {
        debug_assert!(x < self.domain);
        loop {
            x = self.network(x);
            if x < self.domain {
                return x;
            }
        }
    }

    /// The inverse of [`Feistel::permute`].
    pub(crate) fn unpermute(&self, mut y: u64) -> u64 {
        debug_assert!(y < self.domain);
        loop {
            y = self.network_inverse(y);
            if y < self.domain {
                return y;
            }
        }
    }

    fn network(&self, x: u64) -> u64 {
        let (mut left, mut right) = (x >> self.half_bits, x & self.half_mask);
        for round in 0..ROUNDS {
            let next = left ^ self.round_function(round, right);
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }

    fn network_inverse(&self, y: u64) -> u64 {
        let (mut left, mut right) = (y >> self.half_bits, y & self.half_mask);
        for round in (0..ROUNDS).rev() {
            let previous = right ^ self.round_function(round, left);
            right = left;
            left = previous;
        }
        (left << self.half_bits) | right
    }

    fn round_function(&self, round: u8, half: u64) -> u64 {
        let mut hasher = SipHasher24::new_with_key(&self.key);
        hasher.write_u8(round);
        hasher.write_u64(half);
        hasher.finish() & self.half_mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_domains_are_permuted_exactly() {
        for domain in [2u64, 3, 62, 100, 3844, 4097] {
            let feistel = Feistel::new([7; 16], domain);
            let mut seen = vec![false; domain as usize];
            for x in 0..domain {
                let y = feistel.permute(x);
                assert!(y < domain);
                assert!(!seen[y as usize], "{y} hit twice in domain {domain}");
                seen[y as usize] = true;
                assert_eq!(feistel.unpermute(y), x);
            }
        }
    }
}
