//! Code issuance: sequence numbers leased from the database in blocks, turned into codes by the
//! keyed permutation of the `shortcode` crate.
//!
//! A lease is one atomic `UPDATE ... RETURNING`, so processes sharing a database never get
//! overlapping blocks, and issuing a code inside a block costs no I/O. A crash loses at most the
//! unused rest of the block, and of the batch reserve ([`BATCH_RESERVE`]).
//!
//! The database can be restored from a backup older than the codes already sent, and would then
//! lease their numbers again. So every lease also raises a high-water mark in Redis
//! ([`crate::projection::ISSUED_MARK`]), which a restored database cannot lower, and first
//! moves the database's sequence up to it. (Redis restored older, or lost: the creates' `SET NX`
//! still refuses any code Redis holds, see [`crate::service`].)

use crate::projection::{Projection, ProjectionError};
use shortcode::{CodeScheme, SchemeError};
use shortlink_store::{Storage, StorageError, RESTORED_BEHIND_REDIS_SETTING};
use std::sync::Arc;
use tokio::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Exhausted(#[from] SchemeError),
    /// The high-water mark could not be read or raised; a create could not be written anyway.
    #[error(transparent)]
    Redis(#[from] ProjectionError),
}

pub struct Issuer {
    scheme: CodeScheme,
    storage: Arc<dyn Storage>,
    projection: Arc<Projection>,
    block_size: u64,
    block: Mutex<Block>,
    /// Numbers leased for batches and not yet used: batch groups take theirs from here.
    reserve: Mutex<Block>,
}

/// Sequence numbers a batch lease takes at least (spelled in `wire`: the module's cache refill
/// skips as many unused numbers below the issued mark). A lease is a write: on SQLite it waits
/// for the one write connection, i.e. for the batch group being written, and the next group
/// could not be prepared meanwhile. Leasing ahead makes most groups' codes free of I/O; a crash
/// loses at most this many numbers (of billions).
pub use shortlink_wire::keys::BATCH_RESERVE;

#[derive(Debug, Default)]
struct Block {
    next: u64,
    end: u64,
}

impl Issuer {
    pub fn new(
        scheme: CodeScheme,
        storage: Arc<dyn Storage>,
        projection: Arc<Projection>,
        block_size: u64,
    ) -> Self {
        Self {
            scheme,
            storage,
            projection,
            block_size: block_size.max(1),
            block: Mutex::new(Block::default()),
            reserve: Mutex::new(Block::default()),
        }
    }

    pub fn scheme(&self) -> &CodeScheme {
        &self.scheme
    }

    /// The next sequence number; leases a new block when the current one is used up. Holding the
    /// lock across the lease makes concurrent callers wait for one lease instead of taking several.
    pub async fn next_sequence(&self) -> Result<u64, IssueError> {
        let mut block = self.block.lock().await;
        if block.next >= block.end {
            let start = self.lease(self.block_size).await?;
            *block = Block {
                next: start,
                end: start.saturating_add(self.block_size),
            };
        }
        let sequence = block.next;
        block.next += 1;
        Ok(sequence)
    }

    /// A fresh generated code.
    pub async fn next_code(&self) -> Result<String, IssueError> {
        let sequence = self.next_sequence().await?;
        Ok(self.scheme.encode(sequence)?)
    }

    /// Leases `size` numbers at or above the high-water mark; returns the first.
    async fn lease(&self, size: u64) -> Result<u64, IssueError> {
        // Read before leasing: every number below the mark was leased before this read, so a
        // database that was not restored has its sequence at or above it already.
        let mark = self.projection.issued_mark().await?;
        let mut start = self.storage.lease_sequence_block(size).await?;
        if start < mark {
            tracing::warn!(
                sequence = start,
                issued_mark = mark,
                "the database's sequence is behind the numbers already issued (restored from an \
                 older backup?): moving it up to the high-water mark kept in Redis"
            );
            self.storage.raise_sequence(mark).await?;
            // So that `resync` does not take the sent links SQL lacks for orphans.
            self.storage
                .set_setting(
                    RESTORED_BEHIND_REDIS_SETTING,
                    &mark.to_string(),
                    shortlink_store::now(),
                )
                .await?;
            start = self.storage.lease_sequence_block(size).await?;
        }
        self.projection
            .raise_issued_mark(start.saturating_add(size))
            .await?;
        Ok(start)
    }

    /// Moves past a number whose code Redis already holds (the database is behind), here and
    /// in the database.
    pub async fn skip_past(&self, code: &str) -> Result<(), StorageError> {
        self.storage
            .set_setting(RESTORED_BEHIND_REDIS_SETTING, code, shortlink_store::now())
            .await?;
        match self.scheme.decode(code) {
            Some(sequence) => self.raise_sequence(sequence.saturating_add(1)).await,
            None => Ok(()),
        }
    }

    /// Moves the sequence to at least `next` (restored codes use the numbers below it), and
    /// skips them in what this process has leased already.
    pub async fn raise_sequence(&self, next: u64) -> Result<(), StorageError> {
        self.storage.raise_sequence(next).await?;
        for leased in [&self.block, &self.reserve] {
            let mut leased = leased.lock().await;
            leased.next = leased.next.max(next).min(leased.end);
        }
        Ok(())
    }

    /// `count` fresh generated codes (a batch group), in sequence order, from the batch
    /// reserve: a database round trip only when the reserve runs out, and then for at least
    /// [`BATCH_RESERVE`] numbers, whatever the configured block size.
    pub async fn lease_codes(&self, count: usize) -> Result<Vec<String>, IssueError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let count = count as u64;
        let mut reserve = self.reserve.lock().await;
        let mut sequences = Vec::with_capacity(2);
        let mut missing = count;
        let left = reserve.end - reserve.next;
        if left > 0 {
            let take = left.min(missing);
            sequences.push(reserve.next..reserve.next + take);
            reserve.next += take;
            missing -= take;
        }
        if missing > 0 {
            let size = missing.max(BATCH_RESERVE);
            let start = self.lease(size).await?;
            *reserve = Block {
                next: start + missing,
                end: start.saturating_add(size),
            };
            sequences.push(start..start + missing);
        }
        drop(reserve);
        let mut codes = Vec::with_capacity(count as usize);
        for sequence in sequences.into_iter().flatten() {
            codes.push(self.scheme.encode(sequence)?);
        }
        Ok(codes)
    }
}
