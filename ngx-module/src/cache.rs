//! Per-worker cache of decoded link records.
//!
//! A hit should touch one cache line. The hot entries do not stay in the CPU caches between
//! requests (each request's kernel and nginx work streams ~10 KB through them), so what a hit
//! costs is the lines and pages it touches, not its instructions. A general hash map touches
//! three or four (control group, a bucket that straddles two lines, the boxed target); `perf`
//! put nearly all of `Cache::get`'s time on those loads.
//!
//! So the table is a 2-way set-associative cache of fixed 64-byte slots: a code hashes (seeded
//! foldhash) to one 128-byte set, and a slot holds the code, the link's fields and the target
//! inline when code and target fit in [`INLINE`] bytes (longer ones spill to the heap: one more
//! line). No control bytes, no probe sequence: a lookup reads one set, a miss included. Each set
//! evicts its least recently used way, so a hot code survives any stream of other codes. The
//! table is allocated zeroed (pages come in as they are first used, as with a hash map) and, when
//! it is large, advised to use huge pages: the hot sets then share a few TLB entries instead of
//! one 4 KiB page each.

use std::alloc::{self, Layout};
use std::hash::{BuildHasher, Hash, Hasher};
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use foldhash::fast::RandomState;

use shortlink_wire::record::{
    Extras, Link, LinkView, WorkspaceName, QUARANTINE_STATUS, REVOKED_STATUS,
};

/// What a lookup resolved to, as handed to the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    Link(Link),
    /// No such key in Redis; cached only for the short negative TTL.
    Missing,
}

/// What a hit finds: the link's fields, borrowed from its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit<'a> {
    Link(CachedLink<'a>),
    Missing,
}

/// A cached [`Link`], read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedLink<'a> {
    revoked: bool,
    status: u16,
    expires_at: u64,
    forward_query: bool,
    target: &'a [u8],
    extras: Option<&'a Extras>,
}

impl<'a> CachedLink<'a> {
    /// The same view as [`Link::view`] of the link it was stored from.
    pub fn view(&self) -> LinkView<'a> {
        LinkView {
            revoked: self.revoked,
            status: self.status,
            expires_at: self.expires_at,
            forward_query: self.forward_query,
            // A revoked entry keeps its workspace where a live one keeps its target.
            target: if self.revoked { &[] } else { self.target },
            extras: self.extras,
        }
    }

    /// The name of the link's workspace; `None`: `default` ([`Link::workspace`]).
    #[inline]
    pub fn workspace(&self) -> Option<&'a [u8]> {
        if self.revoked {
            return (!self.target.is_empty()).then_some(self.target);
        }
        Some(self.extras?.workspace.as_ref()?.as_bytes())
    }

    /// An owned copy, for a task that outlives the borrow of the cache.
    pub fn to_link(&self) -> Link {
        if self.revoked {
            let workspace = WorkspaceName::parse(self.target);
            return match self.status {
                QUARANTINE_STATUS => Link::Quarantined { workspace },
                _ => Link::Revoked { workspace },
            };
        }
        Link::Live {
            status: self.status,
            expires_at: self.expires_at,
            forward_query: self.forward_query,
            target: self.target.into(),
            extras: self.extras.map(|extras| {
                // SAFETY: `extras` points into an `Arc<Extras>` the slot holds a count of
                // (`fill`); the new count is the returned link's own.
                unsafe {
                    let raw: *const Extras = extras;
                    Arc::increment_strong_count(raw);
                    Arc::from_raw(raw)
                }
            }),
        }
    }
}

/// Which locations an entry answers for. The cache is the worker's, shared by its locations, and
/// a hit skips the shape check: a code only an imported-codes location looks up must not answer
/// elsewhere, where it is no code and stays a 404 without a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every location: a code of one of our shapes.
    All,
    /// `shortlink_imported_codes on` locations only (as an entry's scope); such a location
    /// reads every entry (as a reader's scope).
    Imported,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    pub capacity: usize,
    pub ttl_ms: u64,
    pub negative_ttl_ms: u64,
}

/// Bytes of code and target kept inside a slot; beyond that both go to one heap block.
const INLINE: usize = 40;
const WAYS: usize = 2;

// Slot kinds; 0 (all-zero memory) is an empty slot.
const EMPTY: u8 = 0;
const LIVE: u8 = 1;
const REVOKED: u8 = 2;
const MISSING: u8 = 3;

// Slot flags.
const FORWARD_QUERY: u8 = 1;
/// In way 0's flags only: way 1 was used last (else way 0).
const WAY1_RECENT: u8 = 2;
/// The link has lifecycle or rules: its bytes are spilled whatever their length, and the
/// second word of `bytes` holds an `Arc<Extras>` (`Arc::into_raw`) the slot holds a count of.
const EXTRAS: u8 = 4;
/// Stored with [`Scope::Imported`]: answers only imported-codes locations.
const IMPORTED: u8 = 8;

/// One entry, one cache line. All-zero is an empty slot, so the table can start as zeroed pages.
#[repr(C, align(64))]
struct Slot {
    /// Milliseconds (nginx's clock) until which the entry answers.
    fresh_until: u64,
    expires_at: u64,
    status: u16,
    kind: u8,
    flags: u8,
    code_len: u16,
    /// Code plus target bytes.
    len: u16,
    /// Code then target when `len <= INLINE` (and no [`EXTRAS`]); else the first word holds the
    /// address of a leaked `Box<[u8]>` of `len` bytes (code then target) that this slot owns,
    /// and with [`EXTRAS`] the second word that of its `Arc<Extras>` (`Arc::into_raw`).
    bytes: [u8; INLINE],
}

/// Two slots in one 128-byte block (the pair of lines the CPU's adjacent-line prefetcher
/// fetches together).
#[repr(C, align(128))]
struct Set {
    ways: [Slot; WAYS],
}

const _: () = assert!(size_of::<Slot>() == 64 && size_of::<Set>() == 128);

impl Slot {
    fn spilled(&self) -> bool {
        usize::from(self.len) > INLINE || self.flags & EXTRAS != 0
    }

    fn word(&self, index: usize) -> usize {
        let mut addr = [0; size_of::<usize>()];
        addr.copy_from_slice(&self.bytes[index * size_of::<usize>()..][..size_of::<usize>()]);
        usize::from_ne_bytes(addr)
    }

    fn set_word(&mut self, index: usize, value: usize) {
        self.bytes[index * size_of::<usize>()..][..size_of::<usize>()]
            .copy_from_slice(&value.to_ne_bytes());
    }

    fn spill_ptr(&self) -> *mut u8 {
        self.word(0) as *mut u8
    }

    fn extras(&self) -> Option<&Extras> {
        if self.flags & EXTRAS == 0 {
            return None;
        }
        // SAFETY: with EXTRAS set the second word is `Arc::into_raw` of an `Arc<Extras>` whose
        // count this slot holds (taken in `fill`, given back only by `clear`).
        Some(unsafe { &*(self.word(1) as *const Extras) })
    }

    fn data(&self) -> &[u8] {
        let len = usize::from(self.len);
        if self.spilled() {
            // SAFETY: a spilled slot owns a live `Box<[u8]>` of `len` bytes at this address
            // (written by `fill`, freed only by `clear`).
            unsafe { std::slice::from_raw_parts(self.spill_ptr(), len) }
        } else {
            &self.bytes[..len]
        }
    }

    #[inline(always)]
    fn holds(&self, code: &[u8]) -> bool {
        self.kind != EMPTY
            && usize::from(self.code_len) == code.len()
            && &self.data()[..code.len()] == code
    }

    #[inline(always)]
    fn hit(&self) -> Hit<'_> {
        if self.kind == MISSING {
            return Hit::Missing;
        }
        Hit::Link(CachedLink {
            revoked: self.kind == REVOKED,
            status: self.status,
            expires_at: self.expires_at,
            forward_query: self.flags & FORWARD_QUERY != 0,
            target: &self.data()[usize::from(self.code_len)..],
            extras: self.extras(),
        })
    }

    /// Frees the spilled block, if any, and empties the slot (keeping way 0's recency bit).
    /// Returns whether the slot held a spilled block.
    fn clear(&mut self) -> bool {
        let spilled = self.kind != EMPTY && self.spilled();
        if spilled {
            let block = ptr::slice_from_raw_parts_mut(self.spill_ptr(), usize::from(self.len));
            // SAFETY: the block came from `Box::into_raw` in `fill` with this length, and the
            // slot forgets it below, so it is freed exactly once.
            drop(unsafe { Box::from_raw(block) });
        }
        if self.kind != EMPTY && self.flags & EXTRAS != 0 {
            // SAFETY: the count `fill` took with `Arc::into_raw`, given back once: the slot
            // forgets the pointer below.
            drop(unsafe { Arc::from_raw(self.word(1) as *const Extras) });
        }
        let recent = self.flags & WAY1_RECENT;
        // SAFETY: all-zero is a valid (empty) slot.
        *self = unsafe { std::mem::zeroed() };
        self.flags = recent;
        spilled
    }

    /// Stores an entry in an empty slot. Returns whether its bytes spilled to the heap.
    fn fill(&mut self, code: &[u8], value: &Cached, fresh_until: u64, scope: Scope) -> bool {
        let (kind, status, expires_at, forward_query, target, extras): (_, _, _, _, &[u8], _) =
            match value {
                Cached::Missing => (MISSING, 0, 0, false, &[], None),
                // Its workspace where a live link's target goes: no allocation, and a revoked
                // entry of `default` stays as it was.
                Cached::Link(Link::Revoked { workspace }) => {
                    let workspace = workspace.as_ref().map_or(&[][..], WorkspaceName::as_bytes);
                    (REVOKED, REVOKED_STATUS, 0, false, workspace, None)
                }
                // A quarantine is kept as a tombstone is, its status telling them apart.
                Cached::Link(Link::Quarantined { workspace }) => {
                    let workspace = workspace.as_ref().map_or(&[][..], WorkspaceName::as_bytes);
                    (REVOKED, QUARANTINE_STATUS, 0, false, workspace, None)
                }
                Cached::Link(Link::Live {
                    status,
                    expires_at,
                    forward_query,
                    target,
                    extras,
                }) => (
                    LIVE,
                    *status,
                    *expires_at,
                    *forward_query,
                    target,
                    extras.as_ref(),
                ),
            };
        let len = code.len() + target.len();
        self.fresh_until = fresh_until;
        self.expires_at = expires_at;
        self.status = status;
        self.kind = kind;
        self.flags = (self.flags & WAY1_RECENT)
            | if forward_query { FORWARD_QUERY } else { 0 }
            | if extras.is_some() { EXTRAS } else { 0 }
            | if scope == Scope::Imported {
                IMPORTED
            } else {
                0
            };
        // `insert` only stores entries whose lengths fit.
        self.code_len = code.len() as u16;
        self.len = len as u16;
        if let Some(extras) = extras {
            // One more count on the decoded extras, not a copy of them.
            let extras = Arc::into_raw(Arc::clone(extras));
            self.set_word(1, extras as usize);
        }
        if !self.spilled() {
            self.bytes[..code.len()].copy_from_slice(code);
            self.bytes[code.len()..len].copy_from_slice(target);
            false
        } else {
            let block: Box<[u8]> = [code, target].concat().into_boxed_slice();
            let addr = Box::into_raw(block).cast::<u8>() as usize;
            self.set_word(0, addr);
            true
        }
    }
}

/// The sets, in pages of their own.
///
/// Mapped straight from the kernel rather than through malloc: anonymous pages start zeroed and
/// only count once used (a zeroed allocation at 128-byte alignment would write every page up
/// front), they are page-aligned (so huge-page extents line up), and the worker's malloc heap,
/// which nginx's per-request pools go through, stays as it would be without the cache.
struct Table {
    sets: NonNull<Set>,
    len: usize,
    /// Bytes mapped.
    size: usize,
}

/// Tables this large are advised to use transparent huge pages (2 MiB).
const HUGE_PAGE: usize = 2 << 20;

impl Table {
    fn new(len: usize) -> Self {
        let size = len
            .checked_mul(size_of::<Set>())
            .expect("cache size is bounded by the directive parser");
        // SAFETY: a new private anonymous mapping; no existing memory is affected.
        let addr = unsafe {
            nginx_sys::mmap(
                ptr::null_mut(),
                size,
                (nginx_sys::PROT_READ | nginx_sys::PROT_WRITE) as i32,
                (nginx_sys::MAP_PRIVATE | nginx_sys::MAP_ANONYMOUS) as i32,
                -1,
                0,
            )
        };
        // MAP_FAILED is (void *) -1.
        let Some(sets) = NonNull::new(addr.cast::<Set>()).filter(|_| addr as isize != -1) else {
            alloc::handle_alloc_error(Layout::from_size_align(size, 4096).expect("valid layout"))
        };
        debug_assert_eq!(sets.as_ptr() as usize % align_of::<Set>(), 0);
        let table = Table { sets, len, size };
        table.advise_huge_pages();
        table
    }

    /// Asks for huge pages over the whole 2 MiB extents inside the table. Only a hint: the
    /// kernel may ignore it (`transparent_hugepage=never`), and a failure changes nothing.
    fn advise_huge_pages(&self) {
        let start = self.sets.as_ptr() as usize;
        let end = start + self.size;
        let first = start.next_multiple_of(HUGE_PAGE);
        let last = end / HUGE_PAGE * HUGE_PAGE;
        if last > first {
            // SAFETY: the range lies inside this table's own mapping; MADV_HUGEPAGE changes how
            // its pages are backed, never their contents.
            unsafe {
                nginx_sys::madvise(
                    first as *mut std::ffi::c_void,
                    last - first,
                    nginx_sys::MADV_HUGEPAGE as i32,
                )
            };
        }
    }

    fn set(&mut self, index: usize) -> &mut Set {
        assert!(index < self.len);
        // SAFETY: `index` is in bounds; the sets are initialised (zeroed pages, and all-zero is
        // a valid set) and borrowed through `&mut self`.
        unsafe { &mut *self.sets.as_ptr().add(index) }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of this size; the slots own no memory any more
        // (the cache frees spilled blocks before dropping the table).
        unsafe { nginx_sys::munmap(self.sets.as_ptr().cast(), self.size) };
    }
}

pub struct Cache {
    table: Table,
    hasher: RandomState,
    /// Occupied slots (fresh or stale).
    len: usize,
    /// Slots whose bytes live on the heap.
    spilled: usize,
    config: CacheConfig,
}

impl Cache {
    pub fn new(config: CacheConfig) -> Self {
        Self {
            table: Table::new(config.capacity.div_ceil(WAYS).max(1)),
            hasher: RandomState::default(),
            len: 0,
            spilled: 0,
            config,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    #[allow(clippy::manual_hash_one)]
    fn set_of(&mut self, code: &[u8]) -> &mut Set {
        // `hash_one` spelled out, so that it is inlined with the probe: as a call its entry and
        // exit were ~10 instructions a probe (issue 82).
        let mut hasher = self.hasher.build_hasher();
        code.hash(&mut hasher);
        let hash = hasher.finish();
        // The high half of hash × sets: uniform over the sets without a power-of-two size.
        let index = ((u128::from(hash) * self.table.len as u128) >> 64) as usize;
        self.table.set(index)
    }

    /// The cached answer for `code` if it is still fresh at `now_ms`, for any location.
    pub fn get(&mut self, code: &[u8], now_ms: u64) -> Option<Hit<'_>> {
        self.get_in(code, now_ms, Scope::All)
    }

    /// The cached answer for `code` if it is still fresh at `now_ms` and answers a location that
    /// reads `reader` ([`Scope`]). Always inlined, with its probe: a cached redirect's answer is
    /// made from what it returns, which then stays in registers (issue 82).
    #[inline(always)]
    pub fn get_in(&mut self, code: &[u8], now_ms: u64, reader: Scope) -> Option<Hit<'_>> {
        // Behind a zone this cache holds only what the zone's slots cannot (extras, long
        // targets), usually nothing: a code the zone missed then costs no second hash (and
        // no call).
        if self.len == 0 {
            return None;
        }
        self.probe(code, now_ms, reader)
    }

    #[inline(always)]
    fn probe(&mut self, code: &[u8], now_ms: u64, reader: Scope) -> Option<Hit<'_>> {
        let set = self.set_of(code);
        let way = set.ways.iter().position(|slot| slot.holds(code))?;
        // A stale entry stays until the lookup that follows this miss replaces it.
        if now_ms >= set.ways[way].fresh_until {
            return None;
        }
        // Elsewhere such a code takes the shape check; a lookup it passes replaces the entry.
        if set.ways[way].flags & IMPORTED != 0 && reader == Scope::All {
            return None;
        }
        touch(set, way);
        Some(set.ways[way].hit())
    }

    /// Forgets `code` (Redis reported a change of its record).
    pub fn remove(&mut self, code: &[u8]) {
        let set = self.set_of(code);
        let Some(way) = set.ways.iter().position(|slot| slot.holds(code)) else {
            return;
        };
        let freed = set.ways[way].clear();
        self.len -= 1;
        self.spilled -= usize::from(freed);
    }

    /// Forgets everything. A fresh mapping is cheaper than zeroing one that may be large.
    pub fn clear(&mut self) {
        if self.len == 0 {
            return;
        }
        for index in 0..self.table.len {
            if self.spilled == 0 {
                break;
            }
            for slot in &mut self.table.set(index).ways {
                self.spilled -= usize::from(slot.clear());
            }
        }
        self.table = Table::new(self.table.len);
        self.len = 0;
    }

    /// Stores what a lookup of `code` found, for every location.
    pub fn insert(&mut self, code: &[u8], value: Cached, now_ms: u64) {
        self.insert_in(code, value, now_ms, Scope::All);
    }

    /// Stores what a lookup of `code` found, for the locations `scope` names.
    pub fn insert_in(&mut self, code: &[u8], value: Cached, now_ms: u64, scope: Scope) {
        let ttl = ttl_for(&self.config, &value);
        let target_len = match &value {
            Cached::Link(Link::Live { target, .. }) => target.len(),
            Cached::Link(Link::Revoked { workspace } | Link::Quarantined { workspace }) => {
                workspace.map_or(0, |name| name.as_bytes().len())
            }
            Cached::Missing => 0,
        };
        // Lengths are kept in 16 bits; nothing that long is a code (it is just not cached).
        if ttl == 0 || code.len() + target_len > usize::from(u16::MAX) {
            return;
        }
        let set = self.set_of(code);
        let way = set
            .ways
            .iter()
            .position(|slot| slot.holds(code))
            .or_else(|| set.ways.iter().position(|slot| slot.kind == EMPTY))
            .or_else(|| set.ways.iter().position(|slot| slot.fresh_until <= now_ms))
            .unwrap_or(if set.ways[0].flags & WAY1_RECENT != 0 {
                0
            } else {
                1
            });
        let slot = &mut set.ways[way];
        let (was_empty, freed) = (slot.kind == EMPTY, slot.clear());
        let spilled = slot.fill(code, &value, now_ms.saturating_add(ttl), scope);
        touch(set, way);
        self.len += usize::from(was_empty);
        self.spilled = self.spilled + usize::from(spilled) - usize::from(freed);
    }
}

/// Marks `way` as the set's most recently used (one store, only when it changes).
fn touch(set: &mut Set, way: usize) {
    let flags = &mut set.ways[0].flags;
    let recent = if way == 1 {
        *flags | WAY1_RECENT
    } else {
        *flags & !WAY1_RECENT
    };
    if *flags != recent {
        *flags = recent;
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        // Most caches never spill (codes and targets are short): skip the walk over every set.
        for index in 0..self.table.len {
            if self.spilled == 0 {
                break;
            }
            for slot in &mut self.table.set(index).ways {
                self.spilled -= usize::from(slot.clear());
            }
        }
    }
}

fn ttl_for(config: &CacheConfig, value: &Cached) -> u64 {
    match value {
        Cached::Link(_) => config.ttl_ms,
        Cached::Missing => config.negative_ttl_ms,
    }
}

pub mod zone;

#[cfg(test)]
mod tests;
