//! Group commit of the callbacks' receipts: a gateway calls once per report, so under load many
//! callbacks of one workspace are waiting on their own transaction at once, each spending a
//! handful of round trips on it. Instead each checked receipt is queued with a oneshot, and one
//! writer per workspace takes what is queued (up to the store's chunk) and writes it as the
//! NDJSON ingest does (`record_receipts`: one transaction for many, each answered as if alone,
//! a repeat within the group as a duplicate of the first), then answers each.
//!
//! The writer never waits for more: alone, a callback is written at once, as before. A callback
//! is answered only after its group's commit (a gateway retries an unanswered report, and a 2xx
//! must mean stored); a database failure answers every callback of the group 5xx, and nothing of
//! the group is half-written (one transaction). Only a group that lost a race to a concurrent
//! writer of the same messages is redone one receipt at a time (`record_receipts`); should the
//! database fail in the middle of that, the receipts already stored are answered 5xx with the
//! rest, and a gateway's retry of one of them gets 200 (a duplicate). The writer runs in a task
//! of its own, so a gateway that hangs up does not abandon the others' group.

use shortlink_store::StorageError;

use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::{NewReceipt, Recorded, Refusal};
use shortlink_visits::store::VisitStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// Receipts per group: the store's chunk (one transaction).
const GROUP: usize = 500;

/// What recording one receipt answered; a failed group's error shared by all its callbacks.
pub type Answer = Result<Result<Recorded, Refusal>, Arc<StorageError>>;

struct Waiting {
    receipt: NewReceipt,
    answer: oneshot::Sender<Answer>,
}

/// The callbacks' receipts waiting for their workspace's writer. A workspace is in the map
/// while its writer runs.
#[derive(Default)]
pub struct ReceiptGroups {
    queues: Mutex<HashMap<WorkspaceId, Vec<Waiting>>>,
}

impl std::fmt::Debug for ReceiptGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptGroups").finish_non_exhaustive()
    }
}

impl ReceiptGroups {
    /// Records `receipt` in `workspace` with whatever else is waiting there, answered after the
    /// commit. `None`: the writer failed before answering (it panicked).
    pub async fn record(
        self: &Arc<Self>,
        store: &Arc<dyn VisitStore>,
        workspace: WorkspaceId,
        receipt: NewReceipt,
    ) -> Option<Answer> {
        let (answer, answered) = oneshot::channel();
        let start_writer = {
            let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
            let start = !queues.contains_key(&workspace);
            (queues.entry(workspace).or_default()).push(Waiting { receipt, answer });
            start
        };
        if start_writer {
            let writer = Writer {
                groups: Arc::clone(self),
                workspace,
                done: false,
            };
            tokio::spawn(writer.run(Arc::clone(store)));
        }
        answered.await.ok()
    }
}

/// The one writer of a workspace's queue while it has one.
struct Writer {
    groups: Arc<ReceiptGroups>,
    workspace: WorkspaceId,
    /// The queue was found empty and the workspace left the map under its lock.
    done: bool,
}

impl Writer {
    async fn run(mut self, store: Arc<dyn VisitStore>) {
        while let Some(group) = self.take() {
            let (receipts, answers): (Vec<_>, Vec<_>) = (group.into_iter())
                .map(|waiting| (waiting.receipt, waiting.answer))
                .unzip();
            let now = shortlink_store::now();
            let recorded = (store.deliveries())
                .record_receipts(self.workspace, &receipts, now)
                .await;
            match recorded {
                Ok(recorded) if recorded.len() == answers.len() => {
                    for (answer, recorded) in answers.into_iter().zip(recorded) {
                        // A callback whose gateway hung up: its receipt is stored all the same.
                        let _ = answer.send(Ok(recorded));
                    }
                }
                Ok(_) => {
                    let error = Arc::new(StorageError::Corrupt(
                        "the store answered a group of receipts with another count".into(),
                    ));
                    for answer in answers {
                        let _ = answer.send(Err(Arc::clone(&error)));
                    }
                }
                Err(error) => {
                    let error = Arc::new(error);
                    for answer in answers {
                        let _ = answer.send(Err(Arc::clone(&error)));
                    }
                }
            }
        }
    }

    /// What is waiting now (at most a group); `None` once nothing is, the writer then gone.
    fn take(&mut self) -> Option<Vec<Waiting>> {
        let mut queues = (self.groups.queues.lock()).unwrap_or_else(PoisonError::into_inner);
        let Some(waiting) = queues.get_mut(&self.workspace) else {
            self.done = true;
            return None;
        };
        if waiting.is_empty() {
            queues.remove(&self.workspace);
            self.done = true;
            return None;
        }
        let take = waiting.len().min(GROUP);
        Some(waiting.drain(..take).collect())
    }
}

impl Drop for Writer {
    /// A writer that panicked: its workspace leaves the map, so that the next callback starts a
    /// new writer; the callbacks queued meanwhile are answered 5xx (their senders dropped).
    fn drop(&mut self) {
        if !self.done {
            let mut queues = (self.groups.queues.lock()).unwrap_or_else(PoisonError::into_inner);
            queues.remove(&self.workspace);
        }
    }
}
