//! What the invalidation connection ([`super::tracking`]) tells the worker's cache: reports as
//! they arrive, applied at the cache's next access. Its own file because the lookup connections
//! carry it too ([`super::connection`] hands it each frame that is not a reply), and the tracker
//! is built on those connections.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ptr;

use nginx_sys::ngx_event_t;

use super::resp::Frame;
use crate::cache::zone::Zone;

pub(super) const CHANNEL: &[u8] = b"__redis__:invalidate";
/// The keys whose changes are reported: the link records.
pub(super) const LINK_PREFIX: &[u8] = shortlink_wire::keys::LINK_PREFIX.as_bytes();
/// Pending evictions kept for the next cache access; beyond that the whole cache is dropped.
const MAX_PENDING: usize = 4096;
/// Codes waiting to be read into the zone: at most the zone's slots and this many; beyond
/// that the oldest are dropped (a campaign larger than this arriving faster than it is read is
/// prefilled from its newest links on). About 40 bytes each while they wait.
pub const MAX_PREFILL: usize = 1 << 20;

/// What the invalidation connection tells the worker's cache. Shared with the connection,
/// which records reports as they arrive; the cache applies them at its next access.
pub struct TrackState {
    /// Bumped by every report and every change of `up`.
    seq: Cell<u64>,
    up: Cell<bool>,
    /// Codes (keys without the prefix) to evict.
    evict: RefCell<Vec<Vec<u8>>>,
    /// Drop the whole cache: a null report (FLUSHALL, a replica's full resync), an overflow of
    /// `evict`, or a fresh subscription (reports may have been missed before it).
    flush: Cell<bool>,
    /// The edge's shared cache (`shortlink_cache_zone`): reports are applied to it as they
    /// arrive, not at this worker's next access, since other workers read it meanwhile.
    zone: Cell<Option<Zone>>,
    /// Codes reported changed, to be read from Redis into the zone, newest last.
    prefill: RefCell<VecDeque<Vec<u8>>>,
    prefill_limit: Cell<usize>,
    /// Posted when `prefill` gets codes: the worker's event that starts reading them.
    wake: Cell<*mut ngx_event_t>,
    /// This worker's fresh subscription emptied the zone: the epoch it left, for the prefill to
    /// read the newest links back ([`crate::prefill`]'s refill) while the epoch is still that.
    refill: Cell<Option<u64>>,
}

impl Default for TrackState {
    fn default() -> Self {
        Self {
            seq: Cell::new(0),
            up: Cell::new(false),
            evict: RefCell::default(),
            flush: Cell::new(false),
            zone: Cell::new(None),
            prefill: RefCell::default(),
            prefill_limit: Cell::new(0),
            wake: Cell::new(ptr::null_mut()),
            refill: Cell::new(None),
        }
    }
}

/// Posts `event` (null: none) unless it is already posted.
fn post(event: *mut ngx_event_t) {
    // SAFETY: a non-null `wake` is the worker's live event (`share`'s caller clears it before
    // freeing it). Unit tests never set one, and run without nginx's symbols.
    #[cfg(not(test))]
    unsafe {
        if !event.is_null() && (*event).posted() == 0 {
            nginx_sys::ngx_post_event(event, ptr::addr_of_mut!(nginx_sys::ngx_posted_events));
        }
    }
    #[cfg(test)]
    assert!(event.is_null());
}

/// What to apply to the cache before reading it.
pub enum Pending {
    Nothing,
    Flush,
    Evict(Vec<Vec<u8>>),
}

impl TrackState {
    pub fn is_up(&self) -> bool {
        self.up.get()
    }

    /// Names the moment a lookup was sent: its answer may be cached only if the ticket is
    /// unchanged when it comes back.
    pub fn ticket(&self) -> Option<u64> {
        self.up.get().then(|| self.seq.get())
    }

    /// Applies this worker's reports to `zone` from now on, and queues each reported code to
    /// be read into it ([`TrackState::take_prefill`]), posting `wake` (null: none).
    pub fn share(&self, zone: Zone, wake: *mut ngx_event_t) {
        self.zone.set(Some(zone));
        self.wake.set(wake);
        self.prefill_limit
            .set(MAX_PREFILL.min(zone.capacity() as usize).max(1));
    }

    /// Stops posting the worker's event (it is about to be freed).
    pub fn forget_wake(&self) {
        self.wake.set(ptr::null_mut());
    }

    pub fn has_prefill(&self) -> bool {
        !self.prefill.borrow().is_empty() || self.refill.get().is_some()
    }

    /// The epoch of the zone this worker's fresh subscription emptied, once.
    pub fn take_refill(&self) -> Option<u64> {
        self.refill.take()
    }

    /// Up to `n` queued codes, newest first.
    pub fn take_prefill(&self, n: usize) -> Vec<Vec<u8>> {
        let mut queue = self.prefill.borrow_mut();
        let n = n.min(queue.len());
        let codes = (0..n).filter_map(|_| queue.pop_back()).collect();
        // A campaign's burst may have grown it to megabytes: give them back once it is read.
        if queue.is_empty() && queue.capacity() > 4096 {
            *queue = VecDeque::new();
        }
        codes
    }

    fn queue_prefill(&self, code: &[u8]) {
        let mut queue = self.prefill.borrow_mut();
        if queue.len() >= self.prefill_limit.get() {
            queue.pop_front();
        }
        queue.push_back(code.to_vec());
        post(self.wake.get());
    }

    pub(super) fn set_up(&self, up: bool) {
        if self.up.replace(up) != up {
            // Reports may have been missed before this subscription: by every worker, if Redis
            // restarted. Other workers keep theirs, so only a new subscription empties the zone.
            // The worker then reads the newest links back (a restart's, a respawned worker's
            // or a reconnection's zone would else fill only as links are clicked).
            if let (true, Some(zone)) = (up, self.zone.get()) {
                zone.clear();
                self.refill.set(Some(zone.epoch()));
                post(self.wake.get());
            }
            self.seq.set(self.seq.get() + 1);
            self.flush.set(true);
            self.evict.borrow_mut().clear();
        }
    }

    /// Takes what arrived since the last call.
    pub fn take(&self) -> Pending {
        if self.flush.replace(false) {
            self.evict.borrow_mut().clear();
            return Pending::Flush;
        }
        let mut evict = self.evict.borrow_mut();
        if evict.is_empty() {
            Pending::Nothing
        } else {
            Pending::Evict(std::mem::take(&mut *evict))
        }
    }

    /// Called by the connection for each frame that is not a reply to a command. Returns
    /// whether it was an invalidation message.
    pub fn on_push(&self, frame: &Frame) -> bool {
        let Frame::Array(items) = frame else {
            return false;
        };
        let [Frame::Bulk(kind), Frame::Bulk(channel), keys] = items.as_slice() else {
            return false;
        };
        if kind != b"message" || channel != CHANNEL {
            return false;
        }
        self.seq.set(self.seq.get() + 1);
        match keys {
            Frame::Array(keys) => {
                let mut evict = self.evict.borrow_mut();
                for key in keys {
                    match key {
                        Frame::Bulk(key) => {
                            if let Some(code) = key.strip_prefix(LINK_PREFIX) {
                                if let Some(zone) = self.zone.get() {
                                    zone.remove(code);
                                    self.queue_prefill(code);
                                }
                                evict.push(code.to_vec());
                            }
                        }
                        _ => self.flush_all(),
                    }
                }
                // Only the worker's own cache: the zone has had each code removed already.
                if evict.len() > MAX_PENDING {
                    evict.clear();
                    self.flush.set(true);
                }
            }
            // A null list means "everything changed".
            _ => self.flush_all(),
        }
        true
    }

    /// Everything may have changed: the zone at once, the worker's cache at its next access.
    fn flush_all(&self) {
        if let Some(zone) = self.zone.get() {
            zone.clear();
        }
        self.flush.set(true);
    }

    /// The connection broke: nothing it promised holds any more.
    pub fn on_closed(&self) {
        self.set_up(false);
    }
}
