//! The streamed write path of a request with many items, shared by the batch and by compose:
//! chunks of raw items checked ahead in parallel, written in groups through
//! [`shortlink_core::service::LinkService::create_chunks`], answered in order (see the batch's module
//! documentation for the why of each stage). What an item is and how it is answered is the
//! [`Items`] of the request.

use super::body::RawChunk;
use super::failure::failure_error;
use super::limits::{CHECKED_AHEAD, GROUP_CHUNKS, HELD_FRAMES, PARALLEL_CHUNKS, RESULT_BYTES};
use crate::{AppState, Budget, DomainContext, Error};
use axum::http::StatusCode;
use futures_util::{stream, Stream, StreamExt};
use shortlink_core::limits::Reservation;
use shortlink_core::service::{self, Claim, ItemFailure, ItemOutcome, Job};
use shortlink_model::Link;
use shortlink_store::audit::AuditEntry;
use shortlink_store::Backend;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Groups written at once on PostgreSQL and MariaDB (concurrent transactions). Two: one commits
/// while the other inserts; with four, full groups (8,000 rows each) took more memory and were
/// no faster (the server is the bottleneck).
pub const PARALLEL_GROUPS: usize = 2;
/// Groups written at once on SQLite: two. Their transactions queue for the one write
/// connection, so the second only gets ready (plan, codes, rows) while the first writes, and
/// starts inserting the moment it commits. More would only wait longer (a group waits out the
/// busy writer past the pool's acquire timeout: `shortlink_store::patience`).
pub const PARALLEL_GROUPS_SQLITE: usize = 2;
/// Groups rendered at once (after their commit).
const PARALLEL_RENDERS: usize = 2;

/// What a streamed request's items are: how one is checked into a link, and how it is answered.
pub(crate) trait Items: Send + Sync + 'static {
    /// What an item keeps from its check to its answer besides its link.
    type Kept: Send + 'static;
    /// The `via` label of the links it creates (`shortlink_links_created_total`).
    const VIA: &'static str;
    /// Checks the item at `index`: the link to create, or why there is none.
    fn check(&self, index: i64, item: super::body::RawItem) -> Checked<Self::Kept>;
    /// Appends the answer of the item at `index`.
    fn render(&self, out: &mut Vec<u8>, index: i64, answer: Answer<Self::Kept>);
}

/// An item after its check.
// Returned and taken apart at once, never kept: boxing the link would cost an allocation an item.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Checked<K> {
    Valid(service::NewLink, K),
    /// Nothing is created for it; what it kept, if it got that far.
    Refused(Error, Option<K>),
}

/// An item's answer.
pub(crate) enum Answer<K> {
    Refused(Error, Option<K>),
    /// Created (201), by this request or an earlier one with its `Idempotency-Key`, or found
    /// live for an `idempotent` item (200).
    Link {
        link: Box<Link>,
        status: StatusCode,
        kept: K,
    },
    /// A dry run: checked and valid, nothing created.
    Planned(K),
}

/// Whether the links are created, or only checked (a dry run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Write,
    DryRun,
}

/// The answer's frames, one per chunk in order, for `chunks` (`claim`: the request's
/// `Idempotency-Key`), written for `job`: once its key is revoked or its workspace suspended
/// or deleted, the groups after answer why (see [`shortlink_core::service::authority`]). They
/// start flowing at once, `HELD_FRAMES` ahead of the reader: the caller must not start
/// answering before the body is read (see the spool).
pub(crate) fn run<I: Items>(
    items: Arc<I>,
    (state, budget, audit): (AppState, Budget, Option<AuditEntry>),
    domains: DomainContext,
    chunks: impl Stream<Item = RawChunk> + Send + 'static,
    (claim, job): (Option<Claim>, Arc<Job>),
    mode: Mode,
) -> impl Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static {
    let created = Arc::new(AtomicU64::new(0));
    let recorded = (state.clone(), Arc::clone(&created));
    let parallel_groups = match state.links.storage().backend() {
        Backend::Sqlite => PARALLEL_GROUPS_SQLITE,
        Backend::Postgres | Backend::Mysql => PARALLEL_GROUPS,
    };
    let checked = check_ahead(chunks, Arc::clone(&items));
    let admitted = admit_groups(
        (budget, Arc::clone(&job)),
        mode,
        checked.ready_chunks(GROUP_CHUNKS),
    );
    let results = admitted
        .map(move |(group, admission)| {
            let created = Arc::clone(&created);
            tokio::spawn(write_group(
                state.clone(),
                group,
                (admission, created),
                (claim, Arc::clone(&job)),
                mode,
            ))
        })
        .buffered(parallel_groups)
        .map(move |written| {
            let (items, domains) = (Arc::clone(&items), domains.clone());
            tokio::task::spawn_blocking(move || {
                written
                    .and_then(|group| group)
                    .map(|group| render_group(&*items, group, &domains, mode))
            })
        })
        .buffered(PARALLEL_RENDERS)
        .flat_map(|joined| {
            stream::iter(match joined {
                Ok(Ok(frames)) => frames.into_iter().map(Ok).collect(),
                Ok(Err(error)) | Err(error) => {
                    tracing::error!(%error, "a chunk task failed");
                    vec![Err(std::io::Error::other("chunk failed"))]
                }
            })
        })
        .chain(stream::once(record(audit, recorded)).filter_map(|_| async { None }));
    run_ahead(results, HELD_FRAMES)
}

/// Appends the request's one audit row once its last group is written: how many links it
/// created, never one row per link. A request cut short (client gone) records what it created.
async fn record(audit: Option<AuditEntry>, (state, created): (AppState, Arc<AtomicU64>)) {
    let Some(mut entry) = audit else { return };
    entry.batch_size = i64::try_from(created.load(Ordering::Relaxed)).ok();
    if let Err(error) = state.links.storage().append_audit(&entry).await {
        tracing::error!(%error, action = entry.action, "a batch's audit row could not be written");
    }
}

/// Drives `results` in a task of its own, `held` items ahead of whoever reads them: the request
/// goes on being written while its answer cannot start yet, up to that many results.
fn run_ahead<T: Send + 'static>(
    results: impl Stream<Item = T> + Send + 'static,
    held: usize,
) -> impl Stream<Item = T> + Send + 'static {
    let (sender, receiver) = tokio::sync::mpsc::channel(held);
    tokio::spawn(async move {
        let mut results = std::pin::pin!(results);
        while let Some(result) = results.next().await {
            if sender.send(result).await.is_err() {
                // The answer was dropped (client gone): stop writing.
                return;
            }
        }
    });
    stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|result| (result, receiver))
    })
}

/// Checks chunks in parallel tasks, ahead of the writer: a task pulls the body's chunks and
/// keeps up to [`CHECKED_AHEAD`] checked ones waiting, so while a group is written the next one
/// is read and checked, and the writer finds a full group ready. Driven by the writer's pulls
/// alone, checking would only start on the chunks the body reader had ready, and groups would
/// stay small (more, costlier commits).
fn check_ahead<I: Items>(
    chunks: impl Stream<Item = RawChunk> + Send + 'static,
    items: Arc<I>,
) -> Pin<Box<dyn Stream<Item = CheckResult<I::Kept>> + Send>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(CHECKED_AHEAD);
    tokio::spawn(async move {
        let mut checked = std::pin::pin!(chunks
            .map(move |chunk| {
                let items = Arc::clone(&items);
                tokio::task::spawn_blocking(move || check_chunk(&*items, chunk))
            })
            .buffered(PARALLEL_CHUNKS));
        while let Some(chunk) = checked.next().await {
            if sender.send(chunk).await.is_err() {
                // The answer was dropped (client gone): stop reading.
                return;
            }
        }
    });
    Box::pin(stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    }))
}

type CheckResult<K> = std::result::Result<CheckedChunk<K>, tokio::task::JoinError>;

/// Per item, what it kept, or why it was refused.
type Verdicts<K> = Vec<(i64, std::result::Result<K, (Error, Option<K>)>)>;

/// A chunk after checking: every item's verdict, and the links of the valid ones.
struct CheckedChunk<K> {
    checked: Verdicts<K>,
    valid: Vec<(i64, service::NewLink)>,
}

fn check_chunk<I: Items>(items: &I, chunk: RawChunk) -> CheckedChunk<I::Kept> {
    let mut checked = Vec::with_capacity(chunk.items.len());
    let mut valid = Vec::with_capacity(chunk.items.len());
    for (offset, item) in chunk.items.into_iter().enumerate() {
        let index = chunk.first + offset as i64;
        match items.check(index, item) {
            Checked::Valid(new, kept) => {
                valid.push((index, new));
                checked.push((index, Ok(kept)));
            }
            Checked::Refused(error, kept) => checked.push((index, Err((error, kept)))),
        }
    }
    CheckedChunk { checked, valid }
}

/// Whether a group's links may be issued: their share of the day's links reserved (and the
/// group's place in the job's order), or refused (the request is cut there); a dry run's issue
/// none.
enum Admission {
    Reserved(Reservation, service::Turn),
    Refused,
    DryRun,
    /// The job's key or workspace stopped it: nothing reserved, nothing issued.
    Stopped(service::Stop),
}

/// Reserves each group's links of the day's quota, one group after the other in request order:
/// the first that does not fit cuts the request, and every group from it on is refused
/// ([`crate::budget`] says so to users). Reservations never wait on a write. A stopped job's
/// groups reserve nothing: they issue nothing. Turns are taken here, in request order, before the
/// groups are written side by side.
fn admit_groups<K: Send + 'static>(
    (budget, job): (Budget, Arc<Job>),
    mode: Mode,
    groups: impl Stream<Item = Vec<CheckResult<K>>> + Send + 'static,
) -> impl Stream<Item = (Vec<CheckResult<K>>, Admission)> + Send + 'static {
    let cut = Arc::new(AtomicBool::new(false));
    groups.then(move |group| {
        let (budget, cut, job) = (budget.clone(), Arc::clone(&cut), Arc::clone(&job));
        async move {
            let links: usize = (group.iter().flatten()).map(|chunk| chunk.valid.len()).sum();
            if mode == Mode::DryRun {
                return (group, Admission::DryRun);
            }
            if let Some(stop) = job.stopped() {
                return (group, Admission::Stopped(stop));
            }
            if cut.load(Ordering::Relaxed) {
                return (group, Admission::Refused);
            }
            match budget.reserve_links(links as u64).await {
                Ok(reservation) => (group, Admission::Reserved(reservation, job.turn())),
                Err(error) => {
                    tracing::info!(%error, workspace = %budget.workspace(), "a request is cut at its quota");
                    cut.store(true, Ordering::Relaxed);
                    (group, Admission::Refused)
                }
            }
        }
    })
}

/// A written group: per chunk, the verdicts and the outcomes of the valid items.
type WrittenGroup<K> = Vec<(Verdicts<K>, Vec<(i64, ItemOutcome)>)>;

/// Writes a group of checked chunks in one transaction (nothing in a dry run). A chunk task
/// that failed fails the answer (the body stream breaks off).
/// Every item of `chunks` failed with `failure`, nothing of them issued.
fn failed<T>(chunks: &[Vec<(i64, T)>], failure: ItemFailure) -> Vec<Vec<(i64, ItemOutcome)>> {
    (chunks.iter())
        .map(|chunk| {
            (chunk.iter())
                .map(|(index, _)| (*index, ItemOutcome::Failed(failure.clone())))
                .collect()
        })
        .collect()
}

async fn write_group<K>(
    state: AppState,
    group: Vec<CheckResult<K>>,
    (admission, total): (Admission, Arc<AtomicU64>),
    (claim, job): (Option<Claim>, Arc<Job>),
    mode: Mode,
) -> std::result::Result<WrittenGroup<K>, tokio::task::JoinError> {
    let mut checked = Vec::with_capacity(group.len());
    let mut valid = Vec::with_capacity(group.len());
    for chunk in group {
        let chunk = chunk?;
        checked.push(chunk.checked);
        valid.push(chunk.valid);
    }
    let outcomes = match (mode, admission) {
        (Mode::DryRun, _) | (Mode::Write, Admission::DryRun) => {
            valid.iter().map(|_| Vec::new()).collect()
        }
        (Mode::Write, Admission::Refused) => failed(&valid, ItemFailure::QuotaExceeded),
        (Mode::Write, Admission::Stopped(stop)) => failed(&valid, ItemFailure::Stopped(stop)),
        (Mode::Write, Admission::Reserved(mut reservation, turn)) => {
            let outcomes = (state.links)
                .create_chunks(valid, claim, (&job, turn), &mut reservation)
                .await;
            let created = (outcomes.iter().flatten())
                .filter(|(_, outcome)| matches!(outcome, ItemOutcome::Created(_)))
                .count();
            reservation.keep(created as u64).await;
            total.fetch_add(created as u64, Ordering::Relaxed);
            outcomes
        }
    };
    Ok(checked.into_iter().zip(outcomes).collect())
}

/// Every item's answer of a written group, in order: one frame per chunk. One buffer for the
/// whole group (400 bytes reserved a result) outgrew its estimate and doubled while the old
/// one was still held: 9.6 MB at once for 8,000 results, twice over with two renders in
/// flight, the largest transient allocation of a batch (heaptrack).
fn render_group<I: Items>(
    items: &I,
    group: WrittenGroup<I::Kept>,
    domains: &DomainContext,
    mode: Mode,
) -> Vec<Vec<u8>> {
    group
        .into_iter()
        .map(|(checked, outcomes)| {
            let mut out = Vec::with_capacity(checked.len() * RESULT_BYTES);
            let mut outcomes = outcomes.into_iter();
            for (index, checked) in checked {
                let answer = match checked {
                    Err((error, kept)) => Answer::Refused(error, kept),
                    Ok(kept) if mode == Mode::DryRun => Answer::Planned(kept),
                    Ok(kept) => answer(I::VIA, outcomes.next(), kept, domains),
                };
                items.render(&mut out, index, answer);
            }
            out
        })
        .collect()
}

/// A valid item's answer from its outcome, counting a new link (metrics, domain health).
fn answer<K>(
    via: &'static str,
    outcome: Option<(i64, ItemOutcome)>,
    kept: K,
    domains: &DomainContext,
) -> Answer<K> {
    let failure = match outcome {
        Some((_, ItemOutcome::Created(link))) => {
            domains.link_created(via, &link);
            return Answer::Link {
                link,
                status: StatusCode::CREATED,
                kept,
            };
        }
        Some((_, ItemOutcome::Existing(link))) => {
            return Answer::Link {
                link,
                status: StatusCode::OK,
                kept,
            }
        }
        Some((_, ItemOutcome::Failed(failure))) => failure,
        None => ItemFailure::Internal,
    };
    Answer::Refused(failure_error(failure), Some(kept))
}
