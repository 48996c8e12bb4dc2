//! A connection's visit events: batches and spooled commands onto the output, each booked with
//! the visits it carries (counted as failed if the connection goes before its reply).

use std::ops::Range;

use shortlink_wire::event::{Batch, Encoder};

use super::reply::Pending;
use super::Conn;
use crate::events::{KeptCommand, Rerouted};

impl Conn {
    /// Queues one event command carrying `visits`, written by `write` straight onto the output
    /// (after any spooled ones, so they keep their order). Must only be called when `is_ready()`.
    pub fn send_event(&mut self, visits: usize, write: impl FnOnce(&mut Vec<u8>)) {
        self.flush_spool();
        let start = self.out.len();
        write(&mut self.out);
        self.queued_event(visits as u32, start..self.out.len());
    }

    /// [`Conn::send_event`] of `batch`'s `XADD`: with nothing else waiting to be written, the
    /// batch's buffer becomes the output, the command written around the visits where they lie
    /// ([`Encoder::command_in_place`]), instead of the batch being copied onto it.
    pub fn send_batch(&mut self, visits: usize, encoder: &Encoder, batch: &mut Batch) {
        self.flush_spool();
        // `sent` is 0 while the output is empty (`flush`, `fail`).
        if let Some(start) = encoder.command_in_place(batch, &mut self.out) {
            self.sent = start;
            self.queued_event(visits as u32, start..self.out.len());
            return;
        }
        let start = self.out.len();
        encoder.write_command(&mut self.out, batch);
        self.queued_event(visits as u32, start..self.out.len());
    }

    /// Queues an event command a node redirected ([`Rerouted`]) as it was, after `ASKING` for
    /// an `-ASK` (whose reply is dropped).
    pub fn resend_event(&mut self, rerouted: Rerouted, asking: bool) {
        if asking {
            drop(self.send(&[&[b"ASKING"]]));
        }
        self.out.extend_from_slice(&rerouted.command.bytes);
        self.queued(Pending::Event {
            visits: rerouted.visits,
            command: Some(rerouted.command),
        });
    }

    /// Books the event command of `visits` written to `out[command]`.
    fn queued_event(&mut self, visits: u32, command: Range<usize>) {
        let command = self.events.keeps_commands().then(|| KeptCommand {
            bytes: self.out[command].into(),
            redirects: 0,
        });
        self.queued(Pending::Event { visits, command });
    }

    /// Moves the worker's spooled events onto this (ready) connection.
    pub fn flush_spool(&mut self) {
        if !self.takes_events {
            return;
        }
        let mut start = self.out.len();
        for spooled in self.events.flush_into(&mut self.out) {
            let end = start + spooled.len as usize;
            self.queued_event(spooled.visits, start..end);
            start = end;
        }
    }
}
