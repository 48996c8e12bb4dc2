//! Records in doubt: a write-through that failed may or may not have reached Redis, and with
//! Sentinel that matters after a failover. A reply lost with the connection, or a `WAIT` that came
//! short while the primary was dying, leaves a write on the old primary that its replicas may
//! still apply (a frozen replica reads what its socket buffered) and that the undo (a create's
//! delete, an update's previous record) may not have followed. The promoted replica would then
//! hold a refused change: an update SQL rolled back, a link SQL never committed.
//!
//! So with Sentinel or `--redis-wait-replicas` every key of a failed write-through is kept here,
//! with the value sent, until [`Projection::settle_in_doubt`] has written it again from SQL (the
//! marker's keeper calls it on every check).

use std::time::Duration;

use super::marker::RefillError;
use super::{written_value, Projection, ProjectionError, RecordWrite};
use crate::sync::LockOrRecover;
use shortlink_store::{self as storage, Storage};
use shortlink_wire::keys::LINK_PREFIX;
use shortlink_wire::keys::{PREVIEW_PREFIX, VISIT_COUNT_PREFIX};

impl Projection {
    /// Notes the keys of `writes` when `result` is a failure (with Sentinel, a cluster or `WAIT` only: one
    /// Redis behaves as before).
    pub(super) fn doubt_if_failed<T>(
        &self,
        writes: &[RecordWrite],
        result: Result<T, ProjectionError>,
    ) -> Result<T, ProjectionError> {
        if result.is_err() && (self.primary.fails_over() || self.wait.is_some()) {
            let mut in_doubt = self.in_doubt.lock_or_recover();
            for write in writes {
                in_doubt.insert(
                    write.key().to_owned(),
                    written_value(write).map(<[u8]>::to_vec),
                );
            }
        }
        result
    }

    /// The keys in doubt, with the value each failed write sent (`None` for a delete).
    pub fn in_doubt(&self) -> Vec<(String, Option<Vec<u8>>)> {
        let in_doubt = self.in_doubt.lock_or_recover();
        in_doubt
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// `key` written again from SQL: no longer in doubt, unless a write that failed since sent
    /// another value.
    pub fn settled(&self, key: &str, sent: &Option<Vec<u8>>) {
        let mut in_doubt = self.in_doubt.lock_or_recover();
        if in_doubt.get(key) == Some(sent) {
            in_doubt.remove(key);
        }
    }

    /// Writes every record in doubt again as SQL has it, under the row's lock so no update
    /// interleaves: the link's record (`WAIT`ed like any write-through), or, for a link SQL does
    /// not have, the removal of what the failed write sent (only if Redis still holds exactly
    /// that). Returns how many were settled; the first failure stops the round (the next check
    /// tries again, e.g. once a replica is promoted).
    pub async fn settle_in_doubt(
        &self,
        storage: &dyn Storage,
        grace: Duration,
    ) -> Result<usize, RefillError> {
        let mut settled = 0;
        let in_doubt = self.in_doubt();
        let slugs = super::Slugs::default();
        for (key, sent) in in_doubt {
            // A record, or a key that goes with one (its card, its click counter).
            let Some(code) = [LINK_PREFIX, PREVIEW_PREFIX, VISIT_COUNT_PREFIX]
                .iter()
                .find_map(|prefix| key.strip_prefix(prefix))
            else {
                continue;
            };
            let mut tx = storage.begin().await?;
            let result = match tx.lock_link_by_code(code).await {
                Ok(Some(link)) => {
                    let workspace = match slugs.record_workspace(storage, link.workspace).await {
                        Ok(workspace) => workspace,
                        Err(error) => {
                            let _ = tx.rollback().await;
                            return Err(error.into());
                        }
                    };
                    let writes =
                        RecordWrite::for_link_and_card(&link, workspace, storage::now(), grace);
                    self.apply(&writes).await
                }
                Ok(None) => match &sent {
                    Some(value) => {
                        self.delete_if_unchanged(&[(key.as_str(), value.as_slice())])
                            .await
                    }
                    None => Ok(()),
                },
                Err(error) => {
                    let _ = tx.rollback().await;
                    return Err(error.into());
                }
            };
            // Nothing changed in SQL: the transaction only held the row.
            let _ = tx.rollback().await;
            result?;
            self.settled(&key, &sent);
            settled += 1;
        }
        if settled > 0 {
            tracing::info!(settled, "records in doubt written again from SQL");
        }
        Ok(settled)
    }
}
