//! The write-through on a Redis Cluster: a transaction (or a pipeline) may only hold keys of one
//! hash slot, so a write of several records is split into one per slot, run concurrently. Each
//! part is today's transaction: `MULTI`, its commands, `EXEC`, and with `--redis-wait-replicas`
//! a `WAIT` in the same pipeline, which the cluster client sends whole to the node serving the
//! slot, so the `WAIT` counts that node's replicas for exactly these writes. A part that fails
//! fails the whole write, after every part has finished: the caller then undoes all of it as
//! before (`delete_if_unchanged`, the previous records), and the keys are in doubt until written
//! again from SQL (`doubt`), so nothing half-written stays. One Redis keeps one group.
//!
//! This is the path of single writes and of the slots a batch chunk could not write on its
//! primary's pipeline; a batch chunk's slots go one pipeline per primary ([`super::primaries`]).

use super::{Projection, ProjectionError};
use crate::primary::RedisConnection;
use shortlink_wire::cluster::{key_slot, marker_key, SLOTS};
use shortlink_wire::keys::LINK_PREFIX;
use std::borrow::Cow;
use std::future::Future;

impl Projection {
    /// Indices of `keys` by hash slot on a cluster (each group in the keys' order); one group of
    /// all of them otherwise.
    pub(super) fn slot_groups<'k>(&self, keys: impl Iterator<Item = &'k str>) -> Vec<Vec<usize>> {
        if !self.primary.is_cluster() {
            return vec![keys.enumerate().map(|(i, _)| i).collect()];
        }
        let groups = self.slot_groups_with_slots(keys);
        groups.into_iter().map(|(_, group)| group).collect()
    }

    /// Indices of `keys` by hash slot, with the slot (in the order slots first appear).
    pub(super) fn slot_groups_with_slots<'k>(
        &self,
        keys: impl Iterator<Item = &'k str>,
    ) -> Vec<(u16, Vec<usize>)> {
        let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
        let mut index = std::collections::HashMap::new();
        for (i, key) in keys.enumerate() {
            let slot = key_slot(key.as_bytes());
            let at = *index.entry(slot).or_insert_with(|| {
                groups.push((slot, Vec::new()));
                groups.len() - 1
            });
            groups[at].1.push(i);
        }
        groups
    }

    /// Runs `each` for every slot group of `keys` concurrently; once all have finished, their
    /// results with the group each came from, or the first error.
    pub(super) async fn per_slot<'k, T, F, Fut>(
        &self,
        keys: impl Iterator<Item = &'k str>,
        each: F,
    ) -> Result<Vec<(Vec<usize>, T)>, ProjectionError>
    where
        F: Fn(Vec<usize>) -> Fut,
        Fut: Future<Output = Result<T, ProjectionError>>,
    {
        let groups = self.slot_groups(keys);
        self.per_slot_groups(groups, each).await
    }

    /// `SCAN` over link keys on a cluster: every primary in turn. The cursor carries the primary's
    /// index (in `CLUSTER SLOTS` order) in its top 16 bits and that node's cursor below.
    pub(super) async fn scan_cluster(
        &self,
        cursor: u64,
        count: u32,
    ) -> Result<(u64, Vec<String>), ProjectionError> {
        let mut connection = self.connection().await?.1;
        let shards = connection.shards().await?.unwrap_or_default();
        let node = (cursor >> 48) as usize;
        let Some(shard) = shards.get(node) else {
            return Ok((0, Vec::new()));
        };
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor & ((1 << 48) - 1))
            .arg("MATCH")
            .arg(format!("{LINK_PREFIX}*"))
            .arg("COUNT")
            .arg(count);
        let reply = connection.on_address(&shard.primary, &cmd).await?;
        let (next, keys): (u64, Vec<String>) = redis::from_redis_value(&reply)?;
        let next = match next {
            0 if node + 1 < shards.len() => ((node as u64) + 1) << 48,
            0 => 0,
            next => ((node as u64) << 48) | next,
        };
        Ok((next, keys))
    }

    /// The keys of every primary of a cluster (`DBSIZE` summed).
    pub(super) async fn cluster_key_count(&self) -> Result<u64, ProjectionError> {
        let mut connection = self.connection().await?.1;
        let mut total = 0;
        for shard in connection.shards().await?.unwrap_or_default() {
            let reply = connection
                .on_address(&shard.primary, &redis::cmd("DBSIZE"))
                .await?;
            total += redis::from_redis_value::<u64>(&reply)?;
        }
        Ok(total)
    }
}

/// The writes of a group, borrowed when the group is all of them.
pub(super) fn pick<'w, T: Clone>(items: &'w [T], group: &[usize]) -> Cow<'w, [T]> {
    if group.len() == items.len() {
        Cow::Borrowed(items)
    } else {
        Cow::Owned(group.iter().map(|&i| items[i].clone()).collect())
    }
}

/// The slots of a cluster whose projection marker is missing, asked of each primary with one
/// pipeline of `EXISTS` for the markers of its slots (sent by address: the slot map just read,
/// not the client's, which may lag behind a reshard).
pub async fn missing_marker_slots(
    connection: &mut RedisConnection,
) -> Result<Vec<u16>, ProjectionError> {
    let shards = connection.shards().await?.unwrap_or_default();
    let mut missing = Vec::new();
    let mut covered = 0usize;
    for shard in &shards {
        let slots: Vec<u16> = shard.slots().collect();
        covered += slots.len();
        let mut pipe = redis::pipe();
        for &slot in &slots {
            pipe.cmd("EXISTS").arg(marker_key(slot));
        }
        let present = connection.on_node(&shard.primary, &pipe).await?;
        for (slot, present) in slots.iter().zip(present) {
            if !redis::from_redis_value::<bool>(&present)? {
                missing.push(*slot);
            }
        }
    }
    if covered < usize::from(SLOTS) {
        // Slots no primary serves (a failover under way): not whole, try again later.
        return Err(ProjectionError::NoPrimary(
            "some hash slots have no primary",
        ));
    }
    Ok(missing)
}
