//! Prefill of the shared cache zone (`shortlink_cache_zone`): each link record Redis reports
//! changed (a new link is a write of its `sl:c:` key, reported to every worker's invalidation
//! subscription) is read back and stored in the zone before its first click, newest first.
//!
//! Each worker reads the codes its own subscription reported, after it removed them from the
//! zone, with the lookup's usual ticket: the store is refused if another worker's removal of the
//! same code comes later (its own read then stores it), so a record is never older than a
//! removal any worker has applied. With N workers that is up to N reads per issued link and
//! edge; they are pipelined, [`BATCH`] at a time, on the worker's lookup connections.
//!
//! Refill: a worker's fresh subscription empties the zone (reports may have been missed before
//! it): at nginx's start, when the master replaces a worker, after a reconnection to Redis. That
//! worker then reads the newest links back ([`Refill`]): generated codes are sequence numbers
//! under the code secret, and Redis holds the highest number the sidecars leased
//! (`sl:meta:issued`), so the codes below it, newest first, are read like reported ones until
//! 4/5 of the zone's slots hold links (what the zone keeps 99% of), [`HOLE`] numbers in a row
//! gave none, or another worker's fresh subscription empties the zone again (that worker
//! refills it). Reported codes go first. Aliases and imported codes are not numbered: they come
//! back at their first click.

use ngx::async_::{spawn, Task};

use nginx_sys::{ngx_cycle, NGX_LOG_NOTICE};
use ngx::ngx_log_error;
use shortlink_wire::keys;
use shortlink_wire::resp::Frame;

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
/// Numbers read in a row without a link before a refill stops: the unused rest of the blocks
/// sidecars lease ahead (a batch's reserve and a block of `--sequence-block`, 1,000 by default,
/// each, the newest of which lie right below the mark), with room for two sidecars.
const HOLE: u64 = 2 * (keys::BATCH_RESERVE + 1_000);

/// Reading the newest links back into an emptied zone.
struct Refill {
    /// The zone's epoch this worker's subscription left; another means another worker refills.
    epoch: u64,
    /// The next number to read is the one below this.
    below: u64,
    /// Links to find: 4/5 of the zone's slots.
    wanted: u64,
    found: u64,
    /// Numbers read since the last link.
    since_link: u64,
    read: u64,
}

impl Refill {
    /// Asks Redis for the issued mark; `None`: nothing to read (no mark, or no Redis).
    async fn start(mcf: &MainConf, epoch: u64) -> Option<Refill> {
        let (reply, slots) = worker::with(mcf, |w| {
            let (_, slots) = w.zone_state()?;
            Some((w.issued_mark().ok()?, slots))
        })
        .flatten()?;
        let Ok(Frame::Bulk(mark)) = reply.await else {
            return None;
        };
        let below = std::str::from_utf8(&mark).ok()?.parse().ok()?;
        Some(Refill {
            epoch,
            below,
            wanted: slots / 5 * 4,
            found: 0,
            since_link: 0,
            read: 0,
        })
    }

    /// Up to `n` codes, newest first; none once it is done.
    fn next(&mut self, mcf: &MainConf, n: usize) -> Vec<Vec<u8>> {
        let current = worker::with(mcf, |w| w.zone_state())
            .flatten()
            .is_some_and(|(epoch, _)| epoch == self.epoch);
        let Some(scheme) = mcf.scheme.as_ref() else {
            return Vec::new();
        };
        if !current || self.found >= self.wanted || self.since_link >= HOLE {
            return Vec::new();
        }
        let mut codes = Vec::with_capacity(n);
        while codes.len() < n && self.below > 0 {
            self.below -= 1;
            if let Ok(code) = scheme.encode(self.below) {
                codes.push(code.into_bytes());
            }
        }
        self.read += codes.len() as u64;
        codes
    }

    fn saw(&mut self, link: bool) {
        if link {
            self.found += 1;
            self.since_link = 0;
        } else {
            self.since_link += 1;
        }
    }

    fn log_end(&self) {
        // SAFETY: `ngx_cycle` is set before any worker code runs; its log outlives requests.
        let log = unsafe { (*ngx_cycle).log };
        ngx_log_error!(
            NGX_LOG_NOTICE,
            log,
            "shortlink: cache zone refill done: {} links among the newest {} codes",
            self.found,
            self.read
        );
    }
}

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
    let mut refill: Option<Refill> = None;
    loop {
        if let Some(epoch) = worker::with(mcf, |w| w.take_refill()).flatten() {
            refill = Refill::start(mcf, epoch).await;
        }
        let mut codes = std::mem::take(&mut retry);
        let room = BATCH.saturating_sub(codes.len());
        let queued = worker::with(mcf, |w| w.take_prefill(room)).unwrap_or_default();
        codes.extend(queued.into_iter().map(|code| (code, 0)));
        // Reads of the refill are marked by RETRIES + 1 (never read again).
        let room = BATCH.saturating_sub(codes.len());
        if let Some(r) = refill.as_mut().filter(|_| room > 0) {
            let older = r.next(mcf, room);
            if older.is_empty() {
                r.log_end();
                refill = None;
            }
            codes.extend(older.into_iter().map(|code| (code, RETRIES + 1)));
        }
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
            let resolution = interpret(frame, &mcf.expected_scheme, false).0;
            if let (Some(r), true) = (refill.as_mut(), reads > RETRIES) {
                r.saw(matches!(resolution, Resolution::Link(_)));
            }
            let Resolution::Link(link) = resolution else {
                continue;
            };
            let now = now_ms();
            let remembered = worker::with(mcf, |w| {
                let remembered = w.remember(&code, Cached::Link(link), now, ticket, scope);
                w.count_prefilled(remembered);
                remembered
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
