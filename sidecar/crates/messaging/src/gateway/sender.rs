//! One send job, sent by the sidecar holding its lease: its queued messages are read in pages
//! (memory bounded whatever the campaign's size), handed to the gateway one by one at the
//! gateway's throttle, and each outcome recorded as its row leaves the queue. The job ends once
//! compose queued its last message and none is left.
//!
//! Per recipient it records what its hand-off came to and, for a message the gateway took, a
//! `submitted` receipt (the funnel's first step; Kannel's own reports follow on the `dlr-url`).
//! A link the gateway may have from an earlier job (accepted, queued, unknown, interrupted: a
//! compose retried with its `Idempotency-Key` answers the same links) is skipped: a recipient
//! never gets it twice. Once
//! the key that started the job is revoked or its workspace suspended or deleted (checked at
//! most every [`STANDING_EVERY`]), the rest of the job is recorded as stopped, nothing sent.
//!
//! At most once: a hand-off is marked started in the job's row before the request leaves. A
//! job taken over with such a mark (its sidecar died between the request and the record) records
//! that message as `interrupted` and never sends it again: an SMS cannot be recalled. A hand-off
//! whose answer never came is `unknown`, never tried again (`super::kannel`).
//!
//! Receipts never lost: nothing is handed over while the job's callback base does not answer
//! ([`super::callback`]), probed before the first message and after each failed hand-off.

use super::callback::{Callback, Waited};
use super::kannel::{self, Handoff, Sendsms};
use crate::signed::job_signature;
use crate::Messaging;
use shortlink_core::background::Shutdown;
use shortlink_core::service::{Authority, Stop};
use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::{
    DeliveryState, Gateway, LinkRef, NewReceipt, OpenJob, Pending, SendOutcome, SendRecord,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How stale the job's knowledge of its key and workspace may get.
const STANDING_EVERY: Duration = Duration::from_millis(500);
/// Queued messages read at once.
const PAGE: i64 = 200;
/// How often a job whose compose is still answering looks for more messages, unless told.
const WAITING: Duration = Duration::from_millis(100);
/// The wait before writing an outcome again when the database failed.
const RETRY_RECORD: Duration = Duration::from_secs(1);

/// What an `interrupted` message's record says.
pub const INTERRUPTED: &str =
    "its sidecar stopped during the hand-off: not sent again (the gateway may have it)";

/// Sends job `open` until it ends, this sidecar loses it or stops: its id.
pub async fn send_job(messaging: Arc<Messaging>, open: OpenJob, shutdown: Shutdown) -> String {
    let id = open.id.clone();
    let lost = Arc::new(AtomicBool::new(false));
    let heartbeat = renew(Arc::clone(&messaging), id.clone(), Arc::clone(&lost));
    let mut run = Run::new(&messaging, open, lost, shutdown).await;
    // In the job's own task: a job aborted with its sidecar stops renewing its lease too.
    tokio::select! {
        () = run.drain() => {}
        () = heartbeat => {}
    }
    id
}

/// Renews the lease every third of it; marks the job `lost` once another sidecar has it (and
/// never returns: the job sees the mark between two messages).
async fn renew(messaging: Arc<Messaging>, job: String, lost: Arc<AtomicBool>) {
    let sends = &messaging.sends;
    loop {
        tokio::time::sleep(sends.lease / 3).await;
        let until = sends.lease_from(shortlink_store::now());
        let queue = messaging.store.send_queue();
        match queue.renew(&job, &sends.owner, until).await {
            Ok(true) => {}
            Ok(false) => {
                lost.store(true, Ordering::Release);
                return std::future::pending().await;
            }
            // The lease may run out meanwhile: the mark of the next hand-off checks it.
            Err(error) => tracing::warn!(%error, %job, "a send job's lease could not be renewed"),
        }
    }
}

struct Run {
    messaging: Arc<Messaging>,
    job: OpenJob,
    authority: Authority,
    /// The gateway, or why there is none to send through (every message then fails).
    sendsms: Result<Sendsms, String>,
    /// Its reports' way back; probed before a hand-off when `unproven`.
    callback: Option<Callback>,
    unproven: bool,
    ticks: tokio::time::Interval,
    watch: Watch,
    lost: Arc<AtomicBool>,
    shutdown: Shutdown,
}

/// Why the job stopped sending here before its end.
enum Halt {
    /// Another sidecar holds it now.
    Lost,
    /// This sidecar stops: its lease is given up for another to go on.
    Stopping,
}

impl Run {
    async fn new(
        messaging: &Arc<Messaging>,
        job: OpenJob,
        lost: Arc<AtomicBool>,
        shutdown: Shutdown,
    ) -> Run {
        let mut callback = None;
        let (sendsms, per_second) = match messaging.ready(job.workspace).await {
            Ok(ready) => match &job.dlr_base {
                Some(base) => {
                    callback = Callback::new(ready.probe, base)
                        .inspect_err(|error| tracing::warn!(%error, "no callback probe"))
                        .ok();
                    let sendsms = Sendsms {
                        dlr_base: base.clone(),
                        ..ready.sendsms
                    };
                    (Ok(sendsms), ready.per_second)
                }
                None => (Err("the job has no callback URL".to_owned()), 1000),
            },
            Err(error) => (Err(error.message()), 1000),
        };
        let mut ticks = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let authority = Authority {
            workspace: job.workspace,
            key: job.api_key,
        };
        Run {
            messaging: Arc::clone(messaging),
            job,
            authority,
            sendsms,
            callback,
            unproven: true,
            ticks,
            watch: Watch::default(),
            lost,
            shutdown,
        }
    }

    fn workspace(&self) -> WorkspaceId {
        self.authority.workspace
    }

    fn halted(&self) -> Option<Halt> {
        if self.lost.load(Ordering::Acquire) {
            return Some(Halt::Lost);
        }
        (*self.shutdown.borrow()).then_some(Halt::Stopping)
    }

    /// Sends pages of the queue until it is empty and sealed (then the job ends), or it halts.
    async fn drain(&mut self) {
        let store = Arc::clone(&self.messaging.store);
        let queue = store.send_queue();
        let owner = self.messaging.sends.owner.clone();
        if let Some(index) = self.job.handing {
            if let Err(halt) = self.interrupted(index).await {
                return self.halt(halt).await;
            }
        }
        loop {
            if let Some(halt) = self.halted() {
                return self.halt(halt).await;
            }
            // Sealed before the page is read: every message of a sealed job is in it.
            let sealed = match queue.held(&self.job.id, &owner).await {
                Ok(Some(job)) => job.queued,
                Ok(None) => return,
                Err(_) => false,
            };
            let page = match queue.pending(&self.job.id, PAGE).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(%error, job = %self.job.id, "a send queue could not be read");
                    Vec::new()
                }
            };
            if page.is_empty() {
                if sealed {
                    return self.finish().await;
                }
                let queued = self.messaging.sends.queued.notified();
                let _ = tokio::time::timeout(WAITING, queued).await;
                continue;
            }
            for message in page {
                if let Err(halt) = self.one(message).await {
                    return self.halt(halt).await;
                }
            }
        }
    }

    async fn finish(&self) {
        let stopped = self.watch.stopped.map(|stop| stop.to_string());
        let queue = self.messaging.store.send_queue();
        let now = shortlink_store::now();
        let owner = &self.messaging.sends.owner;
        if let Err(error) = queue
            .finish(&self.job.id, owner, now, stopped.as_deref())
            .await
        {
            tracing::error!(%error, job = %self.job.id, "a send job's end could not be written");
        }
    }

    async fn halt(&self, halt: Halt) {
        if let Halt::Stopping = halt {
            // Given up: another sidecar's next pass takes the job at once.
            let queue = self.messaging.store.send_queue();
            let owner = &self.messaging.sends.owner;
            let past = shortlink_store::now() - chrono::Duration::milliseconds(1);
            let _ = queue.renew(&self.job.id, owner, past).await;
        }
    }

    /// Records message `index` (whose hand-off started and was never recorded) as interrupted.
    async fn interrupted(&mut self, index: i64) -> Result<(), Halt> {
        let queue = self.messaging.store.send_queue();
        let Some(message) = (queue.pending_at(&self.job.id, index).await).ok().flatten() else {
            return Ok(());
        };
        let message_id = format!("{}-{}", self.job.id, message.index);
        let record = unsent(
            &message,
            &message_id,
            SendOutcome::Interrupted,
            INTERRUPTED.into(),
        );
        self.record(&record).await
    }

    /// Sends and records one message.
    async fn one(&mut self, message: Pending) -> Result<(), Halt> {
        let message_id = format!("{}-{}", self.job.id, message.index);
        let record = match self.watch.stopped {
            Some(stop) => unsent(
                &message,
                &message_id,
                SendOutcome::Stopped,
                stop.to_string(),
            ),
            None => self.send(&message, &message_id).await?,
        };
        self.record(&record).await
    }

    /// Writes an outcome (its queued row goes with it), again until the database takes it: the
    /// message must never be read from the queue again.
    async fn record(&self, record: &SendRecord) -> Result<(), Halt> {
        let queue = self.messaging.store.send_queue();
        loop {
            match queue.record(self.workspace(), &self.job.id, record).await {
                Ok(()) => return Ok(()),
                Err(error) => {
                    tracing::error!(%error, job = %self.job.id, "a send's record could not be written");
                }
            }
            if let Some(halt) = self.halted() {
                return Err(halt);
            }
            tokio::time::sleep(RETRY_RECORD).await;
        }
    }

    /// Sends one message at its turn, unless the gateway already accepted its link or the job
    /// has stopped by then.
    async fn send(&mut self, message: &Pending, message_id: &str) -> Result<SendRecord, Halt> {
        let gateways = self.messaging.store.gateways();
        match gateways.accepted(self.workspace(), &message.code).await {
            Ok(false) => {}
            Ok(true) => {
                let why = "the gateway may have this link's message from an earlier job".to_owned();
                return Ok(unsent(message, message_id, SendOutcome::Skipped, why));
            }
            Err(error) => {
                tracing::warn!(%error, job = %self.job.id, "a send could not be checked");
                let why = "database unavailable".into();
                return Ok(unsent(message, message_id, SendOutcome::Failed, why));
            }
        }
        if self.unproven {
            self.callback_answers().await?;
        }
        let sendsms = match &self.sendsms {
            Ok(sendsms) => sendsms,
            Err(why) => {
                return Ok(unsent(
                    message,
                    message_id,
                    SendOutcome::Failed,
                    why.clone(),
                ))
            }
        };
        self.ticks.tick().await;
        let standing = self.standing_now().await;
        if let Some(stop) = self.watch.check(standing) {
            return Ok(unsent(
                message,
                message_id,
                SendOutcome::Stopped,
                stop.to_string(),
            ));
        }
        if let Some(halt) = self.halted() {
            return Err(halt);
        }
        let sends = &self.messaging.sends;
        let now = shortlink_store::now();
        let queue = self.messaging.store.send_queue();
        let marked = queue.handing(
            &self.job.id,
            &sends.owner,
            message.index,
            now,
            sends.lease_from(now),
        );
        // Not marked, not sent: the message was erased (its record, with no row left, is not
        // written), or the job is another sidecar's now, or the database cannot tell.
        if !marked.await.unwrap_or(false) {
            return match queue.pending_at(&self.job.id, message.index).await {
                Ok(None) => Ok(unsent(
                    message,
                    message_id,
                    SendOutcome::Erased,
                    String::new(),
                )),
                Ok(Some(_)) | Err(_) => Err(Halt::Lost),
            };
        }
        let link = match &message.short_url {
            Some(url) => format!("short_url={url}"),
            None => format!("code={}", message.code),
        };
        let key = &self.messaging.dlr_key;
        let (code, short_url) = (&message.code, message.short_url.as_deref());
        let sig = job_signature(key, &self.job.id, message_id, code, short_url);
        let dlr_url = kannel::dlr_url(&sendsms.dlr_base, &link, message_id, &sig);
        let sent = sendsms.send(&message.phone, &message.text, &dlr_url).await;
        let at = shortlink_store::now();
        if sent.handoff.taken() {
            self.submitted(message, message_id, at).await;
        } else if sent.handoff != Handoff::Refused {
            // The network may be down for the way back too: proven again before the next one.
            self.unproven = true;
        }
        Ok(SendRecord {
            index: message.index,
            code: message.code.clone(),
            message_id: message_id.to_owned(),
            outcome: sent.handoff.outcome(),
            http_status: sent.http_status,
            gateway_code: sent.gateway_code,
            detail: Some(sent.handoff.detail().to_owned()),
            attempts: sent.attempts,
            at,
        })
    }

    /// Returns once the job's callback base answers, the job's row saying meanwhile that it
    /// waits (its lease is renewed by the job's heartbeat all along); `Err` if it halts first.
    async fn callback_answers(&mut self) -> Result<(), Halt> {
        let Some(callback) = &self.callback else {
            return Ok(());
        };
        if callback.answers().await {
            self.unproven = false;
            return Ok(());
        }
        let queue = self.messaging.store.send_queue();
        let (job, owner) = (&self.job.id, &self.messaging.sends.owner);
        tracing::warn!(%job, "the send job waits for its callback URL to answer");
        let since = Some(shortlink_store::now());
        if let Err(error) = queue.waiting(job, owner, since).await {
            tracing::warn!(%error, %job, "a send job's wait could not be written");
        }
        let waited = tokio::select! {
            waited = callback.until_answers(self.shutdown.clone()) => waited,
            () = lost(&self.lost) => return Err(Halt::Lost),
        };
        if waited == Waited::Stopping {
            return Err(Halt::Stopping);
        }
        if let Err(error) = queue.waiting(job, owner, None).await {
            tracing::warn!(%error, %job, "a send job's wait's end could not be written");
        }
        self.unproven = false;
        Ok(())
    }

    /// The standing of the job's key and workspace, when [`Watch`] is due to read it again.
    async fn standing_now(&self) -> Option<Option<Stop>> {
        if !self.watch.due() {
            return None;
        }
        Some(self.standing().await)
    }

    /// The `submitted` receipt of a message the gateway accepted.
    async fn submitted(
        &self,
        message: &Pending,
        message_id: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) {
        let short_domain = (message.short_url.as_deref())
            .and_then(|url| url::Url::parse(url).ok())
            .and_then(|url| url.host_str().map(str::to_owned));
        let receipt = NewReceipt {
            link: LinkRef::Code(message.code.clone()),
            short_domain,
            message_id: message_id.to_owned(),
            state: DeliveryState::Submitted,
            error_code: None,
            error_text: None,
            carrier: None,
            at,
            gateway: Gateway::Kannel,
        };
        let deliveries = self.messaging.store.deliveries();
        let receipts = [receipt];
        let recorded = deliveries.record_receipts(self.workspace(), &receipts, at);
        if let Err(error) = recorded.await {
            tracing::warn!(%error, job = %self.job.id, "a submitted receipt could not be written");
        }
    }

    /// Why the job must stop, if it must (a database that cannot tell is no reason).
    async fn standing(&self) -> Option<Stop> {
        let storage = &self.messaging.storage;
        let mut tx = storage.begin().await.ok()?;
        let (workspace, key) = (self.authority.workspace, self.authority.key);
        let standing = tx.standing(workspace, key, false).await;
        let _ = tx.rollback().await;
        Stop::of(standing.ok()?)
    }
}

/// What the job knows of its key and workspace.
#[derive(Default)]
struct Watch {
    checked: Option<Instant>,
    stopped: Option<Stop>,
}

impl Watch {
    /// Whether the standing is to be read again ([`STANDING_EVERY`] has passed).
    fn due(&self) -> bool {
        self.stopped.is_none() && self.checked.is_none_or(|at| at.elapsed() >= STANDING_EVERY)
    }

    /// Why the job must stop, with the standing just read if it was.
    fn check(&mut self, read: Option<Option<Stop>>) -> Option<Stop> {
        if let Some(stopped) = read {
            self.stopped = stopped;
            self.checked = Some(Instant::now());
        }
        self.stopped
    }
}

/// Completes once another sidecar holds the job.
async fn lost(lost: &AtomicBool) {
    let mut every = tokio::time::interval(Duration::from_millis(200));
    while !lost.load(Ordering::Acquire) {
        every.tick().await;
    }
}

fn unsent(message: &Pending, message_id: &str, outcome: SendOutcome, why: String) -> SendRecord {
    SendRecord {
        index: message.index,
        code: message.code.clone(),
        message_id: message_id.to_owned(),
        outcome,
        http_status: None,
        gateway_code: None,
        detail: Some(why),
        attempts: 0,
        at: shortlink_store::now(),
    }
}
