//! Where the Redis primary is: the `--redis-url` itself (one box, the default), or the primary
//! that Redis Sentinel names for `--redis-sentinel-service` (docs/DEPLOYMENT.md, "Sentinel").
//!
//! Every Redis user of the sidecar (the write-through, the projection marker, the visit
//! consumer) asks [`Primary::client`] each time it makes a connection, and drops its connection
//! on an error that [`needs_rediscovery`] says may mean a failover. So after a promotion the next
//! connection goes to the new primary, whoever noticed first.

mod connection;
mod error;
mod sentinel;

pub use connection::{RedisConnection, Shard};
pub use sentinel::parse_address as parse_sentinel_address;

use crate::sync::LockOrRecover;
pub use error::ProjectionError;
use redis::{ConnectionInfo, IntoConnectionInfo};
use shortlink_config::{Config, ConfigError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the sidecar reaches the primary. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Primary(Arc<Inner>);

struct Inner {
    source: Source,
    /// The last primary address discovered, and how many times it changed (promotions seen).
    last: Mutex<Option<String>>,
    promotions: AtomicU64,
}

enum Source {
    /// `--redis-url`: the one Redis, as before Sentinel support.
    Fixed(redis::Client),
    Sentinel(sentinel::Sentinels),
    /// `--redis-cluster`: the seeds; the client learns the slot map from them and follows
    /// failovers and reshards itself (`MOVED`, slot map refreshes). `node` is the first seed's
    /// connection settings (credentials, TLS), used for the write-through's own connection to
    /// each primary ([`Primary::connect_node`]).
    Cluster {
        client: redis::cluster::ClusterClient,
        node: ConnectionInfo,
    },
}

/// How a connection is made: its timeouts, and whether a connection manager (reconnects by
/// itself; the write path) or a plain multiplexed connection (made again by its user).
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    pub connection_timeout: Duration,
    pub response_timeout: Duration,
    pub manager: bool,
}

impl std::fmt::Debug for Primary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Primary")
            .field("sentinel", &self.is_sentinel())
            .finish_non_exhaustive()
    }
}

impl Primary {
    /// From the configuration: Sentinel when `--redis-sentinels` is set, else `--redis-url`.
    pub fn from_config(config: &Config) -> Result<Self, ProjectionError> {
        if !config.redis_cluster.is_empty() {
            return Self::cluster(&config.redis_cluster);
        }
        if config.redis_sentinels.is_empty() {
            return Self::fixed(&config.redis_url);
        }
        let node = config.redis_url.as_str().into_connection_info()?;
        let sentinels = sentinel::Sentinels::new(
            &config.redis_sentinels,
            &config.redis_sentinel_service,
            node,
            config.redis_timeout,
        )?;
        Ok(Self::new(Source::Sentinel(sentinels)))
    }

    /// The one Redis at `url`.
    pub fn fixed(url: &str) -> Result<Self, ProjectionError> {
        Ok(Self::new(Source::Fixed(redis::Client::open(url)?)))
    }

    /// The cluster that `seeds` (`host:port` or `redis://` URLs) belong to.
    pub fn cluster(seeds: &[String]) -> Result<Self, ProjectionError> {
        let seeds = seeds
            .iter()
            .map(|seed| parse_sentinel_address(seed))
            .collect::<Result<Vec<_>, _>>()?;
        let node = seeds
            .first()
            .cloned()
            .ok_or(ProjectionError::NoPrimary("no cluster seed given"))?;
        let client = redis::cluster::ClusterClientBuilder::new(seeds)
            // A write waits at most its own allowance (the projection's `run`); the client's
            // retries (slot map refresh after `MOVED`, a node reconnected) fit inside it.
            .retries(3)
            .min_retry_wait(20)
            .max_retry_wait(200)
            .build()?;
        Ok(Self::new(Source::Cluster { client, node }))
    }

    fn new(source: Source) -> Self {
        Self(Arc::new(Inner {
            source,
            last: Mutex::new(None),
            promotions: AtomicU64::new(0),
        }))
    }

    pub fn is_sentinel(&self) -> bool {
        matches!(self.0.source, Source::Sentinel(_))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.0.source, Source::Cluster { .. })
    }

    /// Whether writes are replicated to nodes that a failover promotes (Sentinel or cluster):
    /// then a failed write-through is in doubt (crate::projection's `doubt`).
    pub fn fails_over(&self) -> bool {
        !matches!(self.0.source, Source::Fixed(_))
    }

    /// A new connection: to the one Redis, the primary Sentinel names now, or the cluster.
    pub async fn connect(
        &self,
        options: ConnectOptions,
    ) -> Result<RedisConnection, ProjectionError> {
        let connecting = async {
            if let Source::Cluster { client, .. } = &self.0.source {
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(options.connection_timeout)
                    .set_response_timeout(options.response_timeout);
                let connection = client.get_async_connection_with_config(config).await?;
                return Ok(RedisConnection::Cluster(connection));
            }
            let client = self.client().await?;
            if options.manager {
                // No retries inside the manager: a request must fail fast, the next one tries
                // again.
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(options.connection_timeout)
                    .set_response_timeout(options.response_timeout)
                    .set_number_of_retries(0)
                    .set_max_delay(100);
                let manager =
                    redis::aio::ConnectionManager::new_with_config(client, config).await?;
                return Ok(RedisConnection::Manager(manager));
            }
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(options.connection_timeout)
                .set_response_timeout(options.response_timeout);
            let connection = client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            Ok::<_, ProjectionError>(RedisConnection::Multiplexed(connection))
        };
        // A cluster connection asks every seed at once, then one node for the slot map, then
        // connects to every node of the map: a node that accepts connections but never answers
        // costs a reply timeout in two of those steps.
        let limit = match self.0.source {
            Source::Cluster { .. } => options.connection_timeout + options.response_timeout * 2,
            _ => options.connection_timeout,
        };
        tokio::time::timeout(limit, connecting)
            .await
            .map_err(|_| ProjectionError::Timeout(limit))?
    }

    /// A connection of its own to one node of a cluster (`host:port`, as `CLUSTER SLOTS` names it),
    /// with the seeds' credentials and TLS: what the write-through sends a primary's whole share
    /// of a batch chunk on (`crate::projection`'s `primaries`), outside the cluster client, which
    /// would fail or resend a whole pipeline for one slot's redirection.
    pub async fn connect_node(
        &self,
        address: &str,
        options: ConnectOptions,
    ) -> Result<redis::aio::MultiplexedConnection, ProjectionError> {
        let Source::Cluster { node, .. } = &self.0.source else {
            return Err(ProjectionError::NoPrimary("not a cluster"));
        };
        let (host, port) = connection::split_address(address)?;
        let mut info = node.clone();
        info.addr = match info.addr {
            redis::ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            },
            _ => redis::ConnectionAddr::Tcp(host, port),
        };
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(options.connection_timeout)
            .set_response_timeout(options.response_timeout);
        let connecting = async {
            redis::Client::open(info)?
                .get_multiplexed_async_connection_with_config(&config)
                .await
        };
        Ok(tokio::time::timeout(options.connection_timeout, connecting)
            .await
            .map_err(|_| ProjectionError::Timeout(options.connection_timeout))??)
    }

    /// A client for the primary as it is now: with Sentinel, asked of the sentinels again at each
    /// call (callers call it only to make a connection, so this costs a round trip or two per
    /// reconnection, never per command).
    async fn client(&self) -> Result<redis::Client, ProjectionError> {
        match &self.0.source {
            Source::Cluster { .. } => Err(ProjectionError::NoPrimary(
                "a cluster has no one primary to connect to",
            )),
            Source::Fixed(client) => Ok(client.clone()),
            Source::Sentinel(sentinels) => {
                let info = sentinels.primary().await?;
                self.note(&info);
                Ok(redis::Client::open(info)?)
            }
        }
    }

    /// How many times the discovered primary changed since start-up.
    pub fn promotions(&self) -> u64 {
        self.0.promotions.load(Ordering::Relaxed)
    }

    fn note(&self, info: &ConnectionInfo) {
        let address = info.addr.to_string();
        let mut last = self.0.last.lock_or_recover();
        if last.as_deref() == Some(address.as_str()) {
            return;
        }
        if let Some(previous) = last.as_deref() {
            self.0.promotions.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(previous, current = %address, "the Redis primary changed (failover)");
        } else {
            tracing::info!(primary = %address, "Redis primary found through Sentinel");
        }
        *last = Some(address);
    }
}

/// `--redis-cluster`'s own problems: set with `--redis-sentinels`, no seed given, or a seed that
/// is no address. (A seed that does not answer shows at start-up.)
pub fn check_cluster_seeds(config: &Config) -> Result<(), ConfigError> {
    if config.redis_cluster.is_empty() {
        return Ok(());
    }
    if !config.redis_sentinels.is_empty() {
        return Err(ConfigError::Cluster(
            "cannot be used with --redis-sentinels: a cluster fails over by itself; give one"
                .to_owned(),
        ));
    }
    if config
        .redis_cluster
        .iter()
        .all(|seed| seed.trim().is_empty())
    {
        return Err(ConfigError::Cluster(
            "no seed node given (host:port,...)".to_owned(),
        ));
    }
    for seed in &config.redis_cluster {
        if seed.trim().is_empty() || parse_sentinel_address(seed.trim()).is_err() {
            return Err(ConfigError::Cluster(format!(
                "{:?} is neither host:port nor a redis:// URL",
                shortlink_config::redact::redact_url(seed)
            )));
        }
    }
    Ok(())
}

/// Whether an error may mean the connection no longer reaches the primary: it broke, timed out
/// or was refused (the primary died), or the server became a replica (`READONLY`, an old primary
/// back as a replica of the new one) or lost its primary (`MASTERDOWN`). The caller drops its
/// connection; the next one asks [`Primary::client`] again.
pub fn needs_rediscovery(error: &redis::RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || matches!(
            error.kind(),
            redis::ErrorKind::ReadOnly | redis::ErrorKind::MasterDown
        )
}

/// Whether an error from a cluster means the client's slot map is behind: a reshard or a
/// failover moved the slot (`MOVED`, `ASK`), a slot is being migrated (`TRYAGAIN`) or has no owner
/// for a moment (`CLUSTERDOWN`), or a transaction was discarded because one of its keys had moved
/// (`EXECABORT`). Nothing of the command was applied; a connection made again reads the map afresh.
pub fn slot_map_is_behind(error: &redis::RedisError) -> bool {
    matches!(
        error.kind(),
        redis::ErrorKind::Moved
            | redis::ErrorKind::Ask
            | redis::ErrorKind::TryAgain
            | redis::ErrorKind::ClusterDown
            | redis::ErrorKind::ExecAbortError
    )
}

/// How many times a write is tried while a failover may be under way (Sentinel only): with
/// `--redis-timeout` between the first try and the last, it covers Sentinel's detection and
/// promotion for the usual `down-after-milliseconds` of a second or so, and a request still ends
/// with a 503 within its allowance when the failover takes longer.
pub const FAILOVER_ATTEMPTS: u32 = 8;

/// Pause between two attempts while a failover may be under way.
pub fn failover_backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64 << attempt.min(4))
}
