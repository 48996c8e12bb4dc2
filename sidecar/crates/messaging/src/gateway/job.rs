//! A compose request that sends: its send job is opened (after the request's `Idempotency-Key`
//! was claimed: a refused compose leaves no job), and each message the answer promises is
//! written to the job's queue in SQL before the answer's frame that promises it goes out
//! ([`Queue`]). The job is sent by whichever sidecar holds its lease ([`super::runner`],
//! [`super::sender`]): this one at once, another one if this one stops.

use super::ready::{new_id, Ready};
use super::sends::Sends;
use crate::{Messaging, Result};
use shortlink_core::service::Authority;
use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::{NewJob, Pending, SendJob};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Where compose puts a job's messages as it answers them: kept here until the frame that
/// answers them is about to go out ([`Queue::flush`]), then written to SQL.
pub struct Queue {
    pub job: String,
    workspace: WorkspaceId,
    messaging: Arc<Messaging>,
    waiting: Mutex<Vec<Pending>>,
    /// Compose queued its last message (and said so in SQL).
    sealed: AtomicBool,
}

impl Queue {
    /// A message the answer promises; written by the next [`Self::flush`].
    pub fn push(&self, message: Pending) {
        self.lock().push(message);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the messages pushed so far: the answer promises no message that is not queued.
    pub async fn flush(&self) -> Result<()> {
        let waiting = std::mem::take(&mut *self.lock());
        if waiting.is_empty() {
            return Ok(());
        }
        let queue = self.messaging.store.send_queue();
        queue.enqueue(self.workspace, &self.job, &waiting).await?;
        self.messaging.sends.queued.notify_waiters();
        Ok(())
    }

    /// Writes the last messages and says no more come: the job ends once they are sent.
    pub async fn seal(&self) -> Result<()> {
        self.flush().await?;
        let queue = self.messaging.store.send_queue();
        queue.seal(&self.job, shortlink_store::now()).await?;
        self.sealed.store(true, Ordering::Release);
        self.messaging.sends.queued.notify_waiters();
        Ok(())
    }
}

impl Drop for Queue {
    /// A compose cut short (its client gone, its body broken off): what it answered so far is
    /// queued and the job sealed, so that it ends.
    fn drop(&mut self) {
        if self.sealed.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let waiting = std::mem::take(&mut *self.lock());
        let (messaging, job, workspace) = (
            Arc::clone(&self.messaging),
            self.job.clone(),
            self.workspace,
        );
        runtime.spawn(async move {
            let queue = messaging.store.send_queue();
            let written = match waiting.is_empty() {
                true => Ok(()),
                false => queue.enqueue(workspace, &job, &waiting).await,
            };
            let sealed = match written {
                Ok(()) => queue.seal(&job, shortlink_store::now()).await,
                Err(error) => Err(error),
            };
            if let Err(error) = sealed {
                // Its lease ends with this sidecar; whoever takes it over seals it.
                tracing::error!(%error, %job, "a cut-short compose's send queue was not sealed");
            }
        });
    }
}

/// Opens a job of `workspace`'s gateway for `authority`, held by this sidecar, and starts
/// sending it: 422 when the workspace has no gateway or its password cannot be read.
pub async fn start(
    messaging: &Arc<Messaging>,
    authority: Authority,
    campaign: Option<String>,
) -> Result<Queue> {
    let workspace = authority.workspace;
    let Ready {
        sendsms,
        reports_hours,
        ..
    } = messaging.ready(workspace).await?;
    let id = new_id("snd")?;
    let (token_id, token) = messaging.job_token(workspace, &id).await?;
    let dlr_base = format!("{}/callbacks/{token}/kannel", sendsms.dlr_base);
    let now = shortlink_store::now();
    let job = SendJob {
        id: id.clone(),
        workspace,
        campaign,
        callback_token_id: token_id,
        created_at: now,
        finished_at: None,
        stopped: None,
        waiting_since: None,
    };
    let sends: &Sends = &messaging.sends;
    let new = NewJob {
        job: &job,
        api_key: authority.key,
        dlr_base: &dlr_base,
        reports_ms: i64::from(reports_hours) * 3_600_000,
        owner: &sends.owner,
        lease_until: sends.lease_from(now),
    };
    messaging.store.send_queue().open_job(&new).await?;
    sends.wake(&id);
    Ok(Queue {
        job: id,
        workspace,
        messaging: Arc::clone(messaging),
        waiting: Mutex::new(Vec::new()),
        sealed: AtomicBool::new(false),
    })
}
