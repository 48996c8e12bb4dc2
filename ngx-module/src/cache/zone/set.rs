//! A set of the zone: one page of [`WAYS`] slots behind their line of tags, how a reader finds
//! a tag among them, and how a writer (the mutex held) evicts and publishes a way.

use std::mem::size_of;
use std::ptr;
use std::sync::atomic::{AtomicU16, AtomicU8, Ordering};

use super::slot::Slot;

/// Ways per set: 21 slots and their tags fill one page; a record competes for 21 slots, so a zone
/// holds over 99% of as many random codes as 4/5 of its slots (2 ways held 73% at full load).
pub(super) const WAYS: usize = 21;
/// One set, one page.
pub(super) const PAGE: usize = 4096;

/// A set: one line of tags (the top 16 bits of the hashes of the codes its ways hold, 0 for
/// none), read first so that a lookup copies only the slot whose tag matches, then the ways.
#[repr(C, align(64))]
pub(super) struct Set {
    pub(super) tags: [u16; WAYS],
    /// Non-zero once an insert put a code whose first set this is into its second set: only
    /// then does a lookup that misses here read the second (a bogus code or a miss reads one
    /// set). Never cleared: a stale flag costs a read.
    pub(super) spilled: u16,
    /// Where CLOCK's sweep goes on; written under the mutex.
    pub(super) hand: u32,
    pub(super) ways: [Slot; WAYS],
}

const _: () = assert!(size_of::<Set>() == PAGE);
/// The tags line as a reader loads it: whole words.
pub(super) const TAG_WORDS: usize = (WAYS * 2).div_ceil(8);

/// The ways whose tag in `words` (the set's tag line, lane `n` of word `n / 4` tag `n`) is
/// `tag`, as a bit mask, all lanes at once (a loop over the 21 tags was ~12 instructions a tag,
/// ~500 per missed code, which every bogus code pays).
pub(super) fn tag_mask(words: &[u64; TAG_WORDS], tag: u16) -> u32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64; the intrinsics only compute on values.
    let mask = unsafe {
        use std::arch::x86_64::*;
        let spread = _mm_set1_epi16(tag as i16);
        let lanes =
            |low: u64, high: u64| _mm_cmpeq_epi16(_mm_set_epi64x(high as i64, low as i64), spread);
        let first = _mm_packs_epi16(lanes(words[0], words[1]), lanes(words[2], words[3]));
        let last = _mm_packs_epi16(lanes(words[4], words[5]), _mm_setzero_si128());
        _mm_movemask_epi8(first) as u32 | ((_mm_movemask_epi8(last) as u32) << 16)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let mask = swar_tag_mask(words, tag);
    // Past the tags: the spill flag, the hand.
    mask & ((1 << WAYS) - 1)
}

/// [`tag_mask`] in plain words, four lanes at a time.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) fn swar_tag_mask(words: &[u64; TAG_WORDS], tag: u16) -> u32 {
    const LOW: u64 = 0x7fff_7fff_7fff_7fff;
    const HIGH: u64 = 0x8000_8000_8000_8000;
    let spread = u64::from(tag) * 0x0001_0001_0001_0001;
    let mut mask = 0u32;
    for (i, word) in words.iter().enumerate() {
        // A lane of `x` is zero iff its tag is `tag`; the lane's high bit is then clear in
        // `nonzero` (exact: the addition never carries across lanes).
        let x = word ^ spread;
        let zero = !(((x & LOW) + LOW) | x) & HIGH;
        let lanes =
            ((zero >> 15) & 1) | ((zero >> 30) & 2) | ((zero >> 45) & 4) | ((zero >> 60) & 8);
        mask |= (lanes as u32) << (4 * i);
    }
    mask
}

/// The ways of a [`tag_mask`], in order.
pub(super) fn ways_of(mut mask: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        let way = mask.trailing_zeros() as usize;
        mask &= mask.wrapping_sub(1);
        (way < WAYS).then_some(way)
    })
}

/// The way holding `code` now (the mutex held).
pub(super) fn find(set: &Set, code: &[u8], tag: u16, epoch: u32) -> Option<usize> {
    (0..WAYS).find(|&way| set.tags[way] == tag && set.ways[way].holds(code, epoch))
}

/// CLOCK in a full set: from the hand on, the first way whose reference bit is clear,
/// clearing those it passes.
pub(super) fn clock(set: &mut Set) -> usize {
    let start = set.hand as usize % WAYS;
    // Two rounds at most: the first clears every bit it passes.
    for step in 0..2 * WAYS {
        let way = (start + step) % WAYS;
        let slot = ptr::addr_of_mut!(set.ways[way].referenced);
        // SAFETY: the byte is the slot's, which the mutex lets this process write; readers
        // store to it as an atomic too.
        let referenced = unsafe { AtomicU8::from_ptr(slot) };
        if referenced.swap(0, Ordering::Relaxed) == 0 {
            set.hand = ((way + 1) % WAYS) as u32;
            return way;
        }
    }
    start
}

/// Publishes `way`'s tag (readers filter on it; a stale one only costs them a copy).
pub(super) fn set_tag(set: &mut Set, way: usize, tag: u16) {
    // SAFETY: the tag is a u16 of the set, which the mutex lets this process write; readers
    // read it with volatile loads of the whole line.
    unsafe { AtomicU16::from_ptr(ptr::addr_of_mut!(set.tags[way])).store(tag, Ordering::Release) };
}
