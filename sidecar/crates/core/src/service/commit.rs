//! How every write-through ends (create, batch, update, revoke): once Redis holds the new
//! records, the commit. When Redis fails the transaction is rolled back; when the commit fails
//! after the Redis write, Redis is put back as SQL keeps it. Each writer says what "put back"
//! means for it (delete what it wrote, or restore the previous record); the order, the logging
//! and the advice to run `resync` are here, once.

use super::{LinkService, ServiceError};
use crate::projection::ProjectionError;
use shortlink_store::audit::AuditEntry;
use shortlink_store::LinkTx;
use std::future::Future;

/// Whose records a write sent, as its log lines name them.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scope<'a> {
    Link(&'a str),
    /// A batch group: how many records it sent.
    Batch(usize),
}

impl LinkService {
    /// Appends the change's audit row (`audit`, the last statement: the workspace's chain head
    /// stays locked only until the commit) and commits `tx`; if either fails, `undo` takes Redis
    /// back to what SQL keeps (best effort: what it cannot undo is logged, for `resync`). `undo`
    /// runs only on that failure. So a change is never stored without its audit row.
    pub(super) async fn commit_or_undo(
        &self,
        mut tx: Box<dyn LinkTx>,
        scope: Scope<'_>,
        audit: Option<&AuditEntry>,
        undo: impl Future<Output = Result<(), ProjectionError>>,
    ) -> Result<(), ServiceError> {
        let appended = match audit {
            Some(entry) => tx.append_audit(entry).await,
            None => Ok(()),
        };
        let committed = match appended {
            Ok(()) => tx.commit().await,
            Err(error) => {
                let _ = tx.rollback().await;
                Err(error)
            }
        };
        let Err(error) = committed else {
            return Ok(());
        };
        if let Err(redis) = undo.await {
            const ADVICE: &str = "commit failed after the redis write, and redis could not be \
                                  restored: run `shortlink-sidecar resync`";
            match scope {
                Scope::Link(code) => tracing::error!(code, %error, %redis, "{ADVICE}"),
                Scope::Batch(records) => tracing::error!(records, %error, %redis, "{ADVICE}"),
            }
        }
        Err(error.into())
    }

    /// After the Redis write failed (`error`): rolls `tx` back. A record that reached the primary
    /// but too few replicas ([`ProjectionError::NotReplicated`]) is taken back with `undo`, so a
    /// write not acknowledged is in neither store.
    pub(super) async fn roll_back_after_redis(
        &self,
        tx: Box<dyn LinkTx>,
        scope: Scope<'_>,
        error: &ProjectionError,
        undo: impl Future<Output = Result<(), ProjectionError>>,
    ) {
        let reached = matches!(error, ProjectionError::NotReplicated { .. });
        self.roll_back_and_undo(tx, scope, error, reached.then_some(undo))
            .await;
    }

    /// After a Redis write failed (`error`) when earlier ones of the same write had succeeded (a
    /// card after its record): rolls `tx` back and takes back what reached Redis with `undo`.
    pub(super) async fn roll_back_and_undo(
        &self,
        tx: Box<dyn LinkTx>,
        scope: Scope<'_>,
        error: &ProjectionError,
        undo: Option<impl Future<Output = Result<(), ProjectionError>>>,
    ) {
        match scope {
            Scope::Link(code) => tracing::warn!(code, %error, "redis write failed; rolling back"),
            Scope::Batch(records) => {
                tracing::warn!(records, %error, "redis write failed; rolling back")
            }
        }
        if let Err(rollback) = tx.rollback().await {
            tracing::warn!(error = %rollback, "rollback failed");
        }
        let Some(undo) = undo else {
            return;
        };
        if let Err(redis) = undo.await {
            const ADVICE: &str = "a failed write could not be undone in redis: run \
                                  `shortlink-sidecar resync`";
            match scope {
                Scope::Link(code) => tracing::error!(code, %redis, "{ADVICE}"),
                Scope::Batch(records) => tracing::error!(records, %redis, "{ADVICE}"),
            }
        }
    }
}
