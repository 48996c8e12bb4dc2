//! The bounded per-worker spool (`shortlink_events_buffer`): encoded event commands waiting
//! while Redis is unreachable, and the counters every part of the event path shares.

use std::cell::{Cell, RefCell};
use std::ptr;

use nginx_sys::{ngx_add_timer, ngx_event_t, ngx_post_event, ngx_posted_events};

use crate::conf::SpoolLimits;
use crate::status::{Counter, Counters};

/// Encoded event commands (each carrying one or more visits), bounded by visits and by bytes.
/// One contiguous buffer: flushing it is a single copy onto the connection's output.
#[derive(Debug)]
pub struct Spool {
    buf: Vec<u8>,
    /// Each spooled command, in order.
    commands: Vec<Spooled>,
    visits: usize,
    limits: SpoolLimits,
}

impl Spool {
    pub fn new(limits: SpoolLimits) -> Self {
        Self {
            buf: Vec::new(),
            commands: Vec::new(),
            visits: 0,
            limits,
        }
    }

    /// Visits spooled.
    pub fn len(&self) -> usize {
        self.visits
    }

    pub fn is_empty(&self) -> bool {
        self.visits == 0
    }

    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Encodes one command carrying `visits` into the spool; `false` (and nothing kept) when it
    /// does not fit.
    pub fn push(&mut self, visits: usize, write: impl FnOnce(&mut Vec<u8>)) -> bool {
        if self.visits + visits > self.limits.events {
            return false;
        }
        let before = self.buf.len();
        write(&mut self.buf);
        if self.buf.len() > self.limits.bytes {
            self.buf.truncate(before);
            return false;
        }
        self.visits += visits;
        self.commands.push(Spooled {
            visits: visits as u32,
            len: (self.buf.len() - before) as u32,
        });
        true
    }

    /// Moves every spooled command to the end of `out`, in order.
    pub fn drain_into(&mut self, out: &mut Vec<u8>) -> Vec<Spooled> {
        out.extend_from_slice(&self.buf);
        self.buf.clear();
        if self.buf.capacity() > 64 * 1024 {
            // A spool that grew during an outage gives its memory back once flushed.
            self.buf.shrink_to(16 * 1024);
        }
        self.visits = 0;
        std::mem::take(&mut self.commands)
    }
}

/// One command of the spool: the visits it carries and its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spooled {
    pub visits: u32,
    pub len: u32,
}

/// An event command a cluster node did not run because its stream's slot is elsewhere
/// (`-MOVED`) or moving (`-ASK`): nothing of it was stored, so it is sent again, as it is, to the
/// node the error names.
#[derive(Debug)]
pub struct Rerouted {
    /// The error reply without its `-` and line end: `MOVED <slot> <ip:port>` or `ASK ...`.
    pub error: Vec<u8>,
    pub visits: u32,
    pub command: KeptCommand,
}

/// An event command's bytes, kept on a cluster until its reply.
#[derive(Debug)]
pub struct KeptCommand {
    pub bytes: Box<[u8]>,
    /// Redirections it has followed in a row; see [`MAX_REDIRECTS`].
    pub redirects: u8,
}

/// Redirections an event command follows in a row; a reshard asks for two at most (`-ASK` while
/// its slot moves, `-MOVED` once it has). More means nodes that disagree on the slot's owner
/// bounce it between them: it then waits in the spool for them to agree.
pub const MAX_REDIRECTS: u8 = 5;

/// A worker's spool and counters, shared by its Redis pool and connections (a connection that
/// comes up flushes the spool itself).
pub struct EventShared {
    pub spool: RefCell<Spool>,
    stats: Option<&'static Counters>,
    /// On a cluster, connections keep a copy of each event command until its reply, so that a
    /// redirected one can be sent again ([`Rerouted`]). One Redis never redirects: no copies.
    keep_commands: bool,
    rerouted: RefCell<Vec<Rerouted>>,
    /// The worker's flush event, posted when a command is rerouted so that it leaves without
    /// waiting for the next visit; null while the worker has none.
    wake: Cell<*mut ngx_event_t>,
}

impl EventShared {
    pub fn new(limits: SpoolLimits, stats: Option<&'static Counters>, cluster: bool) -> Self {
        Self {
            spool: RefCell::new(Spool::new(limits)),
            stats,
            keep_commands: cluster,
            rerouted: RefCell::new(Vec::new()),
            wake: Cell::new(ptr::null_mut()),
        }
    }

    /// Whether connections keep each event command until its reply (a cluster's).
    pub fn keeps_commands(&self) -> bool {
        self.keep_commands
    }

    /// Sets (or, with null, clears) the event posted when a command is rerouted. The caller
    /// keeps it alive and clears it before freeing it.
    pub fn set_wake(&self, event: *mut ngx_event_t) {
        self.wake.set(event);
    }

    /// Keeps a redirected command to be sent again, and wakes the worker to send it. Its visits
    /// count as sent again only when they are.
    pub fn reroute(&self, rerouted: Rerouted) {
        self.sub(Counter::EventsSent, rerouted.visits as usize);
        self.add(Counter::EventsRerouted, rerouted.visits as usize);
        self.rerouted.borrow_mut().push(rerouted);
        let event = self.wake.get();
        // SAFETY: a non-null `wake` is the worker's live flush event (set_wake's contract);
        // posting an event that is already posted does nothing.
        unsafe {
            if !event.is_null() && (*event).posted() == 0 {
                ngx_post_event(event, ptr::addr_of_mut!(ngx_posted_events));
            }
        }
    }

    /// Has the worker's flush event run in `ms`, unless it is already armed or posted: a command
    /// held back in the spool then leaves even when no visit comes to carry it.
    pub fn wake_in(&self, ms: u64) {
        let event = self.wake.get();
        // SAFETY: a non-null `wake` is the worker's live flush event (set_wake's contract); it
        // is only armed while neither on the timer tree nor posted.
        unsafe {
            if !event.is_null() && (*event).posted() == 0 && (*event).timer_set() == 0 {
                ngx_add_timer(event, ms as _);
            }
        }
    }

    /// The commands rerouted since the last call.
    pub fn take_rerouted(&self) -> Vec<Rerouted> {
        match self.rerouted.try_borrow_mut() {
            Ok(mut rerouted) if !rerouted.is_empty() => std::mem::take(&mut *rerouted),
            _ => Vec::new(),
        }
    }

    pub fn add(&self, counter: Counter, n: usize) {
        if let Some(stats) = self.stats {
            stats.add(counter, n as u64);
        }
    }

    pub fn sub(&self, counter: Counter, n: usize) {
        if let Some(stats) = self.stats {
            stats.sub(counter, n as u64);
        }
    }

    /// Moves the spool onto a connection's output; returns the commands moved, in order.
    pub fn flush_into(&self, out: &mut Vec<u8>) -> Vec<Spooled> {
        let Ok(mut spool) = self.spool.try_borrow_mut() else {
            return Vec::new();
        };
        let visits = spool.len();
        if visits == 0 {
            return Vec::new();
        }
        let commands = spool.drain_into(out);
        self.sub(Counter::EventsBuffered, visits);
        self.add(Counter::EventsSent, visits);
        commands
    }

    /// Spools one command carrying `visits`, or counts them dropped when the spool is full.
    pub fn spool(&self, visits: usize, write: impl FnOnce(&mut Vec<u8>)) {
        let kept = self
            .spool
            .try_borrow_mut()
            .is_ok_and(|mut spool| spool.push(visits, write));
        self.add(
            if kept {
                Counter::EventsBuffered
            } else {
                Counter::EventsDropped
            },
            visits,
        );
    }
}

impl Drop for EventShared {
    /// The worker is exiting (or its configuration was replaced): spooled events are lost.
    fn drop(&mut self) {
        let rerouted: usize = self
            .rerouted
            .get_mut()
            .iter()
            .map(|r| r.visits as usize)
            .sum();
        let n = self.spool.get_mut().len();
        if rerouted > 0 {
            self.add(Counter::EventsDropped, rerouted);
        }
        if n > 0 {
            self.sub(Counter::EventsBuffered, n);
            self.add(Counter::EventsDropped, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Batch, Encoder, Visit};
    use super::*;

    fn visit() -> Visit<'static> {
        Visit {
            code: b"abc1234",
            status: 302,
            ..Visit::default()
        }
    }

    /// The command for a batch of `visits`, as Redis would receive it.
    fn command(encoder: &Encoder, visits: &[Visit<'_>]) -> Vec<u8> {
        let mut batch = Batch::default();
        visits.iter().for_each(|v| batch.push(v));
        let mut out = Vec::new();
        encoder.write_command(&mut out, &batch);
        out
    }

    #[test]
    fn spool_is_bounded_by_visits_and_bytes() {
        let enc = Encoder::new(1000);
        let one = command(&enc, &[visit()]);
        let two = command(&enc, &[visit(), visit()]);
        let put = |spool: &mut Spool, cmd: &[u8], visits| {
            spool.push(visits, |out| out.extend_from_slice(cmd))
        };

        let mut spool = Spool::new(SpoolLimits {
            events: 3,
            bytes: 1 << 20,
        });
        assert!(put(&mut spool, &two, 2));
        assert!(!put(&mut spool, &two, 2), "2 + 2 visits exceed 3");
        assert!(put(&mut spool, &one, 1));
        assert_eq!(spool.len(), 3);
        assert_eq!(spool.bytes(), two.len() + one.len());

        let mut spool = Spool::new(SpoolLimits {
            events: 100,
            bytes: 2 * one.len() + 1,
        });
        assert!(put(&mut spool, &one, 1));
        assert!(put(&mut spool, &one, 1));
        assert!(!put(&mut spool, &one, 1));
        assert_eq!(
            spool.bytes(),
            2 * one.len(),
            "a refused command leaves nothing"
        );

        let mut out = Vec::new();
        let one_command = Spooled {
            visits: 1,
            len: one.len() as u32,
        };
        assert_eq!(spool.drain_into(&mut out), [one_command, one_command]);
        assert_eq!(out, [one.clone(), one.clone()].concat());
        assert!(spool.is_empty() && spool.bytes() == 0);

        let mut none = Spool::new(SpoolLimits {
            events: 0,
            bytes: 1 << 20,
        });
        assert!(!put(&mut none, &one, 1));
    }
}
