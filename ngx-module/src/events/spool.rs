//! The bounded per-worker spool (`shortlink_events_buffer`): encoded event commands waiting
//! while Redis is unreachable, and the counters every part of the event path shares.

use std::cell::RefCell;

use crate::conf::SpoolLimits;
use crate::status::{Counter, Counters};

/// Encoded event commands (each carrying one or more visits), bounded by visits and by bytes.
/// One contiguous buffer: flushing it is a single copy onto the connection's output.
#[derive(Debug)]
pub struct Spool {
    buf: Vec<u8>,
    /// Visits carried by each spooled command, in order.
    commands: Vec<u32>,
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
        self.commands.push(visits as u32);
        true
    }

    /// Moves every spooled command to the end of `out`; returns the visits each one carries.
    pub fn drain_into(&mut self, out: &mut Vec<u8>) -> Vec<u32> {
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

/// A worker's spool and counters, shared by its Redis pool and connections (a connection that
/// comes up flushes the spool itself).
pub struct EventShared {
    pub spool: RefCell<Spool>,
    stats: Option<&'static Counters>,
}

impl EventShared {
    pub fn new(limits: SpoolLimits, stats: Option<&'static Counters>) -> Self {
        Self {
            spool: RefCell::new(Spool::new(limits)),
            stats,
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

    /// Moves the spool onto a connection's output; returns the visits of each command moved.
    pub fn flush_into(&self, out: &mut Vec<u8>) -> Vec<u32> {
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
        let n = self.spool.get_mut().len();
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
        assert_eq!(spool.drain_into(&mut out), [1, 1]);
        assert_eq!(out, [one.clone(), one.clone()].concat());
        assert!(spool.is_empty() && spool.bytes() == 0);

        let mut none = Spool::new(SpoolLimits {
            events: 0,
            bytes: 1 << 20,
        });
        assert!(!put(&mut none, &one, 1));
    }
}
