//! The projection's connection to the primary: made lazily, re-made after failures (after a
//! failover, to the primary the sentinels name then), and the transactions of the write-through
//! with their `WAIT`.

use super::{Projection, ProjectionError, Wait};
use crate::primary::{
    failover_backoff, needs_rediscovery, slot_map_is_behind, ConnectOptions, RedisConnection,
    FAILOVER_ATTEMPTS,
};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The connection's own reply timeout, above any call's allowance (see `connection`).
pub(super) const MANAGER_RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// The projection's connection: none yet (or dropped after a failure), being made, or made
/// (with the number it was made under, see [`Projection::forget`]).
pub(super) enum Slot {
    Empty,
    Connecting(JoinHandle<Result<RedisConnection, ProjectionError>>),
    Ready(u64, RedisConnection),
}

impl Projection {
    /// The connection and the number it was made under. It is made by a task of its own: a call
    /// whose allowance ends while it waits does not cancel the making, and the next call waits
    /// for the same task. Making a cluster connection can outlast one call's allowance (a seed
    /// that swallows connections costs its reply timeout), and if each call cancelled it, none
    /// would ever finish.
    pub(super) async fn connection(&self) -> Result<(u64, RedisConnection), ProjectionError> {
        if let Slot::Ready(made, connection) = &*self.connection.read().await {
            return Ok((*made, connection.clone()));
        }
        let mut slot = self.connection.write().await;
        loop {
            match &mut *slot {
                Slot::Ready(made, connection) => return Ok((*made, connection.clone())),
                Slot::Empty => *slot = Slot::Connecting(tokio::spawn(self.connect())),
                Slot::Connecting(task) => {
                    let connected = task.await;
                    *slot = Slot::Empty;
                    let connection = connected.map_err(|_| {
                        ProjectionError::NoPrimary("the task connecting to redis stopped")
                    })??;
                    let made = self.connections_made.fetch_add(1, Ordering::Relaxed) + 1;
                    *slot = Slot::Ready(made, connection.clone());
                    return Ok((made, connection));
                }
            }
        }
    }

    /// Makes a connection (within the time [`crate::primary::Primary::connect`] allows).
    fn connect(
        &self,
    ) -> impl std::future::Future<Output = Result<RedisConnection, ProjectionError>> + 'static {
        // Each call's own deadline (`run`) bounds its wait. One Redis or Sentinel: the connection's
        // response timeout only catches a reply that never comes, and must not cut a batch
        // chunk's longer allowance. A cluster: every request is one slot's transaction or one
        // node's check, the longest the marker check (four timeouts, `state`); a node that stops
        // answering must not hold the connection's slot map and seeds much longer than that.
        let response_timeout = if self.primary.is_cluster() {
            self.timeout * 4 + self.wait.map_or(Duration::ZERO, |wait| wait.timeout)
        } else {
            self.timeout.max(MANAGER_RESPONSE_TIMEOUT)
        };
        let options = ConnectOptions {
            connection_timeout: self.timeout,
            response_timeout,
            manager: true,
        };
        let primary = self.primary.clone();
        async move { primary.connect(options).await }
    }

    /// Drops the connection numbered `made` (not one another request made since), so the next
    /// call asks where the primary is.
    async fn forget(&self, made: u64) {
        let mut slot = self.connection.write().await;
        if matches!(&*slot, Slot::Ready(current, _) if *current == made) {
            *slot = Slot::Empty;
        }
    }

    /// Runs `pipe` within `allowance`. One Redis: a command that finds the connection dropped
    /// (Redis restarted) is retried once on the connection the manager re-makes. With Sentinel:
    /// an error that may mean a failover drops the connection and the command is tried again, on
    /// the primary the sentinels name, up to [`FAILOVER_ATTEMPTS`] times within the allowance.
    /// On a cluster alike: the connection made again learns the slot map afresh, so a write to
    /// the slots of a primary that died goes to its replica once that is promoted.
    /// Every write here is idempotent (`SET`, `DEL`, conditional scripts, a click's count with
    /// its token: `wire::click_count`) or refuses to overwrite (`SET NX`), so a retry never makes
    /// a record wrong nor counts a click twice: a create's `SET NX` retried after its first try
    /// did land finds the key taken, and the create takes a fresh code as for any taken code (the
    /// first record stays, an orphan for `resync`).
    pub(super) async fn run<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        allowance: Duration,
    ) -> Result<T, ProjectionError> {
        let deadline = tokio::time::Instant::now() + allowance;
        let sentinel = self.primary.fails_over();
        let cluster = self.primary.is_cluster();
        let attempts = if sentinel { FAILOVER_ATTEMPTS } else { 2 };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut made = None;
            let try_once = async {
                let (number, mut connection) = self.connection().await?;
                made = Some(number);
                Ok::<T, ProjectionError>(pipe.query_async::<T>(&mut connection).await?)
            };
            let result = tokio::time::timeout_at(deadline, try_once).await;
            let error = match result {
                Ok(Err(error)) => error,
                Ok(result) => return result,
                Err(_) => {
                    // A connection whose replies stopped (its node gone from the network, its
                    // packets swallowed) would hold every later call until its own 60 s
                    // timeout: the next call makes a new one (on a cluster, with the slot map
                    // read afresh, which names the promoted replica).
                    if let (true, Some(made)) = (sentinel, made) {
                        self.forget(made).await;
                    }
                    return Err(ProjectionError::Timeout(allowance));
                }
            };
            let retry = match &error {
                ProjectionError::Redis(e) if sentinel => {
                    needs_rediscovery(e) || (cluster && slot_map_is_behind(e))
                }
                ProjectionError::Redis(e) => e.is_connection_dropped() || e.is_io_error(),
                // Sentinel between two primaries, or a connection attempt that timed out.
                ProjectionError::NoPrimary(_) | ProjectionError::Timeout(_) => sentinel,
                ProjectionError::NotReplicated { .. } => false,
            };
            if !retry || attempt >= attempts {
                return Err(error);
            }
            tracing::debug!(%error, attempt, "redis command failed; trying again");
            if sentinel {
                if let Some(made) = made {
                    self.forget(made).await;
                }
                let pause = failover_backoff(attempt);
                if tokio::time::Instant::now() + pause >= deadline {
                    return Err(error);
                }
                tokio::time::sleep(pause).await;
            }
        }
    }

    /// The write-through's transaction: `add` puts its commands in (and says whether it added
    /// any). Without `--redis-wait-replicas`, `MULTI`/`EXEC` as before. With it, `MULTI`, the
    /// commands, `EXEC`, then `WAIT`, all in one pipeline, so on the same connection: `WAIT`
    /// counts the replicas that acknowledged this connection's writes, and on another connection
    /// it would vouch for nothing.
    pub(super) fn transaction(
        &self,
        add: impl FnOnce(&mut redis::Pipeline) -> bool,
    ) -> Option<redis::Pipeline> {
        let mut body = redis::pipe();
        if !add(&mut body) {
            return None;
        }
        let Some(wait) = self.wait else {
            body.atomic();
            return Some(body);
        };
        let mut pipe = redis::pipe();
        pipe.cmd("MULTI").ignore();
        for cmd in body.cmd_iter() {
            // `QUEUED`; the results come in `EXEC`'s reply.
            pipe.add_command(cmd.clone()).ignore();
        }
        pipe.cmd("EXEC");
        pipe.cmd("WAIT").arg(wait.replicas).arg(
            u64::try_from(wait.timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        );
        Some(pipe)
    }

    /// Runs a [`Self::transaction`]: `EXEC`'s reply, one value per command. With `WAIT`, fails
    /// with [`ProjectionError::NotReplicated`] when fewer replicas than required acknowledged
    /// in time: the writes are on the primary, and the caller undoes them as for any failure.
    pub(super) async fn run_transaction(
        &self,
        pipe: &redis::Pipeline,
        allowance: Duration,
    ) -> Result<Vec<redis::Value>, ProjectionError> {
        let Some(Wait { replicas, timeout }) = self.wait else {
            return self.run(pipe, allowance).await;
        };
        let (exec, acknowledged): (Vec<redis::Value>, u32) =
            self.run(pipe, allowance + timeout).await?;
        if acknowledged < replicas {
            return Err(ProjectionError::NotReplicated {
                acknowledged,
                required: replicas,
            });
        }
        Ok(exec)
    }
}
