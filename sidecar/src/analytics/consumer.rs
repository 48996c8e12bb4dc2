//! The `sl:events` consumer: a member of the Redis consumer group `sl-consumers` that reads stream
//! entries in batches, splits them into visits (an entry carries one visit, or several when the
//! module packs them: one field group each, beginning with `c`; see
//! [`shortlink_analytics::split_entry`]), enriches them ([`shortlink_analytics::Enricher`]) and
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
//! Visits that cannot be stored are acknowledged with their entry and counted, never retried:
//! unparseable ones (`invalid`; one bad group of a packed entry costs only itself), events that
//! are not redirects (`ignored`, e.g. 410 answers), and entries trimmed from the stream (`MAXLEN
//! ~`) before they were read (`trimmed`). A batch the database refuses for a reason other than
//! unavailability is retried, then split in halves until the offending visit is isolated and
//! dropped (`failed`, logged); while the database is unavailable the batch is retried with
//! backoff, forever, and nothing is acknowledged.

use super::store::VisitStore;
use crate::storage::{Backend, StorageError};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};
use shortlink_analytics::{split_entry, Enricher, Visit};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The stream the nginx module writes (docs/ARCHITECTURE.md, "Visit events").
pub const STREAM: &str = "sl:events";
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
        Backend::Postgres => 32_000,
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

/// What the consumer has done since it started.
#[derive(Debug, Default)]
pub struct ConsumerCounters {
    /// Stream entries read (one entry may carry several visits).
    pub read: AtomicU64,
    /// Visits found in those entries, well-formed or not (`invalid` counts the malformed ones).
    pub visits: AtomicU64,
    pub inserted: AtomicU64,
    pub duplicates: AtomicU64,
    pub invalid: AtomicU64,
    pub ignored: AtomicU64,
    pub trimmed: AtomicU64,
    pub failed: AtomicU64,
    pub acked: AtomicU64,
    /// The most visits one read has held (reads are sized to about one transaction's worth).
    pub largest_read: AtomicU64,
}

impl ConsumerCounters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn max(counter: &AtomicU64, n: u64) {
        counter.fetch_max(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("unexpected reply to {0}")]
    Reply(&'static str),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("shutting down")]
    Shutdown,
    #[error("a consumer task stopped: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// One stream entry as read: `fields` is `None` when the entry was trimmed away while pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    pub id: String,
    pub fields: Option<Vec<(Vec<u8>, Vec<u8>)>>,
}

/// Where the next read comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// This consumer's own pending entries, after this id (a restart under the same name).
    OwnPending(String),
    /// New entries (`>`), with `XAUTOCLAIM` of stale ones now and then.
    New,
}

/// A batch parsed and enriched: the entry ids to acknowledge once `visits` are committed.
struct Prepared {
    ids: Vec<String>,
    visits: Vec<Visit>,
    /// Visits found in the entries, stored or not (sizes the next read).
    seen: usize,
}

/// Most visits the module packs into one entry (docs/ARCHITECTURE.md, "Visit events"): the
/// first read assumes full entries, so it never holds more than about one transaction's worth.
const MAX_VISITS_PER_ENTRY: f64 = 512.0;

/// A batch being written by a task of its own, not yet acknowledged.
struct InFlight {
    ids: Vec<String>,
    write: JoinHandle<Result<(), ConsumerError>>,
}

/// The database side of the consumer, cloned into the task that writes a batch.
#[derive(Clone)]
struct Writer {
    store: Arc<dyn VisitStore>,
    counters: Arc<ConsumerCounters>,
    count_bots: bool,
    max_visits_per_transaction: usize,
    shutdown: Option<watch::Receiver<bool>>,
}

pub struct Consumer {
    client: redis::Client,
    connection: Option<MultiplexedConnection>,
    enricher: Arc<Enricher>,
    settings: ConsumerSettings,
    counters: Arc<ConsumerCounters>,
    writer: Writer,
    phase: Phase,
    claim_cursor: String,
    last_claim: Option<Instant>,
    group_ready: bool,
    /// Visits per entry expected in the next read: jumps up to what a read showed, halves its
    /// way down. Sizes `COUNT` so a read holds about one transaction's worth of visits: a read
    /// of `--consumer-batch` full entries held up to 512,000 visits (hundreds of MB, which the
    /// allocator kept after the spike; soak RSS grew in steps).
    visits_per_entry: f64,
}

impl Consumer {
    pub fn new(
        redis_url: &str,
        store: Arc<dyn VisitStore>,
        enricher: Arc<Enricher>,
        settings: ConsumerSettings,
    ) -> Result<Self, ConsumerError> {
        let counters: Arc<ConsumerCounters> = Arc::default();
        let per_transaction = settings
            .max_visits_per_transaction
            .unwrap_or_else(|| max_visits_per_transaction(store.backend()))
            .max(1);
        Ok(Consumer {
            client: redis::Client::open(redis_url)?,
            connection: None,
            enricher,
            writer: Writer {
                store,
                counters: Arc::clone(&counters),
                count_bots: settings.count_bots,
                max_visits_per_transaction: per_transaction,
                shutdown: None,
            },
            settings,
            counters,
            phase: Phase::OwnPending("0".to_owned()),
            claim_cursor: "0-0".to_owned(),
            last_claim: None,
            group_ready: false,
            visits_per_entry: MAX_VISITS_PER_ENTRY,
        })
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

    async fn connection(&mut self) -> Result<MultiplexedConnection, ConsumerError> {
        if let Some(connection) = &self.connection {
            return Ok(connection.clone());
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Duration::from_secs(5))
            .set_response_timeout(self.settings.block + Duration::from_secs(10));
        let connection = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        self.connection = Some(connection.clone());
        Ok(connection)
    }

    /// Runs a command; a failure drops the connection so the next call reconnects.
    async fn query(&mut self, cmd: &redis::Cmd) -> Result<Value, ConsumerError> {
        let mut connection = self.connection().await?;
        match cmd.query_async::<Value>(&mut connection).await {
            Ok(value) => Ok(value),
            Err(error) => {
                if !matches!(error.kind(), redis::ErrorKind::ExtensionError) {
                    self.connection = None;
                }
                Err(error.into())
            }
        }
    }

    /// Creates the group (and the stream) if missing. The group starts at the beginning of the
    /// stream, so events queued before the first consumer ever ran are counted too.
    pub async fn ensure_group(&mut self) -> Result<(), ConsumerError> {
        let mut cmd = redis::cmd("XGROUP");
        cmd.arg("CREATE")
            .arg(STREAM)
            .arg(GROUP)
            .arg("0")
            .arg("MKSTREAM");
        match self.query(&cmd).await {
            Ok(_) => {}
            Err(ConsumerError::Redis(e)) if e.code() == Some("BUSYGROUP") => {}
            Err(e) => return Err(e),
        }
        self.group_ready = true;
        Ok(())
    }

    /// The next batch: this consumer's own pending entries first, then entries idle too long with
    /// other consumers, then new entries (waiting up to `block` for them).
    pub async fn read_batch(&mut self) -> Result<Vec<RawEntry>, ConsumerError> {
        if !self.group_ready {
            self.ensure_group().await?;
        }
        if let Phase::OwnPending(after) = &self.phase {
            let after = after.clone();
            let entries = self.xreadgroup(&after, None).await?;
            match entries.last() {
                Some(last) => {
                    self.phase = Phase::OwnPending(last.id.clone());
                    return Ok(entries);
                }
                None => self.phase = Phase::New,
            }
        }
        let claim_every = (self.settings.claim_after / 2).max(Duration::from_millis(100));
        if self.last_claim.is_none_or(|at| at.elapsed() >= claim_every) {
            let claimed = self.claim().await?;
            if !claimed.is_empty() {
                return Ok(claimed);
            }
        }
        self.xreadgroup(">", Some(self.settings.block)).await
    }

    async fn xreadgroup(
        &mut self,
        after: &str,
        block: Option<Duration>,
    ) -> Result<Vec<RawEntry>, ConsumerError> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP")
            .arg(GROUP)
            .arg(&self.settings.name)
            .arg("COUNT")
            .arg(self.read_count());
        if let Some(block) = block {
            cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
        }
        cmd.arg("STREAMS").arg(STREAM).arg(after);
        let reply = match self.query(&cmd).await {
            Err(ConsumerError::Redis(e)) if e.code() == Some("NOGROUP") => {
                // The stream or group was deleted behind our back: recreate and start over.
                self.group_ready = false;
                return Err(ConsumerError::Redis(e));
            }
            other => other?,
        };
        let entries = match reply {
            Value::Nil => Vec::new(),
            Value::Array(streams) => {
                let mut out = Vec::new();
                for stream in streams {
                    let Value::Array(parts) = stream else {
                        return Err(ConsumerError::Reply("XREADGROUP"));
                    };
                    if let Some(entries) = parts.into_iter().nth(1) {
                        out.extend(parse_entries(entries)?);
                    }
                }
                out
            }
            Value::Map(streams) => {
                let mut out = Vec::new();
                for (_, entries) in streams {
                    out.extend(parse_entries(entries)?);
                }
                out
            }
            _ => return Err(ConsumerError::Reply("XREADGROUP")),
        };
        ConsumerCounters::add(&self.counters.read, entries.len() as u64);
        Ok(entries)
    }

    /// One `XAUTOCLAIM` step over the group's pending entries idle longer than `claim_after`.
    async fn claim(&mut self) -> Result<Vec<RawEntry>, ConsumerError> {
        let mut cmd = redis::cmd("XAUTOCLAIM");
        cmd.arg(STREAM)
            .arg(GROUP)
            .arg(&self.settings.name)
            .arg(self.settings.claim_after.as_millis() as u64)
            .arg(&self.claim_cursor)
            .arg("COUNT")
            .arg(self.read_count());
        let reply = self.query(&cmd).await?;
        let Value::Array(parts) = reply else {
            return Err(ConsumerError::Reply("XAUTOCLAIM"));
        };
        let mut parts = parts.into_iter();
        let cursor = parts.next().and_then(|v| text(&v));
        let entries = match parts.next() {
            Some(entries) => parse_entries(entries)?,
            None => Vec::new(),
        };
        match cursor {
            // A full turn over the pending list: rest until the next claim interval.
            Some(cursor) if cursor == "0-0" => {
                self.claim_cursor = cursor;
                self.last_claim = Some(Instant::now());
            }
            Some(cursor) => self.claim_cursor = cursor,
            None => return Err(ConsumerError::Reply("XAUTOCLAIM")),
        }
        if !entries.is_empty() {
            tracing::info!(
                consumer = %self.settings.name,
                entries = entries.len(),
                "claimed visit events left pending by another consumer"
            );
        }
        ConsumerCounters::add(&self.counters.read, entries.len() as u64);
        Ok(entries)
    }

    /// Parses, enriches and stores a batch; returns the ids to acknowledge (all of them, unless the
    /// database stayed unavailable until shutdown).
    pub async fn store(&mut self, entries: &[RawEntry]) -> Result<Vec<String>, ConsumerError> {
        let prepared = prepare(entries, &self.enricher, &self.counters);
        self.observe(entries.len(), prepared.seen);
        self.writer.write_all(&prepared.visits).await?;
        Ok(prepared.ids)
    }

    pub async fn ack(&mut self, ids: &[String]) -> Result<(), ConsumerError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut cmd = redis::cmd("XACK");
        cmd.arg(STREAM).arg(GROUP).arg(ids);
        self.query(&cmd).await?;
        ConsumerCounters::add(&self.counters.acked, ids.len() as u64);
        Ok(())
    }

    /// Reads, stores and acknowledges one batch; returns how many entries it held.
    pub async fn step(&mut self) -> Result<usize, ConsumerError> {
        let entries = self.read_batch().await?;
        if entries.is_empty() {
            return Ok(0);
        }
        let ids = self.store(&entries).await?;
        self.ack(&ids).await?;
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
            self.phase = Phase::OwnPending("0".to_owned());
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
                // CPU-bound (user agent parsing, geo, hashing): off the async workers.
                let prepared =
                    tokio::task::spawn_blocking(move || prepare(&entries, &enricher, &counters))
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
        let Prepared { ids, visits, .. } = prepared;
        *in_flight = Some(InFlight {
            ids,
            write: tokio::spawn(async move { writer.write_all(&visits).await }),
        });
        Ok((n, acked))
    }

    /// Waits for a batch's write and acknowledges it; returns how many entries that was.
    async fn settle(&mut self, batch: InFlight) -> Result<usize, ConsumerError> {
        batch.write.await??;
        self.ack(&batch.ids).await?;
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
            if read == 0 && in_flight.is_none() && self.phase == Phase::New {
                return Ok(total);
            }
        }
    }

    /// Consumes until `shutdown` turns true, riding out Redis and database outages. A batch in
    /// progress is finished (or left pending, never half-counted) before returning.
    pub async fn run(mut self, shutdown: watch::Receiver<bool>) {
        self.writer.shutdown = Some(shutdown.clone());
        tracing::info!(consumer = %self.settings.name, stream = STREAM, group = GROUP, "consuming visit events");
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
            failed = get(&c.failed),
            "visit consumer counters"
        );
    }
}

/// Splits entries into visits (several per entry when the module packed them) and enriches them.
/// Malformed visits and non-redirect answers are counted and left out; their entries are
/// acknowledged with the rest.
fn prepare(entries: &[RawEntry], enricher: &Enricher, counters: &ConsumerCounters) -> Prepared {
    let mut visits = Vec::with_capacity(entries.len());
    let mut seen = 0;
    for entry in entries {
        let Some(fields) = &entry.fields else {
            ConsumerCounters::add(&counters.trimmed, 1);
            continue;
        };
        for event in split_entry(&entry.id, fields) {
            seen += 1;
            ConsumerCounters::add(&counters.visits, 1);
            match event {
                Err(error) => {
                    tracing::debug!(%error, "unreadable visit event acknowledged");
                    ConsumerCounters::add(&counters.invalid, 1);
                }
                Ok(event) if event.status.is_some_and(|s| !(300..400).contains(&s)) => {
                    ConsumerCounters::add(&counters.ignored, 1);
                }
                Ok(event) => visits.push(enricher.enrich(&event)),
            }
        }
    }
    Prepared {
        ids: entries.iter().map(|e| e.id.clone()).collect(),
        visits,
        seen,
    }
}

impl Writer {
    /// Stores a batch's visits in transactions of at most `max_visits_per_transaction`.
    async fn write_all(&self, visits: &[Visit]) -> Result<(), ConsumerError> {
        for chunk in visits.chunks(self.max_visits_per_transaction) {
            self.write(chunk).await?;
        }
        Ok(())
    }

    /// Stores visits in one transaction per batch, riding out database outages (see the module
    /// doc): returns `Err` only on shutdown.
    async fn write(&self, visits: &[Visit]) -> Result<(), ConsumerError> {
        if visits.is_empty() {
            return Ok(());
        }
        let mut attempt: u32 = 0;
        loop {
            match self.store.store_batch(visits, self.count_bots).await {
                Ok(outcome) => {
                    ConsumerCounters::add(&self.counters.inserted, outcome.inserted);
                    ConsumerCounters::add(&self.counters.duplicates, outcome.duplicates);
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
                    Box::pin(self.write(left)).await?;
                    return Box::pin(self.write(right)).await;
                }
                Err(error) => {
                    tracing::error!(%error, event = %visits[0].event_id, "visit cannot be stored; dropped");
                    ConsumerCounters::add(&self.counters.failed, 1);
                    return Ok(());
                }
            }
            attempt = attempt.saturating_add(1);
            self.pause(backoff(attempt)).await?;
        }
    }

    /// Sleeps, unless shutdown is asked for first.
    async fn pause(&self, duration: Duration) -> Result<(), ConsumerError> {
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
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(5))
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn bytes(value: Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(bytes) => Some(bytes),
        Value::SimpleString(s) => Some(s.into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// `[[id, [field, value, ...] | nil], ...]` → entries.
fn parse_entries(value: Value) -> Result<Vec<RawEntry>, ConsumerError> {
    let Value::Array(entries) = value else {
        return Err(ConsumerError::Reply("stream entries"));
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(parts) = entry else {
            return Err(ConsumerError::Reply("stream entry"));
        };
        let mut parts = parts.into_iter();
        let id = parts
            .next()
            .as_ref()
            .and_then(text)
            .ok_or(ConsumerError::Reply("stream entry id"))?;
        let fields = match parts.next() {
            Some(Value::Array(flat)) => {
                let mut pairs = Vec::with_capacity(flat.len() / 2);
                let mut flat = flat.into_iter();
                while let (Some(k), Some(v)) = (flat.next(), flat.next()) {
                    if let (Some(k), Some(v)) = (bytes(k), bytes(v)) {
                        pairs.push((k, v));
                    }
                }
                Some(pairs)
            }
            Some(Value::Map(map)) => Some(
                map.into_iter()
                    .filter_map(|(k, v)| Some((bytes(k)?, bytes(v)?)))
                    .collect(),
            ),
            _ => None,
        };
        out.push(RawEntry { id, fields });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_including_trimmed_ones() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![
            Value::Array(vec![
                bulk("1-0"),
                Value::Array(vec![bulk("c"), bulk("abc"), bulk("t"), bulk("5")]),
            ]),
            Value::Array(vec![bulk("2-0"), Value::Nil]),
        ]);
        let entries = parse_entries(reply).unwrap();
        assert_eq!(entries[0].id, "1-0");
        assert_eq!(
            entries[0].fields.as_deref(),
            Some(
                &[
                    (b"c".to_vec(), b"abc".to_vec()),
                    (b"t".to_vec(), b"5".to_vec())
                ][..]
            )
        );
        assert_eq!(entries[1].fields, None);
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(30), Duration::from_secs(5));
    }
}
