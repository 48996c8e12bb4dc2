//! The consumer's counters, which the metrics read and every part of the consumer adds to.

use std::sync::atomic::{AtomicU64, Ordering};

/// What the consumer has done since it started.
#[derive(Debug, Default)]
pub struct ConsumerCounters {
    /// Stream entries read (one entry may carry several visits).
    pub read: AtomicU64,
    /// Visits found in those entries, well-formed or not (`invalid` counts the malformed ones).
    pub visits: AtomicU64,
    pub inserted: AtomicU64,
    pub duplicates: AtomicU64,
    pub invalid: AtomicU64,
    pub ignored: AtomicU64,
    pub trimmed: AtomicU64,
    /// Visits of codes no link holds: a deleted workspace's clicks that were still in the
    /// stream, a worker's spool or its cache. Dropped, never counted as another workspace's.
    pub unowned: AtomicU64,
    pub failed: AtomicU64,
    /// Orphan visits stored (crate::orphans), redeliveries not counted again.
    pub orphans: AtomicU64,
    pub acked: AtomicU64,
    /// Stored visits whose verdict hindsight changed (crate::hindsight), each once.
    pub reclassified: AtomicU64,
    /// The most visits one read has held (reads are sized to about one transaction's worth).
    pub largest_read: AtomicU64,
}

impl ConsumerCounters {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn max(counter: &AtomicU64, n: u64) {
        counter.fetch_max(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
