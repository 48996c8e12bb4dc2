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

use crate::background::{self, Shutdown};
use crate::primary::{needs_rediscovery, ConnectOptions, Primary, RedisConnection};
use crate::projection::{Projection, ProjectionError, RecordWrite};
use shortlink_config::Config;
use shortlink_store::{self as storage, LinkFilter, Storage, StorageError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Present while Redis holds every link. Value: `<unix ms> <fingerprint>`, the time of the
/// resync that set it and the code scheme's fingerprint the nginx module compares with its own
/// (docs/ARCHITECTURE.md); a marker without one (older sidecars) says nothing about the scheme.
pub use shortlink_wire::keys::PROJECTION_MARKER as MARKER_KEY;
/// The token of the resync in progress (see the module documentation).
pub use shortlink_wire::keys::RESYNC_TOKEN as RESYNC_TOKEN_KEY;

/// Links read per SQL page and written per Redis pipeline.
const PAGE: u32 = 1000;

/// Shortest pause between two checks, whatever the configuration says: a check is one `EXISTS`,
/// but a zero interval would be a busy loop.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// `KEYS[1]` = token key, `KEYS[2]` = marker, `ARGV[1]` = our token, `ARGV[2]` = marker value.
/// Atomic in Redis: no flush can fall between the check and the set.
const SET_IF_TOKEN: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[2], ARGV[2])
    redis.call('DEL', KEYS[1])
    return 1
end
return 0
";

/// What a refill found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RefillCounts {
    /// Records written where the key was missing (`SET NX`; an existing key is left alone).
    pub offered: u64,
    /// Links past their grace period: no record, nothing deleted.
    pub past_grace: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RefillError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Redis(#[from] ProjectionError),
}

/// Writes every link's record from SQL to Redis where the key is missing, in code order, a page
/// at a time: the `resync` command's walk (`scan_links`, `RecordWrite::for_link`), with `SET NX`
/// instead of `SET` and no deletes. Why: it runs beside the API. A create, update or revoke
/// writes its record through while the refill is under way, and that record is newer than the
/// SQL page the refill read a moment earlier; it must never be overwritten (a revoked link would
/// redirect again). After a data loss the missing keys are exactly the ones to fill.
pub async fn refill(
    storage: &dyn Storage,
    marker: &ProjectionMarker,
    grace: Duration,
) -> Result<RefillCounts, RefillError> {
    refill_slots(storage, marker, grace, None).await
}

/// [`refill`], on a cluster only for the links of `slots` when given (`slots[slot]` true).
async fn refill_slots(
    storage: &dyn Storage,
    marker: &ProjectionMarker,
    grace: Duration,
    slots: Option<&[bool]>,
) -> Result<RefillCounts, RefillError> {
    let filter = LinkFilter::default();
    let mut counts = RefillCounts::default();
    let mut after: Option<String> = None;
    loop {
        let page = storage.scan_links(&filter, after.as_deref(), PAGE).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.code.clone());
        let now = storage::now();
        // Each record with its card, each kept if its own key is in `slots` (on a cluster the
        // card may live in another slot than its record).
        let writes: Vec<RecordWrite> = page
            .iter()
            .flat_map(|link| {
                let record = RecordWrite::for_link(link, now, grace);
                let card = RecordWrite::new_card(link, &record);
                std::iter::once(record).chain(card)
            })
            .filter(|write| slots.is_none_or(|slots| cluster::in_slots(slots, write.key())))
            .collect();
        let records = writes
            .iter()
            .filter(|w| shortlink_wire::keys::code_of(w.key()).is_some());
        counts.past_grace += records
            .clone()
            .filter(|w| matches!(w, RecordWrite::Delete { .. }))
            .count() as u64;
        counts.offered += records.count() as u64;
        marker.fill_missing(&writes).await?;
    }
    counts.offered -= counts.past_grace;
    Ok(counts)
}

/// A token that proves no data loss happened since [`ProjectionMarker::begin`].
#[derive(Debug)]
pub struct ResyncToken {
    token: String,
    /// On a cluster, the slots it was stored in (beside their markers).
    slots: Vec<u16>,
}

/// Reads and sets the marker and writes the refill's `SET NX` records, on a connection of its
/// own: the projection's connection and API are the write path's (plain `SET`, `MULTI`).
pub struct ProjectionMarker {
    primary: Primary,
    timeout: Duration,
    /// The code scheme's fingerprint, carried in the marker's value.
    fingerprint: Option<String>,
    connection: Mutex<Option<RedisConnection>>,
}

impl std::fmt::Debug for ProjectionMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectionMarker")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ProjectionMarker {
    pub fn new(config: &Config) -> Result<Self, ProjectionError> {
        Ok(Self::with_primary(Primary::from_config(config)?, config))
    }

    /// On `primary`, made from the configuration when it was checked (the wiring then cannot
    /// fail on a Redis setting); give it a `Primary` of its own, not a clone of another user's.
    pub fn with_primary(primary: Primary, config: &Config) -> Self {
        Self {
            primary,
            timeout: config.redis_timeout,
            fingerprint: config
                .code_scheme()
                .ok()
                .map(|scheme| scheme.fingerprint().to_owned()),
            connection: Mutex::new(None),
        }
    }

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
        pipe.cmd("DEL").arg(MARKER_KEY).ignore();
        self.query::<()>(&pipe, self.timeout).await
    }

    /// What the marker is set to: the time and our fingerprint.
    fn marker_value(&self) -> String {
        match &self.fingerprint {
            Some(fingerprint) => format!("{} {fingerprint}", unix_ms()),
            None => unix_ms().to_string(),
        }
    }

    /// Whether the marker is there, i.e. Redis holds the whole projection.
    pub async fn is_present(&self) -> Result<bool, ProjectionError> {
        if self.primary.is_cluster() {
            return Ok(self.missing_slots().await?.is_empty());
        }
        let mut pipe = redis::pipe();
        pipe.cmd("EXISTS").arg(MARKER_KEY);
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
        pipe.cmd("SET").arg(RESYNC_TOKEN_KEY).arg(&token).ignore();
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
            .arg(RESYNC_TOKEN_KEY)
            .arg(MARKER_KEY)
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
                "resync: resumed run, projection marker {MARKER_KEY} not set (run a full resync, \
                 or let a serving sidecar check it)"
            );
            return Ok(());
        };
        if self.finish(token).await? {
            println!("resync: projection marker {} set", self.marker_name());
        } else {
            eprintln!(
                "resync: Redis lost data during the run (or another resync started): projection \
                 marker {MARKER_KEY} not set; a serving sidecar refills Redis by itself, or run \
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

    async fn query<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        allowance: Duration,
    ) -> Result<T, ProjectionError> {
        let mut slot = self.connection.lock().await;
        let mut connection = self.connection_in(&mut slot).await?;
        let result = tokio::time::timeout(allowance, pipe.query_async::<T>(&mut connection)).await;
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                // A broken connection is made again on the next call (Redis restarted), to the
                // primary the sentinels name then (a failover: also `READONLY`, `MASTERDOWN`).
                if needs_rediscovery(&error) {
                    *slot = None;
                }
                Err(error.into())
            }
            Err(_) => {
                *slot = None;
                Err(ProjectionError::Timeout(allowance))
            }
        }
    }
}

impl ProjectionMarker {
    /// The marker's connection, made if there is none.
    async fn connection_in(
        &self,
        slot: &mut Option<RedisConnection>,
    ) -> Result<RedisConnection, ProjectionError> {
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        // Each call bounds its own wait (`query`): a refill's pipelines get longer ones.
        let options = ConnectOptions {
            connection_timeout: self.timeout,
            response_timeout: self.timeout.max(Duration::from_secs(60)),
            manager: false,
        };
        Ok(slot.insert(self.primary.connect(options).await?).clone())
    }

    /// For messages: the marker's key, or on a cluster its 16384 keys.
    fn marker_name(&self) -> String {
        if self.primary.is_cluster() {
            format!(
                "{}{{<tag>}} of every slot",
                shortlink_wire::cluster::MARKER_PREFIX
            )
        } else {
            MARKER_KEY.to_owned()
        }
    }

    /// The marker key: the one of slot `slot` on a cluster, [`MARKER_KEY`] otherwise.
    fn marker_key(&self, slot: u16) -> String {
        if self.primary.is_cluster() {
            shortlink_wire::cluster::marker_key(slot)
        } else {
            MARKER_KEY.to_owned()
        }
    }
}

/// The fingerprint in a marker's value, if it carries one.
pub fn marker_fingerprint(value: &str) -> Option<&str> {
    value
        .split_once(' ')
        .map(|(_, fingerprint)| fingerprint.trim())
        .filter(|fingerprint| !fingerprint.is_empty())
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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
                redis_down =
                    !cluster::keep(storage.as_ref(), &marker, grace, &mut shards, redis_down).await;
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
                        "projection marker {MARKER_KEY} missing: Redis lost its data or was never \
                         filled; restoring it from SQL (nginx falls back to the sidecar meanwhile)"
                    );
                    let started = Instant::now();
                    match restore(storage.as_ref(), &marker, grace).await {
                        Ok(Some(counts)) => tracing::info!(
                            records = counts.offered,
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "projection restored; marker set"
                        ),
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
