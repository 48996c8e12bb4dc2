//! A single create of a generated code on PostgreSQL: the record first (`SET NX`), then the link
//! and its audit row in one statement that commits by itself. A transaction would cost `BEGIN`
//! and `COMMIT`, two round trips of the four a create sends, for nothing the order below does
//! not give: the row is stored only once its record is, as in a transaction held across the
//! Redis write.
//!
//! What a crash between the two leaves is a record without its row: a code nobody was given,
//! which `resync` removes (docs/RELIABILITY.md). Aliases keep the transaction
//! ([`super::create`]): a chosen code may be a row whose record is gone (a link expired past its
//! grace, or revoked), and its record must not answer, even for a moment, with another target.
//! A generated code is one no link has, unless the sequence went back or an import kept a
//! code of our shape; both are caught by the insert and taken back, as below.

use super::commit::{Outcome, Scope};
use super::{LinkService, ServiceError};
use crate::projection::{written_value, ProjectionError, RecordWrite};
use shortlink_store::audit::AuditEntry;
use shortlink_store::{self as storage, Link, Slot, StorageError, StorageResult};

/// How one attempt at a generated code ended.
pub(super) enum Attempt {
    /// The link is stored, with its record.
    Created,
    /// The code was taken (in Redis or in SQL) and nothing of this attempt remains: try the next.
    CodeTaken,
    /// The claimed slot holds a concurrent request's link: that one is the answer.
    SlotTaken(Box<Link>),
}

impl LinkService {
    /// Whether single creates of generated codes take [`Self::create_record_first`].
    pub(super) fn creates_record_first(&self) -> bool {
        self.storage.backend() == storage::Backend::Postgres
    }

    /// Writes `link`'s record (and card), then its row and `audit` ([`storage::Storage::
    /// insert_link_committed`], else in a transaction). Whatever this attempt wrote to Redis is
    /// taken back unless SQL holds the row.
    pub(super) async fn create_record_first(
        &self,
        link: &Link,
        slot: Option<Slot>,
        audit: &AuditEntry,
    ) -> Result<Attempt, ServiceError> {
        let write = RecordWrite::for_link(link, storage::now(), self.grace);
        let card = RecordWrite::new_card(link, &write);
        let record = written_value(&write).map(|value| (write.key(), value));
        let written: Vec<(&str, &[u8])> = record
            .into_iter()
            .chain(
                card.iter()
                    .filter_map(|card| Some((card.key(), written_value(card)?))),
            )
            .collect();
        let scope = Scope::Link(link);

        let redis_started = std::time::Instant::now();
        let created = self.projection.create(&write).await;
        crate::metrics::write_latency("redis", redis_started);
        match created {
            Ok(None) => {}
            Ok(Some(existing)) => {
                self.generated_code_refused(&link.code, &existing).await?;
                return Ok(Attempt::CodeTaken);
            }
            Err(error) => {
                // The record is on the primary if too few replicas have it: taken back then.
                if matches!(error, ProjectionError::NotReplicated { .. }) {
                    self.take_back(scope, record.as_slice()).await;
                }
                return Err(error.into());
            }
        }
        if let Some(card) = &card {
            if let Err(error) = self.projection.apply(std::slice::from_ref(card)).await {
                self.take_back(scope, &written).await;
                return Err(error.into());
            }
        }

        let sql_started = std::time::Instant::now();
        let stored = match self.storage.insert_link_committed(link, slot, audit).await {
            Ok(true) => Ok(()),
            // This process does not know the chain's head (its first append, or another
            // sidecar appended since): a transaction reads it under lock.
            Ok(false) => self.insert_in_transaction(link, slot, audit).await,
            Err(error) => Err(error),
        };
        crate::metrics::write_latency("sql", sql_started);
        match stored {
            Ok(()) => Ok(Attempt::Created),
            Err(StorageError::Conflict) => {
                self.take_back(scope, &written).await;
                // A concurrent request with the same idempotency key may have won the slot.
                if let Some(slot) = slot {
                    if let Some((_, won)) = self
                        .storage
                        .links_by_slots(slot.batch_id, 0, 0)
                        .await?
                        .pop()
                    {
                        return Ok(Attempt::SlotTaken(Box::new(won)));
                    }
                }
                self.generated_code_taken(&link.code).await;
                Ok(Attempt::CodeTaken)
            }
            Err(error) => match self.commit_outcome(scope).await {
                Outcome::Committed => {
                    tracing::warn!(%scope, %error, "the insert's answer was lost, but it took effect");
                    Ok(Attempt::Created)
                }
                Outcome::RolledBack => {
                    self.take_back(scope, &written).await;
                    Err(error.into())
                }
                Outcome::Unknown => {
                    tracing::error!(
                        %scope,
                        %error,
                        "the insert failed and the database did not answer whether it took \
                         effect: its redis records were kept; run `shortlink-sidecar resync` \
                         once the database is back"
                    );
                    Err(error.into())
                }
            },
        }
    }

    /// The insert and the append in a transaction: the append locks the chain's head.
    async fn insert_in_transaction(
        &self,
        link: &Link,
        slot: Option<Slot>,
        audit: &AuditEntry,
    ) -> StorageResult<()> {
        let mut tx = self.storage.begin().await?;
        let mut written = tx.insert_link_audited(link, slot, audit).await;
        if let Ok(false) = written {
            written = tx.append_audit(audit).await.map(|()| true);
        }
        match written {
            Ok(_) => tx.commit().await,
            Err(error) => {
                let _ = tx.rollback().await;
                Err(error)
            }
        }
    }

    /// Redis refused a generated code's record: a link in SQL holds the code too (the sequence
    /// went back, or an import kept it), or SQL is behind Redis ([`Self::refused_code`], and the
    /// issuer moves past it).
    async fn generated_code_refused(
        &self,
        code: &str,
        existing: &[u8],
    ) -> Result<(), ServiceError> {
        if self.storage.link_by_code(code).await?.is_some() {
            self.generated_code_taken(code).await;
            return Ok(());
        }
        self.refused_code(code, existing);
        self.issuer.skip_past(code).await?;
        Ok(())
    }

    /// Deletes what this attempt wrote to Redis, where it is still as written.
    async fn take_back(&self, scope: Scope<'_>, written: &[(&str, &[u8])]) {
        if let Err(redis) = self.projection.delete_if_unchanged(written).await {
            tracing::error!(
                %scope,
                %redis,
                "a link not stored could not be taken back from redis: run `shortlink-sidecar resync`"
            );
        }
    }
}
