//! A worker's connections to one Redis: a few keepalive connections, pipelined, opened on
//! demand, with a shared backoff after failures.

use std::cell::Cell;
use std::rc::Rc;

use super::backoff::Backoff;
use super::connection::{Conn, ConnRef, Reply, Timeouts};
use super::{now_ms, RedisError};
use crate::conf::{PeerAddr, Redis};
use crate::events::EventShared;

pub struct Pool {
    peer: PeerAddr,
    timeouts: Timeouts,
    max: usize,
    conns: Vec<ConnRef>,
    backoff: Rc<Cell<Backoff>>,
    events: Rc<EventShared>,
}

impl Pool {
    pub fn new(redis: &Redis, events: Rc<EventShared>) -> Self {
        Self {
            peer: redis.peer,
            timeouts: Timeouts {
                connect_ms: redis.spec.connect_timeout_ms,
                read_ms: redis.spec.read_timeout_ms,
            },
            max: redis.spec.connections,
            conns: Vec::with_capacity(redis.spec.connections),
            backoff: Rc::new(Cell::new(Backoff::default())),
            events,
        }
    }

    /// Queues an event command carrying `visits` on a connected connection, without waiting for
    /// anything. With none connected it goes to the spool (or is dropped when that is full), and
    /// a connection is started, unless backing off, so that the spool is flushed once Redis
    /// answers.
    pub fn send_event(&mut self, visits: usize, write: impl FnOnce(&mut Vec<u8>)) {
        self.conns
            .retain(|c| c.try_borrow().map_or(true, |c| !c.is_closed()));
        if !self
            .conns
            .iter()
            .any(|c| c.try_borrow().is_ok_and(|c| c.is_ready()))
        {
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
        let ready = self
            .conns
            .iter()
            .filter_map(|c| {
                let c = c.try_borrow_mut().ok().filter(|c| c.is_ready())?;
                Some((c.in_flight(), c))
            })
            .min_by_key(|(load, _)| *load);
        match ready {
            Some((_, mut conn)) => {
                conn.send_event(visits, write);
                self.events.add(crate::status::Counter::EventsSent, visits);
            }
            None => self.events.spool(visits, write),
        }
    }

    fn open(&self) -> Result<ConnRef, RedisError> {
        Conn::open(
            &self.peer,
            self.timeouts,
            Rc::clone(&self.backoff),
            Rc::clone(&self.events),
        )
    }

    /// Queues a command on the least busy connection; its reply arrives through the returned
    /// future. Each argument is given as parts that are concatenated (`resp::encode_command`).
    pub fn request(&mut self, args: &[&[&[u8]]]) -> Result<Reply, RedisError> {
        let conn = self.pick()?;
        let mut conn = conn.try_borrow_mut().map_err(|_| RedisError::Unavailable)?;
        Ok(conn.send(args))
    }

    fn pick(&mut self) -> Result<ConnRef, RedisError> {
        self.conns
            .retain(|c| c.try_borrow().map_or(true, |c| !c.is_closed()));
        let least_busy = self
            .conns
            .iter()
            .filter_map(|c| {
                let load = c
                    .try_borrow()
                    .ok()
                    .filter(|c| c.accepts_commands())?
                    .in_flight();
                Some((load, c))
            })
            .min_by_key(|(load, _)| *load);
        let down = self.backoff.get().is_down(now_ms());
        match least_busy {
            // Pipelining makes one connection enough; open another only while all are busy.
            Some((load, c)) if load == 0 || down || self.conns.len() >= self.max => {
                return Ok(Rc::clone(c))
            }
            None if down => return Err(RedisError::Unavailable),
            _ => {}
        }
        let fallback = least_busy.map(|(_, c)| Rc::clone(c));
        match self.open() {
            Ok(conn) => {
                self.conns.push(Rc::clone(&conn));
                Ok(conn)
            }
            Err(e) => fallback.ok_or(e),
        }
    }
}
