//! The projection marker on a Redis Cluster: one marker per hash slot
//! (`shortlink_wire::cluster::marker_key`), beside the records it vouches for, so the module's
//! `MGET <record> <marker>` stays in one slot and a node that loses its data loses exactly its
//! slots' markers. The resync token is kept per slot too (`sl:meta:resync:{<tag>}`, the marker's
//! tag), so the check-and-set script stays single-slot: a slot gets its marker only if its token
//! survived, i.e. the node serving it kept what the refill wrote there.
//!
//! The keeper asks every primary which markers it lacks (one pipeline of `EXISTS` per node) and
//! refills only the links of those slots: after one primary lost its data, that is a third of the
//! links written, not all of them, and the SQL scan costs the same either way. It also watches
//! the slot map: a slot whose new primary was its replica (a failover) loses its marker first, as
//! with Sentinel (see [`super::Keeper`]), since the promoted replica may lack writes no `WAIT`
//! vouched for.

use super::handle::{ProjectionMarker, ResyncToken, SET_IF_TOKEN};
use super::refill::{refill_slots, RefillError};
use crate::primary::Shard;
use crate::projection::{missing_marker_slots, ProjectionError, RecordWrite};
use shortlink_store::Storage;
pub use shortlink_wire::cluster::token_key;
use shortlink_wire::cluster::{key_slot, marker_key, SLOTS};
use std::time::{Duration, Instant};

pub(super) fn all_slots() -> Vec<u16> {
    (0..SLOTS).collect()
}

impl ProjectionMarker {
    /// The slots whose marker is missing.
    pub(super) async fn missing_slots(&self) -> Result<Vec<u16>, ProjectionError> {
        let mut connection = self.shared_connection().await?;
        let result = tokio::time::timeout(self.timeout * 4, missing_marker_slots(&mut connection))
            .await
            .map_err(|_| ProjectionError::Timeout(self.timeout * 4))?;
        self.forget_if_broken(&result).await;
        result
    }

    pub(super) async fn clear_slots(&self, slots: &[u16]) -> Result<(), ProjectionError> {
        let cmds = slots.iter().map(|&slot| {
            let mut cmd = redis::cmd("DEL");
            cmd.arg(marker_key(slot));
            (slot, cmd)
        });
        self.on_nodes(cmds.collect()).await.map(drop)
    }

    pub(super) async fn set_tokens(
        &self,
        slots: &[u16],
        token: &str,
    ) -> Result<(), ProjectionError> {
        let cmds = slots.iter().map(|&slot| {
            let mut cmd = redis::cmd("SET");
            cmd.arg(token_key(slot)).arg(token);
            (slot, cmd)
        });
        self.on_nodes(cmds.collect()).await.map(drop)
    }

    /// Sets the marker of every slot of `token` whose token is still there; whether all were.
    pub(super) async fn finish_slots(&self, token: &ResyncToken) -> Result<bool, ProjectionError> {
        let value = self.marker_value();
        let cmds = token.slots.iter().map(|&slot| {
            let mut cmd = redis::cmd("EVAL");
            cmd.arg(SET_IF_TOKEN)
                .arg(2)
                .arg(token_key(slot))
                .arg(marker_key(slot))
                .arg(&token.token)
                .arg(&value);
            (slot, cmd)
        });
        let set = self.on_nodes(cmds.collect()).await?;
        let mut all = true;
        for (_, set) in set {
            all &= redis::from_redis_value::<bool>(&set)?;
        }
        Ok(all)
    }

    /// `SET NX` of the records, one pipeline per node.
    pub(super) async fn fill_missing_on_nodes(
        &self,
        writes: &[RecordWrite],
    ) -> Result<(), ProjectionError> {
        let cmds = writes.iter().filter_map(|write| {
            let mut pipe = redis::pipe();
            if !crate::projection::set_if_absent(&mut pipe, write) {
                return None;
            }
            let cmd = pipe.cmd_iter().next()?.clone();
            Some((key_slot(write.key().as_bytes()), cmd))
        });
        self.on_nodes(cmds.collect()).await.map(drop)
    }

    /// Runs each command on the primary serving its slot: one pipeline per node, the timeout
    /// per thousand commands. Replies in the commands' order.
    async fn on_nodes(
        &self,
        cmds: Vec<(u16, redis::Cmd)>,
    ) -> Result<Vec<(u16, redis::Value)>, ProjectionError> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        let mut connection = self.shared_connection().await?;
        let allowance = self.timeout * u32::try_from(cmds.len() / 1000 + 2).unwrap_or(u32::MAX);
        let run = async {
            let shards = connection.shards().await?.unwrap_or_default();
            let mut owner = vec![usize::MAX; usize::from(SLOTS)];
            for (index, shard) in shards.iter().enumerate() {
                for slot in shard.slots() {
                    owner[usize::from(slot)] = index;
                }
            }
            let mut replies = Vec::with_capacity(cmds.len());
            for (index, shard) in shards.iter().enumerate() {
                let mine: Vec<&(u16, redis::Cmd)> = cmds
                    .iter()
                    .filter(|(slot, _)| owner[usize::from(*slot)] == index)
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let mut pipe = redis::pipe();
                for (_, cmd) in &mine {
                    pipe.add_command(cmd.clone());
                }
                let values = connection.on_node(&shard.primary, &pipe).await?;
                replies.extend(mine.iter().map(|(slot, _)| *slot).zip(values));
            }
            if replies.len() < cmds.len() {
                return Err(ProjectionError::NoPrimary(
                    "some hash slots have no primary",
                ));
            }
            Ok(replies)
        };
        let result = tokio::time::timeout(allowance, run)
            .await
            .map_err(|_| ProjectionError::Timeout(allowance))
            .and_then(|result| result);
        self.forget_if_broken(&result).await;
        result
    }

    async fn shared_connection(&self) -> Result<crate::primary::RedisConnection, ProjectionError> {
        let mut slot = self.connection.lock().await;
        self.connection_in(&mut slot).await
    }

    /// Drops the connection after any error: the cluster may have changed under it (a node
    /// the client never connected to, a slot map behind a reshard or a failover), and the next
    /// one learns the slot map afresh. A check is seconds apart, so that costs little.
    async fn forget_if_broken<T>(&self, result: &Result<T, ProjectionError>) {
        if result.is_err() {
            *self.connection.lock().await = None;
        }
    }
}

/// What one check of the keeper found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// Redis did not answer.
    Down,
    /// The markers were there, or could not all be set yet.
    Kept,
    /// Lost data was refilled from SQL and the markers set.
    Restored,
}

/// One check of the keeper on a cluster: clears the markers of slots failed over to their
/// replica since the last check, then refills the slots whose marker is missing and sets their
/// markers.
pub(super) async fn keep(
    storage: &dyn Storage,
    marker: &ProjectionMarker,
    grace: Duration,
    last_shards: &mut Option<Vec<Shard>>,
    was_down: bool,
) -> Check {
    let shards = match marker.shard_map().await {
        Ok(shards) => shards,
        Err(error) => {
            if !was_down {
                tracing::warn!(%error, "cannot read the cluster's slot map");
            }
            return Check::Down;
        }
    };
    let promoted = last_shards
        .as_ref()
        .map(|last| promoted_slots(last, &shards))
        .unwrap_or_default();
    if !promoted.is_empty() {
        tracing::warn!(
            slots = promoted.len(),
            "hash slots failed over to their replica: refilling them from SQL before trusting them"
        );
        if let Err(error) = marker.clear_slots(&promoted).await {
            tracing::warn!(%error, "cannot clear the markers of failed-over slots");
            return Check::Down;
        }
    }
    *last_shards = Some(shards);
    let missing = match marker.missing_slots().await {
        Ok(missing) => missing,
        Err(error) => {
            if !was_down {
                tracing::warn!(%error, "cannot check the projection markers");
            }
            return Check::Down;
        }
    };
    if missing.is_empty() {
        return Check::Kept;
    }
    tracing::warn!(
        slots = missing.len(),
        "projection markers missing: some primary lost its data or was never filled; restoring \
         those slots from SQL (nginx falls back to the sidecar for them meanwhile)"
    );
    let started = Instant::now();
    match restore_slots(storage, marker, grace, &missing).await {
        Ok(Some(records)) => {
            tracing::info!(
                records,
                slots = missing.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "projection restored; markers set"
            );
            return Check::Restored;
        }
        Ok(None) => tracing::warn!("a node lost data again during the restore; retrying"),
        Err(error) => tracing::warn!(%error, "projection restore failed; retrying"),
    }
    Check::Kept
}

/// Refills the links of `slots` and sets their markers where the tokens survived. `Ok(None)`:
/// some did not (data lost again); the next check tries those again.
async fn restore_slots(
    storage: &dyn Storage,
    marker: &ProjectionMarker,
    grace: Duration,
    slots: &[u16],
) -> Result<Option<u64>, RefillError> {
    let token = marker.begin_slots(slots).await?;
    let mut wanted = vec![false; usize::from(SLOTS)];
    for &slot in slots {
        wanted[usize::from(slot)] = true;
    }
    let counts = refill_slots(storage, marker, grace, Some(&wanted)).await?;
    Ok(marker.finish(token).await?.then_some(counts.offered))
}

/// Slots whose primary now is the node that was their replica.
fn promoted_slots(last: &[Shard], now: &[Shard]) -> Vec<u16> {
    let mut before: Vec<Option<&Shard>> = vec![None; usize::from(SLOTS)];
    for shard in last {
        for slot in shard.slots() {
            before[usize::from(slot)] = Some(shard);
        }
    }
    let mut promoted = Vec::new();
    for shard in now {
        for slot in shard.slots() {
            if let Some(old) = before[usize::from(slot)] {
                if old.primary != shard.primary && old.replicas.contains(&shard.primary) {
                    promoted.push(slot);
                }
            }
        }
    }
    promoted
}

impl ProjectionMarker {
    async fn shard_map(&self) -> Result<Vec<Shard>, ProjectionError> {
        let mut connection = self.shared_connection().await?;
        let result = tokio::time::timeout(self.timeout, connection.shards())
            .await
            .map_err(|_| ProjectionError::Timeout(self.timeout))
            .and_then(|shards| Ok(shards?.unwrap_or_default()));
        self.forget_if_broken(&result).await;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_wire::cluster::slot_tag;

    #[test]
    fn a_failover_promotes_the_replica_a_reshard_does_not() {
        let shard = |primary: &str, replica: &str, ranges: Vec<(u16, u16)>| Shard {
            primary: primary.to_owned(),
            replicas: vec![replica.to_owned()],
            ranges,
        };
        let last = vec![
            shard("a:1", "a:2", vec![(0, 99)]),
            shard("b:1", "b:2", vec![(100, 16383)]),
        ];
        // `a:1` failed over to `a:2`; slots 100..=109 were moved from `b:1` to `a:2`.
        let now = vec![
            shard("a:2", "a:1", vec![(0, 109)]),
            shard("b:1", "b:2", vec![(110, 16383)]),
        ];
        assert_eq!(promoted_slots(&last, &now), (0..100).collect::<Vec<u16>>());
        assert_eq!(token_key(7), format!("sl:meta:resync:{{{}}}", slot_tag(7)));
        assert_eq!(key_slot(token_key(7).as_bytes()), 7);
    }
}
