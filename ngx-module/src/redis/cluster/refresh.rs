//! Reading the slot map: a task on the event loop asks one node after another (the primaries
//! of the current map, then the seeds) for `CLUSTER SHARDS`, falling back to `CLUSTER SLOTS` on
//! a Redis older than 7, and leaves the first map it gets for the cluster to take.

use std::cell::RefCell;
use std::rc::Rc;

use ngx::async_::{spawn, Task};
use shortlink_wire::rules::Cidr;

use super::slots::SlotMap;
use crate::conf::PeerAddr;
use crate::events::EventShared;
use crate::redis::connection::{Conn, ConnRef, Timeouts};
use crate::redis::resp::Frame;
use crate::redis::RedisError;

/// Reads wanted in a row are at least this far apart: a burst of `-MOVED` during a reshard
/// costs one read, not one per lookup.
const MIN_GAP_MS: u64 = 100;

pub struct Refresh {
    seeds: Vec<PeerAddr>,
    timeouts: Timeouts,
    /// Whose replicas are read (`read_replicas=`).
    zone: Rc<[Cidr]>,
    wanted: bool,
    last_start: u64,
    /// Where the task leaves its result (`None` inside: every node failed).
    result: Rc<RefCell<Option<Option<SlotMap>>>>,
    task: Option<Task<()>>,
}

impl Refresh {
    pub fn new(seeds: Vec<PeerAddr>, timeouts: Timeouts, zone: &[Cidr]) -> Self {
        Self {
            seeds,
            timeouts,
            zone: zone.into(),
            wanted: false,
            last_start: 0,
            result: Rc::new(RefCell::new(None)),
            task: None,
        }
    }

    pub fn want(&mut self) {
        self.wanted = true;
    }

    pub fn last_start(&self) -> u64 {
        self.last_start
    }

    pub fn is_due(&self, now: u64) -> bool {
        self.wanted && self.task.is_none() && now.saturating_sub(self.last_start) >= MIN_GAP_MS
    }

    /// Starts a read from `primaries`, then the seeds.
    pub fn start(&mut self, now: u64, primaries: Vec<PeerAddr>, events: &Rc<EventShared>) {
        self.wanted = false;
        self.last_start = now;
        let mut candidates = primaries;
        candidates.extend_from_slice(&self.seeds);
        let task = spawn(read(
            candidates,
            self.timeouts,
            Rc::clone(&self.zone),
            Rc::clone(events),
            Rc::clone(&self.result),
        ));
        // ngx 0.5.1 may have run the task to its end already.
        if self.result.borrow().is_none() {
            self.task = Some(task);
        }
    }

    /// What the last task read, once it is done (`Some(None)`: every node failed, and the read
    /// is wanted again).
    pub fn take(&mut self) -> Option<Option<SlotMap>> {
        let done = self.result.borrow_mut().take()?;
        self.task = None;
        if done.is_none() {
            self.wanted = true;
        }
        Some(done)
    }

    pub fn stop(&mut self) {
        self.task = None;
    }
}

async fn read(
    candidates: Vec<PeerAddr>,
    timeouts: Timeouts,
    zone: Rc<[Cidr]>,
    events: Rc<EventShared>,
    result: Rc<RefCell<Option<Option<SlotMap>>>>,
) {
    let mut map = None;
    for peer in &candidates {
        let Ok(conn) = Conn::open_control(peer, timeouts, Rc::clone(&events)) else {
            continue;
        };
        let read = ask(&conn, &zone).await;
        if let Ok(mut c) = conn.try_borrow_mut() {
            c.close_now();
        }
        if let Ok(read) = read {
            map = Some(read);
            break;
        }
    }
    *result.borrow_mut() = Some(map);
}

/// The map as `conn`'s node sees it. A node that serves no slot (a lone node, a cluster not yet
/// formed) is not believed.
async fn ask(conn: &ConnRef, zone: &[Cidr]) -> Result<SlotMap, RedisError> {
    let shards = send(conn, b"SHARDS")?.await?;
    let map = match shards {
        Frame::Error(_) => SlotMap::from_slots(&send(conn, b"SLOTS")?.await?, zone),
        reply => SlotMap::from_shards(&reply, zone),
    };
    match map {
        Ok(map) if map.served_slots() > 0 => Ok(map),
        _ => Err(RedisError::BadValue),
    }
}

fn send(conn: &ConnRef, what: &[u8]) -> Result<crate::redis::Reply, RedisError> {
    match conn.try_borrow_mut() {
        Ok(mut c) if c.accepts_commands() => Ok(c.send(&[&[b"CLUSTER"], &[what]])),
        _ => Err(RedisError::Closed),
    }
}
