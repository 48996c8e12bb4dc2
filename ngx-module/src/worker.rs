//! State each worker process keeps for itself: the Redis pool and the cache.
//!
//! nginx runs a worker's module code on one thread, so a thread-local needs no locking. The
//! state is rebuilt when the configuration changes under it (single-process mode reloads).

use std::cell::RefCell;
use std::rc::Rc;

use crate::cache::{Cache, Cached};
use crate::conf::MainConf;
use crate::events::{Encoder, EventShared, Visit};
use crate::redis::{Pool, RedisError, Reply};
use crate::request::host::PoolMemo;
use crate::status::Counter;

/// Redis key prefix of link records (docs/ARCHITECTURE.md).
const KEY_PREFIX: &[u8] = b"sl:c:";

pub struct Worker {
    conf: *const MainConf,
    redis: Option<Pool>,
    cache: Option<Cache>,
    /// Parsed `shortlink_pool` values, when the pool comes from a variable.
    pub pools: PoolMemo,
    events: Rc<EventShared>,
    encoder: Encoder,
}

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// Runs `f` on this worker's state for `mcf`. `None` if the state is already in use further up
/// the stack (a re-entrant call), which callers treat as "no cache" / "Redis unavailable".
pub fn with<R>(mcf: &MainConf, f: impl FnOnce(&mut Worker) -> R) -> Option<R> {
    WORKER
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            if !matches!(&*slot, Some(w) if std::ptr::eq(w.conf, mcf)) {
                *slot = Some(Worker::new(mcf));
            }
            slot.as_mut().map(f)
        })
        .ok()
        .flatten()
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
        ));
        Self {
            conf: mcf,
            redis: mcf
                .redis
                .as_ref()
                .map(|redis| Pool::new(redis, Rc::clone(&events))),
            cache: mcf.cache_config().map(Cache::new),
            pools: PoolMemo::default(),
            events,
            encoder: Encoder::new(mcf.events_max_len()),
        }
    }

    /// Queues a visit event: on a connection if one is up, else in the spool. Never waits.
    pub fn track(&mut self, visit: &Visit<'_>) {
        self.events.add(Counter::EventsQueued, 1);
        let encoder = &self.encoder;
        match self.redis.as_mut() {
            Some(pool) => pool.send_event(|out| encoder.encode(out, visit)),
            None => self.events.add(Counter::EventsDropped, 1),
        }
    }

    pub fn cache(&mut self) -> Option<&mut Cache> {
        self.cache.as_mut()
    }

    /// Sends `GET sl:c:<code>`; the reply arrives through the returned future.
    pub fn lookup(&mut self, code: &[u8]) -> Result<Reply, RedisError> {
        self.redis
            .as_mut()
            .ok_or(RedisError::Unavailable)?
            .get(KEY_PREFIX, code)
    }

    pub fn remember(&mut self, code: &[u8], value: Cached, now_ms: u64) {
        if let Some(cache) = self.cache.as_mut() {
            cache.insert(code, value, now_ms);
        }
    }
}
