//! SipHash-2-4 of one whole message, keyed once: the check character's hash, which the module
//! computes for every request of a generated code's shape (a bogus one included). The same
//! function as `siphasher`'s `SipHasher24` (tested against it), without its streaming state: a
//! body is at most [`crate::MAX_BODY_LEN`] bytes, one or two blocks, so the hasher's buffering of
//! partial words was most of the ~250 instructions a check cost (callgrind).

/// The key's initial state, computed once per scheme.
#[derive(Clone, Copy)]
pub struct Sip24 {
    v: [u64; 4],
}

impl Sip24 {
    pub fn new(key: &[u8; 16]) -> Self {
        let k0 = u64::from_le_bytes(key[..8].try_into().unwrap_or_default());
        let k1 = u64::from_le_bytes(key[8..].try_into().unwrap_or_default());
        Self {
            v: [
                k0 ^ 0x736f_6d65_7073_6575,
                k1 ^ 0x646f_7261_6e64_6f6d,
                k0 ^ 0x6c79_6765_6e65_7261,
                k1 ^ 0x7465_6462_7974_6573,
            ],
        }
    }

    /// The hash of `message`.
    #[inline]
    pub fn hash(&self, message: &[u8]) -> u64 {
        let mut v = self.v;
        let mut blocks = message.chunks_exact(8);
        for block in &mut blocks {
            let m = u64::from_le_bytes(block.try_into().unwrap_or_default());
            compress(&mut v, m, 2);
        }
        // The last block: the remaining bytes little-endian, the message's length in the top byte.
        let last = tail(blocks.remainder()) | (message.len() as u64) << 56;
        compress(&mut v, last, 2);
        v[2] ^= 0xff;
        rounds(&mut v, 4);
        v[0] ^ v[1] ^ v[2] ^ v[3]
    }
}

/// Up to 7 bytes as a little-endian number, by two overlapping loads instead of a byte loop
/// (the overlapping bytes are the same bytes, so or-ing them in twice changes nothing).
#[inline(always)]
fn tail(rest: &[u8]) -> u64 {
    let n = rest.len();
    let word = |at: usize| {
        u64::from(u32::from_le_bytes([
            rest[at],
            rest[at + 1],
            rest[at + 2],
            rest[at + 3],
        ]))
    };
    if n >= 4 {
        word(0) | word(n - 4) << (8 * (n - 4))
    } else if n > 0 {
        let byte = |at: usize| u64::from(rest[at]) << (8 * at);
        byte(0) | byte(n / 2) | byte(n - 1)
    } else {
        0
    }
}

#[inline(always)]
fn compress(v: &mut [u64; 4], m: u64, n: usize) {
    v[3] ^= m;
    rounds(v, n);
    v[0] ^= m;
}

#[inline(always)]
fn rounds(v: &mut [u64; 4], n: usize) {
    for _ in 0..n {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use siphasher::sip::SipHasher24;
    use std::hash::Hasher;

    #[test]
    fn the_same_hash_as_siphasher_for_every_length() {
        let keys: [[u8; 16]; 3] = [[0; 16], std::array::from_fn(|i| i as u8), [0xa5; 16]];
        let message: Vec<u8> = (0..40u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(11))
            .collect();
        for key in keys {
            let sip = Sip24::new(&key);
            for len in 0..=message.len() {
                let mut reference = SipHasher24::new_with_key(&key);
                reference.write(&message[..len]);
                assert_eq!(sip.hash(&message[..len]), reference.finish(), "{len} bytes");
            }
        }
    }

    #[test]
    fn the_reference_vectors() {
        // The SipHash paper's key 00..0f: the empty message and the message 00.
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let message: Vec<u8> = (0..16).collect();
        let sip = Sip24::new(&key);
        for (len, expected) in [(0, 0x726f_db47_dd0e_0e31), (1, 0x74f8_39c5_93dc_67fd)] {
            assert_eq!(sip.hash(&message[..len]), expected, "{len} bytes");
        }
    }
}
