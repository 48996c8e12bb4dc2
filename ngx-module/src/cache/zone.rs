//! One record cache per edge, in nginx shared memory (`shortlink_cache_zone name size;`),
//! read by every worker.
//!
//! Layout: the zone's slab pool gives one block, a [`Header`] followed by 2-way sets of fixed
//! 192-byte slots (code and target inline, up to [`INLINE`] bytes). A record that does not fit
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

use std::hash::BuildHasher;
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};

use foldhash::fast::FixedState;
use nginx_sys::{ngx_shm_zone_t, ngx_shmtx_t, ngx_slab_pool_t};
#[cfg(not(test))]
use nginx_sys::{ngx_shmtx_lock as lock_mutex, ngx_shmtx_unlock as unlock_mutex};

// Unit tests run on one thread, without nginx's symbols.
#[cfg(test)]
unsafe fn lock_mutex(_: *mut ngx_shmtx_t) {}
#[cfg(test)]
unsafe fn unlock_mutex(_: *mut ngx_shmtx_t) {}

use super::{CacheConfig, Cached, CachedLink, Hit, Scope, IMPORTED};
use shortlink_wire::record::{Link, WorkspaceName, REVOKED_STATUS};

/// Code plus target bytes a slot holds.
pub const INLINE: usize = 152;
/// Bytes of shared memory per cached record.
pub const SLOT_BYTES: usize = size_of::<Slot>();
const WAYS: usize = 2;
/// Removal stamps: a power of two; two codes sharing one only cost a refused store.
const STAMPS: usize = 1 << 14;

const EMPTY: u8 = 0;
const LIVE: u8 = 1;
const REVOKED: u8 = 2;
const MISSING: u8 = 3;
const FORWARD_QUERY: u8 = 1;

/// One entry: three cache lines, the first holding everything but the bytes past its 24th.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct Slot {
    /// Seqlock: odd while a writer is inside.
    version: u32,
    /// Low half of the zone's epoch when written: another epoch is an empty slot.
    epoch: u32,
    /// High half of the code's hash, compared before the slot is copied.
    tag: u32,
    len: u16,
    status: u16,
    code_len: u8,
    kind: u8,
    flags: u8,
    /// CLOCK's reference bit; not covered by the seqlock.
    referenced: u8,
    _pad: u32,
    fresh_until: u64,
    expires_at: u64,
    bytes: [u8; INLINE],
}

const _: () = assert!(size_of::<Slot>() == 192);

impl Slot {
    const EMPTY: Slot = Slot {
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

    /// A buffer for [`Zone::get`].
    pub fn empty() -> SlotCopy {
        Slot::EMPTY
    }

    fn holds(&self, code: &[u8], epoch: u32) -> bool {
        self.kind != EMPTY
            && self.epoch == epoch
            && usize::from(self.code_len) == code.len()
            && &self.bytes[..code.len()] == code
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

/// A reader's copy of a slot, filled by [`Zone::get`].
pub type SlotCopy = Slot;

#[repr(C)]
struct Set {
    ways: [Slot; WAYS],
}

#[repr(C, align(64))]
struct Header {
    seed: u64,
    sets: u64,
    /// Bumped by every flush; part of a lookup's ticket.
    epoch: AtomicU64,
    /// Slots holding an entry of the current epoch.
    entries: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    prefills: AtomicU64,
    stamps: [AtomicU32; STAMPS],
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
        // SAFETY: the sets follow the header in the same block (`init`), `index` is in bounds.
        unsafe { self.header.as_ptr().add(1).cast::<Set>().add(index) }
    }

    fn lock(&self) -> Locked<'_> {
        // SAFETY: the slab pool's mutex, initialised by nginx with the zone.
        unsafe { lock_mutex(self.mutex) };
        Locked(self)
    }

    fn locate(&self, code: &[u8]) -> (usize, u32, usize) {
        let hash = FixedState::with_seed(self.header().seed).hash_one(code);
        let sets = self.header().sets;
        let index = ((u128::from(hash) * u128::from(sets)) >> 64) as usize;
        (index, (hash >> 32) as u32, (hash as usize) & (STAMPS - 1))
    }

    pub fn capacity(&self) -> u64 {
        self.header().sets * WAYS as u64
    }

    /// Taken when a lookup is sent; [`Zone::insert`] stores its answer only if it still holds.
    pub fn ticket(&self, code: &[u8]) -> Ticket {
        let (_, _, stamp) = self.locate(code);
        Ticket {
            epoch: self.header().epoch.load(Ordering::Acquire),
            stamp: self.header().stamps[stamp].load(Ordering::Acquire),
        }
    }

    /// Copies `code`'s entry into `copy` if it is fresh at `now_ms` and answers `reader`.
    pub fn get<'c>(
        &self,
        code: &[u8],
        now_ms: u64,
        reader: Scope,
        copy: &'c mut SlotCopy,
    ) -> Option<Hit<'c>> {
        let (index, tag, _) = self.locate(code);
        let epoch = self.header().epoch.load(Ordering::Acquire) as u32;
        let set = self.set_ptr(index);
        for way in 0..WAYS {
            // SAFETY: in bounds (locate); only fields read, through raw pointers, never a
            // reference to memory another process writes.
            let slot = unsafe { ptr::addr_of_mut!((*set).ways[way]) };
            // SAFETY: as above; a torn read of the tag only costs a copy or a miss.
            if unsafe { ptr::read_volatile(ptr::addr_of!((*slot).tag)) } != tag {
                continue;
            }
            if !read(slot, copy) || !copy.holds(code, epoch) {
                continue;
            }
            if now_ms >= copy.fresh_until || (copy.flags & IMPORTED != 0 && reader == Scope::All) {
                break;
            }
            // SAFETY: the reference bit is a byte of the slot, written only as an atomic.
            let referenced = unsafe { AtomicU8::from_ptr(ptr::addr_of_mut!((*slot).referenced)) };
            if referenced.load(Ordering::Relaxed) == 0 {
                referenced.store(1, Ordering::Relaxed);
            }
            self.header().hits.fetch_add(1, Ordering::Relaxed);
            return Some(copy.hit());
        }
        self.header().misses.fetch_add(1, Ordering::Relaxed);
        None
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
        let (index, tag, stamp) = self.locate(code);
        entry.tag = tag;
        let _locked = self.lock();
        let epoch = self.header().epoch.load(Ordering::Relaxed);
        if epoch != ticket.epoch
            || self.header().stamps[stamp].load(Ordering::Relaxed) != ticket.stamp
        {
            return Stored::Refused;
        }
        entry.epoch = epoch as u32;
        let set = self.set_ptr(index);
        // SAFETY: writers hold the mutex, so this process is the only one writing the set; the
        // slots are read by copy (seqlock) elsewhere.
        let ways = unsafe { &mut (*set).ways };
        let way = self.choose(ways, code, epoch as u32, now_ms);
        let old = &ways[way];
        let occupied = old.kind != EMPTY && old.epoch == epoch as u32;
        if occupied && !old.holds(code, epoch as u32) && now_ms < old.fresh_until {
            self.header().evictions.fetch_add(1, Ordering::Relaxed);
        }
        if !occupied {
            self.header().entries.fetch_add(1, Ordering::Relaxed);
        }
        entry.referenced = 1;
        write(&mut ways[way], entry);
        Stored::Yes
    }

    /// The way an insert of `code` takes: its own, an empty or stale one, else CLOCK.
    fn choose(&self, ways: &mut [Slot; WAYS], code: &[u8], epoch: u32, now_ms: u64) -> usize {
        if let Some(way) = ways.iter().position(|s| s.holds(code, epoch)) {
            return way;
        }
        let free = |s: &Slot| s.kind == EMPTY || s.epoch != epoch || s.fresh_until <= now_ms;
        if let Some(way) = ways.iter().position(free) {
            return way;
        }
        for (way, slot) in ways.iter_mut().enumerate() {
            // SAFETY: the byte is the slot's, which the mutex lets this process write; readers
            // store to it as an atomic too.
            let referenced = unsafe { AtomicU8::from_ptr(ptr::addr_of_mut!(slot.referenced)) };
            if referenced.swap(0, Ordering::Relaxed) == 0 {
                return way;
            }
        }
        0
    }

    /// Forgets `code` (Redis reported a change of its record) and refuses any answer to a
    /// lookup of it sent before now.
    pub fn remove(&self, code: &[u8]) {
        let (index, _, stamp) = self.locate(code);
        let _locked = self.lock();
        self.header().stamps[stamp].fetch_add(1, Ordering::Release);
        let epoch = self.header().epoch.load(Ordering::Relaxed) as u32;
        // SAFETY: as in insert: the mutex is held.
        let ways = unsafe { &mut (*self.set_ptr(index)).ways };
        if let Some(way) = ways.iter().position(|s| s.holds(code, epoch)) {
            self.header().entries.fetch_sub(1, Ordering::Relaxed);
            write(&mut ways[way], Slot::EMPTY);
        }
    }

    /// Forgets everything: a new epoch empties every slot at once.
    pub fn clear(&self) {
        let _locked = self.lock();
        self.header().epoch.fetch_add(1, Ordering::Release);
        self.header().entries.store(0, Ordering::Relaxed);
    }

    /// Counts a record stored ahead of its first click.
    pub fn count_prefill(&self) {
        self.header().prefills.fetch_add(1, Ordering::Relaxed);
    }

    pub fn stats(&self) -> Stats {
        let h = self.header();
        Stats {
            entries: h.entries.load(Ordering::Relaxed),
            capacity: self.capacity(),
            hits: h.hits.load(Ordering::Relaxed),
            misses: h.misses.load(Ordering::Relaxed),
            evictions: h.evictions.load(Ordering::Relaxed),
            prefills: h.prefills.load(Ordering::Relaxed),
        }
    }
}

/// Seqlock read: copies `slot` into `copy`; false if a writer was or came inside meanwhile.
fn read(slot: *mut Slot, copy: &mut Slot) -> bool {
    // SAFETY: `slot` points into the mapped zone. The version is only written as an atomic;
    // the rest is copied with a volatile read and kept only if the version proves no writer
    // touched it during the copy (a seqlock, as crossbeam's AtomicCell does).
    unsafe {
        let version = AtomicU32::from_ptr(ptr::addr_of_mut!((*slot).version));
        let before = version.load(Ordering::Acquire);
        if before & 1 != 0 {
            return false;
        }
        *copy = ptr::read_volatile(slot);
        fence(Ordering::Acquire);
        version.load(Ordering::Relaxed) == before
    }
}

/// Seqlock write, under the zone's mutex.
fn write(slot: &mut Slot, mut entry: Slot) {
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

/// Bytes of the zone's block before the sets.
pub const HEADER_BYTES: usize = size_of::<Header>();
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
    let pool = zone.shm.addr.cast::<ngx_slab_pool_t>();
    // SAFETY: the caller's promise; `pfree` is the pool's free page count.
    let free = unsafe { (*pool).pfree };
    // One page of slack: the allocation's own bookkeeping.
    let bytes = free.saturating_sub(1) * page_size();
    let sets = bytes.saturating_sub(HEADER_BYTES) / SET_BYTES;
    if sets == 0 {
        return false;
    }
    // SAFETY: a live slab pool; all-zero is a valid header and set (every slot empty, epoch 0).
    let block = unsafe { nginx_sys::ngx_slab_calloc(pool, HEADER_BYTES + sets * SET_BYTES) };
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
        let mut block = vec![0u8; HEADER_BYTES + sets * SET_BYTES + 64];
        let offset = block.as_ptr().align_offset(64);
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
