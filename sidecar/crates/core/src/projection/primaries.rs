//! The write-through of a batch chunk on a Redis Cluster, one pipeline per primary.
//!
//! A chunk's ~1,000 records fall in ~1,000 hash slots. Each slot keeps its own transaction
//! (`MULTI`, its commands, `EXEC`: a transaction may only hold keys of one slot; a slot with one
//! command, as most are, sends it alone, atomic by itself), but the parts of all the slots one
//! primary serves go in one pipeline, sent on a connection of the write-through's own to that
//! primary, with `--redis-wait-replicas` one `WAIT` at its end: three requests per chunk on a
//! 3-primary cluster instead of a thousand.
//!
//! Where each slot goes is the slot map read with `CLUSTER SLOTS` ([`NodeMap`]), kept until a
//! node says it is behind. The node decides, not the map: a node runs a slot's part only for a
//! slot it serves, and answers `-MOVED` (another node serves it: a reshard done, a failover) or
//! `-ASK` (being migrated, the key is on the target) for the others, which refuses that slot's
//! command or discards its transaction (`EXECABORT`) and nothing else of the pipeline. Such a
//! slot is sent again to the node named (`ASKING` first for `-ASK`) at most [`REDIRECTIONS`]
//! times, and the map is read
//! again for the next write; a slot still not written, a slot the node cannot serve right now
//! (`-TRYAGAIN`, `-CLUSTERDOWN`) and every slot of a node that cannot be reached go through the
//! per-slot path of [`super::slots`] (the cluster client, which follows redirections and
//! failovers itself, with `run`'s retries). So each slot is written on the primary that serves it
//! when it is written, or the write fails; never acknowledged unwritten, never dropped.
//!
//! `WAIT` counts the replicas that acknowledged everything this connection wrote before it, so
//! one `WAIT` after a primary's transactions vouches for all of them (and for anything another
//! chunk sent on the same connection earlier, which only asks more). A slot written on another
//! node after a redirection gets that node's own `WAIT`.
//!
//! Failures are as in [`super::slots`]: a part that fails fails the whole write once every part
//! has finished, and the caller undoes all of it; a node that does not answer within the
//! allowance fails the write (its transactions may have run: the caller's undo and the doubt
//! cover them).

use super::{Projection, ProjectionError};
use crate::primary::{ConnectOptions, Shard};
use crate::sync::LockOrRecover;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{ErrorKind, Pipeline, RedisError, Value};
use shortlink_wire::cluster::SLOTS;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How many times a slot's transaction follows `-MOVED`/`-ASK` on the write-through's own
/// connections before it is left to the per-slot path.
const REDIRECTIONS: usize = 2;

/// The primary of each slot, as `CLUSTER SLOTS` said when last read.
#[derive(Debug)]
pub(super) struct NodeMap {
    primaries: Vec<String>,
    /// Per slot, its index in `primaries` ([`NO_OWNER`] for none).
    owner: Vec<u16>,
}

const NO_OWNER: u16 = u16::MAX;

impl NodeMap {
    pub(super) fn from_shards(shards: &[Shard]) -> Self {
        let mut owner = vec![NO_OWNER; usize::from(SLOTS)];
        for (index, shard) in shards.iter().enumerate() {
            for slot in shard.slots() {
                if let Some(owner) = owner.get_mut(usize::from(slot)) {
                    *owner = u16::try_from(index).unwrap_or(NO_OWNER);
                }
            }
        }
        Self {
            primaries: shards.iter().map(|shard| shard.primary.clone()).collect(),
            owner,
        }
    }

    fn primary_of(&self, slot: u16) -> Option<&str> {
        let index = *self.owner.get(usize::from(slot))?;
        self.primaries.get(usize::from(index)).map(String::as_str)
    }
}

/// The write-through's own view of a cluster: the slot map and one connection per primary.
#[derive(Default)]
pub(super) struct Primaries {
    map: Mutex<Option<Arc<NodeMap>>>,
    nodes: Mutex<HashMap<String, MultiplexedConnection>>,
}

/// One slot's share of a write: its items, the node it is sent to, whether `ASKING` goes first.
struct Part {
    group: Vec<usize>,
    address: String,
    asking: bool,
}

/// What became of one slot's transaction.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Executed: `EXEC`'s replies, one per command.
    Done(Vec<Value>),
    /// Not executed: the slot is served elsewhere (`-MOVED`), or its key is there (`-ASK`).
    Redirected {
        address: String,
        asking: bool,
    },
    /// Not executed and the node cannot say where: for the per-slot path.
    Elsewhere,
    Failed(ProjectionError),
}

impl Projection {
    /// Runs one transaction per slot of `keys` (`add` puts the command of the item at an index
    /// in, and says whether there was one; a slot of one command sends it alone), grouped per
    /// primary on a cluster as the module's doc says; with `wait`, one `WAIT` per primary.
    /// `per_slot` is the path of a slot that could not be written that way (one slot's
    /// transaction through the cluster client). Without a cluster, `per_slot` for the one group
    /// of all. Once every part has finished: the replies per group (`EXEC`'s, or the one
    /// command's), or the first error.
    pub(super) async fn per_primary<'k, F, Fut>(
        &self,
        keys: impl Iterator<Item = &'k str>,
        allowance: Duration,
        wait: bool,
        add: impl Fn(usize, &mut Pipeline) -> bool,
        per_slot: F,
    ) -> Result<Vec<(Vec<usize>, Vec<Value>)>, ProjectionError>
    where
        F: Fn(Vec<usize>) -> Fut,
        Fut: Future<Output = Result<Vec<Value>, ProjectionError>>,
    {
        if !self.primary.is_cluster() {
            return self.per_slot(keys, per_slot).await;
        }
        let wait = self.wait.filter(|_| wait);
        let deadline = Instant::now() + allowance + wait.map_or(Duration::ZERO, |w| w.timeout);
        let groups = self.slot_groups_with_slots(keys);
        let map = match self.node_map().await {
            Ok(map) => map,
            Err(error) => {
                tracing::debug!(%error, "no slot map; the chunk goes slot by slot");
                let groups = groups.into_iter().map(|(_, group)| group).collect();
                return self.per_slot_groups(groups, per_slot).await;
            }
        };
        let mut todo = Vec::with_capacity(groups.len());
        let mut elsewhere = Vec::new();
        for (slot, group) in groups {
            match map.primary_of(slot) {
                Some(address) => todo.push(Part {
                    group,
                    address: address.to_owned(),
                    asking: false,
                }),
                None => elsewhere.push(group),
            }
        }
        let mut done = Vec::new();
        let mut failure = None;
        let mut behind = !elsewhere.is_empty();
        for round in 0..=REDIRECTIONS {
            if todo.is_empty() {
                break;
            }
            let mut by_node: HashMap<String, Vec<Part>> = HashMap::new();
            for part in todo.drain(..) {
                by_node.entry(part.address.clone()).or_default().push(part);
            }
            let sends = by_node.into_iter().map(|(address, parts)| {
                self.send_to_primary(address, parts, &add, wait, allowance, deadline)
            });
            for (part, outcome) in futures_util::future::join_all(sends)
                .await
                .into_iter()
                .flatten()
            {
                match outcome {
                    Outcome::Done(replies) => done.push((part.group, replies)),
                    Outcome::Redirected { address, asking } if round < REDIRECTIONS => {
                        tracing::debug!(%address, asking, "a slot's transaction sent again");
                        behind = true;
                        todo.push(Part {
                            group: part.group,
                            address,
                            asking,
                        });
                    }
                    Outcome::Redirected { .. } | Outcome::Elsewhere => {
                        behind = true;
                        elsewhere.push(part.group);
                    }
                    Outcome::Failed(error) => {
                        failure.get_or_insert(error);
                    }
                }
            }
        }
        if behind {
            tracing::debug!("a slot was served elsewhere than the map said; the map is read again");
            self.forget_node_map();
        }
        // Once a part failed the write fails whatever the rest does: the caller undoes it all.
        if !elsewhere.is_empty() && failure.is_none() {
            tracing::debug!(
                slots = elsewhere.len(),
                "slots not written on their primary's pipeline; sent slot by slot"
            );
            match self.per_slot_groups(elsewhere, per_slot).await {
                Ok(parts) => done.extend(parts),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        failure.map_or(Ok(done), Err)
    }

    /// Sends the transactions of `parts`, all for the node at `address`, in one pipeline (with
    /// `WAIT` at its end); what became of each.
    async fn send_to_primary(
        &self,
        address: String,
        parts: Vec<Part>,
        add: &impl Fn(usize, &mut Pipeline) -> bool,
        wait: Option<super::Wait>,
        allowance: Duration,
        deadline: Instant,
    ) -> Vec<(Part, Outcome)> {
        let mut pipe = redis::pipe();
        let mut layout = Vec::with_capacity(parts.len());
        for part in &parts {
            if part.asking {
                pipe.cmd("ASKING");
            }
            let at = pipe.len();
            layout.push(match part.group[..] {
                // One command is atomic by itself: no transaction around it (most slots of a
                // chunk hold one record: a third of the commands a primary runs).
                [item] if add(item, &mut pipe) => Placed::Alone(at),
                [_] => Placed::Nothing,
                _ => {
                    pipe.cmd("MULTI");
                    for &item in &part.group {
                        add(item, &mut pipe);
                    }
                    pipe.cmd("EXEC");
                    Placed::Transaction(at, pipe.len() - 1)
                }
            });
        }
        if let Some(wait) = wait {
            pipe.cmd("WAIT").arg(wait.replicas).arg(
                u64::try_from(wait.timeout.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            );
        }
        let sent = async {
            let mut connection = self.node_connection(&address).await?;
            Ok::<_, ProjectionError>(connection.req_packed_commands(&pipe, 0, pipe.len()).await?)
        };
        let outcomes = match tokio::time::timeout_at(deadline, sent).await {
            Ok(Ok(replies)) => read_replies(&replies, &layout, wait),
            Ok(Err(error)) if unreachable(&error) => {
                tracing::debug!(%error, %address, "primary unreachable; its slots go slot by slot");
                self.forget_node(&address);
                parts.iter().map(|_| Outcome::Elsewhere).collect()
            }
            Ok(Err(error)) => {
                self.forget_node(&address);
                parts
                    .iter()
                    .map(|_| Outcome::Failed(copy_error(&error)))
                    .collect()
            }
            Err(_) => {
                // Its replies may still come: the connection is made again for the next write,
                // and the map read again (the node may be gone, its slots failed over).
                self.forget_node(&address);
                self.forget_node_map();
                parts
                    .iter()
                    .map(|_| Outcome::Failed(ProjectionError::Timeout(allowance)))
                    .collect()
            }
        };
        parts.into_iter().zip(outcomes).collect()
    }

    /// The slot map, read with `CLUSTER SLOTS` unless known.
    async fn node_map(&self) -> Result<Arc<NodeMap>, ProjectionError> {
        if let Some(map) = lock(&self.primaries.map).clone() {
            return Ok(map);
        }
        let read = async {
            let mut connection = self.connection().await?.1;
            Ok::<_, ProjectionError>(connection.shards().await?.unwrap_or_default())
        };
        let shards = tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| ProjectionError::Timeout(self.timeout))??;
        let map = Arc::new(NodeMap::from_shards(&shards));
        *lock(&self.primaries.map) = Some(Arc::clone(&map));
        Ok(map)
    }

    /// The map is behind (a redirection, a node gone): read it again for the next write.
    fn forget_node_map(&self) {
        *lock(&self.primaries.map) = None;
    }

    /// The write-through's connection to the node at `address`, made if need be.
    async fn node_connection(
        &self,
        address: &str,
    ) -> Result<MultiplexedConnection, ProjectionError> {
        if let Some(connection) = lock(&self.primaries.nodes).get(address) {
            return Ok(connection.clone());
        }
        let options = ConnectOptions {
            connection_timeout: self.timeout,
            // Each call's own deadline bounds its wait (`send_to_primary`).
            response_timeout: self
                .timeout
                .max(super::connection::MANAGER_RESPONSE_TIMEOUT),
            manager: false,
        };
        let connection = self.primary.connect_node(address, options).await?;
        Ok(lock(&self.primaries.nodes)
            .entry(address.to_owned())
            .or_insert(connection)
            .clone())
    }

    fn forget_node(&self, address: &str) {
        lock(&self.primaries.nodes).remove(address);
    }

    /// Runs `per_slot` for each of `groups` concurrently; once all have finished, their results
    /// with their groups, or the first error.
    pub(super) async fn per_slot_groups<T, F, Fut>(
        &self,
        groups: Vec<Vec<usize>>,
        per_slot: F,
    ) -> Result<Vec<(Vec<usize>, T)>, ProjectionError>
    where
        F: Fn(Vec<usize>) -> Fut,
        Fut: Future<Output = Result<T, ProjectionError>>,
    {
        let runs = groups.into_iter().map(|group| {
            let run = per_slot(group.clone());
            async move { (group, run.await) }
        });
        let mut done = Vec::new();
        let mut failure = None;
        for (group, result) in futures_util::future::join_all(runs).await {
            match result {
                Ok(value) => done.push((group, value)),
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        failure.map_or(Ok(done), Err)
    }
}

/// Where a slot's part is in its primary's pipeline.
#[derive(Debug, Clone, Copy)]
pub(super) enum Placed {
    /// No command: nothing to write for it (a create's delete).
    Nothing,
    /// One command, at this index, alone: atomic by itself.
    Alone(usize),
    /// A transaction: `MULTI` at the first index, `EXEC` at the second.
    Transaction(usize, usize),
}

/// What became of each slot's part of a primary's pipeline, from its replies (`layout`: where
/// each part is; a `WAIT` reply, if any, is last).
pub(super) fn read_replies(
    replies: &[Value],
    layout: &[Placed],
    wait: Option<super::Wait>,
) -> Vec<Outcome> {
    let short = || {
        Outcome::Failed(ProjectionError::Redis(RedisError::from((
            ErrorKind::TypeError,
            "fewer replies than commands sent",
        ))))
    };
    // `WAIT`'s verdict, for the transactions that ran.
    let replicated = match wait {
        None => Ok(()),
        Some(wait) => match replies.last() {
            Some(Value::Int(acknowledged)) if *acknowledged >= i64::from(wait.replicas) => Ok(()),
            Some(Value::Int(acknowledged)) => Err(ProjectionError::NotReplicated {
                acknowledged: u32::try_from(*acknowledged).unwrap_or(0),
                required: wait.replicas,
            }),
            Some(Value::ServerError(error)) => {
                Err(ProjectionError::Redis(RedisError::from(error.clone())))
            }
            _ => Err(ProjectionError::Redis(RedisError::from((
                ErrorKind::TypeError,
                "WAIT did not answer a number",
            )))),
        },
    };
    layout
        .iter()
        .map(|&placed| {
            let outcome = match placed {
                Placed::Nothing => Outcome::Done(Vec::new()),
                Placed::Alone(at) => match replies.get(at) {
                    None => short(),
                    Some(Value::ServerError(error)) => refused(RedisError::from(error.clone())),
                    Some(reply) => Outcome::Done(vec![reply.clone()]),
                },
                Placed::Transaction(multi, exec) => match replies.get(exec) {
                    None => short(),
                    Some(reply) => transaction_outcome(&replies[multi..exec], reply),
                },
            };
            match (outcome, &replicated) {
                (Outcome::Done(_), Err(error)) => Outcome::Failed(copy_error(error)),
                (outcome, _) => outcome,
            }
        })
        .collect()
}

/// One slot's transaction: `queued` holds the replies to `MULTI` and to each command queued,
/// `exec` the reply to `EXEC`.
fn transaction_outcome(queued: &[Value], exec: &Value) -> Outcome {
    match exec {
        Value::Array(replies) => match replies.iter().find_map(server_error) {
            // A command that failed when run (the others ran: a transaction does not roll back).
            Some(error) => Outcome::Failed(ProjectionError::Redis(error)),
            None => Outcome::Done(replies.clone()),
        },
        Value::ServerError(aborted) => {
            // `EXECABORT`: nothing ran; why is in the reply of the command refused when queued.
            let error = queued
                .iter()
                .find_map(server_error)
                .unwrap_or_else(|| RedisError::from(aborted.clone()));
            refused(error)
        }
        _ => Outcome::Failed(ProjectionError::Redis(RedisError::from((
            ErrorKind::TypeError,
            "EXEC answered neither replies nor an error",
        )))),
    }
}

/// A slot's part that did not run, by why: sent again where the node says, left to the
/// per-slot path, or a failure.
fn refused(error: RedisError) -> Outcome {
    match error.kind() {
        ErrorKind::Moved | ErrorKind::Ask => match error.redirect_node() {
            Some((address, _)) => Outcome::Redirected {
                address: address.to_owned(),
                asking: error.kind() == ErrorKind::Ask,
            },
            None => Outcome::Elsewhere,
        },
        ErrorKind::TryAgain | ErrorKind::ClusterDown => Outcome::Elsewhere,
        _ => Outcome::Failed(ProjectionError::Redis(error)),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock_or_recover()
}

fn server_error(value: &Value) -> Option<RedisError> {
    match value {
        Value::ServerError(error) => Some(RedisError::from(error.clone())),
        _ => None,
    }
}

/// Whether a node could not be reached at all (or its connection broke): its slots go to the
/// per-slot path, whose cluster client finds the node serving them now.
fn unreachable(error: &ProjectionError) -> bool {
    match error {
        ProjectionError::Redis(error) => {
            error.is_io_error()
                || error.is_connection_dropped()
                || error.is_connection_refusal()
                || matches!(error.kind(), ErrorKind::ReadOnly | ErrorKind::MasterDown)
        }
        ProjectionError::Timeout(_) | ProjectionError::NoPrimary(_) => true,
        ProjectionError::NotReplicated { .. } => false,
    }
}

/// The same error again, for each transaction it failed (`ProjectionError` is not `Clone`).
fn copy_error(error: &ProjectionError) -> ProjectionError {
    match error {
        ProjectionError::Redis(error) => ProjectionError::Redis(match error.detail() {
            Some(detail) => RedisError::from((error.kind(), "redis", detail.to_owned())),
            None => RedisError::from((error.kind(), "redis", error.to_string())),
        }),
        ProjectionError::Timeout(after) => ProjectionError::Timeout(*after),
        ProjectionError::NoPrimary(why) => ProjectionError::NoPrimary(why),
        ProjectionError::NotReplicated {
            acknowledged,
            required,
        } => ProjectionError::NotReplicated {
            acknowledged: *acknowledged,
            required: *required,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::Wait;

    /// A reply as the server sends it (RESP2).
    fn reply(resp: &str) -> Value {
        redis::parse_redis_value(resp.as_bytes()).unwrap()
    }

    fn queued() -> Value {
        reply("+QUEUED\r\n")
    }

    fn wait(replicas: u32) -> Option<Wait> {
        Wait::new(replicas, Duration::from_millis(500))
    }

    #[test]
    fn a_primary_pipeline_is_read_transaction_by_transaction() {
        // Slot A: two SET NX, one written, one taken. Slot B: moved away when queued.
        // Slot C: being migrated, its key is on the target. Slot D: mid-failover.
        let replies = vec![
            reply("+OK\r\n"),
            queued(),
            queued(),
            reply("*2\r\n+OK\r\n$-1\r\n"),
            reply("+OK\r\n"),
            reply("-MOVED 3999 127.0.0.1:7001\r\n"),
            reply("-EXECABORT Transaction discarded because of previous errors.\r\n"),
            reply("+OK\r\n"),
            reply("-ASK 4000 127.0.0.1:7002\r\n"),
            reply("-EXECABORT Transaction discarded because of previous errors.\r\n"),
            reply("+OK\r\n"),
            reply("-TRYAGAIN Multiple keys request during rehashing of slot\r\n"),
            reply("-EXECABORT Transaction discarded because of previous errors.\r\n"),
            reply(":1\r\n"),
        ];
        let layout = [
            Placed::Transaction(0, 3),
            Placed::Transaction(4, 6),
            Placed::Transaction(7, 9),
            Placed::Transaction(10, 12),
        ];
        let outcomes = read_replies(&replies, &layout, wait(1));
        assert!(
            matches!(&outcomes[0], Outcome::Done(set) if set.len() == 2 && set[1] == Value::Nil),
            "{outcomes:?}"
        );
        assert!(
            matches!(&outcomes[1], Outcome::Redirected { address, asking: false } if address == "127.0.0.1:7001"),
            "{outcomes:?}"
        );
        assert!(
            matches!(&outcomes[2], Outcome::Redirected { address, asking: true } if address == "127.0.0.1:7002"),
            "{outcomes:?}"
        );
        assert!(matches!(&outcomes[3], Outcome::Elsewhere), "{outcomes:?}");
    }

    #[test]
    fn one_wait_short_of_replicas_fails_every_transaction_that_ran_on_the_primary() {
        let replies = vec![
            reply("+OK\r\n"),
            queued(),
            reply("*1\r\n+OK\r\n"),
            reply("+OK\r\n"),
            reply("-MOVED 3999 127.0.0.1:7001\r\n"),
            reply("-EXECABORT Transaction discarded because of previous errors.\r\n"),
            reply(":0\r\n"),
        ];
        let layout = [Placed::Transaction(0, 2), Placed::Transaction(3, 5)];
        let outcomes = read_replies(&replies, &layout, wait(1));
        assert!(
            matches!(
                &outcomes[0],
                Outcome::Failed(ProjectionError::NotReplicated {
                    acknowledged: 0,
                    required: 1
                })
            ),
            "{outcomes:?}"
        );
        // The moved slot did not run here: it gets the `WAIT` of the node it goes to.
        assert!(
            matches!(&outcomes[1], Outcome::Redirected { .. }),
            "{outcomes:?}"
        );
        // Without `--redis-wait-replicas` there is no `WAIT` reply to read.
        let outcomes = read_replies(&replies[..6], &layout, None);
        assert!(matches!(&outcomes[0], Outcome::Done(_)), "{outcomes:?}");
    }

    #[test]
    fn other_errors_fail_the_write_and_missing_replies_are_no_success() {
        let replies = vec![
            reply("+OK\r\n"),
            reply("-OOM command not allowed when used memory > 'maxmemory'.\r\n"),
            reply("-EXECABORT Transaction discarded because of previous errors.\r\n"),
            reply("+OK\r\n"),
            queued(),
            reply("*1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        ];
        let layout = [
            Placed::Transaction(0, 2),
            Placed::Transaction(3, 5),
            Placed::Transaction(6, 8),
        ];
        let outcomes = read_replies(&replies, &layout, None);
        assert!(
            matches!(&outcomes[0], Outcome::Failed(ProjectionError::Redis(e)) if e.code() == Some("OOM")),
            "{outcomes:?}"
        );
        assert!(
            matches!(&outcomes[1], Outcome::Failed(ProjectionError::Redis(e)) if e.code() == Some("WRONGTYPE")),
            "{outcomes:?}"
        );
        assert!(matches!(&outcomes[2], Outcome::Failed(_)), "{outcomes:?}");
    }

    #[test]
    fn a_slot_of_one_command_sends_it_alone() {
        // A written record, a taken one, one moved away, one being migrated, a card to delete
        // (a create sends nothing for it), then `WAIT`.
        let replies = vec![
            reply("+OK\r\n"),
            reply("$-1\r\n"),
            reply("-MOVED 12 127.0.0.1:7001\r\n"),
            reply("+OK\r\n"),
            reply("-ASK 13 127.0.0.1:7002\r\n"),
            reply(":1\r\n"),
        ];
        // `ASKING` (index 3) goes before the part redirected with `-ASK` when sent again; here
        // it stands for any reply that is not the part's own.
        let layout = [
            Placed::Alone(0),
            Placed::Alone(1),
            Placed::Alone(2),
            Placed::Alone(4),
            Placed::Nothing,
        ];
        let outcomes = read_replies(&replies, &layout, wait(1));
        assert!(
            matches!(&outcomes[0], Outcome::Done(set) if set[..] == [Value::Okay]),
            "{outcomes:?}"
        );
        assert!(
            matches!(&outcomes[1], Outcome::Done(set) if set[..] == [Value::Nil]),
            "{outcomes:?}"
        );
        assert!(
            matches!(&outcomes[2], Outcome::Redirected { asking: false, .. }),
            "{outcomes:?}"
        );
        assert!(
            matches!(&outcomes[3], Outcome::Redirected { asking: true, .. }),
            "{outcomes:?}"
        );
        assert!(
            matches!(&outcomes[4], Outcome::Done(set) if set.is_empty()),
            "{outcomes:?}"
        );
    }

    #[test]
    fn the_map_names_each_slots_primary() {
        let shards = [
            Shard {
                primary: "127.0.0.1:7000".into(),
                replicas: vec![],
                ranges: vec![(0, 5460)],
            },
            Shard {
                primary: "127.0.0.1:7001".into(),
                replicas: vec![],
                ranges: vec![(5461, 10922), (10924, 16383)],
            },
        ];
        let map = NodeMap::from_shards(&shards);
        assert_eq!(map.primary_of(0), Some("127.0.0.1:7000"));
        assert_eq!(map.primary_of(5461), Some("127.0.0.1:7001"));
        assert_eq!(map.primary_of(16383), Some("127.0.0.1:7001"));
        assert_eq!(map.primary_of(10923), None, "a slot without owner");
    }
}
