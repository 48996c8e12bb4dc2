//! A worker's connections to one Redis: a few keepalive connections, pipelined, opened on
//! demand, with a shared backoff after failures.

use std::cell::Cell;
use std::rc::Rc;

use shortlink_wire::event::{Batch, Encoder};

use super::backoff::Backoff;
use super::connection::{Conn, ConnRef, Reply, Timeouts};
use super::error::RedisError;
use super::resp;
use crate::conf::parse::RedisSpec;
use crate::conf::{PeerAddr, Redis};
use crate::events::{EventShared, Rerouted};
use crate::ffi::now_ms;

pub struct Pool {
    peer: PeerAddr,
    timeouts: Timeouts,
    max: usize,
    conns: Vec<ConnRef>,
    backoff: Rc<Cell<Backoff>>,
    events: Rc<EventShared>,
    /// Reads a cluster replica: every connection says `READONLY` first and takes no events.
    replica: bool,
}

impl Pool {
    pub fn new(redis: &Redis, events: Rc<EventShared>) -> Self {
        Self::for_peer(redis.peer, &redis.spec, events)
    }

    /// A pool to `peer` (a cluster node) with the settings of `spec`.
    pub fn for_peer(peer: PeerAddr, spec: &RedisSpec, events: Rc<EventShared>) -> Self {
        Self {
            peer,
            timeouts: Timeouts::of(spec),
            max: spec.connections,
            conns: Vec::with_capacity(spec.connections),
            backoff: Rc::new(Cell::new(Backoff::default())),
            events,
            replica: false,
        }
    }

    /// A pool that reads the cluster replica at `peer` (lookups only).
    pub fn for_replica(peer: PeerAddr, spec: &RedisSpec, events: Rc<EventShared>) -> Self {
        Self {
            replica: true,
            ..Self::for_peer(peer, spec, events)
        }
    }

    /// Queues an event command carrying `visits` on a connected connection, without waiting for
    /// anything. With none connected it goes to the spool (or is dropped when that is full), and
    /// a connection is started, unless backing off, so that the spool is flushed once Redis
    /// answers.
    pub fn send_event(&mut self, visits: usize, write: impl FnOnce(&mut Vec<u8>)) {
        self.conns
            .retain(|c| c.try_borrow().map_or(true, |c| !c.is_closed()));
        let ready = preferred(&self.conns, Conn::is_ready);
        if let Some(mut conn) = ready.and_then(|(_, c)| c.try_borrow_mut().ok()) {
            conn.send_event(visits, write);
            self.events.add(crate::status::Counter::EventsSent, visits);
            return;
        }
        // Spooled before a connection is opened: one that connects at once flushes the spool.
        self.events.spool(visits, write);
        if ready.is_some() {
            return; // connected, only busy further up the stack
        }
        let connecting = self
            .conns
            .iter()
            .any(|c| c.try_borrow().is_ok_and(|c| c.is_connecting()));
        if !connecting && !self.backoff.get().is_down(now_ms()) && self.conns.len() < self.max {
            if let Ok(conn) = self.open() {
                self.conns.push(conn);
            }
        }
    }

    /// [`Pool::send_event`] of `batch`'s `XADD`, on a ready connection by
    /// [`Conn::send_batch`] (which may take the batch's buffer instead of copying it).
    pub fn send_batch(&mut self, visits: usize, encoder: &Encoder, batch: &mut Batch) {
        self.conns
            .retain(|c| c.try_borrow().map_or(true, |c| !c.is_closed()));
        let ready = preferred(&self.conns, Conn::is_ready);
        if let Some(mut conn) = ready.and_then(|(_, c)| c.try_borrow_mut().ok()) {
            conn.send_batch(visits, encoder, batch);
            self.events.add(crate::status::Counter::EventsSent, visits);
            return;
        }
        self.send_event(visits, |out| encoder.write_command(out, batch));
    }

    /// Sends an event command a node redirected here ([`Rerouted`]) again: on a ready connection,
    /// after `ASKING` for an `-ASK`; with none ready, spooled like any event (a node that then
    /// gets it without `ASKING` redirects it once more).
    pub fn resend_event(&mut self, rerouted: Rerouted, asking: bool) {
        self.conns
            .retain(|c| c.try_borrow().map_or(true, |c| !c.is_closed()));
        let ready = preferred(&self.conns, Conn::is_ready);
        if let Some(mut conn) = ready.and_then(|(_, c)| c.try_borrow_mut().ok()) {
            let visits = rerouted.visits as usize;
            conn.resend_event(rerouted, asking);
            self.events.add(crate::status::Counter::EventsSent, visits);
            return;
        }
        let bytes = rerouted.command.bytes;
        self.send_event(rerouted.visits as usize, |out| {
            out.extend_from_slice(&bytes)
        });
    }

    /// Moves the worker's spool onto a ready connection; `false` when none is ready.
    pub fn flush_spool(&mut self) -> bool {
        if self.replica {
            return false;
        }
        let ready = preferred(&self.conns, Conn::is_ready);
        match ready.and_then(|(_, c)| c.try_borrow_mut().ok()) {
            Some(mut conn) => {
                conn.flush_spool();
                true
            }
            None => false,
        }
    }

    fn open(&self) -> Result<ConnRef, RedisError> {
        let open = if self.replica {
            Conn::open_reader
        } else {
            Conn::open
        };
        open(
            &self.peer,
            self.timeouts,
            Rc::clone(&self.backoff),
            Rc::clone(&self.events),
        )
    }

    /// Queues a command on the preferred connection ([`preferred`]); its reply arrives through the returned
    /// future. Each argument is given as parts that are concatenated (`resp::encode_command`).
    pub fn request(&mut self, args: &[&[&[u8]]]) -> Result<Reply, RedisError> {
        self.request_with(|out| resp::encode_command(out, args))
    }

    /// [`Pool::request`] of a command `write` appends to the connection's output.
    pub fn request_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<Reply, RedisError> {
        let conn = self.pick()?;
        let mut conn = conn.try_borrow_mut().map_err(|_| RedisError::Unavailable)?;
        Ok(conn.send_with(write))
    }

    /// Queues `ASKING` and then the command `write` appends on one connection (a cluster's `-ASK` redirection
    /// holds for the next command of the connection only); the reply to `ASKING` is dropped.
    pub fn request_asking(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Reply, RedisError> {
        let conn = self.pick()?;
        let mut conn = conn.try_borrow_mut().map_err(|_| RedisError::Unavailable)?;
        drop(conn.send(&[&[b"ASKING"]]));
        Ok(conn.send_with(write))
    }

    fn pick(&mut self) -> Result<ConnRef, RedisError> {
        self.conns
            .retain(|c| c.try_borrow().map_or(true, |c| !c.is_closed()));
        let chosen = preferred(&self.conns, Conn::accepts_commands);
        let down = self.backoff.get().is_down(now_ms());
        match chosen {
            Some((load, c)) if load < SPREAD_AT || down || self.conns.len() >= self.max => {
                return Ok(Rc::clone(c))
            }
            None if down => return Err(RedisError::Unavailable),
            _ => {}
        }
        let fallback = chosen.map(|(_, c)| Rc::clone(c));
        match self.open() {
            Ok(conn) => {
                self.conns.push(Rc::clone(&conn));
                Ok(conn)
            }
            Err(e) => fallback.ok_or(e),
        }
    }
}

/// Commands in flight on one connection before the pool spreads to another. Redis runs commands
/// one at a time, so a second connection adds no throughput, only more reads and writes on both
/// sides: measured on the uniform benchmark, lookups spread over two busy connections cost Redis
/// 25% more CPU each and the worker 8% more than lookups filling one. A deep queue is the reason
/// to spread: one slow reply should not hold every lookup of the worker.
const SPREAD_AT: usize = 256;

/// Of the connections that are `usable` (in pool order), the first with fewer than [`SPREAD_AT`]
/// commands in flight, else the least busy; with its load.
fn preferred(conns: &[ConnRef], usable: impl Fn(&Conn) -> bool) -> Option<(usize, &ConnRef)> {
    let mut least_busy: Option<(usize, &ConnRef)> = None;
    for c in conns {
        let Some(load) = c
            .try_borrow()
            .ok()
            .filter(|c| usable(c))
            .map(|c| c.in_flight())
        else {
            continue;
        };
        if load < SPREAD_AT {
            return Some((load, c));
        }
        if least_busy.is_none_or(|(least, _)| load < least) {
            least_busy = Some((load, c));
        }
    }
    least_busy
}
