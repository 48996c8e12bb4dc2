//! Code issuance: sequence numbers leased from the database in blocks, turned into codes by the
//! keyed permutation of the `shortcode` crate.
//!
//! A lease is one atomic `UPDATE ... RETURNING`, so processes sharing a database never get
//! overlapping blocks, and issuing a code inside a block costs no I/O. A crash loses at most the
//! unused rest of the block.

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
}

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

    /// `count` fresh generated codes from one lease of exactly that many numbers (a batch chunk):
    /// one database round trip, whatever the configured block size.
    pub async fn lease_codes(&self, count: usize) -> Result<Vec<String>, IssueError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let start = self.storage.lease_sequence_block(count as u64).await?;
        (start..start + count as u64)
            .map(|sequence| self.scheme.encode(sequence).map_err(IssueError::from))
            .collect()
    }
}
