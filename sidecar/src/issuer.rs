//! Code issuance: sequence numbers leased from the database in blocks, turned into codes by the
//! keyed permutation of the `shortcode` crate.
//!
//! A lease is one atomic `UPDATE ... RETURNING`, so processes sharing a database never get
//! overlapping blocks, and issuing a code inside a block costs no I/O. A crash loses at most the
//! unused rest of the block, and of the batch reserve ([`BATCH_RESERVE`]).

use crate::storage::{Storage, StorageError};
use shortcode::{CodeScheme, SchemeError};
use std::sync::Arc;
use tokio::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Exhausted(#[from] SchemeError),
}

pub struct Issuer {
    scheme: CodeScheme,
    storage: Arc<dyn Storage>,
    block_size: u64,
    block: Mutex<Block>,
    /// Numbers leased for batches and not yet used: batch groups take theirs from here.
    reserve: Mutex<Block>,
}

/// Sequence numbers a batch lease takes at least. A lease is a write: on SQLite it waits for the
/// one write connection, i.e. for the batch group being written, and the next group could not be
/// prepared meanwhile. Leasing ahead makes most groups' codes free of I/O; a crash loses at most
/// this many numbers (of billions).
pub const BATCH_RESERVE: u64 = 65_536;

#[derive(Debug, Default)]
struct Block {
    next: u64,
    end: u64,
}

impl Issuer {
    pub fn new(scheme: CodeScheme, storage: Arc<dyn Storage>, block_size: u64) -> Self {
        Self {
            scheme,
            storage,
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
    pub async fn next_sequence(&self) -> Result<u64, StorageError> {
        let mut block = self.block.lock().await;
        if block.next >= block.end {
            let start = self.storage.lease_sequence_block(self.block_size).await?;
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
            let start = self.storage.lease_sequence_block(size).await?;
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
