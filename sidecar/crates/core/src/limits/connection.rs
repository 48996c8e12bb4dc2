//! The limits' own way to the Redis primary (or cluster): made on first use, made again after a
//! failure, and not tried at all for [`PAUSE`] after one, so that a Redis outage costs a request
//! of the limiter at most one `--redis-timeout`, once per pause, not one per request.

use crate::primary::{ConnectOptions, Primary, ProjectionError, RedisConnection};
use crate::sync::ReadWriteOrRecover;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// How long the limits leave Redis alone after a failure.
pub(super) const PAUSE: Duration = Duration::from_secs(1);

pub(super) struct LimitsConnection {
    primary: Primary,
    timeout: Duration,
    connection: RwLock<Option<RedisConnection>>,
    /// Held while a connection is being made, so concurrent requests wait for one attempt
    /// instead of each making their own.
    connecting: tokio::sync::Mutex<()>,
    /// When the last failure was (ms since `epoch`, 0: none).
    failed_at: AtomicU64,
    epoch: Instant,
}

/// Why a script was not run.
#[derive(Debug, thiserror::Error)]
pub enum LimitsUnavailable {
    #[error(transparent)]
    Redis(#[from] ProjectionError),
    /// A failure less than [`PAUSE`] ago: not tried.
    #[error("redis failed less than {PAUSE:?} ago; not tried")]
    Paused,
}

impl LimitsConnection {
    pub(super) fn new(primary: Primary, timeout: Duration) -> Self {
        Self {
            primary,
            timeout,
            connection: RwLock::new(None),
            connecting: tokio::sync::Mutex::new(()),
            failed_at: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// Runs `script` with its keys and arguments already in `invocation`, within the timeout.
    pub(super) async fn invoke<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, LimitsUnavailable> {
        if self.paused() {
            return Err(LimitsUnavailable::Paused);
        }
        let running = async {
            let mut connection = self.connection().await?;
            Ok::<T, ProjectionError>(invocation.invoke_async(&mut connection).await?)
        };
        let result = match tokio::time::timeout(self.timeout, running).await {
            Ok(result) => result,
            Err(_) => Err(ProjectionError::Timeout(self.timeout)),
        };
        result.map_err(|error| {
            // Made again next time: after a failover the next connection goes to the primary
            // Sentinel names then, or learns a cluster's slot map afresh.
            *self.connection.write_or_recover() = None;
            self.failed_at
                .store(self.since_epoch().max(1), Ordering::Relaxed);
            LimitsUnavailable::Redis(error)
        })
    }

    fn paused(&self) -> bool {
        let failed_at = self.failed_at.load(Ordering::Relaxed);
        failed_at != 0 && self.since_epoch() < failed_at + PAUSE.as_millis() as u64
    }

    fn since_epoch(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn connection(&self) -> Result<RedisConnection, ProjectionError> {
        if let Some(connection) = self.current() {
            return Ok(connection);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(connection) = self.current() {
            return Ok(connection);
        }
        let options = ConnectOptions {
            connection_timeout: self.timeout,
            response_timeout: self.timeout,
            manager: true,
        };
        let connection = self.primary.connect(options).await?;
        *self.connection.write_or_recover() = Some(connection.clone());
        Ok(connection)
    }

    fn current(&self) -> Option<RedisConnection> {
        self.connection.read_or_recover().clone()
    }
}
