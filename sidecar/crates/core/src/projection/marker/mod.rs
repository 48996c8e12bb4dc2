//! The projection marker: `sl:meta:projection` in Redis says "Redis holds the whole projection of
//! SQL", so a missing `sl:c:<code>` really means "no such link".
//!
//! Why: the module answers a missing record with 404. After Redis loses its data (`FLUSHALL`, a
//! restart without persistence, a failover to an empty replica) every live link would answer 404
//! until someone ran `resync`. So the module reads the marker in the same round trip as the record
//! (`MGET sl:c:<code> sl:meta:projection`) and treats a missing marker like a Redis failure
//! (fallback to the sidecar, which answers from SQL). The sidecar puts the projection back and
//! only then sets the marker again:
//!
//! - while serving, [`Keeper`] checks the marker at start-up and then every
//!   `--projection-check-interval`; when it is missing it refills Redis from SQL and sets it;
//! - the `resync` command sets it after a complete run.
//!
//! Ordering: the marker is set only after every page was written, and only if Redis kept its data
//! throughout. A resync first stores a random token under `sl:meta:resync`; one script at the end
//! sets the marker only if that token is still there. A `FLUSHALL` during the resync removes the
//! token (and whatever pages were written), so the marker stays missing and the keeper starts over.
//!
//! On a Redis Cluster the marker and the token are kept per hash slot ([`cluster`]).

mod cluster;
mod handle;
mod refill;

pub use handle::{ProjectionMarker, ResyncToken};
pub use refill::{refill, RefillCounts, RefillError};

use crate::background::{self, Shutdown};
use crate::projection::{not_found, Projection, ProjectionError, RecordWrite};
use handle::{unix_ms, SET_IF_TOKEN};
use shortlink_config::Config;
use shortlink_store::Storage;
use shortlink_wire::keys::{PROJECTION_MARKER, RESYNC_TOKEN};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Shortest pause between two checks, whatever the configuration says: a check is one `EXISTS`,
/// but a zero interval would be a busy loop.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

impl ProjectionMarker {
    /// The marker's value, if it is there.
    /// On a cluster, slot 0's marker: every marker carries the same fingerprint.
    pub async fn value(&self) -> Result<Option<String>, ProjectionError> {
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(self.marker_key(0));
        let (value,): (Option<String>,) = self.query(&pipe, self.timeout).await?;
        Ok(value)
    }

    /// Removes the marker (the module falls back, a serving sidecar refills and sets it).
    pub async fn clear(&self) -> Result<(), ProjectionError> {
        if self.primary.is_cluster() {
            return self.clear_slots(&cluster::all_slots()).await;
        }
        let mut pipe = redis::pipe();
        pipe.cmd("DEL").arg(PROJECTION_MARKER).ignore();
        self.query::<()>(&pipe, self.timeout).await
    }

    /// Whether the marker is there, i.e. Redis holds the whole projection.
    pub async fn is_present(&self) -> Result<bool, ProjectionError> {
        if self.primary.is_cluster() {
            return Ok(self.missing_slots().await?.is_empty());
        }
        let mut pipe = redis::pipe();
        pipe.cmd("EXISTS").arg(PROJECTION_MARKER);
        let (exists,): (bool,) = self.query(&pipe, self.timeout).await?;
        Ok(exists)
    }

    /// Starts a full resync: stores a fresh token that [`Self::finish`] checks.
    pub async fn begin(&self) -> Result<ResyncToken, ProjectionError> {
        self.begin_slots(&cluster::all_slots()).await
    }

    /// [`Self::begin`] for `slots` only (a cluster's; ignored on one Redis).
    async fn begin_slots(&self, slots: &[u16]) -> Result<ResyncToken, ProjectionError> {
        let mut bytes = [0u8; 16];
        // The OS random source failing is not worth failing the resync for: the token only has
        // to differ from a concurrent resync's, and the clock and PID do that in practice.
        if getrandom::fill(&mut bytes).is_err() {
            bytes[..8].copy_from_slice(&unix_ms().to_le_bytes());
            bytes[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        }
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        if self.primary.is_cluster() {
            self.set_tokens(slots, &token).await?;
            return Ok(ResyncToken {
                token,
                slots: slots.to_vec(),
            });
        }
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg(RESYNC_TOKEN).arg(&token).ignore();
        self.query::<()>(&pipe, self.timeout).await?;
        Ok(ResyncToken {
            token,
            slots: Vec::new(),
        })
    }

    /// Sets the marker if Redis kept the token since [`Self::begin`], i.e. nothing the resync
    /// wrote was lost. `Ok(false)`: it was lost (or another resync started since); the marker
    /// stays missing.
    /// On a cluster, per slot: `Ok(true)` when every slot kept its token and got its marker.
    pub async fn finish(&self, token: ResyncToken) -> Result<bool, ProjectionError> {
        if self.primary.is_cluster() {
            return self.finish_slots(&token).await;
        }
        let mut pipe = redis::pipe();
        pipe.cmd("EVAL")
            .arg(SET_IF_TOKEN)
            .arg(2)
            .arg(RESYNC_TOKEN)
            .arg(PROJECTION_MARKER)
            .arg(&token.token)
            .arg(self.marker_value());
        let (set,): (bool,) = self.query(&pipe, self.timeout).await?;
        Ok(set)
    }

    /// The end of the `resync` command: sets the marker after a complete run (`token` from
    /// [`Self::begin`] before its first page; `None` for a resumed run, which cannot vouch for
    /// what the interrupted one wrote) and says what it did.
    pub async fn finish_after_resync(
        &self,
        token: Option<ResyncToken>,
    ) -> Result<(), ProjectionError> {
        let Some(token) = token else {
            eprintln!(
                "resync: resumed run, projection marker {PROJECTION_MARKER} not set (run a full resync, \
                 or let a serving sidecar check it)"
            );
            return Ok(());
        };
        if self.finish(token).await? {
            println!("resync: projection marker {} set", self.marker_name());
        } else {
            eprintln!(
                "resync: Redis lost data during the run (or another resync started): projection \
                 marker {PROJECTION_MARKER} not set; a serving sidecar refills Redis by itself, or run \
                 resync again"
            );
        }
        Ok(())
    }

    /// `SET NX` for every record write; deletes are skipped (see [`refill`]).
    async fn fill_missing(&self, writes: &[RecordWrite]) -> Result<(), ProjectionError> {
        if self.primary.is_cluster() {
            return self.fill_missing_on_nodes(writes).await;
        }
        let mut pipe = redis::pipe();
        for write in writes {
            match write {
                RecordWrite::Set { key, value } => {
                    pipe.cmd("SET").arg(key).arg(value).arg("NX").ignore();
                }
                RecordWrite::SetUntil { key, value, at } => {
                    pipe.cmd("SET")
                        .arg(key)
                        .arg(value)
                        .arg("NX")
                        .arg("EXAT")
                        .arg(*at)
                        .ignore();
                }
                RecordWrite::Delete { .. } => {}
            }
        }
        // As for the projection's pipelines: the timeout per thousand writes.
        let allowance = self.timeout * u32::try_from(writes.len() / 1000 + 1).unwrap_or(u32::MAX);
        self.query(&pipe, allowance).await
    }
}

/// The fingerprint in a marker's value, if it carries one.
pub fn marker_fingerprint(value: &str) -> Option<&str> {
    value
        .split_once(' ')
        .map(|(_, fingerprint)| fingerprint.trim())
        .filter(|fingerprint| !fingerprint.is_empty())
}

/// Refills Redis from SQL ([`refill`]) and sets the marker. `Ok(None)`: Redis lost data again
/// during the refill; the marker stays missing, to be tried again.
pub async fn restore(
    storage: &dyn Storage,
    marker: &ProjectionMarker,
    grace: Duration,
) -> Result<Option<RefillCounts>, RefillError> {
    let token = marker.begin().await?;
    let counts = refill(storage, marker, grace).await?;
    Ok(marker.finish(token).await?.then_some(counts))
}

/// Keeps the marker while the sidecar serves: checks it at once, then every
/// `--projection-check-interval`, and restores the projection when it is missing. Redis being
/// down is not an error here: the next check tries again.
pub struct Keeper {
    marker: ProjectionMarker,
    grace: Duration,
    interval: Duration,
    storage: Arc<dyn Storage>,
    projection: Arc<Projection>,
}

impl Keeper {
    /// Keeps `marker` (on a connection of its own: see [`ProjectionMarker::with_primary`]).
    pub fn new(
        marker: ProjectionMarker,
        config: &Config,
        storage: Arc<dyn Storage>,
        projection: Arc<Projection>,
    ) -> Self {
        Keeper {
            marker,
            grace: config.expired_grace,
            interval: config.projection_check_interval.max(MIN_INTERVAL),
            storage,
            projection,
        }
    }

    /// Keeps the marker until `shutdown` (a [`crate::background::Tasks`] job). A restore in
    /// progress is dropped: the marker it had not set yet stays missing, so the next keeper
    /// restores again.
    pub async fn run(self, mut shutdown: Shutdown) {
        tokio::select! {
            () = self.keep() => {}
            () = background::fired(&mut shutdown) => {}
        }
    }

    async fn keep(self) {
        let Keeper {
            marker,
            grace,
            interval,
            storage,
            projection,
        } = self;
        // Log a Redis outage once, not once per check; a foreign marker once per change.
        let mut redis_down = false;
        let mut foreign: Option<String> = None;
        let mut promotions = marker.primary.promotions();
        let mut shards = None;
        loop {
            if marker.primary.is_cluster() {
                let check =
                    cluster::keep(storage.as_ref(), &marker, grace, &mut shards, redis_down).await;
                redis_down = matches!(check, cluster::Check::Down);
                if matches!(check, cluster::Check::Restored) {
                    not_found::restore(storage.as_ref(), &projection).await;
                }
                if !redis_down {
                    if let Err(error) = projection.settle_in_doubt(storage.as_ref(), grace).await {
                        tracing::debug!(%error, "records in doubt not settled yet");
                    }
                }
                tokio::time::sleep(interval).await;
                continue;
            }
            let mut value = marker.value().await;
            if value.is_ok() && marker.primary.promotions() != promotions {
                // A promoted replica has the marker if it had the writes before it (replication
                // keeps the primary's order), but the writes after it only if a `WAIT` vouched
                // for them on this very replica: Sentinel promotes the most up-to-date replica,
                // yet the one that acknowledged may be down too, and without
                // --redis-wait-replicas nothing vouched at all. So a marker set on another
                // primary vouches for nothing here: it goes (nginx falls back to SQL on a miss
                // meanwhile) and the refill below puts back any link missing before setting it.
                tracing::warn!("new Redis primary: refilling it from SQL before trusting it");
                value = marker.clear().await.map(|()| None);
                if value.is_ok() {
                    promotions = marker.primary.promotions();
                }
            }
            match value {
                Ok(Some(value)) => {
                    redis_down = false;
                    let found = marker_fingerprint(&value).map(str::to_owned);
                    if found.is_some() && found != marker.fingerprint && found != foreign {
                        tracing::error!(
                            found = found.as_deref(),
                            ours = marker.fingerprint.as_deref(),
                            "the projection marker names another code scheme: a sidecar with \
                             another code secret writes to this Redis; nginx modules under our \
                             scheme fall back instead of answering 404"
                        );
                    }
                    foreign = found.filter(|found| Some(found) != marker.fingerprint.as_ref());
                }
                Ok(None) => {
                    redis_down = false;
                    tracing::warn!(
                        "projection marker {PROJECTION_MARKER} missing: Redis lost its data or was never \
                         filled; restoring it from SQL (nginx falls back to the sidecar meanwhile)"
                    );
                    let started = Instant::now();
                    match restore(storage.as_ref(), &marker, grace).await {
                        Ok(Some(counts)) => {
                            tracing::info!(
                                records = counts.offered,
                                elapsed_ms = started.elapsed().as_millis() as u64,
                                "projection restored; marker set"
                            );
                            not_found::restore(storage.as_ref(), &projection).await;
                        }
                        Ok(None) => tracing::warn!(
                            "Redis lost data again during the restore; marker not set, retrying"
                        ),
                        Err(error) => tracing::warn!(%error, "projection restore failed; retrying"),
                    }
                }
                Err(error) => {
                    if !redis_down {
                        tracing::warn!(%error, "cannot check the projection marker");
                    }
                    redis_down = true;
                }
            }
            if !redis_down {
                // Failed write-throughs (Sentinel, `WAIT`): see crate::projection's `doubt`.
                if let Err(error) = projection.settle_in_doubt(storage.as_ref(), grace).await {
                    tracing::debug!(%error, "records in doubt not settled yet");
                }
            }
            tokio::time::sleep(interval).await;
        }
    }
}
