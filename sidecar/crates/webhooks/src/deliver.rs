//! Delivery: each sidecar that delivers (`--webhooks`, default on) looks at the subscriptions
//! every second, takes the lease of those nobody holds (or whose holder stopped renewing it) and
//! runs one task per subscription it holds. A task reads the feed from the subscription's cursor,
//! POSTs batches in order, one at a time, and saves the cursor after them under its lease; a
//! failing batch is retried with exponential backoff until the retry window has passed since
//! deliveries started failing, then recorded as a failure (kept for replay) and passed over.
//!
//! Nothing here is on the consumer's path: it only reads what the consumer committed, so a slow
//! or dead receiver holds back its own subscription and nothing else.

use super::client::Sender;
use super::cursor::Cursor;
use super::event::Event;
use super::feed::FeedReader;
use super::store::Stores;
use super::store::{Failure, Lease, Progress};
use super::subscription::Subscription;
use super::WebhookSettings;
use serde::Serialize;
use shortlink_core::background::{self, pause, Shutdown};
use shortlink_store::StorageResult;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::{AbortHandle, JoinSet};

/// How often the subscriptions are looked at (new ones, leases to take over).
const SCAN_EVERY: Duration = Duration::from_secs(1);
/// The most a saved cursor lags the deliveries made (a crash re-sends at most this much).
const SAVE_EVERY: Duration = Duration::from_millis(100);
/// The first retry's pause; each next one doubles, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Events read ahead of the POSTs at most.
const READ_AHEAD: usize = 1000;

/// What a POST's body is.
#[derive(Serialize)]
struct Body<'a> {
    events: &'a [Event],
}

pub struct Deliverer {
    stores: Stores,
    sender: Sender,
    settings: WebhookSettings,
    /// This process's name on the leases it holds.
    owner: String,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The pause before retry number `attempts` (1 = the first retry).
pub fn backoff(attempts: i64) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1))
        .unwrap_or(u32::MAX)
        .min(16);
    (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF)
}

impl Deliverer {
    pub fn new(stores: Stores, settings: WebhookSettings) -> Result<Arc<Self>, String> {
        Ok(Self::with_sender(stores, Sender::new(&settings)?, settings))
    }

    /// With the `sender` made from `settings` when the configuration was checked (so wiring the
    /// deliverer cannot fail on a setting).
    pub fn with_sender(stores: Stores, sender: Sender, settings: WebhookSettings) -> Arc<Self> {
        let owner = format!(
            "{}-{}-{}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "sidecar".into()),
            std::process::id(),
            now_ms()
        );
        Arc::new(Self {
            sender,
            stores,
            settings,
            owner,
        })
    }

    fn lease(&self, subscription: &Subscription) -> Lease {
        Lease {
            id: subscription.id.clone(),
            owner: self.owner.clone(),
            revision: subscription.revision,
            until_ms: now_ms() + millis(self.settings.lease),
        }
    }

    /// Runs until `stop` (a [`shortlink_core::background::Tasks`] job); the tasks end with it, each saving
    /// the cursor of what it delivered (a batch in flight is abandoned and sent again by whoever
    /// delivers next, as its cursor was not saved).
    pub async fn run(self: Arc<Self>, mut stop: Shutdown) {
        let mut tasks = JoinSet::new();
        let mut running: HashMap<String, AbortHandle> = HashMap::new();
        loop {
            running.retain(|_, task| !task.is_finished());
            while tasks.try_join_next().is_some() {}
            if let Err(error) = self.start_tasks(&mut tasks, &mut running, &stop).await {
                tracing::warn!(%error, "webhooks: cannot read the subscriptions");
            }
            if !pause(&mut stop, SCAN_EVERY).await {
                break;
            }
        }
        // Each task sees `stop` too and saves its cursor before returning; the runner's deadline
        // aborts one that does not in time.
        while tasks.join_next().await.is_some() {}
    }

    async fn start_tasks(
        self: &Arc<Self>,
        tasks: &mut JoinSet<()>,
        running: &mut HashMap<String, AbortHandle>,
        stop: &Shutdown,
    ) -> StorageResult<()> {
        let now = now_ms();
        for subscription in self.stores.webhooks.subscriptions().await? {
            let held_elsewhere = subscription.lease_until_ms >= now
                && subscription.lease_owner.as_deref() != Some(self.owner.as_str());
            if running.contains_key(&subscription.id) || held_elsewhere {
                continue;
            }
            let lease = self.lease(&subscription);
            if self.stores.webhooks.claim(&lease, now).await? {
                let task = Task::new(Arc::clone(self), subscription, lease, stop.clone());
                let id = task.subscription.id.clone();
                running.insert(id, tasks.spawn(task.run()));
            }
        }
        Ok(())
    }
}

/// One subscription's delivery, while this process holds its lease.
struct Task {
    deliverer: Arc<Deliverer>,
    subscription: Subscription,
    lease: Lease,
    reader: FeedReader,
    /// Read, not yet delivered, with the cursor after each (a queue: one event per POST takes
    /// them from the front one at a time).
    pending: VecDeque<(Cursor, Event)>,
    /// The cursor after the last event read (or passed over by the filter).
    read_to: Cursor,
    /// When the oldest pending event was read: a batch waits `batch_ms` from then for more.
    waiting_since: Option<Instant>,
    /// The cursor of the next event to deliver, and the deliveries not saved yet.
    at: Cursor,
    unsaved: i64,
    saved_at: Instant,
    stop: Shutdown,
}

enum Step {
    Go,
    Stop,
}

impl Task {
    fn new(
        deliverer: Arc<Deliverer>,
        subscription: Subscription,
        lease: Lease,
        stop: Shutdown,
    ) -> Self {
        let reader = FeedReader::new(deliverer.stores.clone(), deliverer.settings.privacy);
        Task {
            at: subscription.cursor,
            read_to: subscription.cursor,
            deliverer,
            subscription,
            lease,
            reader,
            pending: VecDeque::new(),
            waiting_since: None,
            unsaved: 0,
            saved_at: Instant::now(),
            stop,
        }
    }

    fn id(&self) -> &str {
        &self.subscription.id
    }

    /// Delivers until the lease is lost, the subscription changed or went, or the process stops.
    async fn run(mut self) {
        loop {
            match self.step().await {
                Ok(Step::Go) => {}
                Ok(Step::Stop) => {
                    if *self.stop.borrow() {
                        // Stopping: what was delivered is saved, not sent again.
                        let _ = self.save_if_due(true).await;
                    }
                    break;
                }
                Err(error) => {
                    tracing::warn!(subscription = self.id(), %error, "webhook delivery: database");
                    if !pause(&mut self.stop, SCAN_EVERY).await {
                        break;
                    }
                }
            }
        }
        shortlink_core::metrics::webhook_lag(self.id(), 0.0);
    }

    async fn step(&mut self) -> StorageResult<Step> {
        let poll = self.deliverer.settings.poll;
        let spec = &self.subscription.spec;
        let batch = usize::try_from(spec.batch_size).unwrap_or(1);
        let wait_for = Duration::from_millis(u64::from(spec.batch_ms));
        if self.pending.len() < batch {
            let want = READ_AHEAD.max(batch) - self.pending.len();
            let page = self
                .reader
                .read(self.read_to, &self.subscription.filter(), want)
                .await?;
            self.read_to = page.next;
            if self.pending.is_empty() && !page.events.is_empty() {
                self.waiting_since = Some(Instant::now());
            }
            for event in page.events {
                let after = event.cursor().parse().unwrap_or(page.next);
                self.pending.push_back((after, event));
            }
        }
        let lag = (self.pending.front()).map_or(0, |(_, e)| {
            (chrono::Utc::now() - e.time()).num_milliseconds()
        });
        shortlink_core::metrics::webhook_lag(self.id(), lag.max(0) as f64 / 1000.0);
        let waited = self.waiting_since.map_or(Duration::ZERO, |t| t.elapsed());
        if self.pending.is_empty() || (self.pending.len() < batch && waited < wait_for) {
            if self.pending.is_empty() {
                // Caught up: what the filter passed over need not be read again.
                self.at = self.read_to;
            }
            if !self.save_if_due(false).await? {
                return Ok(Step::Stop);
            }
            // Caught up: until the next look. Waiting for a fuller batch: until it is due.
            let nap = match self.pending.is_empty() {
                true => poll,
                false => poll.min(wait_for - waited),
            };
            let go = pause(&mut self.stop, nap).await;
            return Ok(if go { Step::Go } else { Step::Stop });
        }
        self.send(batch.min(self.pending.len())).await
    }

    /// POSTs the first `n` pending events.
    async fn send(&mut self, n: usize) -> StorageResult<Step> {
        let events: Vec<Event> = (self.pending.iter().take(n))
            .map(|(_, e)| e.clone())
            .collect();
        let after = match n == self.pending.len() {
            true => self.read_to,
            false => self.pending[n - 1].0,
        };
        let body = serde_json::to_vec(&Body { events: &events }).unwrap_or_default();
        let spec = &self.subscription.spec;
        let post = (self.deliverer.sender).post(&spec.url, &self.subscription.secret, body);
        let sent = tokio::select! {
            sent = post => sent,
            // Stopping: this batch is abandoned (its cursor is not saved, so it is sent again).
            () = background::fired(&mut self.stop) => return Ok(Step::Stop),
        };
        match sent {
            Ok(()) => {
                shortlink_core::metrics::webhook_delivered(self.id(), n as u64);
                self.pending.drain(..n);
                self.waiting_since = (!self.pending.is_empty()).then(Instant::now);
                self.at = after;
                self.unsaved += n as i64;
                let was_failing = self.subscription.failing_since_ms.is_some();
                self.subscription.failing_since_ms = None;
                self.subscription.attempts = 0;
                self.subscription.last_error = None;
                // The end of a failure is saved at once: the console shows it recovered.
                let saved = self.save_if_due(was_failing).await?;
                Ok(if saved { Step::Go } else { Step::Stop })
            }
            Err(error) => self.failed(n, after, error.to_string()).await,
        }
    }

    /// A POST of `n` events failed: wait and retry, or give up on them after the window.
    async fn failed(&mut self, n: usize, after: Cursor, error: String) -> StorageResult<Step> {
        let now = now_ms();
        let s = &mut self.subscription;
        let since = *s.failing_since_ms.get_or_insert(now);
        s.attempts += 1;
        s.last_error = Some(error.clone());
        let window = millis(self.deliverer.settings.retry_window);
        if now - since >= window {
            tracing::warn!(subscription = %s.id, events = n, %error, "webhook: given up after the retry window");
            let failure = Failure {
                id: 0,
                from: self.at,
                to: after,
                events: n as i64,
                failed_ms: now,
                error,
            };
            self.pending.drain(..n);
            self.at = after;
            if !self.save(Some(&failure)).await? {
                return Ok(Step::Stop);
            }
            shortlink_core::metrics::webhook_failed(&self.subscription.id, n as u64);
            return Ok(Step::Go);
        }
        shortlink_core::metrics::webhook_retried(&s.id);
        let pause_for = backoff(s.attempts);
        tracing::debug!(subscription = %s.id, attempts = s.attempts, %error, "webhook: retrying in {pause_for:?}");
        // Saved now: a sidecar taking over goes on with the same schedule and window.
        if !self.save_if_due(true).await? {
            return Ok(Step::Stop);
        }
        self.hold(pause_for).await
    }

    /// Waits `total` while keeping the lease (a backoff outlasts it): another sidecar must not
    /// take over and send the same batch while this one is about to send it again.
    async fn hold(&mut self, total: Duration) -> StorageResult<Step> {
        let started = Instant::now();
        while let Some(left) = total
            .checked_sub(started.elapsed())
            .filter(|d| !d.is_zero())
        {
            if !pause(&mut self.stop, left.min(self.deliverer.settings.lease / 4)).await {
                return Ok(Step::Stop);
            }
            if !self.save_if_due(false).await? {
                return Ok(Step::Stop);
            }
        }
        Ok(Step::Go)
    }

    fn progress(&self) -> Progress {
        let s = &self.subscription;
        Progress {
            cursor: self.at,
            delivered: self.unsaved,
            failing_since_ms: s.failing_since_ms,
            attempts: s.attempts,
            last_error: s.last_error.clone(),
        }
    }

    /// The lease, renewed for one more lease time from now.
    fn renewed(&mut self) -> Lease {
        self.lease.until_ms = now_ms() + millis(self.deliverer.settings.lease);
        self.lease.clone()
    }

    /// Saves the progress (renewing the lease) when `now` is asked, or something is unsaved and
    /// [`SAVE_EVERY`] has passed, or half the lease has. `false`: the lease is no longer ours or
    /// the subscription changed; the task ends and the next scan starts over from what is stored.
    async fn save_if_due(&mut self, now: bool) -> StorageResult<bool> {
        let changed = self.unsaved > 0 || self.at != self.subscription.cursor;
        let half_lease = self.deliverer.settings.lease / 2;
        let due = now
            || (changed && self.saved_at.elapsed() >= SAVE_EVERY)
            || self.saved_at.elapsed() >= half_lease;
        if !due {
            return Ok(true);
        }
        self.save(None).await
    }

    /// Saves the progress under a renewed lease, recording `failure` with it when given.
    async fn save(&mut self, failure: Option<&Failure>) -> StorageResult<bool> {
        let progress = self.progress();
        let lease = self.renewed();
        let webhooks = &self.deliverer.stores.webhooks;
        let saved = match failure {
            Some(failure) => webhooks.give_up(&lease, &progress, failure).await?,
            None => webhooks.advance(&lease, &progress).await?,
        };
        if saved {
            self.subscription.cursor = self.at;
            self.unsaved = 0;
            self.saved_at = Instant::now();
        }
        Ok(saved)
    }
}
