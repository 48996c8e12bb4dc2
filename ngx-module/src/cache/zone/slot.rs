//! A slot of the zone and its seqlock: the layout every worker reads, the copy a reader keeps
//! only if no writer came inside meanwhile, the write under the zone's mutex. Shared by the zone
//! ([`super::Zone`]) and the workers' copies ([`super::Near`]).

use std::mem::{size_of, MaybeUninit};
use std::ptr;
use std::sync::atomic::{fence, AtomicU32, AtomicU8, Ordering};

use crate::cache::{CachedLink, Hit};

/// Code plus target bytes a slot holds.
pub const INLINE: usize = 152;
/// Bytes of shared memory per cached record.
pub const SLOT_BYTES: usize = size_of::<Slot>();

pub(super) const EMPTY: u8 = 0;
pub(super) const LIVE: u8 = 1;
pub(super) const REVOKED: u8 = 2;
pub(super) const MISSING: u8 = 3;
pub(super) const FORWARD_QUERY: u8 = 1;

/// One entry: three cache lines, the first holding everything but the bytes past its 24th.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct Slot {
    /// Seqlock: odd while a writer is inside.
    pub(super) version: u32,
    /// Low half of the zone's epoch when written: another epoch is an empty slot.
    pub(super) epoch: u32,
    /// The code's tag (the set's copy of it is compared before the slot is copied).
    pub(super) tag: u32,
    pub(super) len: u16,
    pub(super) status: u16,
    pub(super) code_len: u8,
    pub(super) kind: u8,
    pub(super) flags: u8,
    /// CLOCK's reference bit; not covered by the seqlock.
    pub(super) referenced: u8,
    pub(super) _pad: u32,
    pub(super) fresh_until: u64,
    pub(super) expires_at: u64,
    pub(super) bytes: [u8; INLINE],
}

const _: () = assert!(size_of::<Slot>() == 192);

impl Slot {
    pub(super) const EMPTY: Slot = Slot {
        version: 0,
        epoch: 0,
        tag: 0,
        len: 0,
        status: 0,
        code_len: 0,
        kind: EMPTY,
        flags: 0,
        referenced: 0,
        _pad: 0,
        fresh_until: 0,
        expires_at: 0,
        bytes: [0; INLINE],
    };

    #[inline(always)]
    pub(super) fn holds(&self, code: &[u8], epoch: u32) -> bool {
        self.kind != EMPTY
            && self.epoch == epoch
            && usize::from(self.code_len) == code.len()
            && same_bytes(&self.bytes[..code.len()], code)
    }

    /// What a hit on this copy gives.
    pub fn hit(&self) -> Hit<'_> {
        if self.kind == MISSING {
            return Hit::Missing;
        }
        Hit::Link(CachedLink {
            revoked: self.kind == REVOKED,
            status: self.status,
            expires_at: self.expires_at,
            forward_query: self.flags & FORWARD_QUERY != 0,
            target: &self.bytes[usize::from(self.code_len)..usize::from(self.len)],
            extras: None,
        })
    }
}

/// What a read of a set (or a worker's copy) found (`Zone::get_in`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Probe {
    Hit,
    /// `spilled`: the set's flag, whether the code's second set may hold it.
    Miss {
        spilled: bool,
    },
}

/// `a == b` for slices of one length; a code (at most 16 bytes: generated codes and most aliases)
/// as two overlapping word compares, without the call to `memcmp` (~20 instructions a hit).
#[inline(always)]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap());
    let half = |s: &[u8], at: usize| u32::from_ne_bytes(s[at..at + 4].try_into().unwrap());
    match len {
        8..=16 => word(a, 0) == word(b, 0) && word(a, len - 8) == word(b, len - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, len - 4) == half(b, len - 4),
        _ => a == b,
    }
}

/// Words of a slot before its bytes.
pub(super) const HEAD_WORDS: usize = std::mem::offset_of!(Slot, bytes) / 8;
pub(super) const SLOT_WORDS: usize = size_of::<Slot>() / 8;
const _: () = assert!(std::mem::offset_of!(Slot, bytes) % 8 == 0 && SLOT_BYTES % 8 == 0);

/// Seqlock read: copies `slot` into `copy`; `None` if a writer was or came inside meanwhile.
/// Copies the head and the bytes in use only, a word at a time (a volatile read of the whole
/// slot was 192 byte loads, and touched its third line for every record); the rest of the copy
/// is zeroed, so that it is a whole `Slot`.
#[inline]
pub(super) fn read(slot: *mut Slot, copy: &mut MaybeUninit<Slot>) -> Option<&Slot> {
    let from = slot.cast::<u64>();
    let to = copy.as_mut_ptr().cast::<u64>();
    // SAFETY: `slot` points into the mapped zone, `copy` is a whole slot's worth of memory,
    // both 64-byte aligned. The version is only written as an atomic; the rest is copied with
    // volatile reads and kept only if the version proves no writer touched it during the copy
    // (a seqlock, as crossbeam's AtomicCell does). A torn `len` only bounds the copy: it is
    // clamped, and a torn copy is thrown away.
    unsafe {
        prefetch(from.add(8));
        prefetch(from.add(16));
        let version = AtomicU32::from_ptr(ptr::addr_of_mut!((*slot).version));
        let before = version.load(Ordering::Acquire);
        if before & 1 != 0 {
            return None;
        }
        for word in 0..HEAD_WORDS {
            to.add(word).write(ptr::read_volatile(from.add(word)));
        }
        let len = usize::from(ptr::addr_of!((*copy.as_ptr()).len).read()).min(INLINE);
        let used = HEAD_WORDS + len.div_ceil(8);
        for word in HEAD_WORDS..used {
            to.add(word).write(ptr::read_volatile(from.add(word)));
        }
        for word in used..SLOT_WORDS {
            to.add(word).write(0);
        }
        fence(Ordering::Acquire);
        (version.load(Ordering::Relaxed) == before).then(|| copy.assume_init_ref())
    }
}

/// Asks for a line of the slot ahead of its use: its lines then come from memory together.
#[inline(always)]
pub(super) fn prefetch(at: *const u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(at.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Sets CLOCK's reference bit of a slot a reader hit (one store, only when it was clear).
#[inline]
pub(super) fn mark_referenced(slot: *mut Slot) {
    // SAFETY: `slot` is in the mapped zone; the reference bit is a byte of it that every
    // process only accesses as an atomic.
    let referenced = unsafe { AtomicU8::from_ptr(ptr::addr_of_mut!((*slot).referenced)) };
    if referenced.load(Ordering::Relaxed) == 0 {
        referenced.store(1, Ordering::Relaxed);
    }
}

/// Seqlock write, under the zone's mutex.
pub(super) fn write(slot: &mut Slot, mut entry: Slot) {
    // SAFETY: the version is only ever accessed as an atomic by other processes.
    let version = unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!(slot.version)) };
    let odd = version.load(Ordering::Relaxed) | 1;
    version.store(odd, Ordering::Relaxed);
    fence(Ordering::Release);
    entry.version = odd;
    // SAFETY: `slot` is a valid slot this process may write (the mutex is held); volatile so
    // the stores are not merged or moved across the fences.
    unsafe { ptr::write_volatile(ptr::from_mut(slot), entry) };
    // SAFETY: as above.
    let version = unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!(slot.version)) };
    version.store(odd.wrapping_add(1), Ordering::Release);
}
