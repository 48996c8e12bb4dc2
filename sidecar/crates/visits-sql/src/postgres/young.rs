//! The delivery tables' first statistics. The receipts' ingest reads a chunk's keys from
//! `delivery_receipts` and `delivery_messages` by their primary key; with no statistics,
//! PostgreSQL estimates `workspace_id = ?` at 0.5% of the rows, plans the read on the
//! `(workspace_id, code)` index and filters every row of the workspace for the keys (PostgreSQL
//! 15: 1.5 ms of the database a receipt on fresh tables, 60 µs once analyzed;
//! bench/results/deliveries-2026-11-28.md). Neither `= ANY(array)` nor a join on `unnest` plans
//! better without statistics. Autovacuum analyzes a table once a tenth of it changed, within
//! its naptime, but a new installation's first campaign of receipts lands before that: so once
//! this process has stored [`FIRST_CHECK_AFTER`] receipts it asks, once, whether either table
//! was never analyzed, and analyzes both if so. Later statistics are autovacuum's.

use sqlx::PgPool;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Receipts stored by this process before the one check: enough rows for statistics that
/// describe the keys (unique message ids), few enough that the first campaign is still young.
const FIRST_CHECK_AFTER: usize = 1_000;

#[derive(Default)]
pub(super) struct YoungTables {
    stored: AtomicUsize,
    checked: AtomicBool,
}

impl YoungTables {
    pub(super) async fn receipts_stored(&self, writer: &PgPool, count: usize) {
        if self.checked.load(Ordering::Relaxed)
            || self.stored.fetch_add(count, Ordering::Relaxed) + count < FIRST_CHECK_AFTER
            // The first caller past the count checks; concurrent chunks do not analyze twice.
            || self.checked.swap(true, Ordering::Relaxed)
        {
            return;
        }
        if let Err(error) = analyze_if_never_analyzed(writer).await {
            // Only the ingest's speed depends on it, until autovacuum's own analyze.
            tracing::warn!(%error, "the delivery tables could not be analyzed");
        }
    }
}

async fn analyze_if_never_analyzed(writer: &PgPool) -> Result<(), sqlx::Error> {
    // `reltuples` is -1 until a table's first VACUUM or ANALYZE (PostgreSQL 14 and later).
    let never: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_class WHERE reltuples < 0 AND oid IN \
         (to_regclass('delivery_receipts'), to_regclass('delivery_messages'))",
    )
    .fetch_one(writer)
    .await?;
    if never > 0 {
        sqlx::query("ANALYZE delivery_receipts, delivery_messages")
            .execute(writer)
            .await?;
    }
    Ok(())
}
