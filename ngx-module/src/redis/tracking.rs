//! Cache coherence through Redis server-assisted client-side caching.
//!
//! Each worker holds one connection that asks Redis to report every change of an `sl:c:` key
//! (`CLIENT TRACKING ON REDIRECT <own id> BCAST PREFIX sl:c:`) and then subscribes to
//! `__redis__:invalidate`, so the reports arrive on that same connection as RESP2 pub/sub
//! messages. One connection rather than a tracking client redirecting to a separate subscriber:
//! tracking and delivery then die together, and a dead connection is something the worker sees
//! (a RESP2 subscriber that vanished would make Redis drop reports silently). RESP2 rather than
//! `HELLO 3` pushes: the lookup connections and the shared RESP reader stay as they are.
//!
//! The cache is trusted only while the subscription is up and answers pings; the state below
//! says so, and counts every report and every change of trust so that a lookup answered across
//! one of them is not cached (its value may predate the change).

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use ngx::async_::{sleep, spawn, Task};

use super::backoff::Backoff;
use super::connection::{Conn, ConnRef, Timeouts};
use super::error::RedisError;
use super::resp::Frame;
pub use super::track_state::{Pending, TrackState};
use super::track_state::{CHANNEL, LINK_PREFIX};
use crate::conf::{PeerAddr, Redis};
use crate::events::EventShared;
use crate::ffi::now_ms;

/// How often an idle subscription proves it is alive. A Redis that stopped answering (a frozen
/// replica, a cut network) stops sending invalidations too: within this plus the read timeout
/// the cache is no longer trusted.
pub const PING_EVERY_MS: u64 = 500;

/// The worker's invalidation connection, reopened (with backoff) when it breaks.
pub struct Tracker {
    peer: PeerAddr,
    timeouts: Timeouts,
    backoff: Rc<Cell<Backoff>>,
    events: Rc<EventShared>,
    state: Rc<TrackState>,
    conn: Option<ConnRef>,
    task: Option<Task<()>>,
}

impl Tracker {
    pub fn new(redis: &Redis, events: Rc<EventShared>) -> Self {
        Self::for_peer(redis.peer, Timeouts::of(&redis.spec), events)
    }

    /// The invalidation connection to `peer` (one per primary of a cluster).
    pub fn for_peer(peer: PeerAddr, timeouts: Timeouts, events: Rc<EventShared>) -> Self {
        Self {
            peer,
            timeouts,
            backoff: Rc::new(Cell::new(Backoff::default())),
            events,
            state: Rc::new(TrackState::default()),
            conn: None,
            task: None,
        }
    }

    pub fn state(&self) -> &TrackState {
        &self.state
    }

    /// Reopens the subscription if it is gone and not backing off. Cheap when it is up: that
    /// test is inlined into every cache read, the reopening kept out of line.
    #[inline]
    pub fn ensure(&mut self) {
        let alive = self
            .conn
            .as_ref()
            .is_some_and(|c| c.try_borrow().map_or(true, |c| !c.is_closed()));
        if !alive {
            self.reopen();
        }
    }

    #[cold]
    #[inline(never)]
    fn reopen(&mut self) {
        if self.backoff.get().is_down(now_ms()) {
            return;
        }
        self.state.on_closed();
        self.task = None;
        self.conn = None;
        let Ok(conn) = Conn::open_tracking(
            &self.peer,
            self.timeouts,
            Rc::clone(&self.backoff),
            Rc::clone(&self.events),
            Rc::clone(&self.state),
        ) else {
            return;
        };
        self.conn = Some(Rc::clone(&conn));
        let task = spawn(subscribe(conn, Rc::clone(&self.state)));
        self.task = Some(task);
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task = None;
        if let Some(conn) = self.conn.take() {
            if let Ok(mut c) = conn.try_borrow_mut() {
                c.close_now();
            }
        }
    }
}

/// Subscribes, then pings until the connection fails; the connection marks the state down.
async fn subscribe(conn: ConnRef, state: Rc<TrackState>) {
    if handshake(&conn).await.is_err() {
        close(&conn);
        return;
    }
    state.set_up(true);
    loop {
        sleep(Duration::from_millis(PING_EVERY_MS)).await;
        let reply = match conn.try_borrow_mut() {
            Ok(mut c) if c.accepts_commands() => c.send(&[&[b"PING"]]),
            _ => break,
        };
        match reply.await {
            Ok(Frame::Array(_)) => {}
            _ => break,
        }
    }
    close(&conn);
}

fn close(conn: &ConnRef) {
    if let Ok(mut c) = conn.try_borrow_mut() {
        c.close_now();
    }
}

async fn handshake(conn: &ConnRef) -> Result<(), RedisError> {
    let id = send(conn, &[&[b"CLIENT"], &[b"ID"]])?.await?;
    let Frame::Integer(id) = id else {
        return Err(RedisError::Protocol);
    };
    let id = id.to_string();
    let tracking = send(
        conn,
        &[
            &[b"CLIENT"],
            &[b"TRACKING"],
            &[b"ON"],
            &[b"REDIRECT"],
            &[id.as_bytes()],
            &[b"BCAST"],
            &[b"PREFIX"],
            &[LINK_PREFIX],
        ],
    )?;
    let subscribed = send(conn, &[&[b"SUBSCRIBE"], &[CHANNEL]])?;
    match tracking.await? {
        Frame::Simple(ok) if ok == b"OK" => {}
        _ => return Err(RedisError::ErrorReply),
    }
    match subscribed.await? {
        Frame::Array(items) if items.first() == Some(&Frame::Bulk(b"subscribe".to_vec())) => Ok(()),
        _ => Err(RedisError::ErrorReply),
    }
}

fn send(conn: &ConnRef, args: &[&[&[u8]]]) -> Result<super::Reply, RedisError> {
    match conn.try_borrow_mut() {
        Ok(mut c) if c.accepts_commands() => Ok(c.send(args)),
        _ => Err(RedisError::Closed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(keys: Frame) -> Frame {
        Frame::Array(vec![
            Frame::Bulk(b"message".to_vec()),
            Frame::Bulk(CHANNEL.to_vec()),
            keys,
        ])
    }

    #[test]
    fn reports_evict_codes_and_null_flushes() {
        let s = TrackState::default();
        assert_eq!(s.ticket(), None);
        s.set_up(true);
        assert!(matches!(s.take(), Pending::Flush));
        let t = s.ticket().unwrap();
        assert!(s.on_push(&message(Frame::Array(vec![
            Frame::Bulk(b"sl:c:abc".to_vec()),
            Frame::Bulk(b"other".to_vec()),
        ]))));
        assert_ne!(s.ticket(), Some(t));
        match s.take() {
            Pending::Evict(codes) => assert_eq!(codes, vec![b"abc".to_vec()]),
            _ => panic!("expected evictions"),
        }
        assert!(matches!(s.take(), Pending::Nothing));
        assert!(s.on_push(&message(Frame::Null)));
        assert!(matches!(s.take(), Pending::Flush));
        // Replies to PING are not reports.
        assert!(!s.on_push(&Frame::Array(vec![
            Frame::Bulk(b"pong".to_vec()),
            Frame::Bulk(vec![]),
        ])));
        s.on_closed();
        assert_eq!(s.ticket(), None);
    }
}
