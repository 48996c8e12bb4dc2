//! Work in flight stops with its authority (issue 66). A batch, a compose, a reissue, a console
//! bulk upload or import runs long after the request that started it was let in: each acts for
//! a key (a console session's, or none for the command line) in a workspace, and stops at its next
//! group of chunks once that key is revoked or that workspace suspended or deleted.
//!
//! Where it is checked: in each group's transaction, by one indexed read of the workspace's row
//! and the key's ([`shortlink_store::LinkTx::standing`]), twice. First before anything is
//! written, so a stopped job writes nothing more. Then again just before the commit, this time
//! holding both rows (`FOR SHARE`; SQLite's one writer) until the commit: a revoke, suspend or
//! delete is an `UPDATE` of one of them, so one that committed while the group was being
//! written takes the whole group back (rolled back, its records removed), and one that comes
//! during the commit waits for it, a moment. When a revoke or suspend has answered, nothing
//! more of the job commits, on this sidecar or any other; what committed before is the job's
//! answer, its later items are answered with why it stopped. No cache to go stale, two reads
//! per group of up to 8,000 links. The rows are held only for the commit: held for the whole
//! group, a revoke waited behind it (longer than `--db-timeout`), and on PostgreSQL, where a
//! share lock does not queue behind a waiting writer, behind every group of the job.
//!
//! A delete must also know that nothing of the workspace is still being written when it scans
//! its links for their records: a group taken back removes its records after its rollback.
//! [`InFlight`] tells it, for this sidecar: every group, and every single create, update and
//! revoke, runs inside a read guard of its workspace's gate, and the delete, once suspended,
//! takes the write guard and holds it until its rows are gone: it waits for the writes in
//! flight, and those that come after find the workspace gone (no name for their records, no row
//! for their links' key) and write nothing. A single create is not checked against the
//! suspension itself (a read per create), so without the gate one let in before it could
//! commit after the scan and leave its record. (A group on another sidecar that the
//! suspension took back removes its own records a moment after the delete's scan; `resync`
//! removes any its Redis failure left.)
//!
//! A [`Job`] remembers that it stopped, so its later groups are answered without a transaction
//! (and without a lease of codes), and a workspace resumed meanwhile does not restart it halfway.
//! Its groups decide in the order of their items ([`super::turn`]): once one is stopped, no later
//! one commits, so an answer is its created items, then the stopped ones, never the two mixed.
//! (On PostgreSQL and MariaDB the next group writes while the one ahead decides: only the
//! decisions take turns.)

use super::error::Stop;
use super::turn::{Turn, Turns};
use super::{ItemFailure, ItemOutcome, LinkService, NewLink, CLI_API_KEY_ID};
use crate::limits::Reservation;
use shortlink_model::WorkspaceId;
use std::sync::OnceLock;

/// Who a job writes for: its workspace, and the key that started it (`None`: the command line,
/// the operator's, which no key revoke stops).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authority {
    pub workspace: WorkspaceId,
    pub key: Option<i64>,
}

impl Authority {
    /// Key `key`'s ([`CLI_API_KEY_ID`]: the command line's, which has no key row).
    pub fn key(workspace: WorkspaceId, key: i64) -> Self {
        Authority {
            workspace,
            key: (key != CLI_API_KEY_ID).then_some(key),
        }
    }

    /// The command line's: stopped only by its workspace.
    pub fn command_line(workspace: WorkspaceId) -> Self {
        Authority {
            workspace,
            key: None,
        }
    }
}

/// A running job: its authority, and whether it has stopped. Shared by the job's groups.
#[derive(Debug)]
pub struct Job {
    authority: Authority,
    stopped: OnceLock<Stop>,
    turns: Turns,
}

impl Job {
    pub fn new(authority: Authority) -> Self {
        Job {
            authority,
            stopped: OnceLock::new(),
            turns: Turns::default(),
        }
    }

    /// The place of the next group in the job's order: taken where the order of the items is
    /// known (before groups written at once are spawned), handed to [`LinkService::create_chunks`].
    pub fn turn(&self) -> Turn {
        self.turns.take()
    }

    pub fn authority(&self) -> Authority {
        self.authority
    }

    /// Why it stopped, once it has.
    pub fn stopped(&self) -> Option<Stop> {
        self.stopped.get().copied()
    }

    /// Notes the first stop among `outcomes`.
    fn observe<'a>(&self, outcomes: impl IntoIterator<Item = &'a ItemOutcome>) {
        let stop = outcomes.into_iter().find_map(|outcome| match outcome {
            ItemOutcome::Failed(ItemFailure::Stopped(stop)) => Some(*stop),
            _ => None,
        });
        if let Some(stop) = stop {
            let _ = self.stopped.set(stop);
        }
    }
}

impl LinkService {
    /// Creates a group of chunks in one transaction ([`Self::create_groups`]) for `job`, in its
    /// `turn` (of [`Job::turn`]): once the job has stopped, every item fails with why and nothing
    /// is written. The items draw on `reservation`, their workspace's quota reserved by the
    /// caller (who keeps what was issued of it): items beyond what it has left are refused, none
    /// created.
    pub async fn create_chunks(
        &self,
        chunks: Vec<Vec<(i64, NewLink)>>,
        claim: Option<super::Claim>,
        (job, mut turn): (&Job, Turn),
        reservation: &mut Reservation,
    ) -> Vec<Vec<(i64, ItemOutcome)>> {
        if let Some(stop) = job.stopped() {
            return refuse_all(&chunks, ItemFailure::Stopped(stop));
        }
        // Listed targets are answered apart, each on its own line, and draw no quota.
        let (chunks, refused) = self.screen_chunks(chunks, job.authority).await;
        let links: usize = chunks.iter().map(Vec::len).sum();
        if !reservation.draw(links as u64) {
            tracing::error!(
                links,
                ?reservation,
                "new links beyond their reservation: refused"
            );
            let outcomes = refuse_all(&chunks, ItemFailure::QuotaExceeded);
            let count = chunks.len();
            return super::screen::merge(refused, (0..count).collect(), outcomes, count);
        }
        // On SQLite the transactions take turns anyway: the group writes only in its turn, and
        // skips its transaction if the job stopped meanwhile. Elsewhere it writes at once, beside
        // the group ahead, and waits for its turn before it decides ([`super::turn`]).
        if !self.writes_overlap() {
            turn.wait().await;
        }
        let count = chunks.len();
        if let Some(stop) = job.stopped() {
            let outcomes = refuse_all(&chunks, ItemFailure::Stopped(stop));
            return super::screen::merge(refused, (0..count).collect(), outcomes, count);
        }
        // Thousands of lines: a busy database is waited for, never a reason to shed them.
        let patience = shortlink_store::patience::Patience::BULK;
        let (positions, kept): (Vec<usize>, Vec<_>) = (chunks.into_iter().enumerate())
            .filter(|(_, items)| !items.is_empty())
            .unzip();
        let written = self.create_groups(kept, claim, job.authority, &mut turn);
        let outcomes = shortlink_store::patience::waiting_while_busy(patience, written).await;
        job.observe(outcomes.iter().flatten().map(|(_, outcome)| outcome));
        // Passed only now if not before: the next group sees this one's stop.
        drop(turn);
        super::screen::merge(refused, positions, outcomes, count)
    }

    /// [`Self::create_chunks`] of one chunk.
    pub async fn create_chunk(
        &self,
        items: Vec<(i64, NewLink)>,
        claim: Option<super::Claim>,
        job: (&Job, Turn),
        reservation: &mut Reservation,
    ) -> Vec<(i64, ItemOutcome)> {
        self.create_chunks(vec![items], claim, job, reservation)
            .await
            .pop()
            .unwrap_or_default()
    }
}

/// Every item of `chunks` failed with `failure`.
fn refuse_all(
    chunks: &[Vec<(i64, NewLink)>],
    failure: ItemFailure,
) -> Vec<Vec<(i64, ItemOutcome)>> {
    let failure = ItemOutcome::Failed(failure);
    (chunks.iter())
        .map(|items| {
            (items.iter())
                .map(|(index, _)| (*index, failure.clone()))
                .collect()
        })
        .collect()
}
