//! The `sl:events` consumer: a member of the Redis consumer group `sl-consumers` that reads stream
//! entries in batches, splits them into visits (an entry carries one visit, or several when the
//! module packs them: one field group each, beginning with `c`; see
//! [`shortlink_visit_enrich::split_entry`]), enriches them ([`shortlink_visit_enrich::Enricher`]) and
//! stores them with one transaction per batch ([`VisitStore::store_batch`], at most
//! [`max_visits_per_transaction`] visits each by default), acknowledging only after the commit. While a batch
//! is being written, the next one is read and enriched.
//!
//! Delivery is at least once: a consumer that dies after reading leaves its entries pending in the
//! group; they are read again by the same consumer name on restart (its own pending list comes
//! first) or claimed by another consumer with `XAUTOCLAIM` once idle for `--consumer-claim-after`.
//! Counting is exactly once: the visit id (the entry id, `<entry id>:<n>` for the n-th following
//! visit of a packed entry) is the visits table's primary key, and only rows actually inserted
//! reach the rollups and link counters, so a batch stored twice counts once.
//!
//! Orphan visits (the module's orphan events, and 410s of known links: [`crate::orphans`]) are
//! stored after the batch's visits, in a transaction of their own, before the acknowledgement.
//!
//! Visits that cannot be stored are acknowledged with their entry and counted, never retried:
//! unparseable ones (`invalid`; one bad group of a packed entry costs only itself), events that
//! are not redirects or are `verify-import`'s own requests (`ignored`), and
//! entries trimmed from the stream (`MAXLEN ~`) before they were read (`trimmed`), and visits of
//! codes no link holds (`no_link`: a deleted workspace's late clicks, see
//! [`VisitStore::store_batch`]; never counted as another workspace's). A batch the database refuses for a reason other than
//! unavailability is retried, then split in halves until the offending visit is isolated and
//! dropped (`failed`, logged); while the database is unavailable the batch is retried with
//! backoff, forever, and nothing is acknowledged.

mod counters;
mod entry;
mod error;
mod stream;
mod sweeps;
mod write;

pub use counters::ConsumerCounters;
pub use entry::RawEntry;
pub use error::ConsumerError;
use write::{backoff, prepare, Prepared, Writer};

/// The sweeps this process's consumer noticed, as the fallback reads them ([`Consumer::noticed_sweeps`]).
pub type NoticedSweeps = std::sync::Arc<std::sync::Mutex<shortlink_wire::sweeps::Flags>>;

use super::store::VisitStore;
use shortlink_core::primary::Primary;
use shortlink_core::primary::RedisConnection;
use shortlink_store::Backend;

use shortlink_visit_enrich::Enricher;
use shortlink_wire::keys::EVENT_STREAM;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The consumer group every sidecar consumer joins.
pub const GROUP: &str = "sl-consumers";
/// Visits per transaction at most, by default ([`ConsumerSettings::max_visits_per_transaction`]).
/// A read of `--consumer-batch` entries can hold many times as many visits when the module packs
/// them. Larger transactions fold more visits into each rollup row (one upsert per link, bucket
/// and dimension value per transaction) and commit less often: 16,000 measured 1.4 times the
/// throughput of 4,000 on SQLite and 1.6 times on PostgreSQL (`bench/analytics/run`, 1000
/// links). On SQLite a transaction holds the write lock, which the link API shares, for about
/// a third of a second at that size, so it stays there. PostgreSQL takes 32,000 (a full read of
/// 1000 entries of 32): its per-transaction cost is mostly rollup and link rows, about as many
/// per transaction whatever its size at 1000 links, and no other writer waits on it; 32,000
/// measured 1.02 to 1.44 times 16,000 in alternated runs. A batch's entries are acknowledged
/// once all its transactions have committed.
pub fn max_visits_per_transaction(backend: Backend) -> usize {
    match backend {
        Backend::Sqlite => 16_000,
        Backend::Postgres | Backend::Mysql => 32_000,
    }
}

#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    /// Unique among running consumers; a restart under the same name resumes its pending entries.
    pub name: String,
    /// Entries per read (`COUNT`) at most; fewer when entries carry packed visits, so that a read
    /// holds about one transaction's worth of visits ([`Consumer::read_count`]).
    pub batch: usize,
    /// Longest wait for new entries (`BLOCK`).
    pub block: Duration,
    /// Entries pending this long with another consumer are claimed (`XAUTOCLAIM` min-idle-time).
    pub claim_after: Duration,
    /// Bots and previews also count in `links.visit_count` / `last_visit_at`.
    pub count_bots: bool,
    /// A batch's visits are stored in transactions of at most this many; `None`: the backend's
    /// default ([`max_visits_per_transaction`]).
    pub max_visits_per_transaction: Option<usize>,
}

impl ConsumerSettings {
    pub fn new(name: impl Into<String>) -> Self {
        ConsumerSettings {
            name: name.into(),
            batch: 1000,
            block: Duration::from_secs(1),
            claim_after: Duration::from_secs(60),
            count_bots: false,
            max_visits_per_transaction: None,
        }
    }
}

/// A default consumer name: host name and process id.
pub fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "sidecar".to_owned());
    format!("{host}-{}", std::process::id())
}

/// The counters of this process's consumer, for `GET /metrics` (one consumer per process).
static REGISTERED: OnceLock<Arc<ConsumerCounters>> = OnceLock::new();

/// Makes `counters` the ones [`registered`] returns (the first registration wins).
pub fn register(counters: Arc<ConsumerCounters>) {
    let _ = REGISTERED.set(counters);
}

/// The counters of the consumer this process runs, if it runs one.
pub fn registered() -> Option<&'static Arc<ConsumerCounters>> {
    REGISTERED.get()
}

/// Where the next read comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// This consumer's own pending entries, after this id (a restart under the same name).
    OwnPending(String),
    /// New entries (`>`), with `XAUTOCLAIM` of stale ones now and then.
    New,
}

/// Most visits the module packs into one entry (docs/ARCHITECTURE.md, "Visit events"): the
/// first read assumes full entries, so it never holds more than about one transaction's worth.
const MAX_VISITS_PER_ENTRY: f64 = shortlink_wire::event::BATCH_MAX_VISITS as f64;

/// A batch being written by a task of its own, not yet acknowledged.
struct InFlight {
    /// The stream (index into `Consumer::streams`) its entries came from.
    stream: usize,
    ids: Vec<String>,
    write: JoinHandle<Result<(), ConsumerError>>,
}

/// One stream the consumer reads, and where it is in it.
struct StreamState {
    key: String,
    /// Appended to entry ids to make visit ids (`write::prepare`): `@<tag>` on a cluster.
    id_suffix: Option<String>,
    phase: Phase,
    claim_cursor: String,
    last_claim: Option<Instant>,
    group_ready: bool,
}

impl StreamState {
    fn new(key: String) -> Self {
        // `sl:events:{<tag>}`: the tag marks the stream in visit ids.
        let id_suffix = key
            .split_once('{')
            .and_then(|(_, rest)| rest.split_once('}'))
            .map(|(tag, _)| format!("@{tag}"));
        StreamState {
            key,
            id_suffix,
            phase: Phase::OwnPending("0".to_owned()),
            claim_cursor: "0-0".to_owned(),
            last_claim: None,
            group_ready: false,
        }
    }
}

pub struct Consumer {
    primary: Primary,
    connection: Option<RedisConnection>,
    enricher: Arc<Enricher>,
    settings: ConsumerSettings,
    counters: Arc<ConsumerCounters>,
    writer: Writer,
    /// [`EVENT_STREAM`], or a cluster's streams.
    streams: Vec<StreamState>,
    /// The stream read next, and the one the last read came from.
    at: usize,
    read_from: usize,
    /// Reads in a row that found nothing new (a full round of them: all streams are drained).
    idle: usize,
    /// Visits per entry expected in the next read: jumps up to what a read showed, halves its
    /// way down. Sizes `COUNT` so a read holds about one transaction's worth of visits: a read
    /// of `--consumer-batch` full entries held up to 512,000 visits (hundreds of MB, which the
    /// allocator kept after the spike; soak RSS grew in steps).
    visits_per_entry: f64,
    /// The sweeps noticed, for the fallback of this process ([`Consumer::noticed_sweeps`]).
    noticed: NoticedSweeps,
}

impl Consumer {
    /// A consumer of the one Redis at `redis_url`.
    pub fn new(
        redis_url: &str,
        store: Arc<dyn VisitStore>,
        enricher: Arc<Enricher>,
        settings: ConsumerSettings,
    ) -> Result<Self, ConsumerError> {
        Ok(Self::from_primary(
            Primary::fixed(redis_url)?,
            store,
            enricher,
            settings,
        ))
    }

    /// A consumer reading from `primary` (one Redis, Sentinel's primary, or a cluster and its
    /// streams), checked already: nothing left to refuse once the configuration passed.
    pub fn from_primary(
        primary: Primary,
        store: Arc<dyn VisitStore>,
        enricher: Arc<Enricher>,
        settings: ConsumerSettings,
    ) -> Self {
        let counters: Arc<ConsumerCounters> = Arc::default();
        let per_transaction = settings
            .max_visits_per_transaction
            .unwrap_or_else(|| max_visits_per_transaction(store.backend()))
            .max(1);
        let streams = match primary.is_cluster() {
            true => shortlink_wire::cluster::event_stream_keys()
                .into_iter()
                .map(StreamState::new)
                .collect(),
            false => vec![StreamState::new(EVENT_STREAM.to_owned())],
        };
        Consumer {
            primary,
            connection: None,
            enricher,
            writer: Writer {
                store,
                counters: Arc::clone(&counters),
                count_bots: settings.count_bots,
                max_visits_per_transaction: per_transaction,
                shutdown: None,
                hindsight: Arc::default(),
            },
            settings,
            counters,
            streams,
            at: 0,
            read_from: 0,
            idle: 0,
            visits_per_entry: MAX_VISITS_PER_ENTRY,
            noticed: NoticedSweeps::default(),
        }
    }

    /// Whether every stream is past its own pending entries.
    fn all_new(&self) -> bool {
        self.streams.iter().all(|s| s.phase == Phase::New)
    }

    pub fn counters(&self) -> Arc<ConsumerCounters> {
        Arc::clone(&self.counters)
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// Entries the next read asks for (`COUNT` of `XREADGROUP` and `XAUTOCLAIM`): about one
    /// transaction's worth of visits at the packing seen so far, at most `--consumer-batch`.
    pub fn read_count(&self) -> usize {
        let per_entry = self.visits_per_entry.max(1.0);
        let count = (self.writer.max_visits_per_transaction as f64 / per_entry).floor() as usize;
        count.clamp(1, self.settings.batch.max(1))
    }

    /// Learns the packing from a read: `seen` visits in `entries` entries.
    fn observe(&mut self, entries: usize, seen: usize) {
        if entries == 0 {
            return;
        }
        ConsumerCounters::max(&self.counters.largest_read, seen as u64);
        let observed = (seen as f64 / entries as f64).clamp(1.0, MAX_VISITS_PER_ENTRY);
        self.visits_per_entry = observed.max(self.visits_per_entry / 2.0);
    }

    /// Parses, enriches and stores a batch; returns the ids to acknowledge (all of them, unless the
    /// database stayed unavailable until shutdown).
    pub async fn store(&mut self, entries: &[RawEntry]) -> Result<Vec<String>, ConsumerError> {
        let suffix = self.streams[self.read_from].id_suffix.as_deref();
        let prepared = prepare(entries, suffix, &self.enricher, &self.counters);
        self.observe(entries.len(), prepared.seen);
        self.writer.write_all(prepared.visits).await?;
        self.writer.write_orphans(&prepared.orphans).await?;
        Ok(prepared.ids)
    }
    /// Reads, stores and acknowledges one batch; returns how many entries it held.
    pub async fn step(&mut self) -> Result<usize, ConsumerError> {
        let entries = self.read_batch().await?;
        if entries.is_empty() {
            return Ok(0);
        }
        let stream = self.read_from;
        let ids = self.store(&entries).await?;
        self.ack_on(stream, &ids).await?;
        Ok(entries.len())
    }

    /// One turn of the pipeline that [`drain`](Self::drain) and [`run`](Self::run) drive: reads
    /// and enriches the next batch while the previous one (`in_flight`) is being written, then
    /// acknowledges the previous one once committed and starts writing the new one. Reading and
    /// enrichment (Redis, CPU here) thus overlap the database's work; there is never more than
    /// one write at a time, so batches commit in order and never contend for rows.
    ///
    /// Returns (entries read, entries acknowledged). On an error nothing is left in flight, and
    /// entries read but not acknowledged stay pending: the next read starts over from this
    /// consumer's own pending entries.
    async fn turn(
        &mut self,
        in_flight: &mut Option<InFlight>,
    ) -> Result<(usize, usize), ConsumerError> {
        let result = self.turn_inner(in_flight).await;
        if result.is_err() {
            if let Some(abandoned) = in_flight.take() {
                // Let it finish (or fail) so no write outlives the error; it stays unacknowledged.
                let _ = abandoned.write.await;
            }
            for stream in &mut self.streams {
                stream.phase = Phase::OwnPending("0".to_owned());
            }
        }
        result
    }

    async fn turn_inner(
        &mut self,
        in_flight: &mut Option<InFlight>,
    ) -> Result<(usize, usize), ConsumerError> {
        let read = self.read_batch().await;
        let next = match read {
            Ok(entries) if !entries.is_empty() => {
                let n = entries.len();
                let enricher = Arc::clone(&self.enricher);
                let counters = Arc::clone(&self.counters);
                let suffix = self.streams[self.read_from].id_suffix.clone();
                // CPU-bound (user agent parsing, geo, hashing): off the async workers.
                let prepared = tokio::task::spawn_blocking(move || {
                    prepare(&entries, suffix.as_deref(), &enricher, &counters)
                })
                .await?;
                self.observe(n, prepared.seen);
                Some((n, prepared))
            }
            Ok(_) => None,
            Err(error) => {
                // Still acknowledge what was committed meanwhile, then report the read error.
                if let Some(previous) = in_flight.take() {
                    self.settle(previous).await?;
                }
                return Err(error);
            }
        };
        let acked = match in_flight.take() {
            Some(previous) => self.settle(previous).await?,
            None => 0,
        };
        let Some((n, prepared)) = next else {
            return Ok((0, acked));
        };
        let writer = self.writer.clone();
        let Prepared {
            ids,
            visits,
            orphans,
            ..
        } = prepared;
        *in_flight = Some(InFlight {
            stream: self.read_from,
            ids,
            write: tokio::spawn(async move {
                writer.write_all(visits).await?;
                writer.write_orphans(&orphans).await
            }),
        });
        Ok((n, acked))
    }

    /// Waits for a batch's write and acknowledges it; returns how many entries that was.
    async fn settle(&mut self, batch: InFlight) -> Result<usize, ConsumerError> {
        batch.write.await??;
        self.publish_sweeps().await;
        self.ack_on(batch.stream, &batch.ids).await?;
        Ok(batch.ids.len())
    }

    /// Consumes until the stream has nothing new (tests, benchmarks, one-off runs); returns the
    /// number of entries acknowledged.
    pub async fn drain(&mut self) -> Result<usize, ConsumerError> {
        let mut in_flight = None;
        let mut total = 0;
        loop {
            let (read, acked) = self.turn(&mut in_flight).await?;
            total += acked;
            let drained = self.idle >= self.streams.len();
            if read == 0 && in_flight.is_none() && self.all_new() && drained {
                return Ok(total);
            }
        }
    }

    /// Consumes until `shutdown` turns true, riding out Redis and database outages. A batch in
    /// progress is finished (or left pending, never half-counted) before returning.
    pub async fn run(mut self, shutdown: watch::Receiver<bool>) {
        self.writer.shutdown = Some(shutdown.clone());
        tracing::info!(consumer = %self.settings.name, stream = EVENT_STREAM, group = GROUP, "consuming visit events");
        let mut failures: u32 = 0;
        let mut last_report = Instant::now();
        let mut in_flight = None;
        while !*shutdown.borrow() {
            match self.turn(&mut in_flight).await {
                Ok(_) => failures = 0,
                Err(ConsumerError::Shutdown) => break,
                Err(error) => {
                    failures = failures.saturating_add(1);
                    if failures == 1 || failures % 30 == 0 {
                        tracing::warn!(%error, failures, "visit consumer error; retrying");
                    }
                    if self.writer.pause(backoff(failures)).await.is_err() {
                        break;
                    }
                }
            }
            if last_report.elapsed() >= Duration::from_secs(60) {
                last_report = Instant::now();
                self.report();
            }
        }
        if let Some(last) = in_flight.take() {
            if let Err(error) = self.settle(last).await {
                tracing::info!(%error, "last visit batch left pending for the next consumer");
            }
        }
        self.report();
        tracing::info!(consumer = %self.settings.name, "visit consumer stopped");
    }

    fn report(&self) {
        let c = &self.counters;
        let get = ConsumerCounters::get;
        tracing::info!(
            consumer = %self.settings.name,
            read = get(&c.read),
            visits = get(&c.visits),
            inserted = get(&c.inserted),
            duplicates = get(&c.duplicates),
            invalid = get(&c.invalid),
            ignored = get(&c.ignored),
            trimmed = get(&c.trimmed),
            unowned = get(&c.unowned),
            failed = get(&c.failed),
            "visit consumer counters"
        );
    }
}
