//! One record cache per edge, in nginx shared memory (`shortlink_cache_zone name size;`),
//! read by every worker.
//!
//! Layout: the zone's slab pool gives one block, a [`Header`] followed by sets of [`WAYS`] fixed
//! 192-byte slots (code and target inline, up to [`INLINE`] bytes) behind one line of tags: a set
//! is exactly one 4 KiB page, and the sets start on a page boundary, so a hit walks the page
//! tables once (a random code's set is never in the TLB: with 256 MB of sets and 4 KiB pages, the
//! miss and its page walk are most of what a hit costs; shared memory gets no transparent huge
//! pages unless the host enables them for shmem). A record that does not fit
//! (longer, or with lifecycle/rules extras, which are decoded into the worker's heap) stays in
//! the worker's own cache, as without a zone.
//!
//! Concurrency: readers take no lock. Each slot carries a sequence number (a seqlock): a writer
//! makes it odd, writes, makes it even again; a reader copies the slot and keeps the copy only
//! if the number was even and unchanged across the copy. Writers (inserts, evictions, clears)
//! serialise on the slab pool's own `ngx_shmtx` mutex. nginx's master force-unlocks that mutex
//! when a worker dies holding it (`ngx_unlock_mutexes`, "shared memory zone ... was locked by
//! PID" in the error log), so a SIGKILLed writer cannot wedge the others; the slot it was writing
//! stays odd, reads as a miss, and is rewritten by the next insert into its set.
//!
//! Eviction: per set, CLOCK (second chance). A hit sets the slot's reference bit (one store, only
//! when it was clear); an insert takes an empty or stale way, else the first way whose bit is
//! clear, clearing the bits it passes.
//!
//! Exactness: every worker keeps its own invalidation subscription and applies each report to
//! the zone as it arrives (`TrackState`). A removal bumps the code's *stamp* (a counter chosen by
//! the code's hash); a lookup's answer is stored only if its code's stamp and the zone's epoch
//! (bumped by a flush) are what they were when the lookup was sent, checked under the mutex. So
//! an answer that may predate a change some worker has already applied is never stored, and one
//! stored before any worker applied it is removed by the first that does: a reader that has
//! applied its own reports never sees a record older than them, as with the worker cache.

use std::hash::{BuildHasher, Hasher};
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

use foldhash::fast::FixedState;
use nginx_sys::{ngx_shm_zone_t, ngx_shmtx_t, ngx_slab_pool_t};
#[cfg(not(test))]
use nginx_sys::{ngx_shmtx_lock as lock_mutex, ngx_shmtx_unlock as unlock_mutex};

// Unit tests run on one thread, without nginx's symbols.
#[cfg(test)]
unsafe fn lock_mutex(_: *mut ngx_shmtx_t) {}
#[cfg(test)]
unsafe fn unlock_mutex(_: *mut ngx_shmtx_t) {}

use super::{CacheConfig, Cached, Hit, Scope, IMPORTED};
use shortlink_wire::record::{Link, WorkspaceName, QUARANTINE_STATUS, REVOKED_STATUS};

/// Removal stamps: a power of two; two codes sharing one only cost a refused store.
const STAMPS: usize = 1 << 14;

mod near;
mod set;
mod slot;
pub use near::Near;
use set::{clock, find, set_tag, tag_mask, ways_of, Set, PAGE, TAG_WORDS, WAYS};
use slot::{
    mark_referenced, prefetch, write, Probe, Slot, EMPTY, FORWARD_QUERY, LIVE, MISSING, REVOKED,
};
pub use slot::{INLINE, SLOT_BYTES};

#[repr(C, align(64))]
struct Header {
    seed: u64,
    sets: u64,
    /// Bumped by every flush; part of a lookup's ticket.
    epoch: AtomicU64,
    /// Written by inserts and prefills: on lines of their own (as the stamps), so that a
    /// campaign's prefill, going on while its first links are clicked, does not take the line
    /// every read loads (seed, sets, epoch) out of the other workers' caches.
    counts: Counts,
    stamps: [AtomicU32; STAMPS],
    /// Hits and misses, counted on every lookup: one line per worker (by `ngx_worker`, wrapping
    /// past [`STRIPES`]), summed when read, so that workers never write one shared line.
    reads: [Reads; STRIPES],
}

/// The zone's counts of writes.
#[repr(C, align(64))]
struct Counts {
    /// Slots holding an entry of the current epoch.
    entries: AtomicU64,
    evictions: AtomicU64,
    prefills: AtomicU64,
}

/// Worker lines of read counters.
const STRIPES: usize = 64;

#[repr(C, align(64))]
struct Reads {
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Where a code may be: [`Zone::locate`].
struct Place {
    sets: [usize; 2],
    tag: u16,
    stamp: usize,
    /// The code's entry in a worker's [`Near`], and its key there (the whole hash, never 0).
    near: usize,
    key: u64,
}

/// The zone's counters, for the status page.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub entries: u64,
    pub capacity: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub prefills: u64,
}

/// What a lookup's answer may be stored against ([`Zone::ticket`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    epoch: u64,
    stamp: u32,
}

/// What [`Zone::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    Yes,
    /// A removal or flush came between the ticket and now: the answer may be older.
    Refused,
    /// Too long or with extras: for the worker's own cache.
    DoesNotFit,
}

/// A handle on the mapped zone; copied freely (the memory outlives every worker).
#[derive(Clone, Copy)]
pub struct Zone {
    header: NonNull<Header>,
    mutex: *mut ngx_shmtx_t,
}

struct Locked<'a>(&'a Zone);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SAFETY: taken in `Zone::lock`; this process holds it.
        unsafe { unlock_mutex(self.0.mutex) };
    }
}

impl Zone {
    /// The zone nginx mapped for `shm`, once its init ran (in workers); `None` before.
    ///
    /// # Safety
    /// `shm` is null or a zone whose init is [`init`], mapped in this process.
    pub unsafe fn of(shm: *mut ngx_shm_zone_t) -> Option<Zone> {
        // SAFETY: the caller's promise; `data` is null or the header `init` allocated in the
        // zone, which lives as long as the mapping.
        unsafe {
            let shm = shm.as_ref()?;
            let header = NonNull::new(shm.data.cast::<Header>())?;
            let pool = shm.shm.addr.cast::<ngx_slab_pool_t>();
            Some(Zone {
                header,
                mutex: ptr::addr_of_mut!((*pool).mutex),
            })
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the header lives in the shared mapping for the life of the process; its
        // fields shared across processes are atomics, `seed` and `sets` are written once in init.
        unsafe { self.header.as_ref() }
    }

    fn set_ptr(&self, index: usize) -> *mut Set {
        debug_assert!(index < self.header().sets as usize);
        // SAFETY: the sets follow the header at SETS_OFFSET in the same block (`init`), `index`
        // is in bounds.
        unsafe {
            self.header
                .as_ptr()
                .cast::<u8>()
                .add(SETS_OFFSET)
                .cast::<Set>()
                .add(index)
        }
    }

    fn lock(&self) -> Locked<'_> {
        // SAFETY: the slab pool's mutex, initialised by nginx with the zone.
        unsafe { lock_mutex(self.mutex) };
        Locked(self)
    }

    /// The code's two sets (two choices: an insert takes a free way in either, so sets fill
    /// evenly), its tag, its removal stamp and its entry in a worker's [`Near`], each from other
    /// bits of one hash: the sets from the high bits (the high half of hash × sets), so the tag
    /// must not be those (with 65,536 sets, a 256 MB zone, the top 16 bits were the set's number:
    /// every code of a set had the same tag, and a lookup copied every way until it found its own).
    #[inline(always)]
    fn locate(&self, code: &[u8]) -> Place {
        // The bytes alone, without `Hash for [u8]`'s length prefix (one more multiply, and an
        // out-of-line call): the length already rotates the seed.
        let mut hasher = FixedState::with_seed(self.header().seed).build_hasher();
        hasher.write(code);
        let hash = hasher.finish();
        let sets = u128::from(self.header().sets);
        // The high half of hash × sets: uniform over the sets without a power-of-two size.
        let first = ((u128::from(hash) * sets) >> 64) as usize;
        let other = hash.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let second = ((u128::from(other) * sets) >> 64) as usize;
        Place {
            sets: [first, second],
            tag: (hash >> 16) as u16,
            stamp: (hash as usize) & (STAMPS - 1),
            near: (hash >> 32) as usize,
            key: hash | 1,
        }
    }

    /// Asks for the line [`Zone::get`] of `code` reads first (its first set's tags), and with
    /// it the page walk to that set: called as a request arrives (`crate::prefetch`), so that
    /// the walk and the line come from memory while nginx finds the location and runs its
    /// phases, not while the content handler waits for them. A hint only: nothing is read.
    #[inline]
    pub fn prefetch(&self, code: &[u8]) {
        let place = self.locate(code);
        prefetch(self.set_ptr(place.sets[0]).cast());
    }

    pub fn capacity(&self) -> u64 {
        self.header().sets * WAYS as u64
    }

    /// Taken when a lookup is sent; [`Zone::insert`] stores its answer only if it still holds.
    pub fn ticket(&self, code: &[u8]) -> Ticket {
        let stamp = self.locate(code).stamp;
        Ticket {
            epoch: self.header().epoch.load(Ordering::Acquire),
            stamp: self.header().stamps[stamp].load(Ordering::Acquire),
        }
    }

    /// `code`'s entry if it is fresh at `now_ms` and answers `reader`: from `near` when the
    /// worker's copy there is still its slot's, else copied from the zone into `near`.
    pub fn get<'n>(
        &self,
        code: &[u8],
        now_ms: u64,
        reader: Scope,
        near: &'n mut Near,
    ) -> Option<Hit<'n>> {
        let place = self.locate(code);
        let epoch = self.header().epoch.load(Ordering::Acquire) as u32;
        near.belong_to((self.header.as_ptr() as usize, self.header().seed));
        let index = near.index(place.near);
        // A code gets an entry at its second hit in a row there: a campaign's links, read
        // once each, go through the scratch copy and leave the hot codes' entries alone.
        let admitted = near.keys[index] == place.key;
        let entry = if admitted {
            &mut near.entries[index]
        } else {
            &mut near.scratch
        };
        let checked = if admitted {
            entry.check(code, epoch, now_ms, reader)
        } else {
            None
        };
        let probe = match checked {
            Some(probe) => probe,
            None => {
                let [first, second] = place.sets;
                let mut probe = self.get_in(first, code, place.tag, epoch, now_ms, reader, entry);
                if probe == (Probe::Miss { spilled: true }) && second != first {
                    probe = self.get_in(second, code, place.tag, epoch, now_ms, reader, entry);
                }
                probe
            }
        };
        if probe == Probe::Hit {
            self.reads().hits.fetch_add(1, Ordering::Relaxed);
            if !admitted {
                near.keys[index] = place.key;
                return near.scratch.hit();
            }
            return near.entries[index].hit();
        }
        self.reads().misses.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// This worker's line of read counters. Still atomic adds: after a reload the old
    /// configuration's workers, shutting down, share their numbers with the new ones.
    fn reads(&self) -> &Reads {
        &self.header().reads[worker_index() % STRIPES]
    }

    /// [`Zone::get`] in one set: whether `entry` now holds the code's fresh entry (copied
    /// there from its slot).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn get_in(
        &self,
        index: usize,
        code: &[u8],
        tag: u16,
        epoch: u32,
        now_ms: u64,
        reader: Scope,
        entry: &mut near::Entry,
    ) -> Probe {
        let set = self.set_ptr(index);
        // SAFETY: in bounds (locate); the tags are a filter only (a torn or old one costs a
        // copy or a miss, the copy is checked), read through a raw pointer as whole words (a
        // volatile read of the u16 array is 21 loads), never a reference to memory another
        // process writes. The set starts on a page, so its first words are aligned.
        let words: [u64; TAG_WORDS] = unsafe { ptr::read_volatile(set.cast::<[u64; TAG_WORDS]>()) };
        // Lane `n` of word `n / 4` is tag `n` in memory order; `spilled` follows the tags.
        let words = words.map(u64::from_le);
        let spilled = (words[WAYS / 4] >> (16 * (WAYS % 4))) & 0xffff != 0;
        let miss = Probe::Miss { spilled };
        for way in ways_of(tag_mask(&words, tag)) {
            // SAFETY: as above.
            let slot = unsafe { ptr::addr_of_mut!((*set).ways[way]) };
            let Some(copy) = entry.fill(slot) else {
                continue;
            };
            if !copy.holds(code, epoch) {
                continue;
            }
            // Found, not for this reader: the code is in no other set.
            if now_ms >= copy.fresh_until || (copy.flags & IMPORTED != 0 && reader == Scope::All) {
                return Probe::Miss { spilled: false };
            }
            mark_referenced(slot);
            entry.keep(slot);
            return Probe::Hit;
        }
        miss
    }

    /// Stores what a lookup of `code` found, unless a removal of it or a flush came after
    /// `ticket` was taken.
    pub fn insert(
        &self,
        code: &[u8],
        value: &Cached,
        now_ms: u64,
        config: &CacheConfig,
        ticket: Ticket,
        scope: Scope,
    ) -> Stored {
        let Some(mut entry) = entry_of(code, value, now_ms, config, scope) else {
            return Stored::DoesNotFit;
        };
        let place = self.locate(code);
        let tag = place.tag;
        entry.tag = u32::from(tag);
        let _locked = self.lock();
        let epoch = self.header().epoch.load(Ordering::Relaxed);
        if epoch != ticket.epoch
            || self.header().stamps[place.stamp].load(Ordering::Relaxed) != ticket.stamp
        {
            return Stored::Refused;
        }
        entry.epoch = epoch as u32;
        let (index, way) = self.choose(&place, code, epoch as u32, now_ms);
        // SAFETY: writers hold the mutex, so this process is the only one writing the set; the
        // slots are read by copy (seqlock) elsewhere.
        let set = unsafe { &mut *self.set_ptr(index) };
        let old = &set.ways[way];
        let occupied = old.kind != EMPTY && old.epoch == epoch as u32;
        if occupied && !old.holds(code, epoch as u32) && now_ms < old.fresh_until {
            self.header()
                .counts
                .evictions
                .fetch_add(1, Ordering::Relaxed);
        }
        if !occupied {
            self.header().counts.entries.fetch_add(1, Ordering::Relaxed);
        }
        entry.referenced = 1;
        let [first, second] = place.sets;
        if index == second && second != first {
            // Before the entry is published: a reader that sees its tag in the second set may
            // miss it, never one that read the flag after this store.
            // SAFETY: the flag is a u16 of the first set, written only as an atomic; readers
            // load it with the tag line.
            let spilled =
                unsafe { &*ptr::addr_of!((*self.set_ptr(first)).spilled).cast::<AtomicU16>() };
            if spilled.load(Ordering::Relaxed) == 0 {
                spilled.store(1, Ordering::Release);
            }
        }
        write(&mut set.ways[way], entry);
        set_tag(set, way, tag);
        Stored::Yes
    }

    /// Forgets `code` (Redis reported a change of its record) and refuses any answer to a
    /// lookup of it sent before now.
    pub fn remove(&self, code: &[u8]) {
        let place = self.locate(code);
        let _locked = self.lock();
        self.header().stamps[place.stamp].fetch_add(1, Ordering::Release);
        let epoch = self.header().epoch.load(Ordering::Relaxed) as u32;
        for index in place.sets {
            // SAFETY: as in insert: the mutex is held.
            let set = unsafe { &mut *self.set_ptr(index) };
            if let Some(way) = find(set, code, place.tag, epoch) {
                self.header().counts.entries.fetch_sub(1, Ordering::Relaxed);
                write(&mut set.ways[way], Slot::EMPTY);
                set_tag(set, way, 0);
                return;
            }
        }
    }

    /// Bumped by every [`Zone::clear`].
    pub fn epoch(&self) -> u64 {
        self.header().epoch.load(Ordering::Acquire)
    }

    /// Forgets everything: a new epoch empties every slot at once.
    pub fn clear(&self) {
        let _locked = self.lock();
        self.header().epoch.fetch_add(1, Ordering::Release);
        self.header().counts.entries.store(0, Ordering::Relaxed);
    }

    /// Counts a record stored ahead of its first click.
    pub fn count_prefill(&self) {
        self.header()
            .counts
            .prefills
            .fetch_add(1, Ordering::Relaxed);
    }

    pub fn stats(&self) -> Stats {
        let h = self.header();
        let sum = |f: fn(&Reads) -> &AtomicU64| {
            h.reads
                .iter()
                .fold(0u64, |n, r| n.wrapping_add(f(r).load(Ordering::Relaxed)))
        };
        Stats {
            entries: h.counts.entries.load(Ordering::Relaxed),
            capacity: self.capacity(),
            hits: sum(|r| &r.hits),
            misses: sum(|r| &r.misses),
            evictions: h.counts.evictions.load(Ordering::Relaxed),
            prefills: h.counts.prefills.load(Ordering::Relaxed),
        }
    }
}

impl Zone {
    /// The set and way an insert of `code` takes (the mutex held): its own, else an empty or
    /// stale way of the first set, then of the second, else CLOCK in the first.
    fn choose(&self, place: &Place, code: &[u8], epoch: u32, now_ms: u64) -> (usize, usize) {
        // SAFETY: the mutex is held; in bounds (locate).
        let set = |index: usize| unsafe { &mut *self.set_ptr(index) };
        for index in place.sets {
            if let Some(way) = find(set(index), code, place.tag, epoch) {
                return (index, way);
            }
        }
        let free = |s: &Slot| s.kind == EMPTY || s.epoch != epoch || s.fresh_until <= now_ms;
        for index in place.sets {
            if let Some(way) = set(index).ways.iter().position(free) {
                return (index, way);
            }
        }
        let first = place.sets[0];
        (first, clock(set(first)))
    }
}

/// The slot for `value`, if it fits one.
fn entry_of(
    code: &[u8],
    value: &Cached,
    now_ms: u64,
    config: &CacheConfig,
    scope: Scope,
) -> Option<Slot> {
    let (kind, status, expires_at, forward_query, target, ttl): (_, _, _, _, &[u8], _) = match value
    {
        Cached::Missing => (MISSING, 0, 0, false, &[], config.negative_ttl_ms),
        Cached::Link(Link::Revoked { workspace }) => (
            REVOKED,
            REVOKED_STATUS,
            0,
            false,
            workspace.as_ref().map_or(&[][..], WorkspaceName::as_bytes),
            config.ttl_ms,
        ),
        // Kept as a tombstone is, its status telling them apart.
        Cached::Link(Link::Quarantined { workspace }) => (
            REVOKED,
            QUARANTINE_STATUS,
            0,
            false,
            workspace.as_ref().map_or(&[][..], WorkspaceName::as_bytes),
            config.ttl_ms,
        ),
        Cached::Link(Link::Live {
            extras: Some(_), ..
        }) => return None,
        Cached::Link(Link::Live {
            status,
            expires_at,
            forward_query,
            target,
            extras: None,
        }) => (
            LIVE,
            *status,
            *expires_at,
            *forward_query,
            target,
            config.ttl_ms,
        ),
    };
    let len = code.len() + target.len();
    if ttl == 0 || code.len() > usize::from(u8::MAX) || len > INLINE {
        return None;
    }
    let mut slot = Slot::EMPTY;
    slot.kind = kind;
    slot.status = status;
    slot.expires_at = expires_at;
    slot.fresh_until = now_ms.saturating_add(ttl);
    slot.flags = if forward_query { FORWARD_QUERY } else { 0 }
        | if scope == Scope::Imported {
            IMPORTED
        } else {
            0
        };
    slot.code_len = code.len() as u8;
    slot.len = len as u16;
    slot.bytes[..code.len()].copy_from_slice(code);
    slot.bytes[code.len()..len].copy_from_slice(target);
    Some(slot)
}

/// Bytes of the zone's block before the sets: the header, rounded up to a page (the block is
/// whole pages from the slab pool, so every set is a page).
pub const HEADER_BYTES: usize = size_of::<Header>();
const SETS_OFFSET: usize = HEADER_BYTES.div_ceil(PAGE) * PAGE;
const SET_BYTES: usize = size_of::<Set>();

/// Lays the header and as many sets as fit in the zone's free pages. Called by nginx in the
/// master (first start) with zeroed pages from the slab pool; a reload with the same name and
/// size keeps the old block and what it holds.
///
/// # Safety
/// `zone` is a zone nginx mapped, its slab pool initialised.
pub unsafe fn init(zone: &mut ngx_shm_zone_t, old: *mut std::ffi::c_void) -> bool {
    if !old.is_null() {
        zone.data = old;
        return true;
    }
    ask_for_huge_pages(zone);
    let pool = zone.shm.addr.cast::<ngx_slab_pool_t>();
    // SAFETY: the caller's promise; `pfree` is the pool's free page count.
    let free = unsafe { (*pool).pfree };
    // One page of slack: the allocation's own bookkeeping.
    let bytes = free.saturating_sub(1) * page_size();
    let sets = bytes.saturating_sub(SETS_OFFSET) / SET_BYTES;
    if sets == 0 {
        return false;
    }
    // SAFETY: a live slab pool; all-zero is a valid header and set (every slot empty, epoch 0).
    // An allocation of more than half a page is whole pages, page-aligned.
    let block = unsafe { nginx_sys::ngx_slab_calloc(pool, SETS_OFFSET + sets * SET_BYTES) };
    let Some(header) = NonNull::new(block.cast::<Header>()) else {
        return false;
    };
    // SAFETY: the block just allocated, not yet seen by any other process.
    unsafe {
        (*header.as_ptr()).seed = seed();
        (*header.as_ptr()).sets = sets as u64;
        (*header.as_ptr()).epoch = AtomicU64::new(1);
    }
    zone.data = block;
    true
}

/// Asks the kernel to back the zone with huge pages, before its block is zeroed (which faults
/// every page in): a hit's page walk is most of what it costs (bench/results/edge-cache-2026-11-27.md),
/// and with 2 MiB pages a 256 MB zone needs 128 page-table entries instead of 65,536. Granted only
/// where the host allows huge pages for shared memory (`shmem_enabled` = advise or always: the
/// default `never` ignores it); the workers inherit the mapping's flag. A refusal changes nothing.
fn ask_for_huge_pages(zone: &ngx_shm_zone_t) {
    #[cfg(target_os = "linux")]
    // SAFETY: the range is nginx's own mapping of the zone (page-aligned, `size` bytes); the advice
    // changes how it is backed, never its contents.
    unsafe {
        nginx_sys::madvise(
            zone.shm.addr.cast(),
            zone.shm.size,
            nginx_sys::MADV_HUGEPAGE as i32,
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = zone;
}

/// This worker's number (0 in the master and in unit tests).
fn worker_index() -> usize {
    #[cfg(not(test))]
    // SAFETY: set by nginx before a worker runs its first event; read-only afterwards.
    return unsafe { nginx_sys::ngx_worker };
    #[cfg(test)]
    return 0;
}

fn page_size() -> usize {
    // SAFETY: set by nginx at startup (ngx_os_init), before any configuration is read.
    unsafe { nginx_sys::ngx_pagesize }
}

/// A seed per zone, so that the sets one code lands in cannot be chosen from outside.
fn seed() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    foldhash::fast::RandomState::default().hash_one(nanos)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
pub(super) mod testing {
    //! A zone in ordinary memory for the unit tests (no slab pool, a process-local mutex).
    use super::*;

    pub struct Owned {
        _block: Vec<u8>,
        _mutex: Box<ngx_shmtx_t>,
        pub zone: Zone,
    }

    pub fn zone(sets: usize) -> Owned {
        let mut block = vec![0u8; SETS_OFFSET + sets * SET_BYTES + PAGE];
        let offset = block.as_ptr().align_offset(PAGE);
        let header = block[offset..].as_mut_ptr().cast::<Header>();
        // SAFETY: the block is large enough, aligned, zeroed (a valid header).
        unsafe {
            (*header).sets = sets as u64;
            (*header).seed = 7;
            (*header).epoch = AtomicU64::new(1);
        }
        // SAFETY: all-zero; the tests' lock functions are stubs (see `tests`).
        let mut mutex: Box<ngx_shmtx_t> = Box::new(unsafe { std::mem::zeroed() });
        let zone = Zone {
            header: NonNull::new(header).unwrap(),
            mutex: &mut *mutex,
        };
        Owned {
            _block: block,
            _mutex: mutex,
            zone,
        }
    }
}
