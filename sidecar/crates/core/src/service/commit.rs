//! How every write-through ends (create, batch, update, revoke): once Redis holds the new
//! records, the commit. When Redis fails the transaction is rolled back; when the commit fails
//! after the Redis write, Redis is put back as SQL keeps it. Each writer says what "put back"
//! means for it (delete what it wrote, or restore the previous record); the order, the logging
//! and the advice to run `resync` are here, once.
//!
//! A commit whose answer was lost (the connection dropped, the server stopped) may have taken
//! effect all the same. Undoing Redis then would leave a link in SQL without its record: a
//! retried create would hand out a code that answers 404. So such a commit is read back first.

use super::{LinkService, ServiceError};
use crate::projection::ProjectionError;
use shortlink_model::Link;
use shortlink_store::audit::AuditEntry;
use shortlink_store::{LinkTx, StorageError};
use std::future::Future;
use std::time::Duration;

/// Whose records a write sent, as its log lines name them, with a row that tells whether its
/// commit took effect.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scope<'a> {
    /// One link, as the write leaves it in SQL.
    Link(&'a Link),
    /// A batch group: how many records it sent, and one of the links it inserted.
    Batch {
        records: usize,
        probe: Option<&'a Link>,
    },
}

/// What the log lines say: the code, never the target or the rest of the row.
impl std::fmt::Display for Scope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Link(link) => write!(f, "link {}", link.code),
            Scope::Batch { records, .. } => write!(f, "batch of {records} records"),
        }
    }
}

impl Scope<'_> {
    fn probe(&self) -> Option<&Link> {
        match *self {
            Scope::Link(link) => Some(link),
            Scope::Batch { probe, .. } => probe,
        }
    }
}

/// What SQL holds after a commit that failed.
enum Outcome {
    Committed,
    RolledBack,
    /// The database did not answer within `--db-timeout`.
    Unknown,
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
        let error = match appended {
            Ok(()) => match tx.commit().await {
                Ok(()) => return Ok(()),
                Err(error) => match self.commit_outcome(scope).await {
                    Outcome::Committed => {
                        tracing::warn!(%scope, %error, "the commit's answer was lost, but it took effect");
                        return Ok(());
                    }
                    Outcome::RolledBack => error,
                    Outcome::Unknown => {
                        // Its records stay: a record without its row is a working link nobody
                        // was told of, a row without its record a link that answers 404.
                        tracing::error!(
                            %scope,
                            %error,
                            "the commit failed and the database did not answer whether it took \
                             effect: its redis records were kept; run `shortlink-sidecar resync` \
                             once the database is back"
                        );
                        return Err(error.into());
                    }
                },
            },
            Err(error) => {
                let _ = tx.rollback().await;
                error
            }
        };
        if let Err(redis) = undo.await {
            tracing::error!(
                %scope,
                %error,
                %redis,
                "commit failed after the redis write, and redis could not be restored: run \
                 `shortlink-sidecar resync`"
            );
        }
        Err(error.into())
    }

    /// Reads back, on another connection, whether a commit that failed took effect: SQL holds
    /// the probe's row as the write left it. Retried while the database does not answer, for
    /// `--db-timeout` at most.
    async fn commit_outcome(&self, scope: Scope<'_>) -> Outcome {
        let Some(probe) = scope.probe() else {
            return Outcome::RolledBack;
        };
        let read_back = async {
            let mut pause = Duration::from_millis(50);
            loop {
                match self.storage.get_link(probe.workspace, &probe.code).await {
                    Ok(Some(stored)) if same_write(&stored, probe) => return Outcome::Committed,
                    Ok(_) => return Outcome::RolledBack,
                    Err(StorageError::Unavailable(_)) => {
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(1));
                    }
                    Err(error) => {
                        tracing::warn!(%scope, %error, "a failed commit could not be read back");
                        return Outcome::Unknown;
                    }
                }
            }
        };
        (tokio::time::timeout(self.db_timeout, read_back).await).unwrap_or(Outcome::Unknown)
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
        tracing::warn!(%scope, %error, "redis write failed; rolling back");
        if let Err(rollback) = tx.rollback().await {
            tracing::warn!(error = %rollback, "rollback failed");
        }
        let Some(undo) = undo else {
            return;
        };
        if let Err(redis) = undo.await {
            tracing::error!(
                %scope,
                %redis,
                "a failed write could not be undone in redis: run `shortlink-sidecar resync`"
            );
        }
    }
}

/// Whether `stored` is the row a write of `written` left: all but the click counters, which the
/// visit consumer moves on its own.
fn same_write(stored: &Link, written: &Link) -> bool {
    let uncounted = |link: &Link| Link {
        visit_count: 0,
        last_visit_at: None,
        ..link.clone()
    };
    uncounted(stored) == uncounted(written)
}
