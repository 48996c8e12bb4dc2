//! A batch's chunks in flight at once, on separate connections (PostgreSQL): while the database
//! writes one chunk, the sidecar prepares the next and reads the answers of the one before, so
//! that their work overlaps instead of adding up (bench/results/deliveries-2026-11-28c.md).
//!
//! A receipt's answer depends only on the rows of its own message (its receipts and its current
//! state) and on its link, which the batch does not change. So the batch is cut by message, not
//! by position: every receipt of one message goes to the chunk its first receipt went to, in
//! their order, and the chunks then share no row: no chunk waits for another's lock, none can
//! deadlock with another, and each message sees its receipts played in input order, exactly as
//! one chunk after the other would. The answers are put back in input order.
//!
//! SQLite has one writer; MariaDB's locking reads of messages not there yet lock the gaps
//! between keys, so that chunks of different messages could still wait for each other and
//! deadlock: both stay one chunk at a time.

use super::chunk::key;
use crate::{SqlVisitStore, VisitDialect};
use chrono::{DateTime, Utc};
use futures_util::{StreamExt, TryStreamExt};
use shortlink_model::WorkspaceId;
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::deliveries::model::{NewReceipt, Recorded, Refusal};
use std::collections::HashMap;

/// Chunks of one batch written at once. PostgreSQL spends about four times the sidecar's CPU
/// on a receipt: two chunks keep it busy while a third is prepared or answered.
pub(super) const IN_FLIGHT: usize = 3;

/// The positions of `receipts` in chunks of about `size`, each message's (by `key`, the
/// message id as the database compares it) in one chunk, in order. A chunk takes new messages
/// until it holds `size` receipts; a message seen before adds its receipt to its own chunk,
/// which may then hold more.
fn by_message(receipts: &[NewReceipt], size: usize, key: fn(&str) -> &str) -> Vec<Vec<usize>> {
    let mut chunks: Vec<Vec<usize>> = Vec::with_capacity(receipts.len().div_ceil(size));
    let mut chunk_of: HashMap<&str, usize> = HashMap::with_capacity(receipts.len());
    for (position, receipt) in receipts.iter().enumerate() {
        let chunk = *chunk_of.entry(key(&receipt.message_id)).or_insert_with(|| {
            if chunks.last().is_none_or(|last| last.len() >= size) {
                chunks.push(Vec::with_capacity(size));
            }
            chunks.len() - 1
        });
        chunks[chunk].push(position);
    }
    chunks
}

impl<V: VisitDialect> SqlVisitStore<V> {
    /// `receipts` cut by message ([`by_message`]), [`IN_FLIGHT`] chunks at a time, answered in
    /// input order. The first chunk that fails fails the batch; the chunks committed before it
    /// stay (their receipts answer as duplicates when the batch is sent again).
    pub(super) async fn record_in_parallel(
        &self,
        workspace: WorkspaceId,
        receipts: &[NewReceipt],
        size: usize,
        now: DateTime<Utc>,
    ) -> StorageResult<Vec<Result<Recorded, Refusal>>> {
        let chunks = by_message(receipts, size, key::<V>);
        let owned: Vec<Vec<NewReceipt>> = (chunks.iter())
            .map(|positions| positions.iter().map(|&p| receipts[p].clone()).collect())
            .collect();
        // Collected first (futures do nothing until polled): a closure in the stream is not
        // general enough for `async_trait`'s boxed future.
        let writes: Vec<_> = (owned.iter())
            .map(|chunk| self.record_receipt_chunk(workspace, chunk, now))
            .collect();
        let answered: Vec<Vec<Result<Recorded, Refusal>>> = futures_util::stream::iter(writes)
            .buffered(IN_FLIGHT)
            .try_collect()
            .await?;
        let mut out: Vec<Option<Result<Recorded, Refusal>>> = vec![None; receipts.len()];
        for (positions, answers) in chunks.iter().zip(answered) {
            for (&position, answer) in positions.iter().zip(answers) {
                out[position] = Some(answer);
            }
        }
        (out.into_iter().collect::<Option<Vec<_>>>())
            .ok_or_else(|| StorageError::Corrupt("a chunk's answer is missing".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_visits::deliveries::model::{DeliveryState, Gateway, LinkRef};

    fn receipt(message_id: &str) -> NewReceipt {
        NewReceipt {
            link: LinkRef::Code("c".into()),
            short_domain: None,
            message_id: message_id.into(),
            state: DeliveryState::Delivered,
            error_code: None,
            error_text: None,
            carrier: None,
            at: DateTime::default(),
            gateway: Gateway::Api,
        }
    }

    #[test]
    fn a_message_seen_before_joins_its_own_chunk_in_order() {
        let ids = ["a", "b", "c", "a", "d", "b", "e", "a", "f", "g"];
        let receipts: Vec<NewReceipt> = ids.iter().map(|id| receipt(id)).collect();
        assert_eq!(
            by_message(&receipts, 3, |id| id),
            [vec![0, 1, 2, 3, 5, 7], vec![4, 6, 8], vec![9]]
        );
    }

    #[test]
    fn keys_that_compare_equal_are_one_message() {
        let receipts = [receipt("a"), receipt("b"), receipt("a  ")];
        let trimmed = by_message(&receipts, 2, |id| id.trim_end_matches(' '));
        assert_eq!(trimmed, [vec![0, 1, 2]]);
        assert_eq!(by_message(&receipts, 2, |id| id), [vec![0, 1], vec![2]]);
    }
}
