//! Batch creates: chunks of items written in groups, one transaction per group, with the same
//! write-through as a single create (see [`LinkService::create_groups`]), for a job
//! ([`super::authority`]).

use super::authority::Authority;
use super::commit::Scope;
use super::create::{new_link, GENERATED_CODE_ATTEMPTS};
use super::error::Stop;
use super::turn::Turn;
use super::{Claim, ItemFailure, ItemOutcome, LinkService, NewLink, ServiceError};
use crate::projection::{self, RecordWorkspace, RecordWrite};
use chrono::{DateTime, Utc};
use shortlink_model::{Link, WorkspaceId};
use shortlink_store::{self as storage, Backend, EncodedRows, NewRow, Slot, StorageError};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

mod records;
use records::{join_writes, unpublished, Published};

impl LinkService {
    /// Creates a group of batch chunks in one transaction: one sequence lease for the generated
    /// codes and every chunk's rows encoded for the backend, then, once the transaction has
    /// read that `authority` still stands, per chunk a bulk insert whose Redis records (one
    /// `MULTI`) are sent while the next chunk is inserted; once every Redis write has succeeded
    /// and `authority` still stands (read again, and held: see [`super::authority`]), the
    /// commit. That is the write-through of [`Self::create`], per
    /// group: a Redis failure rolls the whole group back (and deletes what it wrote); nothing is
    /// acknowledged before the commit. Returns one outcome per item, chunk by chunk, in order. With a `claim`, items already committed by an earlier
    /// attempt with the same key are returned instead of created again.
    pub(super) async fn create_groups(
        &self,
        chunks: Vec<Vec<(i64, NewLink)>>,
        claim: Option<Claim>,
        authority: Authority,
        turn: &mut Turn,
    ) -> Vec<Vec<(i64, ItemOutcome)>> {
        // The gate entered in turn order, and a code shared with a group ahead written only in
        // this group's turn (see [`super::turn`]).
        let codes = (chunks.iter().flatten()).filter_map(|(_, new)| new.code.clone());
        let gate = self.in_flight.enter(authority.workspace);
        let (mut writing, clear) = turn.arrive(codes, gate).await;
        if !clear {
            turn.wait().await;
        }
        let mut lock_waits = 0;
        let written = loop {
            match self
                .try_create_chunks(&chunks, claim, (authority, turn), 1)
                .await
            {
                Ok(Written::Outcomes(outcomes)) => break Ok(outcomes),
                Ok(Written::GaveWay) => {}
                // Nothing of the attempt stands (an error comes only before the commit, rolled
                // back and its records taken back): a lock held past `--db-timeout`, by the
                // group ahead committing on a loaded machine or by anyone, slows the group down
                // instead of shedding its lines.
                Err(error) if error.lock_ran_out() && lock_waits < LOCK_WAITS => {
                    lock_waits += 1;
                    tracing::warn!(%error, lock_waits, ?authority, "a group is written again");
                }
                Err(error) => break Err(error),
            }
            // Written again in its turn, out of the gate while it waits: a delete may be queued
            // behind this group.
            drop(writing);
            turn.wait().await;
            writing = self.in_flight.enter(authority.workspace).await;
        };
        drop(writing);
        match written {
            Ok(outcomes) => outcomes,
            Err(error) => {
                let failure = ItemFailure::of(&error);
                if let ItemFailure::Stopped(stop) = failure {
                    tracing::info!(%stop, ?authority, "a job stopped");
                } else if failure == ItemFailure::Internal {
                    tracing::error!(%error, "batch chunk failed");
                } else {
                    tracing::warn!(%error, "batch chunk failed");
                }
                chunks
                    .iter()
                    .map(|items| failed_items(items, failure.clone()))
                    .collect()
            }
        }
    }

    /// [`Self::create_groups`], failing as a whole: plan and lease before the transaction, insert
    /// and publish each chunk, drop the rows whose code Redis already held, wait for the `turn`
    /// (or give way: see [`super::turn`]), end the transaction, then create again (with fresh
    /// codes) the generated items that were refused. An error means nothing of it stands: once
    /// the transaction has ended, failures are the items' own.
    async fn try_create_chunks(
        &self,
        chunks: &[Vec<(i64, NewLink)>],
        claim: Option<Claim>,
        (authority, turn): (Authority, &mut Turn),
        attempt: usize,
    ) -> ChunksResult {
        let now = storage::now();
        let (mut plans, encoded) = self.plan_group(chunks, claim, now).await?;
        turn.progress();
        if plans.iter().all(|plan| plan.rows.is_empty()) {
            return Ok(Written::Outcomes(outcomes(plans, chunks, None)));
        }
        let mut tx = self.storage.begin_batch().await?;
        // Nothing written once the job's authority has ended (read again, and held, before
        // the commit: see `end_transaction`).
        let standing = (tx.standing(authority.workspace, authority.key, false)).await?;
        if let Some(stop) = Stop::of(standing) {
            let _ = tx.rollback().await;
            return Err(ServiceError::Stopped(stop));
        }
        let (mut tx, published) = self
            .insert_and_publish(tx, (&mut plans, encoded), chunks, (claim, now), turn)
            .await?;
        let Published {
            sent,
            taken,
            failed,
        } = published;
        // Items whose generated code Redis already held: created again, with fresh codes.
        let mut refused = Refused::default();
        if !failed && !taken.is_empty() {
            refused = self.refuse_taken(&mut plans, chunks, &taken);
            if let Err(error) = tx.delete_new_links(&refused.rows).await {
                let _ = tx.rollback().await;
                self.unpublish(&sent, &taken).await;
                return Err(error.into());
            }
            self.unpublish_cards(&sent, &taken, &refused.rows).await;
        }
        // Items whose generated code a row already held (an imported code of our shape): no
        // Redis write was made for them; created again with the next numbers.
        if !failed {
            for (c, plan) in plans.iter_mut().enumerate() {
                refused.retry.extend(
                    std::mem::take(&mut plan.retry)
                        .into_iter()
                        .map(|at| (c, at)),
                );
            }
        }
        // The decision in turn: a group ahead that stopped moving may be waiting on this one.
        if !failed && !turn.wait_while_moving(self.db_timeout / 3).await {
            tracing::info!(?authority, "a group gives way to the one ahead of it");
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(error = %rollback, "rollback failed");
            }
            self.unpublish(&sent, &taken).await;
            return Ok(Written::GaveWay);
        }
        // A row the group inserted tells, if the commit's answer is lost, whether it took effect.
        let probe = plans.iter().find_map(|plan| {
            (plan.rows.iter())
                .map(|row| &row.link)
                .find(|link| plan.inserted.contains(&link.code))
        });
        // Items still to create again decide after this commit: the turn waits for them.
        let early = refused.retry.is_empty().then_some(&mut *turn);
        let ending = (failed, authority, early);
        let failure = (self.end_transaction(tx, ending, &sent, &taken, probe)).await;
        // After the transaction (on SQLite the sequence shares its one write connection), whose
        // answer stands: the sequence left behind costs a refused code later, not these lines.
        for code in &refused.rows {
            if let Err(error) = self.issuer.skip_past(code).await {
                tracing::warn!(%error, code, "the sequence was not moved past a code Redis holds");
            }
        }
        let mut results = outcomes(plans, chunks, failure.clone());
        if !refused.retry.is_empty() {
            let items: Vec<(i64, NewLink)> = (refused.retry.iter())
                .map(|&(c, at)| chunks[c][at].clone())
                .collect();
            let job = (authority, turn);
            let outcomes = (self.create_again(&items, failure, claim, job, attempt)).await;
            for ((c, at), (_, outcome)) in refused.retry.into_iter().zip(outcomes) {
                results[c][at].1 = outcome;
            }
        }
        Ok(Written::Outcomes(results))
    }

    /// The generated `items` whose codes were refused, created again with fresh codes after the
    /// group ended (`failure`, if it failed), in its turn. The rest of the group stands: an
    /// error fails these items alone.
    async fn create_again(
        &self,
        items: &[(i64, NewLink)],
        failure: Option<ItemFailure>,
        claim: Option<Claim>,
        (authority, turn): (Authority, &mut Turn),
        attempt: usize,
    ) -> Vec<(i64, ItemOutcome)> {
        if let Some(failure) = failure {
            return failed_items(items, failure);
        }
        if attempt >= GENERATED_CODE_ATTEMPTS {
            return failed_items(items, ItemFailure::CodeTaken);
        }
        let mut lock_waits = 0;
        loop {
            let job = (authority, &mut *turn);
            match self.retry_chunk(items, claim, job, attempt + 1).await {
                Ok(Written::Outcomes(mut outcomes)) => return outcomes.pop().unwrap_or_default(),
                // Cannot be: the turn has come, and in its turn a group never gives way.
                Ok(Written::GaveWay) => return failed_items(items, ItemFailure::Internal),
                Err(error) if error.lock_ran_out() && lock_waits < LOCK_WAITS => lock_waits += 1,
                Err(error) => return failed_items(items, ItemFailure::of(&error)),
            }
        }
    }

    /// Everything that needs no transaction, first: on SQLite the lease needs the (single) write
    /// connection the transaction will hold. Each chunk's plan, one sequence lease for the
    /// generated codes of them all, and each chunk's rows encoded for the backend.
    async fn plan_group(
        &self,
        chunks: &[Vec<(i64, NewLink)>],
        claim: Option<Claim>,
        now: DateTime<Utc>,
    ) -> Result<(Vec<ChunkPlan>, Vec<EncodedRows>), ServiceError> {
        let mut plans = Vec::with_capacity(chunks.len());
        for items in chunks {
            plans.push(self.plan_chunk(items, claim, now).await?);
        }
        // Named before anything is written: a group with a workspace that cannot be named is
        // refused whole.
        let mut names = RecordNames::new();
        for (_, new) in chunks.iter().flatten() {
            if let Entry::Vacant(entry) = names.entry(new.workspace) {
                entry.insert(self.record_workspace(new.workspace).await?);
            }
        }
        let generated: usize = plans.iter().map(|plan| plan.generated).sum();
        let mut codes = self.issuer.lease_codes(generated).await?.into_iter();
        let mut encoded = Vec::with_capacity(plans.len());
        for (plan, items) in plans.iter_mut().zip(chunks) {
            plan.build_rows(items, claim, now, &mut codes, &names)?;
            encoded.push(self.storage.encode_rows(&plan.rows)?);
        }
        Ok((plans, encoded))
    }

    /// Inserts each chunk in `tx` and sends its Redis records while the next chunk is inserted;
    /// waits for them all, telling the `turn`s behind at each chunk that the group moves on. A
    /// failed insert rolls back and removes what earlier chunks sent.
    async fn insert_and_publish(
        &self,
        mut tx: Box<dyn storage::LinkTx>,
        (plans, encoded): (&mut [ChunkPlan], Vec<EncodedRows>),
        chunks: &[Vec<(i64, NewLink)>],
        (claim, now): (Option<Claim>, DateTime<Utc>),
        turn: &Turn,
    ) -> Result<(Box<dyn storage::LinkTx>, Published), ServiceError> {
        let mut redis_writes = Vec::with_capacity(plans.len());
        for ((plan, encoded), items) in plans.iter_mut().zip(encoded).zip(chunks) {
            let inserted = self.insert_planned(&mut *tx, plan, encoded, items, claim, now);
            let writes = match inserted.await {
                Ok(writes) => writes,
                Err(error) => {
                    let _ = tx.rollback().await;
                    // Writes already sent for earlier chunks of the group must not stay.
                    let sent = join_writes(redis_writes).await;
                    self.unpublish(&sent.sent, &sent.taken).await;
                    return Err(error);
                }
            };
            turn.progress();
            let projection = Arc::clone(&self.projection);
            redis_writes.push(tokio::spawn(async move {
                let result = projection.create_chunk(&writes).await;
                (writes, result)
            }));
        }
        let published = join_writes(redis_writes).await;
        turn.progress();
        Ok((tx, published))
    }

    /// The rows whose record Redis already held (`taken`), unless it is this very record (an
    /// alias or imported code already there, as is): no longer inserted; an explicit code fails
    /// as taken, a generated one is to be retried.
    fn refuse_taken(
        &self,
        plans: &mut [ChunkPlan],
        chunks: &[Vec<(i64, NewLink)>],
        taken: &HashMap<String, Vec<u8>>,
    ) -> Refused {
        let mut refused = Refused::default();
        for (c, (plan, items)) in plans.iter_mut().zip(chunks).enumerate() {
            for (r, row) in plan.rows.iter().enumerate() {
                let Some(existing) = taken.get(&shortlink_wire::keys::link_key(&row.link.code))
                else {
                    continue;
                };
                let at = plan.todo[r];
                let explicit = items[at].1.code.is_some();
                let record = || projection::encode_record(&row.link, plan.workspaces[r]);
                if explicit && *existing == record() {
                    continue;
                }
                self.refused_code(&row.link.code, existing);
                plan.inserted.remove(&row.link.code);
                refused.rows.push(row.link.code.clone());
                if explicit {
                    plan.outcomes[at] = Some(ItemOutcome::Failed(ItemFailure::CodeTaken));
                } else {
                    refused.retry.push((c, at));
                }
            }
        }
        refused
    }

    /// Commits, or rolls back when a Redis write failed or the job's `authority` ended while
    /// the group was written; after either failure removes what was sent. Returns the failure
    /// of every inserted item, if any. Passes `turn` on as soon as the group is known to stand.
    async fn end_transaction(
        &self,
        mut tx: Box<dyn storage::LinkTx>,
        (redis_failed, authority, turn): (bool, Authority, Option<&mut Turn>),
        sent: &[Vec<RecordWrite>],
        taken: &HashMap<String, Vec<u8>>,
        probe: Option<&Link>,
    ) -> Option<ItemFailure> {
        // The authority read again and held until the commit: a revoke, suspend or delete that
        // committed meanwhile takes the group back, one that comes later waits for this commit
        // (a moment: the lock is taken last). So nothing of the job commits after one answered.
        let stopped = match redis_failed {
            true => None,
            false => match tx.standing(authority.workspace, authority.key, true).await {
                Ok(standing) => Stop::of(standing).map(ItemFailure::Stopped),
                Err(error) => Some(ItemFailure::of(&error.into())),
            },
        };
        if redis_failed || stopped.is_some() {
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(error = %rollback, "rollback failed");
            }
            self.unpublish(sent, taken).await;
            Some(stopped.unwrap_or(ItemFailure::RedisUnavailable))
        } else {
            // Held rows: nothing can stop this group now, so the next may write while it commits.
            if let Some(turn) = turn {
                turn.pass();
            }
            let records = sent.iter().map(Vec::len).sum();
            let undo = async {
                let written = unpublished(sent, taken);
                self.projection.delete_if_unchanged(&written).await
            };
            let committed = self
                .commit_or_undo(tx, Scope::Batch { records, probe }, None, undo)
                .await;
            committed.err().map(|error| ItemFailure::of(&error))
        }
    }

    /// [`Self::try_create_chunks`] again for items whose codes were refused, boxed: an async
    /// function cannot hold its own future.
    fn retry_chunk<'a>(
        &'a self,
        items: &'a [(i64, NewLink)],
        claim: Option<Claim>,
        job: (Authority, &'a mut Turn),
        attempt: usize,
    ) -> Pin<Box<dyn Future<Output = ChunksResult> + Send + 'a>> {
        Box::pin(async move {
            let chunks = [items.to_vec()];
            (self.try_create_chunks(&chunks, claim, job, attempt)).await
        })
    }

    /// Whether a job's groups write at once (only their decisions take turns): not on SQLite,
    /// whose one writer takes the transactions in turn anyway.
    pub(super) fn writes_overlap(&self) -> bool {
        self.storage.backend() != Backend::Sqlite
    }

    /// What a chunk needs before its transaction: replays of an earlier attempt, existing links
    /// for `idempotent` items, the sequence raised past restored codes, aliases used twice.
    async fn plan_chunk(
        &self,
        items: &[(i64, NewLink)],
        claim: Option<Claim>,
        now: DateTime<Utc>,
    ) -> Result<ChunkPlan, ServiceError> {
        let mut outcomes: Vec<Option<ItemOutcome>> = vec![None; items.len()];
        let hashes: Vec<String> = items.iter().map(|(_, new)| new.target.hash()).collect();

        // A retry: what an earlier attempt committed is the answer.
        if let (Some(claim), Some(first), Some(last)) = (
            claim.filter(|claim| !claim.fresh),
            items.first(),
            items.last(),
        ) {
            let known: HashMap<i64, Link> = self
                .storage
                .links_by_slots(claim.batch_id, first.0, last.0)
                .await?
                .into_iter()
                .collect();
            if !known.is_empty() {
                for (at, (index, new)) in items.iter().enumerate() {
                    if let Some(link) = known.get(index) {
                        outcomes[at] = Some(replayed(link.clone(), new, &hashes[at]));
                    }
                }
            }
        }
        for (at, (_, new)) in items.iter().enumerate() {
            if outcomes[at].is_none() && new.idempotent {
                if let Some(existing) = self.find_existing(new, &hashes[at], now).await? {
                    outcomes[at] = Some(ItemOutcome::Existing(Box::new(existing)));
                }
            }
        }

        // The rest is inserted; imported codes of the generated shape move the sequence past them.
        let todo: Vec<usize> = (0..items.len())
            .filter(|&at| outcomes[at].is_none())
            .collect();
        // Not another shortener's: its shape is a coincidence, and moving the sequence to its
        // number would waste the code space below it (the issuer skips it instead).
        let restored_max = todo
            .iter()
            .filter(|&&at| !items[at].1.foreign)
            .filter_map(|&at| items[at].1.code.as_deref())
            .filter_map(|code| self.issuer.scheme().decode(code))
            .max();
        if let Some(max) = restored_max {
            self.issuer.raise_sequence(max + 1).await?;
        }
        // An alias used twice in one chunk: the first use takes it (one statement cannot tell).
        let mut aliases = HashSet::new();
        let todo: Vec<usize> = todo
            .into_iter()
            .filter(|&at| match &items[at].1.code {
                Some(code) if !aliases.insert(code.as_str()) => {
                    outcomes[at] = Some(ItemOutcome::Failed(ItemFailure::CodeTaken));
                    false
                }
                _ => true,
            })
            .collect();
        let generated = todo
            .iter()
            .filter(|&&at| items[at].1.code.is_none())
            .count();
        Ok(ChunkPlan {
            outcomes,
            hashes,
            todo,
            generated,
            rows: Vec::new(),
            workspaces: Vec::new(),
            inserted: HashSet::new(),
            retry: Vec::new(),
        })
    }

    /// Inserts a planned chunk (`encoded`: its rows, encoded before the transaction began)
    /// inside `tx`; returns the Redis writes of the rows inserted.
    async fn insert_planned(
        &self,
        tx: &mut dyn storage::LinkTx,
        plan: &mut ChunkPlan,
        encoded: EncodedRows,
        items: &[(i64, NewLink)],
        claim: Option<Claim>,
        now: DateTime<Utc>,
    ) -> Result<Vec<RecordWrite>, ServiceError> {
        if plan.rows.is_empty() {
            return Ok(Vec::new());
        }
        plan.inserted = tx
            .insert_links(&plan.rows, encoded)
            .await?
            .into_iter()
            .collect();
        let rows = &plan.rows;
        // Items held for review are stored quarantined, with the entry that listed them.
        for (row, &at) in rows.iter().zip(&plan.todo) {
            // Most links send nowhere else: nothing looked up for them.
            let more = !super::destinations::besides_target(&row.link.extras).is_empty();
            if more && plan.inserted.contains(&row.link.code) {
                super::destinations::index(tx, &row.link, None).await?;
            }
            if let Some(refusal) =
                (items[at].1.held.as_ref()).filter(|_| plan.inserted.contains(&row.link.code))
            {
                super::quarantine::hold(tx, &row.link, refusal).await?;
            }
        }
        // Rows skipped by a unique conflict: a concurrent attempt with the same key took the slot
        // (its row is the answer), or the code is taken.
        let skipped: Vec<usize> = (0..rows.len())
            .filter(|&r| !plan.inserted.contains(&rows[r].link.code))
            .collect();
        let mut won: HashMap<i64, Link> = HashMap::new();
        if let Some(claim) = claim.filter(|_| !skipped.is_empty()) {
            let indexes: Vec<i64> = skipped.iter().map(|&r| items[plan.todo[r]].0).collect();
            won.extend(tx.links_by_slot_list(claim.batch_id, &indexes).await?);
        }
        for &r in &skipped {
            let at = plan.todo[r];
            let (index, new) = &items[at];
            plan.outcomes[at] = Some(match won.remove(index) {
                Some(link) => replayed(link, new, &new.target.hash()),
                None if new.code.is_none() => {
                    self.generated_code_taken(&rows[r].link.code).await;
                    plan.retry.push(at);
                    continue;
                }
                None => ItemOutcome::Failed(ItemFailure::CodeTaken),
            });
        }
        Ok(rows
            .iter()
            .zip(&plan.workspaces)
            .filter(|(row, _)| plan.inserted.contains(&row.link.code))
            .flat_map(|(row, &workspace)| {
                let record = RecordWrite::for_link(&row.link, workspace, now, self.grace);
                let card = RecordWrite::new_card(&row.link, &record);
                std::iter::once(record).chain(card)
            })
            .collect())
    }
}

/// Rows dropped because Redis already held their code.
#[derive(Default)]
struct Refused {
    /// Their codes.
    rows: Vec<String>,
    /// `(chunk, item)` of the generated ones, to create again.
    retry: Vec<(usize, usize)>,
}

/// Each chunk's outcomes: decided before the insert, else its row's (created, or `failure`).
fn outcomes(
    plans: Vec<ChunkPlan>,
    chunks: &[Vec<(i64, NewLink)>],
    failure: Option<ItemFailure>,
) -> Vec<Vec<(i64, ItemOutcome)>> {
    plans
        .into_iter()
        .zip(chunks)
        .map(|(mut plan, items)| {
            for (r, row) in std::mem::take(&mut plan.rows).into_iter().enumerate() {
                if plan.inserted.contains(&row.link.code) {
                    plan.outcomes[plan.todo[r]] = Some(match &failure {
                        None => ItemOutcome::Created(Box::new(row.link)),
                        Some(failure) => ItemOutcome::Failed(failure.clone()),
                    });
                }
            }
            finish(items, plan.outcomes)
        })
        .collect()
}

/// Every item of `items`, failed with `failure`.
fn failed_items(items: &[(i64, NewLink)], failure: ItemFailure) -> Vec<(i64, ItemOutcome)> {
    items
        .iter()
        .map(|(index, _)| (*index, ItemOutcome::Failed(failure.clone())))
        .collect()
}

/// Lock waits that ran out (or deadlocks) after which a group is answered 503 per line. Each
/// was a whole `--db-timeout` on one lock: ten are a lock held for half a minute or more (a
/// transaction left open), not a busy machine, and the caller is told to come back.
const LOCK_WAITS: usize = 10;

/// What a group's attempt came to: its outcomes, chunk by chunk, or nothing written, to be
/// written again in its turn (see [`super::turn`]).
enum Written {
    Outcomes(Vec<Vec<(i64, ItemOutcome)>>),
    GaveWay,
}

type ChunksResult = Result<Written, ServiceError>;

/// What the records of each workspace of a group name, resolved before anything is written.
type RecordNames = HashMap<WorkspaceId, RecordWorkspace>;

/// A chunk of a group on its way through [`LinkService::create_chunks`].
struct ChunkPlan {
    /// Per item: decided before the insert (replayed, existing, refused), else by it.
    outcomes: Vec<Option<ItemOutcome>>,
    /// URL hashes, per item (moved into the rows).
    hashes: Vec<String>,
    /// Items to insert, as positions in the chunk; `rows[r]` is item `todo[r]`.
    todo: Vec<usize>,
    /// How many of them need a generated code.
    generated: usize,
    rows: Vec<NewRow>,
    /// What each row's record names as its workspace (`rows[r]`'s is `workspaces[r]`).
    workspaces: Vec<RecordWorkspace>,
    /// Codes the insert took.
    inserted: HashSet<String>,
    /// Items whose generated code a row already held, to create again with the next numbers.
    retry: Vec<usize>,
}

impl ChunkPlan {
    fn build_rows(
        &mut self,
        items: &[(i64, NewLink)],
        claim: Option<Claim>,
        now: DateTime<Utc>,
        codes: &mut impl Iterator<Item = String>,
        names: &RecordNames,
    ) -> Result<(), StorageError> {
        self.rows = Vec::with_capacity(self.todo.len());
        self.workspaces = Vec::with_capacity(self.todo.len());
        for &at in &self.todo {
            let (index, new) = &items[at];
            // Every item's workspace was named before the plan was built.
            let workspace = *(names.get(&new.workspace)).ok_or_else(|| {
                StorageError::Corrupt(format!("workspace {} not named", new.workspace))
            })?;
            self.workspaces.push(workspace);
            let code = match &new.code {
                Some(code) => code.clone(),
                None => codes.next().unwrap_or_default(),
            };
            let url_hash = std::mem::take(&mut self.hashes[at]);
            self.rows.push(NewRow {
                link: new_link(new.clone(), code, url_hash, now),
                slot: claim.map(|claim| Slot {
                    batch_id: claim.batch_id,
                    index: *index,
                }),
            });
        }
        Ok(())
    }
}

/// An item an earlier attempt with the same key committed: the same answer, if it is the same
/// item (same URL, and same alias if it had one).
fn replayed(link: Link, new: &NewLink, url_hash: &str) -> ItemOutcome {
    let same_code = new.code.as_ref().is_none_or(|code| *code == link.code);
    if link.url_hash == url_hash && same_code {
        ItemOutcome::Created(Box::new(link))
    } else {
        ItemOutcome::Failed(ItemFailure::IdempotencyMismatch)
    }
}

fn finish(items: &[(i64, NewLink)], outcomes: Vec<Option<ItemOutcome>>) -> Vec<(i64, ItemOutcome)> {
    items
        .iter()
        .zip(outcomes)
        .map(|((index, _), outcome)| {
            (
                *index,
                outcome.unwrap_or(ItemOutcome::Failed(ItemFailure::Internal)),
            )
        })
        .collect()
}
