//! The marker's handle: its own connection to Redis, the query every operation goes through, and
//! the keys and values it reads and sets. A leaf: the operations (`mod.rs`, and on a cluster
//! [`super::cluster`]) and the refill build on it.

use crate::primary::{needs_rediscovery, ConnectOptions, Primary, RedisConnection};
use crate::projection::ProjectionError;
use shortlink_config::Config;
use shortlink_wire::keys::PROJECTION_MARKER;
use std::time::Duration;
use tokio::sync::Mutex;

/// `KEYS[1]` = token key, `KEYS[2]` = marker, `ARGV[1]` = our token, `ARGV[2]` = marker value.
/// Atomic in Redis: no flush can fall between the check and the set.
pub(super) const SET_IF_TOKEN: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[2], ARGV[2])
    redis.call('DEL', KEYS[1])
    return 1
end
return 0
";

/// A token that proves no data loss happened since [`ProjectionMarker::begin`].
#[derive(Debug)]
pub struct ResyncToken {
    pub(super) token: String,
    /// On a cluster, the slots it was stored in (beside their markers).
    pub(super) slots: Vec<u16>,
}

/// Reads and sets the marker and writes the refill's `SET NX` records, on a connection of its
/// own: the projection's connection and API are the write path's (plain `SET`, `MULTI`).
pub struct ProjectionMarker {
    pub(super) primary: Primary,
    pub(super) timeout: Duration,
    /// The code scheme's fingerprint, carried in the marker's value.
    pub(super) fingerprint: Option<String>,
    pub(super) connection: Mutex<Option<RedisConnection>>,
}

impl std::fmt::Debug for ProjectionMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectionMarker")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ProjectionMarker {
    pub fn new(config: &Config) -> Result<Self, ProjectionError> {
        Ok(Self::with_primary(Primary::from_config(config)?, config))
    }

    /// On `primary`, made from the configuration when it was checked (the wiring then cannot
    /// fail on a Redis setting); give it a `Primary` of its own, not a clone of another user's.
    pub fn with_primary(primary: Primary, config: &Config) -> Self {
        Self {
            primary,
            timeout: config.redis_timeout,
            fingerprint: config
                .code_scheme()
                .ok()
                .map(|scheme| scheme.fingerprint().to_owned()),
            connection: Mutex::new(None),
        }
    }

    /// What the marker is set to: the time and our fingerprint.
    pub(super) fn marker_value(&self) -> String {
        match &self.fingerprint {
            Some(fingerprint) => format!("{} {fingerprint}", unix_ms()),
            None => unix_ms().to_string(),
        }
    }

    pub(super) async fn query<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        allowance: Duration,
    ) -> Result<T, ProjectionError> {
        let mut slot = self.connection.lock().await;
        let mut connection = self.connection_in(&mut slot).await?;
        let result = tokio::time::timeout(allowance, pipe.query_async::<T>(&mut connection)).await;
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                // A broken connection is made again on the next call (Redis restarted), to the
                // primary the sentinels name then (a failover: also `READONLY`, `MASTERDOWN`).
                if needs_rediscovery(&error) {
                    *slot = None;
                }
                Err(error.into())
            }
            Err(_) => {
                *slot = None;
                Err(ProjectionError::Timeout(allowance))
            }
        }
    }
}

impl ProjectionMarker {
    /// The marker's connection, made if there is none.
    pub(super) async fn connection_in(
        &self,
        slot: &mut Option<RedisConnection>,
    ) -> Result<RedisConnection, ProjectionError> {
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        // Each call bounds its own wait (`query`): a refill's pipelines get longer ones.
        let options = ConnectOptions {
            connection_timeout: self.timeout,
            response_timeout: self.timeout.max(Duration::from_secs(60)),
            manager: false,
        };
        Ok(slot.insert(self.primary.connect(options).await?).clone())
    }

    /// For messages: the marker's key, or on a cluster its 16384 keys.
    pub(super) fn marker_name(&self) -> String {
        if self.primary.is_cluster() {
            format!(
                "{}{{<tag>}} of every slot",
                shortlink_wire::cluster::MARKER_PREFIX
            )
        } else {
            PROJECTION_MARKER.to_owned()
        }
    }

    /// The marker key: the one of slot `slot` on a cluster, [`PROJECTION_MARKER`] otherwise.
    pub(super) fn marker_key(&self, slot: u16) -> String {
        if self.primary.is_cluster() {
            shortlink_wire::cluster::marker_key(slot)
        } else {
            PROJECTION_MARKER.to_owned()
        }
    }
}

pub(super) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
