//! A worker's copies of the zone slots it hit last.
//!
//! A zone hit reads the set's tag line, copies the slot under its seqlock and checks the copy:
//! with the hash, ~360 instructions a hit, where the worker cache's hit was ~155 (callgrind,
//! hot cell; bench/results/edge-cache-2026-11-26c.md). A hot code is read again and again by the same worker, so each worker keeps the
//! copy it made, direct-mapped by the code's hash, with the address of its slot. The next
//! read of the code compares the code with the copy and loads the slot's version: equal, the
//! slot has not been written since (an insert, a removal, an eviction each change the version;
//! a writer killed inside leaves it odd, never equal to a copy's), and a flush changes the
//! zone's epoch, which the copy's must match. So a copy answers only what a read of the zone
//! would answer at that moment, with none of the invalidation rules changed. A hit on a copy
//! still sets the slot's reference bit, so CLOCK keeps a hot code.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use super::slot::{mark_referenced, read, Probe, Slot};
use crate::cache::{Hit, Scope, IMPORTED};

/// Entries per worker: 1 MiB (256 bytes each, and an 8-byte key). A thousand hot codes found
/// 86% of theirs (callgrind's hot cell; direct-mapped: a code shares its entry with 1 in 4
/// others).
const ENTRIES: usize = 4096;

pub struct Near {
    /// Per entry, the key ([`super::Place`]) of the code whose zone hit came last there: a code
    /// is copied into its entry only at its second hit in a row (8 bytes an entry: a bogus or
    /// once-read code touches one word of them, not the entries).
    pub(super) keys: Box<[u64]>,
    pub(super) entries: Box<[Entry]>,
    /// Where a code not (yet) given an entry is copied.
    pub(super) scratch: Entry,
    /// The zone the entries' slots belong to (its header's address and seed).
    zone: (usize, u64),
}

#[repr(C, align(64))]
pub struct Entry {
    copy: MaybeUninit<Slot>,
    /// The slot `copy` was taken from while it held a fresh entry; null: none, and `copy` is
    /// not to be read.
    at: *mut Slot,
}

impl Default for Near {
    fn default() -> Self {
        Self::with_entries(ENTRIES)
    }
}

impl Near {
    /// `entries`: rounded up to a power of two.
    pub fn with_entries(entries: usize) -> Near {
        let entries = entries.max(1).next_power_of_two();
        Near {
            keys: vec![0; entries].into_boxed_slice(),
            entries: (0..entries).map(|_| Entry::new()).collect(),
            scratch: Entry::new(),
            zone: (0, 0),
        }
    }

    /// Forgets every entry unless they are the zone's named `id` (its header's address and
    /// seed: a worker pairs one with its zone; this keeps a slot address from being read in
    /// another zone's mapping).
    pub(super) fn belong_to(&mut self, id: (usize, u64)) {
        if self.zone != id {
            self.entries.iter_mut().for_each(|e| e.at = ptr::null_mut());
            self.keys.fill(0);
            self.zone = id;
        }
    }

    /// The entry of a code whose [`super::Place`] says `near`.
    pub(super) fn index(&self, near: usize) -> usize {
        near & (self.entries.len() - 1)
    }
}

impl Entry {
    fn new() -> Entry {
        Entry {
            copy: MaybeUninit::uninit(),
            at: ptr::null_mut(),
        }
    }

    /// What the copy says about `code`, if it is `code`'s and its slot is unchanged; `None`:
    /// ask the zone.
    pub(super) fn check(
        &self,
        code: &[u8],
        epoch: u32,
        now_ms: u64,
        reader: Scope,
    ) -> Option<Probe> {
        if self.at.is_null() {
            return None;
        }
        // SAFETY: `at` is set only by `keep`, after `fill` wrote a whole copy that passed its
        // seqlock check.
        let copy = unsafe { self.copy.assume_init_ref() };
        if !copy.holds(code, epoch) {
            return None;
        }
        // SAFETY: `at` is a slot of the zone this entry's `Near` belongs to (`belong_to`),
        // mapped for the life of the process; its version is only accessed as an atomic.
        let version = unsafe { AtomicU32::from_ptr(ptr::addr_of_mut!((*self.at).version)) };
        if version.load(Ordering::Acquire) != copy.version {
            return None;
        }
        // The slot is as copied: what the zone says, the copy says (the code is in no other set).
        if now_ms >= copy.fresh_until || (copy.flags & IMPORTED != 0 && reader == Scope::All) {
            return Some(Probe::Miss { spilled: false });
        }
        mark_referenced(self.at);
        Some(Probe::Hit)
    }

    /// Copies `slot` (seqlock read); the copy is not the entry's until [`Entry::keep`].
    pub(super) fn fill(&mut self, slot: *mut Slot) -> Option<&Slot> {
        self.at = ptr::null_mut();
        read(slot, &mut self.copy)
    }

    /// The copy `fill` just made from `slot` is a fresh hit: kept for the next read.
    pub(super) fn keep(&mut self, slot: *mut Slot) {
        self.at = slot;
    }

    /// The kept copy's answer.
    pub(super) fn hit(&self) -> Option<Hit<'_>> {
        if self.at.is_null() {
            return None;
        }
        // SAFETY: as in `check`.
        Some(unsafe { self.copy.assume_init_ref() }.hit())
    }
}
