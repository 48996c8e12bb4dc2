//! Asking Redis Sentinel for the primary (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
//!
//! Why not the `redis` crate's `SentinelClient`: it keeps one connection per sentinel with no
//! timeout, so a sentinel that stopped answering (host down, `SIGSTOP`) hangs every discovery
//! behind it. Here each sentinel gets a fresh connection and `--redis-timeout`, and the next one
//! is asked when it fails: a majority of sentinels is what a failover needs, not all of them.

use super::ProjectionError;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub(super) struct Sentinels {
    sentinels: Vec<ConnectionInfo>,
    service: String,
    /// `--redis-url`: the database, credentials and TLS used with the primary; its address is
    /// replaced by the one the sentinels give.
    node: ConnectionInfo,
    timeout: Duration,
    /// The sentinel that answered last, asked first next time.
    preferred: AtomicUsize,
}

impl Sentinels {
    /// `addresses`: `host:port` or `redis://[:password@]host:port` each.
    pub(super) fn new(
        addresses: &[String],
        service: &str,
        node: ConnectionInfo,
        timeout: Duration,
    ) -> Result<Self, ProjectionError> {
        let sentinels = addresses
            .iter()
            .map(|address| parse_address(address))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            sentinels,
            service: service.to_owned(),
            node,
            timeout,
            preferred: AtomicUsize::new(0),
        })
    }

    /// The primary's connection info: from the first sentinel that names one which, asked
    /// directly, says it is a primary (`ROLE`). A sentinel may still name the old primary for a
    /// moment after a promotion, and the new one says `master` only once promoted.
    pub(super) async fn primary(&self) -> Result<ConnectionInfo, ProjectionError> {
        let count = self.sentinels.len();
        let first = self.preferred.load(Ordering::Relaxed) % count.max(1);
        let mut last_error = None;
        for i in 0..count {
            let at = (first + i) % count;
            match self.ask(&self.sentinels[at]).await {
                Ok(info) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Ok(info);
                }
                Err(error) => {
                    tracing::debug!(sentinel = %self.sentinels[at].addr, %error, "sentinel asked in vain");
                    last_error = Some(error);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| no_primary("no sentinel configured")))
    }

    async fn ask(&self, sentinel: &ConnectionInfo) -> Result<ConnectionInfo, ProjectionError> {
        let mut connection = self.connect(sentinel.clone()).await?;
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("GET-MASTER-ADDR-BY-NAME").arg(&self.service);
        let address: Option<(String, u16)> = self.query(&cmd, &mut connection).await?;
        let Some((host, port)) = address else {
            return Err(no_primary("the sentinel does not know the service"));
        };
        let info = self.node_at(host, port);
        let mut node = self.connect(info.clone()).await?;
        let role: Vec<redis::Value> = self.query(&redis::cmd("ROLE"), &mut node).await?;
        match role.first().map(redis::from_redis_value::<String>) {
            Some(Ok(role)) if role == "master" => Ok(info),
            _ => Err(no_primary("the address named is not a primary (yet)")),
        }
    }

    fn node_at(&self, host: String, port: u16) -> ConnectionInfo {
        let addr = match &self.node.addr {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        ConnectionInfo {
            addr,
            redis: self.node.redis.clone(),
        }
    }

    async fn connect(
        &self,
        info: ConnectionInfo,
    ) -> Result<MultiplexedConnection, ProjectionError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(self.timeout)
            .set_response_timeout(self.timeout);
        let client = redis::Client::open(info)?;
        let connecting = client.get_multiplexed_async_connection_with_config(&config);
        tokio::time::timeout(self.timeout, connecting)
            .await
            .map_err(|_| ProjectionError::Timeout(self.timeout))?
            .map_err(Into::into)
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        connection: &mut MultiplexedConnection,
    ) -> Result<T, ProjectionError> {
        tokio::time::timeout(self.timeout, cmd.query_async::<T>(connection))
            .await
            .map_err(|_| ProjectionError::Timeout(self.timeout))?
            .map_err(Into::into)
    }
}

/// A sentinel's address: `host:port` or a `redis://` URL.
pub fn parse_address(address: &str) -> redis::RedisResult<ConnectionInfo> {
    if address.contains("://") {
        address.into_connection_info()
    } else {
        format!("redis://{address}").as_str().into_connection_info()
    }
}

fn no_primary(why: &'static str) -> ProjectionError {
    ProjectionError::NoPrimary(why)
}
