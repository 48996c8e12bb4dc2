//! The send jobs a sidecar runs: those its own compose requests open (woken at once), and, at
//! start-up and every half lease, any unfinished job whose lease ran out (its sidecar stopped or
//! died): claimed by one conditional `UPDATE`, so that two sidecars never send one job. The same
//! pass revokes the callback tokens of jobs whose reports can no longer come.

use super::sender;
use crate::Messaging;
use shortlink_core::background::{fired, Shutdown};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// Jobs claimed per pass.
const CLAIMS_PER_PASS: i64 = 16;

/// Runs this sidecar's send jobs until `shutdown`; a job stops between two messages and gives
/// up its lease, for another sidecar to go on at once.
pub async fn run(messaging: Arc<Messaging>, mut shutdown: Shutdown) {
    let Some(mut woken) = messaging.sends.take_woken() else {
        return;
    };
    let mut jobs = JoinSet::new();
    let mut running: HashSet<String> = HashSet::new();
    let mut passes =
        tokio::time::interval((messaging.sends.lease / 2).max(Duration::from_millis(50)));
    passes.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = fired(&mut shutdown) => break,
            Some(id) = woken.recv() => {
                if running.insert(id.clone()) {
                    let queue = messaging.store.send_queue();
                    match queue.held(&id, &messaging.sends.owner).await {
                        Ok(Some(open)) => {
                            jobs.spawn(sender::send_job(Arc::clone(&messaging), open, shutdown.clone()));
                        }
                        Ok(None) => { running.remove(&id); }
                        // Its lease runs out; the next pass takes it.
                        Err(error) => {
                            running.remove(&id);
                            tracing::warn!(%error, job = %id, "a send job could not be read");
                        }
                    }
                }
            }
            _ = passes.tick() => pass(&messaging, &mut jobs, &mut running, &shutdown).await,
            Some(ended) = jobs.join_next(), if !jobs.is_empty() => {
                if let Ok(id) = ended {
                    running.remove(&id);
                }
            }
        }
    }
    // Each job stops after its message in flight; the task set's deadline aborts the rest.
    while jobs.join_next().await.is_some() {}
}

/// Claims the jobs whose lease ran out, and revokes the tokens whose reports window ended.
async fn pass(
    messaging: &Arc<Messaging>,
    jobs: &mut JoinSet<String>,
    running: &mut HashSet<String>,
    shutdown: &Shutdown,
) {
    let queue = messaging.store.send_queue();
    let now = shortlink_store::now();
    match queue.revoke_ended_tokens(now).await {
        Ok(0) => {}
        Ok(revoked) => tracing::info!(revoked, "send jobs' callback tokens revoked"),
        Err(error) => tracing::warn!(%error, "send jobs' callback tokens could not be revoked"),
    }
    let claimable = match queue.claimable(now, CLAIMS_PER_PASS).await {
        Ok(ids) => ids,
        Err(error) => {
            tracing::warn!(%error, "unfinished send jobs could not be listed");
            return;
        }
    };
    let owner = &messaging.sends.owner;
    for id in claimable {
        if running.contains(&id) {
            continue;
        }
        let now = shortlink_store::now();
        match queue
            .claim(&id, owner, now, messaging.sends.lease_from(now))
            .await
        {
            Ok(Some(open)) => {
                tracing::info!(job = %id, "a send job is taken over");
                running.insert(id);
                jobs.spawn(sender::send_job(
                    Arc::clone(messaging),
                    open,
                    shutdown.clone(),
                ));
            }
            // Another sidecar was first.
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, job = %id, "a send job could not be claimed"),
        }
    }
}
