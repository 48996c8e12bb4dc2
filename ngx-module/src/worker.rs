//! State each worker process keeps for itself: the Redis pool and the cache.
//!
//! nginx runs a worker's module code on one thread, so a thread-local needs no locking. The
//! state is rebuilt when the configuration changes under it (single-process mode reloads).

use std::cell::RefCell;
use std::ptr;
use std::rc::Rc;

use nginx_sys::{
    ngx_add_timer, ngx_cycle, ngx_del_timer, ngx_delete_posted_event, ngx_event_t, ngx_post_event,
    ngx_posted_events, NGX_LOG_ERR, NGX_LOG_NOTICE,
};
use ngx::async_::Task;
use ngx::ngx_log_error;

use crate::cache::zone::{self, Near, Stored, Zone};
use crate::cache::{Cache, CacheConfig, Cached, Hit, Scope};
use crate::conf::MainConf;
use crate::events::{Batch, Encoder, EventShared, Visit};
use crate::ffi;
use crate::not_found;
use crate::redis::cluster::{Cluster, Target};
use crate::redis::tracking::Pending;
use crate::redis::{Pool, RedisError, Reply, Tracker};
use crate::request::host::PoolMemo;
use crate::request::host_workspaces::HostWorkspaces;
use crate::scheme::SchemeState;
use crate::status::Counter;
use shortlink_wire::click_count::CountCommand;
use shortlink_wire::click_id::ClickId;
use shortlink_wire::keys;
use shortlink_wire::record::password;
use shortlink_wire::resp::{self, KeyedCommand};

/// The projection marker is present while Redis holds every link (the sidecar sets it after a
/// complete resync). A data loss (FLUSHALL, a restart without persistence) takes it away with
/// the links, so a missing link is only "unknown" while the marker is there.
const PROJECTION_MARKER: &[u8] = keys::PROJECTION_MARKER.as_bytes();
/// The record keys' prefix (`sl:c:<code>`).
const LINK_PREFIX: &[u8] = keys::LINK_PREFIX.as_bytes();
/// The click counters' prefix (`sl:n:<code>`).
const VISIT_COUNT_PREFIX: &[u8] = keys::VISIT_COUNT_PREFIX.as_bytes();

pub struct Worker {
    conf: *const MainConf,
    redis: Option<Pool>,
    /// Instead of `redis`, with `shortlink_redis_cluster`.
    cluster: Option<Cluster>,
    cache: Option<Cache>,
    /// The edge's cache in shared memory (`shortlink_cache_zone`), read before `cache`, which
    /// then only holds what does not fit the zone's slots.
    zone: Option<Zone>,
    /// This worker's copies of the zone entries it hit last ([`Near`]).
    near: Near,
    zone_config: Option<CacheConfig>,
    /// Reads the codes the subscription reported into the zone ([`crate::prefill`]).
    prefill: Option<Task<()>>,
    /// Keeps the cache coherent with Redis (`shortlink_cache_invalidation on`); while it is not
    /// subscribed the cache is neither read nor filled.
    tracker: Option<Tracker>,
    /// Parsed `shortlink_pool` values, when the pool comes from a variable.
    pub pools: PoolMemo,
    /// `shortlink_workspace`'s answer per host, when it comes from a variable; a new
    /// configuration starts a new table (a reload that changes the map is seen).
    pub workspaces: HostWorkspaces,
    events: Rc<EventShared>,
    /// `MGET sl:c:<code> sl:meta:projection`, encoded once but for the code.
    lookup: KeyedCommand,
    /// A capped click's count, encoded once but for the code and the token.
    count: CountCommand,
    encoder: Encoder,
    /// On a cluster: the visit streams (key and command head); batches take them in turn.
    streams: Vec<(Vec<u8>, Encoder)>,
    next_stream: usize,
    /// Visits not yet written.
    batch: Batch,
    /// Armed with the first visit of a batch: a timer of `flush_ms`, or with 0 posted to run
    /// once the current pass of the event loop has answered everything that was ready. Either
    /// way it writes the batch. Boxed: nginx's timer tree and posted queue point into it.
    flush: Box<ngx_event_t>,
    flush_ms: u64,
    /// What the last projection marker said about this worker's code scheme.
    scheme: SchemeState,
    /// `shortlink_orphans_per_second`; the second orphan events were last queued in, and how
    /// many more it may take.
    orphans_per_second: u64,
    orphan_second: u64,
    orphans_left: u64,
    /// Keeps this worker's copy of the not-found redirects ([`crate::not_found`]); dropped with
    /// the worker.
    not_found_task: Option<Task<()>>,
    /// Keeps this worker's copy of the sweeps noticed ([`crate::sweeps`]).
    sweeps_task: Option<Task<()>>,
}

/// What [`Worker::remember`] did with an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remembered {
    /// Stored in the zone.
    Zone,
    /// Refused by the zone: a removal of the code (or of one sharing its stamp) or a flush came
    /// after the ticket. Read again, it may be stored.
    Refused,
    /// The worker cache's business (stored there or not).
    Elsewhere,
}

/// What a lookup's answer may be cached against: taken when it is sent
/// ([`Worker::ticket_for`]), handed back to [`Worker::remember`].
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    /// `None`: the answer must not be cached (an invalidation may be missed meanwhile).
    worker: Option<u64>,
    zone: Option<zone::Ticket>,
}

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// Runs `f` on this worker's state for `mcf`. `None` if the state is already in use further up
/// the stack (a re-entrant call), which callers treat as "no cache" / "Redis unavailable".
///
/// Inlined, with the worker's making out of line: a cached redirect's answer then runs in its
/// caller's frame, reading what it needs where it is rather than from a closure's copy of it
/// (issue 82).
#[inline(always)]
pub fn with<R>(mcf: &MainConf, f: impl FnOnce(&mut Worker) -> R) -> Option<R> {
    WORKER
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            if !matches!(&*slot, Some(w) if std::ptr::eq(w.conf, mcf)) {
                make(&mut slot, mcf);
            }
            slot.as_mut().map(f)
        })
        .ok()
        .flatten()
}

/// A worker's state for `mcf`, in place of none or of an older configuration's: once per
/// worker and configuration.
#[cold]
#[inline(never)]
fn make(slot: &mut Option<Worker>, mcf: &MainConf) {
    *slot = Some(Worker::new(mcf));
    if let Some(w) = slot.as_mut() {
        w.read_not_found();
    }
}

/// Builds the worker's state ahead of the first request (and with it the invalidation
/// subscription).
pub fn start(mcf: &MainConf) {
    with(mcf, |w| w.ticket());
}

/// Drops the pool (closing its sockets) and the cache; called when the worker exits.
pub fn shutdown() {
    let _ = WORKER.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            slot.take();
        }
    });
}

impl Worker {
    fn new(mcf: &MainConf) -> Self {
        let events = Rc::new(EventShared::new(
            mcf.events_spool(),
            crate::status::counters(mcf),
            mcf.cluster.is_some(),
        ));
        let mut flush = flush_event();
        let zone = mcf.cache_zone();
        let tracker = match (&mcf.redis, mcf.cache_config()) {
            (Some(redis), Some(_)) if mcf.cache_invalidation() => {
                let tracker = Tracker::new(redis, Rc::clone(&events));
                if let Some(zone) = zone {
                    // The flush event also starts the prefill (`on_flush`); Drop unhooks it.
                    tracker.state().share(zone, &mut *flush);
                }
                Some(tracker)
            }
            _ => None,
        };
        // The box keeps the event's address for the worker's life; Drop clears it first.
        events.set_wake(&mut *flush);
        Self {
            conf: mcf,
            redis: mcf
                .redis
                .as_ref()
                .map(|redis| Pool::new(redis, Rc::clone(&events))),
            cluster: mcf.cluster.as_ref().map(|cluster| {
                let track = mcf.cache_config().is_some() && mcf.cache_invalidation();
                Cluster::new(
                    cluster,
                    Rc::clone(&events),
                    crate::status::counters(mcf),
                    track,
                )
            }),
            cache: mcf.cache_config().map(Cache::new),
            zone,
            near: match zone {
                Some(_) => Near::default(),
                None => Near::with_entries(1),
            },
            zone_config: mcf.cache_config(),
            prefill: None,
            tracker,
            pools: PoolMemo::default(),
            workspaces: HostWorkspaces::default(),
            events,
            lookup: KeyedCommand::new(&[b"MGET"], LINK_PREFIX, &[PROJECTION_MARKER]),
            count: CountCommand::default(),
            encoder: Encoder::new(mcf.events_max_len()),
            streams: match mcf.cluster {
                Some(_) => shortlink_wire::cluster::event_stream_keys()
                    .into_iter()
                    .map(|key| {
                        let encoder = Encoder::for_stream(key.as_bytes(), mcf.events_max_len());
                        (key.into_bytes(), encoder)
                    })
                    .collect(),
                None => Vec::new(),
            },
            // Workers start on different streams, so their batches spread from the first one.
            next_stream: std::process::id() as usize,
            batch: Batch::default(),
            flush,
            flush_ms: mcf.events_flush_ms(),
            scheme: SchemeState::Unknown,
            orphans_per_second: mcf.orphans_per_second(),
            orphan_second: 0,
            orphans_left: 0,
            not_found_task: None,
            sweeps_task: None,
        }
    }

    /// Whether an orphan event may be queued in second `now`: at most
    /// `shortlink_orphans_per_second` a second, the rest counted only.
    pub fn orphan_allowed(&mut self, now: u64) -> bool {
        if now != self.orphan_second {
            self.orphan_second = now;
            self.orphans_left = self.orphans_per_second;
        }
        let allowed = self.orphans_left > 0;
        self.orphans_left = self.orphans_left.saturating_sub(1);
        allowed
    }

    /// Starts the tasks that keep the not-found redirects and the sweeps noticed (with a Redis
    /// to read them from). Spawned under the worker's borrow: a first poll run at once finds the
    /// worker busy and tries again shortly ([`not_found::refresh`]).
    fn read_not_found(&mut self) {
        if self.redis.is_none() && self.cluster.is_none() {
            return;
        }
        // SAFETY: the configuration outlives its workers' state (a new one replaces the
        // worker, whose Drop drops the task).
        let mcf: &'static MainConf = unsafe { &*self.conf };
        self.not_found_task = Some(ngx::async_::spawn(not_found::refresh(mcf)));
        self.sweeps_task = Some(ngx::async_::spawn(crate::sweeps::refresh(mcf)));
    }

    /// Sends `args` to the Redis that holds `key`: its owner on a cluster, else the one server.
    fn send_to_owner(&mut self, key: &[u8], args: &[&[&[u8]]]) -> Result<Reply, RedisError> {
        if let Some(cluster) = self.cluster.as_mut() {
            return cluster.send_for(key, args, &Target::Owner);
        }
        let redis = self.redis.as_mut().ok_or(RedisError::Unavailable)?;
        redis.request(args)
    }

    /// Sends `HGETALL sl:nf`: every not-found redirect setting.
    pub fn not_found_settings(&mut self) -> Result<Reply, RedisError> {
        let key = keys::NOT_FOUND_REDIRECTS.as_bytes();
        let args: [&[&[u8]]; 2] = [&[b"HGETALL"], &[key]];
        self.send_to_owner(key, &args)
    }

    /// Sends `HGETALL <key>` to the key's owner (the sweeps noticed, [`crate::sweeps`]).
    pub fn read_hash(&mut self, key: &[u8]) -> Result<Reply, RedisError> {
        let args: [&[&[u8]]; 2] = [&[b"HGETALL"], &[key]];
        if let Some(cluster) = self.cluster.as_mut() {
            return cluster.send_for(key, &args, &Target::Owner);
        }
        let redis = self.redis.as_mut().ok_or(RedisError::Unavailable)?;
        redis.request(&args)
    }

    /// Adds a visit to the batch. Never waits: the batch is written when the flush event fires
    /// (or at once when it is full), on a connection if one is up, else into the spool.
    // Inlined where a visit is made (`respond::queue`): a plain redirect's visit then has no
    // rule, click id, orphan kind or workspace to test for, and no call (about 35 instructions
    // a tracked redirect, bench/results/redirect-tracking-2026-11-29.md).
    #[inline(always)]
    pub fn track(&mut self, visit: &Visit<'_>) {
        self.events.add(Counter::EventsQueued, 1);
        if self.redis.is_none() && self.cluster.is_none() {
            self.events.add(Counter::EventsDropped, 1);
            return;
        }
        self.batch.push(visit);
        if self.batch.is_full() {
            self.write_batch();
        } else if self.flush.posted() == 0 && self.flush.timer_set() == 0 {
            let ev: *mut ngx_event_t = &mut *self.flush;
            // SAFETY: the event is ours, boxed (its address is stable) and initialised by
            // flush_event(); Drop takes it off the timer tree or the queue if the worker goes
            // first.
            unsafe {
                if self.flush_ms == 0 {
                    ngx_post_event(ev, ptr::addr_of_mut!(ngx_posted_events));
                } else {
                    ngx_add_timer(ev, self.flush_ms as _);
                }
            }
        }
    }

    /// Writes the batched visits as one stream entry.
    fn write_batch(&mut self) {
        self.disarm_flush();
        let visits = self.batch.len();
        if visits == 0 {
            // Woken on a cluster for a batch a node redirected (`EventShared::reroute`), which
            // poll sends, or one held back in the spool (`EventShared::wake_in`).
            if let Some(cluster) = self.cluster.as_mut() {
                cluster.poll();
                cluster.flush_spool();
            }
            return;
        }
        if let Some(pool) = self.redis.as_mut() {
            pool.send_batch(visits, &self.encoder, &mut self.batch);
        } else if let (Some(cluster), false) = (self.cluster.as_mut(), self.streams.is_empty()) {
            self.next_stream = self.next_stream.wrapping_add(1);
            let (key, encoder) = &self.streams[self.next_stream % self.streams.len()];
            let batch = &self.batch;
            cluster.send_event(key, visits, |out| encoder.write_command(out, batch));
        }
        self.batch.clear();
    }

    /// The cache, with every invalidation received so far applied; `None` while invalidations
    /// may be missed (the subscription is down or not yet confirmed).
    pub fn cache(&mut self) -> Option<&mut Cache> {
        synced(&mut self.cache, &mut self.cluster, &mut self.tracker)
    }

    /// The cached answer for `code` (the zone's, through this worker's copies, else the worker
    /// cache's) and the hosts' workspaces at once: a cache hit is judged against its host's
    /// workspace while it still borrows the cache. `None`: no cache may be read now
    /// ([`Worker::cache`]); `Some((None, _))`: a miss. Inlined into the one caller that answers
    /// from it, so that its answer stays in registers (issue 82).
    #[inline(always)]
    pub fn cached(
        &mut self,
        code: &[u8],
        now_ms: u64,
        reader: Scope,
    ) -> Option<(Option<Hit<'_>>, &mut HostWorkspaces)> {
        let cache = synced(&mut self.cache, &mut self.cluster, &mut self.tracker)?;
        let near = &mut self.near;
        if let Some(hit) = self.zone.and_then(|z| z.get(code, now_ms, reader, near)) {
            return Some((Some(hit), &mut self.workspaces));
        }
        Some((cache.get_in(code, now_ms, reader), &mut self.workspaces))
    }

    /// Taken when a lookup is sent and handed back to [`Worker::remember`]: `None` when its
    /// answer must not be cached because an invalidation may be missed meanwhile.
    pub fn ticket(&mut self) -> Option<u64> {
        if let Some(cluster) = self.cluster.as_mut() {
            return cluster.ticket();
        }
        match self.tracker.as_mut() {
            Some(tracker) => {
                tracker.ensure();
                tracker.state().ticket()
            }
            None => Some(0),
        }
    }

    /// [`Worker::ticket`] and, with a zone, the zone's for `code`: taken together when a lookup
    /// of `code` is sent.
    pub fn ticket_for(&mut self, code: &[u8]) -> Ticket {
        Ticket {
            worker: self.ticket(),
            zone: self.zone.map(|zone| zone.ticket(code)),
        }
    }

    /// Sends `MGET sl:c:<code> sl:meta:projection`; the reply (the record, then the marker)
    /// arrives through the returned future. One command, so asking for the marker costs no
    /// round trip.
    /// On a cluster the record's slot decides the node (or `target`, after a redirection) and
    /// the marker is that slot's.
    pub fn lookup(&mut self, code: &[u8], target: &Target) -> Result<Reply, RedisError> {
        if let Some(cluster) = self.cluster.as_mut() {
            return cluster.lookup(code, target);
        }
        self.redis
            .as_mut()
            .ok_or(RedisError::Unavailable)?
            .request_with(|out| self.lookup.write(out, code))
    }

    /// Sends a click's count on `sl:n:<code>` to the primary (every edge counts in the same key):
    /// the count of the click `token` names (`click_count::COUNT_SCRIPT`, [`crate::count`]), or
    /// for a machine's click, without a token, `GET`.
    pub fn count(&mut self, code: &[u8], token: Option<&ClickId>) -> Result<Reply, RedisError> {
        let command = &self.count;
        let write = |out: &mut Vec<u8>| match token {
            Some(token) => command.write(out, code, token.as_bytes()),
            None => resp::encode_command(out, &[&[b"GET"], &[VISIT_COUNT_PREFIX, code]]),
        };
        if let Some(cluster) = self.cluster.as_mut() {
            return cluster.count(code, write);
        }
        let redis = self.redis.as_mut().ok_or(RedisError::Unavailable)?;
        redis.request_with(write)
    }

    /// Sends `GET sl:p:<code>`: a link's preview card.
    pub fn card(&mut self, code: &[u8]) -> Result<Reply, RedisError> {
        let mut key = Vec::with_capacity(keys::PREVIEW_PREFIX.len() + code.len());
        key.extend_from_slice(keys::PREVIEW_PREFIX.as_bytes());
        key.extend_from_slice(code);
        let args: [&[&[u8]]; 2] = [&[b"GET"], &[&key]];
        self.send_to_owner(&key, &args)
    }

    /// Checks (and, when `right` is false, counts) a password attempt against a client's and a
    /// link's budgets ([`password::ATTEMPT_SCRIPT`]; both keys in the link's hash slot). The
    /// reply: 0 to go ahead, else the seconds to wait.
    pub fn count_attempt(
        &mut self,
        client_key: &[u8],
        link_key: &[u8],
        right: bool,
    ) -> Result<Reply, RedisError> {
        let [right, client_burst, client_ms, link_burst, link_ms] = password::attempt_args(right);
        let args: [&[&[u8]]; 10] = [
            &[b"EVAL"],
            &[password::ATTEMPT_SCRIPT.as_bytes()],
            &[b"2"],
            &[client_key],
            &[link_key],
            &[right.as_bytes()],
            &[client_burst.as_bytes()],
            &[client_ms.as_bytes()],
            &[link_burst.as_bytes()],
            &[link_ms.as_bytes()],
        ];
        self.send_to_owner(link_key, &args)
    }

    /// The cluster, when the worker talks to one.
    pub fn cluster(&mut self) -> Option<&mut Cluster> {
        self.cluster.as_mut()
    }

    /// Whether the check character may reject a code without a lookup: only while the marker
    /// names this worker's code scheme.
    pub fn trusts_check(&self) -> bool {
        self.scheme == SchemeState::Matching
    }

    /// Takes the state a lookup's marker gave; says so in the error log when it changes to or
    /// from a mismatch (once per change, not per request).
    pub fn observe_scheme(&mut self, state: SchemeState, expected: &str, marker: &[u8]) {
        if state == self.scheme {
            return;
        }
        let was = std::mem::replace(&mut self.scheme, state);
        let found =
            String::from_utf8_lossy(crate::scheme::marker_fingerprint(marker).unwrap_or(marker));
        // SAFETY: `ngx_cycle` is set before any worker code runs; its log outlives requests.
        let log = unsafe { (*ngx_cycle).log };
        if state == SchemeState::Mismatching {
            ngx_log_error!(
                NGX_LOG_ERR,
                log,
                "shortlink: the projection marker names code scheme {found}, this module is \
                 configured for {expected}: check characters are not trusted and unknown codes \
                 go to the fallback (or 503) instead of 404; give nginx the sidecar's code \
                 secret file, shortlink_code_length and shortlink_code_check"
            );
        } else if was == SchemeState::Mismatching {
            ngx_log_error!(
                NGX_LOG_NOTICE,
                log,
                "shortlink: the projection marker names this module's code scheme again ({found})"
            );
        }
    }

    /// Up to `n` codes the subscription reported, newest first, for the prefill.
    pub fn take_prefill(&mut self, n: usize) -> Vec<Vec<u8>> {
        match (&self.tracker, self.zone) {
            (Some(tracker), Some(_)) => tracker.state().take_prefill(n),
            _ => Vec::new(),
        }
    }

    /// The zone's epoch when this worker's fresh subscription emptied it, once: the prefill
    /// then reads the newest links back ([`crate::prefill`]).
    pub fn take_refill(&mut self) -> Option<u64> {
        match (&self.tracker, self.zone) {
            (Some(tracker), Some(_)) => tracker.state().take_refill(),
            _ => None,
        }
    }

    /// The zone's epoch and slots.
    pub fn zone_state(&self) -> Option<(u64, u64)> {
        self.zone.map(|zone| (zone.epoch(), zone.capacity()))
    }

    /// Sends `GET sl:meta:issued`: the high-water mark of the sequence numbers sidecars leased
    /// (generated codes are those numbers under the code secret). One Redis only: the zone is
    /// refused with a cluster.
    pub fn issued_mark(&mut self) -> Result<Reply, RedisError> {
        self.redis
            .as_mut()
            .ok_or(RedisError::Unavailable)?
            .request(&[&[b"GET"], &[keys::ISSUED_MARK.as_bytes()]])
    }

    /// Counts a prefilled record the zone took: `remembered`, [`Worker::remember`]'s answer
    /// for it (stored as a click's lookup would be).
    pub fn count_prefilled(&self, remembered: Remembered) {
        if let (Remembered::Zone, Some(zone)) = (remembered, self.zone) {
            zone.count_prefill();
        }
    }

    /// Starts the prefill if codes wait and no task reads them; the caller spawns it outside
    /// the worker's borrow.
    fn prefill_due(&mut self) -> Option<(&'static MainConf, Option<Task<()>>)> {
        let queued = self.zone.is_some()
            && self
                .tracker
                .as_ref()
                .is_some_and(|t| t.state().has_prefill());
        if !queued
            || self
                .prefill
                .as_ref()
                .is_some_and(|task| !task.is_finished())
        {
            return None;
        }
        // SAFETY: the configuration outlives its workers' state (a new one replaces the
        // worker, whose Drop drops the task first).
        let mcf: &'static MainConf = unsafe { &*self.conf };
        Some((mcf, self.prefill.take()))
    }

    /// Caches a lookup's answer unless an invalidation (or a change of trust) arrived since
    /// `ticket` was taken: the answer may predate it.
    pub fn remember(
        &mut self,
        code: &[u8],
        value: Cached,
        now_ms: u64,
        ticket: Ticket,
        scope: Scope,
    ) -> Remembered {
        // Applies the reports received so far (to the worker cache; the zone has them already).
        if self.cache().is_none() {
            return Remembered::Elsewhere;
        }
        if let (Some(zone), Some(zone_ticket), Some(config)) =
            (self.zone, ticket.zone, self.zone_config)
        {
            // The subscription was up when the lookup was sent and is now; one renewed between
            // emptied the zone, which the ticket's epoch catches. Reports on other codes do not
            // matter: the zone checks this code's own removals.
            if ticket.worker.is_none() || self.ticket().is_none() {
                return Remembered::Elsewhere;
            }
            match zone.insert(code, &value, now_ms, &config, zone_ticket, scope) {
                Stored::Yes => return Remembered::Zone,
                Stored::Refused => return Remembered::Refused,
                // Longer, or with extras: the worker cache, under its own rule.
                Stored::DoesNotFit => {}
            }
        }
        if ticket.worker.is_none() || ticket.worker != self.ticket() {
            return Remembered::Elsewhere;
        }
        if let Some(cache) = self.cache() {
            cache.insert_in(code, value, now_ms, scope);
        }
        Remembered::Elsewhere
    }
}

impl Worker {
    /// Takes the flush event off nginx's timer tree and posted queue, whichever holds it.
    fn disarm_flush(&mut self) {
        let ev: *mut ngx_event_t = &mut *self.flush;
        // SAFETY: the event is ours; each call only unlinks it from where its flags say it is.
        unsafe {
            if (*ev).timer_set() != 0 {
                ngx_del_timer(ev);
            }
            if (*ev).posted() != 0 {
                ngx_delete_posted_event(ev);
            }
        }
    }
}

/// The body of [`Worker::cache`], on the fields it needs, so that others can be borrowed beside.
#[inline(always)]
fn synced<'a>(
    cache: &'a mut Option<Cache>,
    cluster: &mut Option<Cluster>,
    tracker: &mut Option<Tracker>,
) -> Option<&'a mut Cache> {
    let cache = cache.as_mut()?;
    if let Some(cluster) = cluster.as_mut() {
        return cluster.sync_cache(cache).then_some(cache);
    }
    if let Some(tracker) = tracker.as_mut() {
        tracker.ensure();
        match tracker.state().take() {
            Pending::Nothing => {}
            Pending::Flush => cache.clear(),
            Pending::Evict(codes) => codes.iter().for_each(|code| cache.remove(code)),
        }
        if !tracker.state().is_up() {
            return None;
        }
    }
    Some(cache)
}

impl Drop for Worker {
    fn drop(&mut self) {
        // nginx must not keep a pointer to memory about to be freed.
        self.disarm_flush();
        self.events.set_wake(ptr::null_mut());
        if let Some(tracker) = &self.tracker {
            tracker.state().forget_wake();
        }
        self.prefill = None;
        self.not_found_task = None;
        self.sweeps_task = None;
        // The worker is exiting or its configuration was replaced: unwritten visits are lost.
        self.events.add(Counter::EventsDropped, self.batch.len());
    }
}

/// An event of no connection, timed or posted, whose handler writes the batch.
fn flush_event() -> Box<ngx_event_t> {
    // SAFETY: all-zero is how nginx itself starts an event (ngx_pcalloc): no flags, no timer,
    // not posted.
    let mut ev: Box<ngx_event_t> = Box::new(unsafe { std::mem::zeroed() });
    ev.handler = Some(on_flush);
    // A graceful shutdown does not wait for it (what it would write is counted dropped).
    ev.set_cancelable(1);
    // SAFETY: `ngx_cycle` is set before any worker code runs; the event only borrows its log.
    ev.log = unsafe { (*ngx_cycle).log };
    ev
}

extern "C" fn on_flush(_ev: *mut ngx_event_t) {
    ffi::guard((), || {
        let due = WORKER.try_with(|cell| {
            // Posted events run from the event loop, never inside a borrow of the worker. If
            // that ever changed, the batch would wait for the next visit's flush.
            let mut slot = cell.try_borrow_mut().ok()?;
            let worker = slot.as_mut()?;
            worker.write_batch();
            worker.prefill_due()
        });
        // Spawned outside the borrow: the task may run at once, and it borrows the worker.
        if let Ok(Some((mcf, running))) = due {
            let task = crate::prefill::start(mcf, running);
            let _ = WORKER.try_with(|cell| {
                if let Ok(mut slot) = cell.try_borrow_mut() {
                    if let Some(worker) = slot.as_mut() {
                        worker.prefill = task;
                    }
                }
            });
        }
    });
}
