//! A compose request that sends: its messages are handed to the workspace's gateway one by one,
//! at the gateway's throttle, in a task of their own that outlives the request's answer (the
//! answer does not wait for the throttle; the job's records say what happened).
//!
//! Per recipient it records what the gateway answered and, for a message it accepted, a
//! `submitted` receipt (the funnel's first step; Kannel's own reports follow on the `dlr-url`).
//! A link the gateway already accepted in an earlier job (a compose retried with its
//! `Idempotency-Key` answers the same links) is skipped: a recipient never gets it twice. Once
//! the key that started the job is revoked or its workspace suspended or deleted (checked at
//! most every [`STANDING_EVERY`]), the rest of the job is recorded as stopped, nothing sent.

use super::kannel::{self, Sendsms};
use super::settings::{self, Ready};
use crate::{AppState, Result};
use shortlink_core::service::{Authority, Stop};
use shortlink_store::WorkspaceId;
use shortlink_visits::deliveries::{
    Deliveries, DeliveryState, Gateway, Gateways, LinkRef, NewReceipt, SendJob, SendRecord,
};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How stale the job's knowledge of its key and workspace may get.
const STANDING_EVERY: Duration = Duration::from_millis(500);

/// One message to send.
pub struct Order {
    /// The recipient's line.
    pub index: i64,
    pub code: String,
    pub short_url: Option<String>,
    /// E.164: to the gateway, nowhere else.
    pub phone: String,
    pub text: String,
}

/// Where compose hands its messages to a running job; the job ends once this is dropped and
/// every order is sent.
#[derive(Clone)]
pub struct Queue {
    pub job: String,
    sender: mpsc::UnboundedSender<Order>,
}

impl Queue {
    pub fn push(&self, order: Order) {
        // A job gone (it failed to record) sends nothing more; the answer still goes out.
        let _ = self.sender.send(order);
    }
}

/// Starts a job of `workspace`'s gateway for `authority`: 422 when the workspace has no gateway
/// or its password cannot be read, before anything is issued.
pub async fn start(
    state: &AppState,
    authority: Authority,
    campaign: Option<String>,
) -> Result<Queue> {
    let workspace = authority.workspace;
    let Ready {
        sendsms,
        per_second,
    } = settings::ready(state, workspace).await?;
    let id = settings::new_id("snd")?;
    let (token_id, token) = settings::job_token(state, workspace, &id).await?;
    let sendsms = Sendsms {
        dlr_base: format!("{}/callbacks/{token}/kannel", sendsms.dlr_base),
        ..sendsms
    };
    let job = SendJob {
        id: id.clone(),
        workspace,
        campaign,
        callback_token_id: token_id,
        created_at: shortlink_store::now(),
        finished_at: None,
        stopped: None,
    };
    state.analytics.store.gateways().insert_job(&job).await?;
    let (sender, receiver) = mpsc::unbounded_channel();
    let run = Run {
        state: state.clone(),
        authority,
        job: id.clone(),
        sendsms,
        every: Duration::from_secs(1) / per_second.max(1),
    };
    tokio::spawn(run.drain(receiver));
    Ok(Queue { job: id, sender })
}

struct Run {
    state: AppState,
    authority: Authority,
    job: String,
    sendsms: Sendsms,
    /// The throttle: one message per this.
    every: Duration,
}

impl Run {
    fn workspace(&self) -> WorkspaceId {
        self.authority.workspace
    }

    async fn drain(self, mut orders: mpsc::UnboundedReceiver<Order>) {
        let mut ticks = tokio::time::interval(self.every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut watch = Watch::default();
        while let Some(order) = orders.recv().await {
            let message_id = format!("{}-{}", self.job, order.index);
            let record = match watch.stopped {
                Some(stop) => unsent(&order, &message_id, "stopped", stop.to_string()),
                None => self.send(&mut ticks, &mut watch, &order, &message_id).await,
            };
            let gateways = self.state.analytics.store.gateways();
            if let Err(error) = gateways
                .insert_send(self.workspace(), &self.job, &record)
                .await
            {
                tracing::error!(%error, job = %self.job, "a send's record could not be written");
            }
        }
        let stopped = watch.stopped.map(|stop| stop.to_string());
        let gateways = self.state.analytics.store.gateways();
        let now = shortlink_store::now();
        let finished = gateways.finish_job(self.workspace(), &self.job, now, stopped.as_deref());
        if let Err(error) = finished.await {
            tracing::error!(%error, job = %self.job, "a send job's end could not be written");
        }
    }

    /// Sends one message at its turn, unless the gateway already accepted its link or the job
    /// has stopped by then.
    async fn send(
        &self,
        ticks: &mut tokio::time::Interval,
        watch: &mut Watch,
        order: &Order,
        message_id: &str,
    ) -> SendRecord {
        let gateways = self.state.analytics.store.gateways();
        match gateways.accepted(self.workspace(), &order.code).await {
            Ok(false) => {}
            Ok(true) => {
                let why = "the gateway accepted this link's message before".to_owned();
                return unsent(order, message_id, "skipped", why);
            }
            Err(error) => {
                tracing::warn!(%error, job = %self.job, "a send could not be checked");
                return unsent(order, message_id, "failed", "database unavailable".into());
            }
        }
        ticks.tick().await;
        if let Some(stop) = watch.check(self).await {
            return unsent(order, message_id, "stopped", stop.to_string());
        }
        let link = match &order.short_url {
            Some(url) => format!("short_url={url}"),
            None => format!("code={}", order.code),
        };
        let dlr_url = kannel::dlr_url(&self.sendsms.dlr_base, &link, message_id);
        let sent = (self.sendsms)
            .send(&order.phone, &order.text, &dlr_url)
            .await;
        let at = shortlink_store::now();
        if sent.outcome == "accepted" {
            self.submitted(order, message_id, at).await;
        }
        SendRecord {
            index: order.index,
            code: order.code.clone(),
            message_id: message_id.to_owned(),
            outcome: sent.outcome.to_owned(),
            http_status: sent.http_status,
            answer: sent.answer,
            attempts: sent.attempts,
            at,
        }
    }

    /// The `submitted` receipt of a message the gateway accepted.
    async fn submitted(&self, order: &Order, message_id: &str, at: chrono::DateTime<chrono::Utc>) {
        let short_domain = (order.short_url.as_deref())
            .and_then(|url| url::Url::parse(url).ok())
            .and_then(|url| url.host_str().map(str::to_owned));
        let receipt = NewReceipt {
            link: LinkRef::Code(order.code.clone()),
            short_domain,
            message_id: message_id.to_owned(),
            state: DeliveryState::Submitted,
            error_code: None,
            error_text: None,
            carrier: None,
            at,
            gateway: Gateway::Kannel,
        };
        let deliveries = self.state.analytics.store.deliveries();
        let receipts = [receipt];
        let recorded = deliveries.record_receipts(self.workspace(), &receipts, at);
        if let Err(error) = recorded.await {
            tracing::warn!(%error, job = %self.job, "a submitted receipt could not be written");
        }
    }

    /// Why the job must stop, if it must (a database that cannot tell is no reason).
    async fn standing(&self) -> Option<Stop> {
        let storage = self.state.links.storage();
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
    /// Why the job must stop, read again once [`STANDING_EVERY`] has passed.
    async fn check(&mut self, run: &Run) -> Option<Stop> {
        if self.stopped.is_none() && self.checked.is_none_or(|at| at.elapsed() >= STANDING_EVERY) {
            self.stopped = run.standing().await;
            self.checked = Some(Instant::now());
        }
        self.stopped
    }
}

fn unsent(order: &Order, message_id: &str, outcome: &str, why: String) -> SendRecord {
    SendRecord {
        index: order.index,
        code: order.code.clone(),
        message_id: message_id.to_owned(),
        outcome: outcome.to_owned(),
        http_status: None,
        answer: Some(why),
        attempts: 0,
        at: shortlink_store::now(),
    }
}
