//! The database side of the consumer: preparing a read batch (split, enrich) and writing it.

use super::counters::ConsumerCounters;
use super::entry::RawEntry;
use super::error::ConsumerError;
use crate::hindsight::{Correction, Hindsight, LinkFacts};
use crate::store::VisitStore;
use shortlink_store::StorageError;
use shortlink_visit_enrich::{split_entry, Enricher, Visit};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// A batch parsed and enriched: the entry ids to acknowledge once `visits` are committed.
pub(super) struct Prepared {
    pub(super) ids: Vec<String>,
    pub(super) visits: Vec<Visit>,
    /// Orphan visits (`crate::orphans::orphan_of`), stored after `visits`.
    pub(super) orphans: Vec<Visit>,
    /// Visits found in the entries, stored or not (sizes the next read).
    pub(super) seen: usize,
}

/// The database side of the consumer, cloned into the task that writes a batch.
#[derive(Clone)]
pub(super) struct Writer {
    pub(super) store: Arc<dyn VisitStore>,
    pub(super) counters: Arc<ConsumerCounters>,
    pub(super) count_bots: bool,
    pub(super) max_visits_per_transaction: usize,
    pub(super) shutdown: Option<watch::Receiver<bool>>,
    /// What the consumer remembers of earlier batches to judge the next ones by (one writer
    /// at a time holds it: batches are written in stream order).
    pub(super) hindsight: Arc<Mutex<Hindsight>>,
}

/// Splits entries into visits (several per entry when the module packed them) and enriches them.
/// Orphan visits (`crate::orphans::orphan_of`) go apart, to be stored after the visits.
/// Malformed visits, other non-redirect answers and `verify-import`'s own requests
/// ([`shortlink_wire::agent::VERIFY_IMPORT_AGENT`]) are counted and left out; their entries are
/// acknowledged with the rest.
/// `suffix`: on a cluster, the stream's own mark appended to each entry id to make the visit id:
/// entry ids are unique per stream only, and two streams' entries of the same millisecond would
/// otherwise share an id and count once.
pub(super) fn prepare(
    entries: &[RawEntry],
    suffix: Option<&str>,
    enricher: &Enricher,
    counters: &ConsumerCounters,
) -> Prepared {
    // Split first, so the visits' vector is allocated once at its size: grown from one visit an
    // entry (16,000 visits of 32 an entry: 6 MB), each doubling copied it into fresh pages, and
    // faulting them in took a tenth of the consumer's CPU.
    let mut events = Vec::with_capacity(entries.len());
    for entry in entries {
        let Some(fields) = &entry.fields else {
            ConsumerCounters::add(&counters.trimmed, 1);
            continue;
        };
        let id = match suffix {
            Some(suffix) => std::borrow::Cow::Owned(format!("{}{suffix}", entry.id)),
            None => std::borrow::Cow::Borrowed(entry.id.as_str()),
        };
        events.push(split_entry(&id, fields));
    }
    let seen = events.iter().map(Vec::len).sum();
    ConsumerCounters::add(&counters.visits, seen as u64);
    let mut visits = Vec::with_capacity(seen);
    let mut orphans = Vec::new();
    for event in events.into_iter().flatten() {
        match event {
            Err(error) => {
                tracing::debug!(%error, "unreadable visit event acknowledged");
                ConsumerCounters::add(&counters.invalid, 1);
            }
            // A request no link answered, or a known link's 410 (crate::orphans), on a host:
            // without one it is nobody's orphan, counted as ignored below.
            Ok(event)
                if (event.orphan.is_some() || event.status == Some(410))
                    && event.host.is_some() =>
            {
                orphans.push(enricher.enrich_owned(event));
            }
            Ok(event)
                if event.status.is_some_and(|s| !(300..400).contains(&s))
                    || event.user_agent.as_deref().is_some_and(|agent| {
                        agent.starts_with(shortlink_wire::agent::VERIFY_IMPORT_AGENT)
                    }) =>
            {
                ConsumerCounters::add(&counters.ignored, 1);
            }
            Ok(event) => visits.push(enricher.enrich_owned(event)),
        }
    }
    Prepared {
        ids: entries.iter().map(|e| e.id.clone()).collect(),
        visits,
        orphans,
        seen,
    }
}

impl Writer {
    /// Judges a batch's visits with hindsight ([`Hindsight::judge`]), then stores them in
    /// transactions of at most `max_visits_per_transaction`, the first one applying the
    /// corrections to earlier visits; then hands the stored batch back to hindsight.
    pub(super) async fn write_all(&self, mut visits: Vec<Visit>) -> Result<(), ConsumerError> {
        let corrections = self.judge(&mut visits).await;
        let mut corrections = corrections.as_slice();
        for chunk in visits.chunks(self.max_visits_per_transaction) {
            self.write(chunk, std::mem::take(&mut corrections)).await?;
        }
        if !corrections.is_empty() {
            self.write(&[], corrections).await?;
        }
        (self.hindsight.lock())
            .unwrap_or_else(|e| e.into_inner())
            .keep(visits);
        Ok(())
    }

    /// The batch judged with what the store knows of its links; without it (the database
    /// failing), by the click-time signals alone.
    async fn judge(&self, visits: &mut [Visit]) -> Vec<Correction> {
        let codes = Hindsight::codes(visits);
        let facts = match codes.is_empty() {
            true => LinkFacts::default(),
            false => match self.store.link_facts(&codes).await {
                Ok(facts) => facts,
                Err(error) => {
                    tracing::warn!(%error, "link facts unavailable; the batch judged at click time only");
                    LinkFacts::default()
                }
            },
        };
        let mut hindsight = self.hindsight.lock().unwrap_or_else(|e| e.into_inner());
        hindsight.judge(visits, &facts)
    }

    /// Stores a batch's orphan visits in one transaction, riding out database outages as
    /// [`Writer::write`] does; a batch refused otherwise is dropped (counted as `failed`).
    pub(super) async fn write_orphans(&self, orphans: &[Visit]) -> Result<(), ConsumerError> {
        if orphans.is_empty() {
            return Ok(());
        }
        let mut attempt: u32 = 0;
        loop {
            match self.store.orphans().store_orphans(orphans).await {
                Ok(stored) => {
                    ConsumerCounters::add(&self.counters.orphans, stored);
                    for visit in orphans {
                        if let Some((kind, _)) = crate::orphans::orphan_of(visit) {
                            shortlink_core::metrics::orphan_visit(kind.as_str());
                        }
                    }
                    return Ok(());
                }
                Err(error @ StorageError::Unavailable(_)) => {
                    tracing::warn!(%error, "database unavailable; retrying the orphan visits");
                }
                Err(error) if attempt < 2 => {
                    tracing::warn!(%error, attempt, "orphan visits failed; retrying");
                }
                Err(error) => {
                    tracing::error!(%error, orphans = orphans.len(), "orphan visits cannot be stored; dropped");
                    ConsumerCounters::add(&self.counters.failed, orphans.len() as u64);
                    return Ok(());
                }
            }
            attempt = attempt.saturating_add(1);
            self.pause(backoff(attempt)).await?;
        }
    }

    /// Stores visits in one transaction per batch, riding out database outages (see the module
    /// doc): returns `Err` only on shutdown.
    async fn write(
        &self,
        visits: &[Visit],
        corrections: &[Correction],
    ) -> Result<(), ConsumerError> {
        if visits.is_empty() && corrections.is_empty() {
            return Ok(());
        }
        let mut attempt: u32 = 0;
        loop {
            let stored = self
                .store
                .store_corrected(visits, corrections, self.count_bots)
                .await;
            match stored {
                Ok(outcome) => {
                    // The rollups commit with the visits (one transaction): this is their delay.
                    if let Some(oldest) = visits.iter().map(|v| v.time_ms).min() {
                        shortlink_core::metrics::rollup_delay(oldest);
                    }
                    ConsumerCounters::add(&self.counters.inserted, outcome.inserted);
                    ConsumerCounters::add(&self.counters.duplicates, outcome.duplicates);
                    ConsumerCounters::add(&self.counters.unowned, outcome.unowned);
                    ConsumerCounters::add(&self.counters.reclassified, outcome.reclassified);
                    return Ok(());
                }
                Err(error @ StorageError::Unavailable(_)) => {
                    tracing::warn!(%error, "database unavailable; retrying the visit batch");
                }
                Err(error) if attempt < 2 => {
                    tracing::warn!(%error, attempt, "visit batch failed; retrying");
                }
                Err(error) if visits.len() > 1 => {
                    tracing::warn!(%error, visits = visits.len(), "visit batch failed; splitting it");
                    let (left, right) = visits.split_at(visits.len() / 2);
                    Box::pin(self.write(left, corrections)).await?;
                    return Box::pin(self.write(right, &[])).await;
                }
                Err(error) => {
                    let event = visits
                        .first()
                        .map_or("(corrections)", |v| v.event_id.as_str());
                    tracing::error!(%error, event, "visit cannot be stored; dropped");
                    ConsumerCounters::add(&self.counters.failed, 1);
                    return Ok(());
                }
            }
            attempt = attempt.saturating_add(1);
            self.pause(backoff(attempt)).await?;
        }
    }

    /// Sleeps, unless shutdown is asked for first.
    pub(super) async fn pause(&self, duration: Duration) -> Result<(), ConsumerError> {
        let Some(mut shutdown) = self.shutdown.clone() else {
            tokio::time::sleep(duration).await;
            return Ok(());
        };
        if *shutdown.borrow() {
            return Err(ConsumerError::Shutdown);
        }
        tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            _ = shutdown.changed() => Err(ConsumerError::Shutdown),
        }
    }
}
/// 100 ms doubling to 5 s.
pub(super) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(5))
}
