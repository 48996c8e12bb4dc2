//! Settling the records in doubt (crate::projection's `doubt`): each written again from SQL.

use super::{LinkService, ServiceError};
use crate::projection::{RecordWrite, KEY_PREFIX};
use crate::storage;
use shortlink_wire::keys::{PREVIEW_PREFIX, VISIT_COUNT_PREFIX};

impl LinkService {
    /// Writes every record in doubt again as SQL has it, under the row's lock so no update
    /// interleaves: the link's record (`WAIT`ed like any write-through), or, for a link SQL does
    /// not have, the removal of what the failed write sent (only if Redis still holds exactly
    /// that). Returns how many were settled; the first failure stops the round (the next check
    /// tries again, e.g. once a replica is promoted).
    pub async fn settle_in_doubt(&self) -> Result<usize, ServiceError> {
        let mut settled = 0;
        for (key, sent) in self.projection.in_doubt() {
            // A record, or a key that goes with one (its card, its click counter).
            let Some(code) = [KEY_PREFIX, PREVIEW_PREFIX, VISIT_COUNT_PREFIX]
                .iter()
                .find_map(|prefix| key.strip_prefix(prefix))
            else {
                continue;
            };
            let mut tx = self.storage.begin().await?;
            let result = match tx.lock_link(code).await {
                Ok(Some(link)) => {
                    let writes = RecordWrite::for_link_and_card(&link, storage::now(), self.grace);
                    self.projection.apply(&writes).await
                }
                Ok(None) => match &sent {
                    Some(value) => {
                        self.projection
                            .delete_if_unchanged(&[(key.as_str(), value.as_slice())])
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
            self.projection.settled(&key, &sent);
            settled += 1;
        }
        if settled > 0 {
            tracing::info!(settled, "records in doubt written again from SQL");
        }
        Ok(settled)
    }
}
