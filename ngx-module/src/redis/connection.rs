//! One pipelined Redis connection driven by nginx events.
//!
//! Commands are appended to an output buffer and flushed from a posted write event, so every
//! lookup started during one pass of the event loop leaves in a single `send`. Replies come back
//! in order, so a FIFO of reply slots is all the bookkeeping pipelining needs. Waiting tasks are
//! woken only after the connection is no longer borrowed: a woken task runs at once and may
//! queue its next command on this same connection.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ffi::c_int;
use std::rc::Rc;
use std::{mem, ptr};

use nginx_sys::{
    ngx_add_timer, ngx_close_connection, ngx_connection_log_error_e_NGX_ERROR_ERR,
    ngx_connection_t, ngx_cycle, ngx_del_timer, ngx_event_connect_peer, ngx_event_get_peer,
    ngx_event_t, ngx_exiting, ngx_handle_read_event, ngx_handle_write_event, ngx_peer_connection_t,
    ngx_post_event, ngx_posted_events, NGX_AGAIN, NGX_LOG_ERR, NGX_OK,
};
use ngx::ngx_log_error;

use super::backoff::Backoff;
use super::error::RedisError;
use super::resp::{self, Frame};
use super::track_state::TrackState;
use crate::conf::PeerAddr;
use crate::events::{EventShared, Rerouted};
use crate::ffi;
use crate::ffi::now_ms;
use crate::status::Counter;

mod events;
mod reply;
pub use reply::Reply;
use reply::{redirection, Pending, Slot};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Connecting,
    Ready,
    Closed,
}

#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect_ms: u64,
    pub read_ms: u64,
}

impl Timeouts {
    pub fn of(spec: &crate::conf::parse::RedisSpec) -> Self {
        Self {
            connect_ms: spec.connect_timeout_ms,
            read_ms: spec.read_timeout_ms,
        }
    }
}

pub struct Conn {
    pc: ngx_peer_connection_t,
    state: State,
    out: Vec<u8>,
    sent: usize,
    inbuf: Vec<u8>,
    pending: VecDeque<Pending>,
    /// When the oldest outstanding reply last saw progress.
    waiting_since: u64,
    timeouts: Timeouts,
    backoff: Rc<Cell<Backoff>>,
    /// Replies ready to hand over once the connection is no longer borrowed.
    done: Vec<(Rc<Slot>, Result<Frame, RedisError>)>,
    /// Slots whose replies were handed over, kept for the next commands: once their task has
    /// dropped its `Reply` they are this list's alone, and reusing one spares a lookup an
    /// allocation and a free (about 250 instructions, callgrind, issue 82).
    spare: Vec<Rc<Slot>>,
    /// The worker's visit-event spool (flushed here when the connection comes up) and counters.
    events: Rc<EventShared>,
    /// Set on the invalidation connection: frames nobody asked for are reports for the cache,
    /// and visit events never go here.
    track: Option<Rc<TrackState>>,
    /// Whether spooled visit events may leave here: not on a cluster's slot-map query, and not
    /// on a replica read (a replica refuses writes).
    takes_events: bool,
}

pub type ConnRef = Rc<RefCell<Conn>>;

const READ_CHUNK: usize = 16 * 1024;
/// Buffers grown by an unusually large reply are given back above this size.
const KEEP_CAPACITY: usize = 64 * 1024;

impl Conn {
    /// Starts connecting; commands may be queued at once and leave when the connect completes.
    pub fn open(
        peer: &PeerAddr,
        timeouts: Timeouts,
        backoff: Rc<Cell<Backoff>>,
        events: Rc<EventShared>,
    ) -> Result<ConnRef, RedisError> {
        Self::open_with(peer, timeouts, backoff, events, None, true)
    }

    /// Opens a connection that reads a cluster replica: `READONLY` goes first (its reply is
    /// dropped; a replica that refused it answers lookups with `-MOVED`, which they follow).
    pub fn open_reader(
        peer: &PeerAddr,
        timeouts: Timeouts,
        backoff: Rc<Cell<Backoff>>,
        events: Rc<EventShared>,
    ) -> Result<ConnRef, RedisError> {
        let conn = Self::open_with(peer, timeouts, backoff, events, None, false)?;
        drop(conn.borrow_mut().send(&[&[b"READONLY"]]));
        Ok(conn)
    }

    /// Opens the invalidation connection ([`super::tracking`]).
    pub fn open_tracking(
        peer: &PeerAddr,
        timeouts: Timeouts,
        backoff: Rc<Cell<Backoff>>,
        events: Rc<EventShared>,
        track: Rc<TrackState>,
    ) -> Result<ConnRef, RedisError> {
        Self::open_with(peer, timeouts, backoff, events, Some(track), false)
    }

    /// Opens a connection that never takes spooled visit events (a cluster's slot map query).
    pub fn open_control(
        peer: &PeerAddr,
        timeouts: Timeouts,
        events: Rc<EventShared>,
    ) -> Result<ConnRef, RedisError> {
        let backoff = Rc::new(Cell::new(Backoff::default()));
        Self::open_with(peer, timeouts, backoff, events, None, false)
    }

    fn open_with(
        peer: &PeerAddr,
        timeouts: Timeouts,
        backoff: Rc<Cell<Backoff>>,
        events: Rc<EventShared>,
        track: Option<Rc<TrackState>>,
        takes_events: bool,
    ) -> Result<ConnRef, RedisError> {
        // SAFETY: an all-zero peer connection is nginx's documented starting state.
        let mut pc: ngx_peer_connection_t = unsafe { mem::zeroed() };
        pc.sockaddr = peer.sockaddr;
        pc.socklen = peer.socklen;
        pc.name = peer.name;
        pc.get = Some(ngx_event_get_peer);
        // Pooled connections outlive requests, so they log to the cycle, not to a request.
        // SAFETY: ngx_cycle is set before any worker code runs.
        pc.log = unsafe { (*ngx_cycle).log };
        pc.set_log_error(ngx_connection_log_error_e_NGX_ERROR_ERR);

        let conn = Rc::new(RefCell::new(Conn {
            pc,
            state: State::Connecting,
            out: Vec::new(),
            sent: 0,
            inbuf: Vec::new(),
            pending: VecDeque::new(),
            waiting_since: 0,
            timeouts,
            backoff,
            done: Vec::new(),
            spare: Vec::new(),
            events,
            track,
            takes_events,
        }));
        let mut me = conn.borrow_mut();
        // SAFETY: `pc` is fully initialised for a TCP (or unix) stream connect.
        let rc = unsafe { ngx_event_connect_peer(&mut me.pc) };
        if rc != NGX_OK as isize && rc != NGX_AGAIN as isize {
            // nginx has already logged why and closed the socket.
            me.pc.connection = ptr::null_mut();
            me.state = State::Closed;
            me.note_failure();
            return Err(RedisError::Unavailable);
        }
        // SAFETY: on NGX_OK/NGX_AGAIN nginx hands us a live connection. Its `data` points at
        // the RefCell inside `conn`'s allocation, which outlives the connection: Drop closes it.
        unsafe {
            let c = &mut *me.pc.connection;
            c.data = Rc::as_ptr(&conn).cast_mut().cast();
            c.set_idle(1);
            (*c.read).handler = Some(on_read);
            (*c.write).handler = Some(on_write);
            if rc == NGX_AGAIN as isize {
                ngx_add_timer(c.write, timeouts.connect_ms as _);
            } else {
                me.state = State::Ready;
                me.flush_spool();
            }
        }
        drop(me);
        Ok(conn)
    }

    /// Closed connections are dropped from the pool; closing ones only finish their replies.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    pub fn accepts_commands(&self) -> bool {
        // SAFETY: `pc.connection` is null or the live connection this struct owns.
        self.state != State::Closed
            && unsafe { self.pc.connection.as_ref() }.is_some_and(|c| c.close() == 0)
    }

    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Connected and taking commands: what visit events need (they never wait on a connect).
    pub fn is_ready(&self) -> bool {
        self.state == State::Ready && self.accepts_commands()
    }

    pub fn is_connecting(&self) -> bool {
        self.state == State::Connecting
    }

    /// Queues a command; its reply arrives through the returned future. Must only be called
    /// when `accepts_commands()`.
    pub fn send(&mut self, args: &[&[&[u8]]]) -> Reply {
        self.send_with(|out| resp::encode_command(out, args))
    }

    /// [`Conn::send`] of a command `write` appends to the output (one encoded ahead, such as
    /// a `resp::KeyedCommand`).
    pub fn send_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Reply {
        write(&mut self.out);
        let slot = self.free_slot();
        self.queued(Pending::Wait(Rc::clone(&slot)));
        Reply(slot)
    }

    /// The last spare slot if no task holds it any more (emptied: a task that gave up leaves
    /// its reply there), else a new one.
    fn free_slot(&mut self) -> Rc<Slot> {
        match self.spare.pop() {
            Some(slot) if Rc::strong_count(&slot) == 1 => {
                slot.result.take();
                slot.waker.take();
                slot
            }
            Some(busy) => {
                self.spare.push(busy);
                Rc::new(Slot::default())
            }
            None => Rc::new(Slot::default()),
        }
    }

    /// Books a command just appended to `out` and schedules the write.
    fn queued(&mut self, kind: Pending) {
        if self.pending.is_empty() {
            self.waiting_since = now_ms();
            self.arm_read_timer(self.timeouts.read_ms);
        }
        self.pending.push_back(kind);
        let c = self.pc.connection;
        if self.state == State::Ready && !c.is_null() {
            // Flush after the current batch of events, so concurrent lookups share a write.
            // SAFETY: the write event belongs to our live connection; posting is idempotent
            // and ngx_close_connection unposts it.
            unsafe { ngx_post_event((*c).write, ptr::addr_of_mut!(ngx_posted_events)) };
        }
    }

    /// The live nginx connection, or null once closed.
    fn raw(&self) -> *mut ngx_connection_t {
        self.pc.connection
    }

    fn arm_read_timer(&self, ms: u64) {
        let c = self.raw();
        if c.is_null() {
            return;
        }
        // SAFETY: the read event of our live connection. Not cancelable on purpose: a worker
        // shutting down gracefully waits for outstanding replies (bounded by this timer).
        unsafe {
            if (*(*c).read).timer_set() == 0 {
                ngx_add_timer((*c).read, ms as _);
            }
        }
    }

    fn disarm(ev: *mut ngx_event_t) {
        // SAFETY: callers pass an event of our live connection.
        unsafe {
            if (*ev).timer_set() != 0 {
                ngx_del_timer(ev);
            }
        }
    }

    fn on_write(&mut self, wev: &mut ngx_event_t) {
        match self.state {
            State::Connecting if wev.timedout() != 0 => {
                self.log("connect to redis timed out");
                self.note_failure();
                self.fail(RedisError::Timeout);
            }
            State::Connecting => self.finish_connect(),
            State::Ready => self.flush(),
            State::Closed => {}
        }
    }

    fn on_read(&mut self, rev: &mut ngx_event_t) {
        if rev.timedout() != 0 {
            rev.set_timedout(0);
            self.on_read_timer();
            return;
        }
        match self.state {
            // With epoll a refused connect is reported on both events.
            State::Connecting => self.finish_connect(),
            State::Ready => self.receive(),
            State::Closed => {}
        }
        self.close_if_done();
    }

    fn finish_connect(&mut self) {
        let c = self.raw();
        if c.is_null() {
            return;
        }
        let mut err: c_int = 0;
        let mut len = mem::size_of::<c_int>() as nginx_sys::socklen_t;
        // SAFETY: getsockopt on our own socket into a properly sized integer.
        let rc = unsafe {
            nginx_sys::getsockopt(
                (*c).fd,
                nginx_sys::SOL_SOCKET as c_int,
                nginx_sys::SO_ERROR as c_int,
                ptr::addr_of_mut!(err).cast(),
                &mut len,
            )
        };
        if rc == -1 || err != 0 {
            let err = if rc == -1 {
                nginx_sys::ngx_socket_errno()
            } else {
                err
            };
            self.log(&format!(
                "connect to redis failed: {}",
                std::io::Error::from_raw_os_error(err)
            ));
            self.note_failure();
            self.fail(RedisError::Unavailable);
            return;
        }
        // SAFETY: `c` is live (checked above, not closed since).
        Self::disarm(unsafe { (*c).write });
        self.state = State::Ready;
        self.backoff.set(Backoff::default());
        self.flush_spool();
        self.flush();
    }

    fn flush(&mut self) {
        while self.sent < self.out.len() {
            let c = self.raw();
            if c.is_null() {
                return;
            }
            let chunk = &self.out[self.sent..];
            // SAFETY: `send` is always set on a live connection; the buffer is ours.
            let n =
                unsafe { (*c).send.unwrap_unchecked()(c, chunk.as_ptr().cast_mut(), chunk.len()) };
            if n > 0 {
                self.sent += n as usize;
            } else if n == NGX_AGAIN as isize {
                // SAFETY: re-arms the write event of our live connection.
                if unsafe { ngx_handle_write_event((*c).write, 0) } != NGX_OK as isize {
                    self.fail(RedisError::Closed);
                }
                return;
            } else {
                self.fail(RedisError::Closed);
                return;
            }
        }
        self.out.clear();
        self.sent = 0;
        if self.out.capacity() > KEEP_CAPACITY {
            self.out.shrink_to(READ_CHUNK);
        }
    }

    fn receive(&mut self) {
        loop {
            let c = self.raw();
            if c.is_null() {
                return;
            }
            if self.inbuf.capacity() - self.inbuf.len() < READ_CHUNK / 4 {
                self.inbuf.reserve(READ_CHUNK);
            }
            let spare = self.inbuf.spare_capacity_mut();
            // SAFETY: `recv` is always set on a live connection and writes at most
            // `spare.len()` bytes into memory we own.
            let n =
                unsafe { (*c).recv.unwrap_unchecked()(c, spare.as_mut_ptr().cast(), spare.len()) };
            if n > 0 {
                // SAFETY: recv initialised the first `n` spare bytes.
                unsafe { self.inbuf.set_len(self.inbuf.len() + n as usize) };
                if self.take_replies().is_err() {
                    return;
                }
                // `take_replies` may have closed the connection; otherwise read while ready.
                // SAFETY: `c` is checked live before its read event is looked at.
                if self.raw().is_null() || unsafe { (*(*c).read).ready() } == 0 {
                    break;
                }
            } else if n == NGX_AGAIN as isize {
                break;
            } else {
                if !self.pending.is_empty() {
                    self.log("redis closed the connection");
                }
                self.fail(RedisError::Closed);
                return;
            }
        }
        let c = self.raw();
        // SAFETY: re-arms the read event of our live connection.
        if !c.is_null() && unsafe { ngx_handle_read_event((*c).read, 0) } != NGX_OK as isize {
            self.fail(RedisError::Closed);
        }
    }

    /// Hands every complete reply in the buffer to the oldest waiting slot.
    fn take_replies(&mut self) -> Result<(), ()> {
        let mut used = 0;
        let mut event_errors = 0;
        loop {
            let rest = &self.inbuf[used..];
            if rest.is_empty() {
                break;
            }
            if let Some(track) = &self.track {
                // Reports arrive between replies: parse everything, hand reports over.
                match resp::parse(rest) {
                    Ok(Some((frame, n))) if track.on_push(&frame) => {
                        used += n;
                        continue;
                    }
                    Ok(None) => break,
                    _ => {}
                }
            }
            // Replies nobody reads are only measured: no allocation per visit event.
            let step = match self.pending.front() {
                Some(Pending::Wait(_)) => {
                    resp::parse(rest).map(|r| r.map(|(frame, n)| (n, Some(frame), false)))
                }
                Some(_) => resp::skip(rest).map(|r| r.map(|(n, error)| (n, None, error))),
                None => {
                    self.log("unexpected reply from redis");
                    self.fail(RedisError::Protocol);
                    return Err(());
                }
            };
            match step {
                Ok(Some((n, frame, error))) => {
                    used += n;
                    self.waiting_since = now_ms();
                    match (self.pending.pop_front(), frame) {
                        (Some(Pending::Wait(slot)), Some(frame)) => {
                            self.done.push((slot, Ok(frame)))
                        }
                        (Some(Pending::Event { visits, command }), _) if error => {
                            match (command, redirection(&rest[..n])) {
                                (Some(command), Some(error)) => self.events.reroute(Rerouted {
                                    error: error.to_vec(),
                                    visits,
                                    command,
                                }),
                                _ => event_errors += visits as usize,
                            }
                        }
                        _ => {}
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.log(&format!("bad reply from redis: {e}"));
                    self.fail(RedisError::Protocol);
                    return Err(());
                }
            }
        }
        if event_errors > 0 {
            self.events.add(Counter::EventsFailed, event_errors);
        }
        self.inbuf.drain(..used);
        if self.inbuf.is_empty() && self.inbuf.capacity() > KEEP_CAPACITY {
            self.inbuf.shrink_to(READ_CHUNK);
        }
        let c = self.raw();
        if self.pending.is_empty() && !c.is_null() {
            // SAFETY: `c` is our live connection.
            Self::disarm(unsafe { (*c).read });
        }
        Ok(())
    }

    /// The read timer is armed once per wait and judged on expiry, instead of being re-armed
    /// on every reply (nginx skips timer updates that move less than 300 ms anyway).
    fn on_read_timer(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let waited = now_ms().saturating_sub(self.waiting_since);
        if waited < self.timeouts.read_ms {
            self.arm_read_timer(self.timeouts.read_ms - waited);
            return;
        }
        self.log("redis read timed out");
        self.note_failure();
        self.fail(RedisError::Timeout);
    }

    /// Graceful shutdown asks idle connections to close (`c->close`); one with replies still
    /// outstanding closes when they are in.
    fn close_if_done(&mut self) {
        let c = self.raw();
        if c.is_null() || !self.pending.is_empty() {
            return;
        }
        // SAFETY: `c` is our live connection; `ngx_exiting` is a plain global of this thread.
        let (asked, exiting) = unsafe { ((*c).close() != 0, ngx_exiting != 0) };
        if asked || exiting {
            self.fail(RedisError::Closed);
        }
    }

    fn note_failure(&self) {
        let mut b = self.backoff.get();
        b.failed(now_ms());
        self.backoff.set(b);
    }

    /// Closes the socket now, failing whatever is outstanding.
    pub fn close_now(&mut self) {
        self.fail(RedisError::Closed);
    }

    /// Closes the socket and fails every outstanding reply with `why`.
    fn fail(&mut self, why: RedisError) {
        self.close_socket();
        self.state = State::Closed;
        if let Some(track) = &self.track {
            track.on_closed();
        }
        let mut lost_events = 0;
        for pending in self.pending.drain(..) {
            match pending {
                Pending::Wait(slot) => self.done.push((slot, Err(why))),
                Pending::Event { visits, .. } => lost_events += visits as usize,
            }
        }
        if lost_events > 0 {
            self.events.add(Counter::EventsFailed, lost_events);
        }
        self.out.clear();
        self.sent = 0;
        self.inbuf.clear();
    }

    fn close_socket(&mut self) {
        let c = self.raw();
        if !c.is_null() {
            // SAFETY: closes our live connection exactly once; nginx removes its timers and
            // posted events, so no handler sees `data` again.
            unsafe { ngx_close_connection(c) };
            self.pc.connection = ptr::null_mut();
        }
    }

    fn log(&self, msg: &str) {
        let name = if self.pc.name.is_null() {
            String::new()
        } else {
            // SAFETY: `pc.name` points at the configured address string.
            unsafe { (*self.pc.name).to_string() }
        };
        ngx_log_error!(NGX_LOG_ERR, self.pc.log, "shortlink: {msg} ({name})");
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Waiting tasks are not woken from here: their own deadline ends them.
        self.close_socket();
    }
}

extern "C" fn on_read(ev: *mut ngx_event_t) {
    ffi::guard((), || dispatch(ev, Conn::on_read));
}

extern "C" fn on_write(ev: *mut ngx_event_t) {
    ffi::guard((), || dispatch(ev, Conn::on_write));
}

/// Spare reply slots a connection keeps: about as many as lookups in flight on it.
const MAX_SPARE_SLOTS: usize = 64;

/// Runs an event on its connection, then wakes the tasks whose replies came in.
fn dispatch(ev: *mut ngx_event_t, handle: fn(&mut Conn, &mut ngx_event_t)) {
    // SAFETY: nginx calls our handlers only for events of connections set up in `Conn::open`,
    // whose `data` is the RefCell of a live `Rc<RefCell<Conn>>` (Drop closes the connection
    // before the allocation goes). Taking a strong count keeps it alive through the wake-ups
    // below, which may drop the pool's reference.
    let (ev, conn) = unsafe {
        let c = (*ev).data.cast::<ngx_connection_t>();
        let cell = (*c).data.cast::<RefCell<Conn>>().cast_const();
        Rc::increment_strong_count(cell);
        (&mut *ev, Rc::from_raw(cell))
    };
    let mut done = match conn.try_borrow_mut() {
        Ok(mut me) => {
            handle(&mut me, ev);
            mem::take(&mut me.done)
        }
        Err(_) => return,
    };
    for (slot, result) in done.drain(..) {
        slot.result.set(Some(result));
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
        if let Ok(mut me) = conn.try_borrow_mut() {
            if me.spare.len() < MAX_SPARE_SLOTS {
                me.spare.push(slot);
            }
        }
    }
    // Give the emptied vector back so the next batch does not allocate.
    if let Ok(mut me) = conn.try_borrow_mut() {
        if me.done.capacity() == 0 {
            me.done = done;
        }
    };
}
