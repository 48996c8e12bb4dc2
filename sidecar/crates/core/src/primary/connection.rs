//! The one connection type every Redis user of the sidecar holds (the write-through, the marker
//! keeper, resync, the visit consumer): to the one Redis or the Sentinel-named primary (a
//! connection manager or a multiplexed connection), or to a Redis Cluster. Commands and
//! pipelines go through [`redis::aio::ConnectionLike`] whatever the kind; what only a cluster
//! has (its slot map, a pipeline sent to the node that serves a slot) is here too.

use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// A connection to the primary, or to a cluster. Cheap to clone (all kinds are handles).
#[derive(Clone)]
pub enum RedisConnection {
    Manager(ConnectionManager),
    Multiplexed(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Manager(c) => c.req_packed_command(cmd),
            Self::Multiplexed(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Manager(c) => c.req_packed_commands(cmd, offset, count),
            Self::Multiplexed(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Manager(c) => c.get_db(),
            Self::Multiplexed(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

/// One primary of a cluster and the slot ranges it serves, with its replicas' addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub primary: String,
    pub replicas: Vec<String>,
    pub ranges: Vec<(u16, u16)>,
}

impl Shard {
    pub fn slots(&self) -> impl Iterator<Item = u16> + '_ {
        self.ranges.iter().flat_map(|&(start, end)| start..=end)
    }
}

impl RedisConnection {
    /// The cluster's primaries and their slots (`CLUSTER SLOTS`, asked of any node); `None`
    /// when this is no cluster.
    pub async fn shards(&mut self) -> RedisResult<Option<Vec<Shard>>> {
        let Self::Cluster(connection) = self else {
            return Ok(None);
        };
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let reply = connection
            .route_command(&redis::cmd("CLUSTER").arg("SLOTS").clone(), routing)
            .await?;
        Ok(Some(parse_cluster_slots(reply)?))
    }

    /// Sends `pipe` to the node at `address` (`host:port`, as [`Shard::primary`] names it),
    /// whatever slots its keys are in (they must all be that node's: a key of another node's
    /// slot fails with `MOVED`). On one Redis, plainly.
    pub async fn on_node(&mut self, address: &str, pipe: &Pipeline) -> RedisResult<Vec<Value>> {
        match self {
            Self::Cluster(connection) => {
                let (host, port) = split_address(address)?;
                let route = SingleNodeRoutingInfo::ByAddress { host, port };
                connection.route_pipeline(pipe, 0, pipe.len(), route).await
            }
            other => pipe.query_async(other).await,
        }
    }

    /// Runs `cmd` on the node at `address` (`host:port`, as [`Shard::primary`] names it).
    pub async fn on_address(&mut self, address: &str, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Self::Cluster(connection) => {
                let (host, port) = split_address(address)?;
                let routing =
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
                connection.route_command(cmd, routing).await
            }
            other => cmd.query_async(other).await,
        }
    }
}

pub(super) fn split_address(address: &str) -> RedisResult<(String, u16)> {
    address
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?)))
        .ok_or_else(|| (redis::ErrorKind::ClientError, "bad node address").into())
}

/// `CLUSTER SLOTS`: `[[start, end, [host, port, id, ...], [replica...]...], ...]`, grouped by
/// primary.
fn parse_cluster_slots(reply: Value) -> RedisResult<Vec<Shard>> {
    let bad = || redis::RedisError::from((redis::ErrorKind::TypeError, "bad CLUSTER SLOTS reply"));
    let Value::Array(ranges) = reply else {
        return Err(bad());
    };
    let mut shards: Vec<Shard> = Vec::new();
    for range in ranges {
        let Value::Array(parts) = range else {
            return Err(bad());
        };
        let mut parts = parts.into_iter();
        let start: u16 = redis::from_redis_value(&parts.next().ok_or_else(bad)?)?;
        let end: u16 = redis::from_redis_value(&parts.next().ok_or_else(bad)?)?;
        let mut nodes = parts.map(|node| {
            let Value::Array(fields) = node else {
                return Err(bad());
            };
            let host: String = redis::from_redis_value(fields.first().ok_or_else(bad)?)?;
            let port: u16 = redis::from_redis_value(fields.get(1).ok_or_else(bad)?)?;
            Ok(format!("{host}:{port}"))
        });
        let primary = nodes.next().ok_or_else(bad)??;
        let replicas = nodes.collect::<RedisResult<Vec<_>>>()?;
        match shards.iter_mut().find(|s| s.primary == primary) {
            Some(shard) => shard.ranges.push((start, end)),
            None => shards.push(Shard {
                primary,
                replicas,
                ranges: vec![(start, end)],
            }),
        }
    }
    Ok(shards)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_slot_ranges_by_primary() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let node = |port: i64| Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk("id")]);
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(99), node(7000), node(7003)]),
            Value::Array(vec![Value::Int(100), Value::Int(16383), node(7001)]),
            Value::Array(vec![Value::Int(5), Value::Int(6), node(7000), node(7003)]),
        ]);
        let shards = parse_cluster_slots(reply).unwrap();
        assert_eq!(shards.len(), 2);
        assert_eq!(shards[0].primary, "127.0.0.1:7000");
        assert_eq!(shards[0].replicas, ["127.0.0.1:7003"]);
        assert_eq!(shards[0].ranges, [(0, 99), (5, 6)]);
        assert_eq!(shards[1].slots().count(), 16284);
    }
}
