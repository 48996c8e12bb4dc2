//! Prefill of the shared cache zone (`shortlink_cache_zone`): each link record Redis reports
//! changed (a new link is a write of its `sl:c:` key, reported to every worker's invalidation
//! subscription) is read back and stored in the zone before its first click, newest first.
//!
//! Each worker reads the codes its own subscription reported, after it removed them from the
//! zone, with the lookup's usual ticket: the store is refused if another worker's removal of the
//! same code comes later (its own read then stores it), so a record is never older than a
//! removal any worker has applied. With N workers that is up to N reads per issued link and
//! edge; they are pipelined, [`BATCH`] at a time, on the worker's lookup connections.

use ngx::async_::{spawn, Task};

use crate::cache::{Cached, Scope};
use crate::conf::MainConf;
use crate::ffi::now_ms;
use crate::lookup::{interpret, Resolution};
use crate::redis::cluster::Target;
use crate::request::candidate;
use crate::worker::{self, Remembered};

/// Lookups in flight per round.
const BATCH: usize = 64;
/// Reads of a code whose store was refused: a removal sharing its stamp (16,384 of them) is
/// likely while a campaign is being written, and the next read usually stores it.
const RETRIES: u8 = 3;

/// Starts reading the queued codes unless a task already does (`running`). Called from the
/// worker's posted event, outside any borrow of the worker's state (the task may start at once).
pub fn start(mcf: &'static MainConf, running: Option<Task<()>>) -> Option<Task<()>> {
    if running.as_ref().is_some_and(|task| !task.is_finished()) {
        return running;
    }
    drop(running);
    Some(spawn(run(mcf)))
}

async fn run(mcf: &'static MainConf) {
    let mut retry: Vec<(Vec<u8>, u8)> = Vec::new();
    loop {
        let mut codes = std::mem::take(&mut retry);
        let room = BATCH.saturating_sub(codes.len());
        let queued = worker::with(mcf, |w| w.take_prefill(room)).unwrap_or_default();
        codes.extend(queued.into_iter().map(|code| (code, 0)));
        if codes.is_empty() {
            return;
        }
        let sent: Vec<_> = codes
            .into_iter()
            .filter_map(|(code, reads)| {
                let scope = scope_of(mcf, &code)?;
                worker::with(mcf, |w| {
                    let ticket = w.ticket_for(&code);
                    let reply = w.lookup(&code, &Target::Owner).ok()?;
                    Some((code, reads, scope, ticket, reply))
                })
                .flatten()
            })
            .collect();
        for (code, reads, scope, ticket, reply) in sent {
            let Ok(frame) = reply.await else { continue };
            // A deleted or unknown record is not worth a slot: only links are stored.
            let (Resolution::Link(link), _) = interpret(frame, &mcf.expected_scheme, false) else {
                continue;
            };
            let now = now_ms();
            let remembered = worker::with(mcf, |w| {
                w.remember_prefill(&code, Cached::Link(link), now, ticket, scope)
            });
            if remembered == Some(Remembered::Refused) && reads < RETRIES {
                retry.push((code, reads + 1));
            }
        }
    }
}

/// Which locations a prefilled code answers: as the lookup of a click would have stored it.
/// `None`: no location looks it up.
fn scope_of(mcf: &MainConf, code: &[u8]) -> Option<Scope> {
    let shape = mcf.scheme.as_ref()?.shape(code);
    if shape.may_exist() {
        Some(Scope::All)
    } else if candidate::imported_lookup(shape, code) {
        Some(Scope::Imported)
    } else {
        None
    }
}
