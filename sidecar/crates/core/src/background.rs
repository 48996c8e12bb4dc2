//! One way to run background work (after Pingora's `BackgroundService`): every periodic job and
//! consumer of a process is a named task in one [`Tasks`], handed a [`Shutdown`] receiver when it
//! starts. Stopping sends the one signal to all of them, then waits for them up to a deadline (the
//! bounded drain): a job that observes the signal finishes what it must (the visit consumer its
//! batch in flight, the webhook deliverer saving its cursors) and returns; one still running at the
//! deadline is aborted and named in the log. Dropping a [`Tasks`] (a test dropping a server as a
//! crash would) aborts its tasks at once.
//!
//! A job observes the signal at its await points: [`pause`] instead of `tokio::time::sleep`, or a
//! `tokio::select!` on [`fired`] around a long wait.

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The shutdown signal a task receives: `true` once the process stops. The sender going away
/// counts as stopping too.
pub type Shutdown = watch::Receiver<bool>;

/// How long a stopping process waits for its tasks before aborting them: long enough for a visit
/// batch and a webhook cursor save, short of a service manager's stop timeout.
pub const DRAIN: Duration = Duration::from_secs(10);

/// Completes once the signal is sent (or its sender is gone).
pub async fn fired(shutdown: &mut Shutdown) {
    while !*shutdown.borrow_and_update() {
        if shutdown.changed().await.is_err() {
            return;
        }
    }
}

/// Waits `pause` unless the signal comes first; `false` when stopping.
pub async fn pause(shutdown: &mut Shutdown, pause: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(pause) => !*shutdown.borrow(),
        () = fired(shutdown) => false,
    }
}

/// The background tasks of a process, stopped together.
pub struct Tasks {
    stop: watch::Sender<bool>,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl Default for Tasks {
    fn default() -> Self {
        Self::new()
    }
}

impl Tasks {
    pub fn new() -> Self {
        Tasks {
            stop: watch::channel(false).0,
            tasks: Vec::new(),
        }
    }

    /// Starts `job` with the shutdown signal; `name` is what the log calls it if it overruns.
    pub fn spawn<F, Fut>(&mut self, name: &'static str, job: F)
    where
        F: FnOnce(Shutdown) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let task = tokio::spawn(job(self.stop.subscribe()));
        self.tasks.push((name, task));
    }

    /// Sends the signal, then waits for every task until `deadline` has passed from now; the
    /// tasks still running then are aborted (and logged by name).
    pub async fn shutdown(mut self, deadline: Duration) {
        let _ = self.stop.send(true);
        tracing::debug!(tasks = self.tasks.len(), "stopping the background tasks");
        let until = tokio::time::Instant::now() + deadline;
        for (name, mut task) in std::mem::take(&mut self.tasks) {
            match tokio::time::timeout_at(until, &mut task).await {
                Ok(Ok(())) => tracing::debug!(task = name, "background task stopped"),
                Ok(Err(error)) if error.is_panic() => {
                    tracing::error!(task = name, "background task panicked");
                }
                Ok(Err(_)) => {}
                Err(_) => {
                    tracing::warn!(
                        task = name,
                        ?deadline,
                        "background task still running at the shutdown deadline; aborted"
                    );
                    task.abort();
                }
            }
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for (_, task) in &self.tasks {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Tells the test that a task's future was dropped (what an abort does).
    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// A periodic job: pauses until the signal, then drains for 50 ms (a drain may await) and
    /// says so in `drained`.
    async fn periodic(mut shutdown: Shutdown, drained: Arc<AtomicBool>) {
        while pause(&mut shutdown, Duration::from_secs(3600)).await {}
        tokio::time::sleep(Duration::from_millis(50)).await;
        drained.store(true, Ordering::SeqCst);
    }

    #[tokio::test]
    async fn a_task_that_observes_the_signal_finishes_its_drain() {
        let drained = Arc::new(AtomicBool::new(false));
        let mut tasks = Tasks::new();
        let done = Arc::clone(&drained);
        tasks.spawn("periodic", |shutdown| periodic(shutdown, done));
        tokio::task::yield_now().await;
        let started = tokio::time::Instant::now();
        tasks.shutdown(DRAIN).await;
        assert!(drained.load(Ordering::SeqCst));
        // Not the hour's pause, not the deadline: the drain's own 50 ms.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn tasks_that_ignore_the_signal_are_cut_at_the_one_deadline_and_the_others_drained() {
        const BOUND: Duration = Duration::from_millis(600);
        let dropped = [(); 2].map(|()| Arc::new(AtomicBool::new(false)));
        let drained = Arc::new(AtomicBool::new(false));
        let mut tasks = Tasks::new();
        // Two first in line: the bound is for all of them together, not per task, and the
        // tasks after them still get their drain within it.
        for dropped in &dropped {
            let guard = SetOnDrop(Arc::clone(dropped));
            tasks.spawn("stubborn", |_shutdown| async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            });
        }
        let done = Arc::clone(&drained);
        tasks.spawn("periodic", |shutdown| periodic(shutdown, done));
        tokio::task::yield_now().await;
        let started = tokio::time::Instant::now();
        tasks.shutdown(BOUND).await;
        let took = started.elapsed();
        // Two bounds (one per stubborn task) would be 1200 ms.
        assert!(took >= BOUND && took < BOUND * 2 - BOUND / 3, "{took:?}");
        assert!(drained.load(Ordering::SeqCst), "the other task drained");
        tokio::task::yield_now().await;
        for dropped in &dropped {
            assert!(dropped.load(Ordering::SeqCst), "aborted at the deadline");
        }
    }

    #[tokio::test]
    async fn dropping_the_tasks_aborts_them() {
        let dropped = Arc::new(AtomicBool::new(false));
        let mut tasks = Tasks::new();
        let guard = SetOnDrop(Arc::clone(&dropped));
        tasks.spawn("crash", |mut shutdown| async move {
            let _guard = guard;
            fired(&mut shutdown).await;
            std::future::pending::<()>().await;
        });
        drop(tasks);
        for _ in 0..100 {
            if dropped.load(Ordering::SeqCst) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the task outlived its Tasks");
    }
}
