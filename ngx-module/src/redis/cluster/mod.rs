//! Redis Cluster, per worker: the slot map, a pool per node, an invalidation connection per
//! node read, and the rules for routing a lookup or a visit batch to the node serving its slot.
//!
//! With `read_replicas=` a lookup reads its slot from an online replica in the edge's zone
//! (`READONLY`), and the invalidation connection of that primary's slots goes to that replica:
//! the cache is told of a change when the node it reads has it, as an edge on a replica of one
//! Redis. Writes (visit counts, events) always go to the primary.
//!
//! The map is read from a node (`CLUSTER SHARDS`) by a task on the event loop
//! ([`refresh`]); lookups never wait for it. It is read again after a `-MOVED`, after a lookup
//! failed on a node, when a slot has no owner, and every [`REFRESH_EVERY_MS`] while the worker is
//! busy, so that a primary the worker never hears a `-MOVED` about (a failover, a new node) is
//! tracked within that time. All of it is driven by [`Cluster::poll`], called on each use.

mod addr;
mod refresh;
pub mod slots;

use std::collections::HashMap;
use std::rc::Rc;

use shortlink_wire::cluster::{key_slot, slot_tag, MARKER_PREFIX};
use shortlink_wire::keys::{LINK_PREFIX, VISIT_COUNT_PREFIX};
use shortlink_wire::resp;

use super::connection::{Reply, Timeouts};
use super::tracking::Pending;
use super::{now_ms, Pool, RedisError, Tracker};
use crate::cache::Cache;
use crate::conf::parse::RedisSpec;
use crate::conf::RedisCluster;
use crate::events::{EventShared, Rerouted, MAX_REDIRECTS};
use crate::status::{Counter, Counters};
use addr::Addrs;
use refresh::Refresh;
use slots::{Redirect, SlotMap};

/// A busy worker reads the map this often, whatever happens.
pub const REFRESH_EVERY_MS: u64 = 1_000;

/// How long a visit batch that nodes bounced between them waits before it is sent again: long
/// enough for an operator's next `SETSLOT` to land, short against the visit stream's readers.
const BOUNCED_BATCH_WAIT_MS: u64 = 100;

/// Where a lookup goes.
pub enum Target {
    /// The node the map says the key's slot is read from: a replica in the edge's zone, else
    /// the owner.
    Read,
    /// The node the map says serves the key's slot.
    Owner,
    /// The node a `-MOVED` named.
    Node(Vec<u8>),
    /// The node an `-ASK` named: `ASKING` first.
    Ask(Vec<u8>),
}

pub struct Cluster {
    spec: RedisSpec,
    events: Rc<EventShared>,
    stats: Option<&'static Counters>,
    map: SlotMap,
    /// Whether a map was ever read: until then the cache is not trusted.
    loaded: bool,
    /// Whether a read of the map ever finished, well or not.
    tried: bool,
    /// Bumped by every change of the map, so that a lookup answered across one is not cached.
    generation: u64,
    /// The cache must be dropped at its next access (the map changed).
    flush_cache: bool,
    /// Invalidation connections, one per node read (`SlotMap::readers`); `None` when the cache
    /// is not kept coherent by tracking.
    trackers: Option<Vec<(Vec<u8>, Tracker)>>,
    /// Pools for commands to the node that owns a slot, or that a redirection named.
    nodes: Pools,
    /// `READONLY` pools for lookups on the replicas read, kept only while the map reads them.
    replicas: Pools,
    refresh: Refresh,
    /// Last: the connections above point into it.
    addrs: Addrs,
}

impl Cluster {
    pub fn new(
        conf: &RedisCluster,
        events: Rc<EventShared>,
        stats: Option<&'static Counters>,
        track: bool,
    ) -> Self {
        let mut cluster = Self {
            spec: conf.spec.clone(),
            refresh: Refresh::new(
                conf.seeds.clone(),
                Timeouts::of(&conf.spec),
                &conf.read_replicas,
            ),
            events,
            stats,
            map: SlotMap::empty(),
            loaded: false,
            tried: false,
            generation: 0,
            flush_cache: false,
            trackers: track.then(Vec::new),
            nodes: Pools::new(false),
            replicas: Pools::new(true),
            addrs: Addrs::new(),
        };
        cluster.refresh.want();
        cluster.poll();
        cluster
    }

    /// Whether the worker's first read of the slot map is still under way.
    pub fn first_map_pending(&mut self) -> bool {
        self.poll();
        !self.tried
    }

    /// Takes a map the refresh task read, and starts the next read when one is due.
    pub fn poll(&mut self) {
        let now = now_ms();
        if let Some(read) = self.refresh.take() {
            self.tried = true;
            if let Some(map) = read {
                self.bump(Counter::ClusterMapReads, 1);
                self.install(map);
            }
        }
        if now.saturating_sub(self.refresh.last_start()) >= REFRESH_EVERY_MS {
            self.refresh.want();
        }
        if self.refresh.is_due(now) {
            // The primaries first: the seeds may be long gone.
            let primaries: Vec<_> = self
                .map
                .primaries()
                .iter()
                .filter_map(|p| self.addrs.get(p))
                .collect();
            self.refresh.start(now, primaries, &self.events);
        }
        self.resend_rerouted();
    }

    /// Sends again the visit batches nodes redirected: to the node a `-MOVED` names (the map
    /// learns it, as from a lookup), or once after `ASKING` to the node an `-ASK` names.
    fn resend_rerouted(&mut self) {
        for mut rerouted in self.events.take_rerouted() {
            let visits = rerouted.visits as usize;
            let (node, asking) = match slots::redirect(&rerouted.error) {
                _ if rerouted.command.redirects >= MAX_REDIRECTS => {
                    self.bounced(rerouted);
                    continue;
                }
                Some(Redirect::Moved { slot, node }) => {
                    self.moved(slot, &node);
                    (node, false)
                }
                Some(Redirect::Ask { node, .. }) => {
                    self.asked();
                    (node, true)
                }
                None => {
                    self.give_up(visits);
                    continue;
                }
            };
            rerouted.command.redirects += 1;
            match self
                .nodes
                .get(&node, &mut self.addrs, &self.spec, &self.events)
            {
                Some(pool) => pool.resend_event(rerouted, asking),
                None => self.spool_rerouted(rerouted),
            }
        }
    }

    /// A redirected batch that is not sent again counts as sent and failed, as a batch a node
    /// refused with any other error.
    fn give_up(&self, visits: usize) {
        self.events.add(Counter::EventsSent, visits);
        self.events.add(Counter::EventsFailed, visits);
    }

    /// A batch nodes kept redirecting: they disagree on its stream's owner, as between the two
    /// `CLUSTER SETSLOT ... NODE` of a reshard that told the old owner first (it redirects to
    /// the new one, which until told redirects back). Counted as a cluster failure, it waits in
    /// the spool while the map is read again, then leaves with its redirections counted anew.
    fn bounced(&mut self, rerouted: Rerouted) {
        self.bump(Counter::ClusterFailures, 1);
        self.spool_rerouted(rerouted);
        self.events.wake_in(BOUNCED_BATCH_WAIT_MS);
    }

    /// Moves the spool onto a ready connection to any node: one that does not own a batch's
    /// stream redirects it to the one that does. With none ready, the next connection to come
    /// up takes it.
    pub fn flush_spool(&mut self) {
        if self
            .events
            .spool
            .try_borrow()
            .map_or(true, |s| s.is_empty())
        {
            return;
        }
        let _ = self.nodes.by_node.values_mut().any(Pool::flush_spool);
    }

    /// A redirected batch for a node this worker cannot reach yet waits in the spool.
    fn spool_rerouted(&mut self, rerouted: Rerouted) {
        self.refresh.want();
        let bytes = rerouted.command.bytes;
        self.events.spool(rerouted.visits as usize, |out| {
            out.extend_from_slice(&bytes)
        });
    }

    fn install(&mut self, map: SlotMap) {
        self.loaded = true;
        if let Some(stats) = self.stats {
            stats.set(Counter::ClusterPrimaries, map.primaries().len() as u64);
            stats.set(Counter::ClusterReplicasRead, map.replicas_read() as u64);
        }
        if map == self.map {
            return;
        }
        self.map = map;
        self.changed();
    }

    /// The map changed: answers in flight may not be cached, the cache goes, and the
    /// invalidation connections and replica pools follow the nodes read.
    fn changed(&mut self) {
        self.generation += 1;
        self.flush_cache = true;
        self.bump(Counter::ClusterMapChanges, 1);
        let map = &self.map;
        self.replicas
            .by_node
            .retain(|name, _| map.readers().any(|reader| reader == name.as_slice()));
        let Some(trackers) = self.trackers.as_mut() else {
            return;
        };
        let mut old = std::mem::take(trackers);
        for reader in self.map.readers() {
            let kept = old
                .iter()
                .position(|(name, _)| name == reader)
                .map(|i| old.swap_remove(i));
            let tracker = match kept {
                Some(kept) => Some(kept),
                None => self.addrs.get(reader).map(|peer| {
                    let tracker =
                        Tracker::for_peer(peer, Timeouts::of(&self.spec), Rc::clone(&self.events));
                    (reader.to_vec(), tracker)
                }),
            };
            trackers.extend(tracker);
        }
    }

    fn bump(&self, counter: Counter, n: u64) {
        if let Some(stats) = self.stats {
            stats.add(counter, n);
        }
    }

    /// Applies what the invalidation connections reported to `cache`, and says whether it may
    /// be trusted: a map is loaded and the connection of every node read is up.
    pub fn sync_cache(&mut self, cache: &mut Cache) -> bool {
        self.poll();
        if std::mem::take(&mut self.flush_cache) {
            cache.clear();
        }
        let Some(trackers) = self.trackers.as_mut() else {
            return self.loaded;
        };
        let mut up = self.loaded && trackers.len() == self.map.primaries().len();
        for (_, tracker) in trackers.iter_mut() {
            tracker.ensure();
            match tracker.state().take() {
                Pending::Nothing => {}
                Pending::Flush => cache.clear(),
                Pending::Evict(codes) => codes.iter().for_each(|code| cache.remove(code)),
            }
            up &= tracker.state().is_up();
        }
        up
    }

    /// Names the moment a lookup is sent (see `Worker::ticket`): changes with the map and with
    /// every report or change of trust of any invalidation connection.
    pub fn ticket(&mut self) -> Option<u64> {
        self.poll();
        let Some(trackers) = self.trackers.as_mut() else {
            return Some(self.generation);
        };
        if !self.loaded || trackers.len() != self.map.primaries().len() {
            return None;
        }
        let mut sum = self.generation << 40;
        for (_, tracker) in trackers.iter_mut() {
            tracker.ensure();
            sum = sum.wrapping_add(tracker.state().ticket()?);
        }
        Some(sum)
    }

    /// Whether `code`'s slot is read from a replica: a record missing there may only not have
    /// arrived yet.
    pub fn reads_replica(&self, code: &[u8]) -> bool {
        let mut buf = KeyBuf::new();
        buf.key(LINK_PREFIX.as_bytes(), code)
            .is_ok_and(|key| self.map.reader(key_slot(key)).is_some_and(|(_, r)| r))
    }

    /// Sends `MGET sl:c:<code> sl:meta:projection:{<tag>}` (the marker of the record's slot) to
    /// `target`.
    pub fn lookup(&mut self, code: &[u8], target: &Target) -> Result<Reply, RedisError> {
        let mut buf = KeyBuf::new();
        let key = buf.key(LINK_PREFIX.as_bytes(), code)?;
        let tag = slot_tag(key_slot(key)).as_bytes();
        let args: [&[&[u8]]; 3] = [
            &[b"MGET"],
            &[key],
            &[MARKER_PREFIX.as_bytes(), b"{", tag, b"}"],
        ];
        self.send_for(key, &args, target)
    }

    /// Sends a click's count on `sl:n:<code>` (`Worker::count` writes it: its script, or `GET`
    /// for a machine's click) to the owner of the counter's slot, which holds its token's too.
    pub fn count(
        &mut self,
        code: &[u8],
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Reply, RedisError> {
        let mut buf = KeyBuf::new();
        let key = buf.key(VISIT_COUNT_PREFIX.as_bytes(), code)?;
        self.send_with(key, &Target::Owner, write)
    }

    /// Sends `args` to the node serving `key`'s slot (or `target`, after a redirection).
    pub fn send_for(
        &mut self,
        key: &[u8],
        args: &[&[&[u8]]],
        target: &Target,
    ) -> Result<Reply, RedisError> {
        self.send_with(key, target, |out| resp::encode_command(out, args))
    }

    /// [`Cluster::send_for`] of a command `write` appends to the connection's output.
    fn send_with(
        &mut self,
        key: &[u8],
        target: &Target,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Reply, RedisError> {
        self.poll();
        let slot = key_slot(key);
        let (node, asking, replica) = match target {
            Target::Read => match self.map.reader(slot) {
                Some((node, replica)) => (node, false, replica),
                None => return Err(self.failed()),
            },
            Target::Owner => match self.map.owner(slot) {
                Some(owner) => (owner, false, false),
                None => return Err(self.failed()),
            },
            Target::Node(node) => (node.as_slice(), false, false),
            Target::Ask(node) => (node.as_slice(), true, false),
        };
        let pools = if replica {
            &mut self.replicas
        } else {
            &mut self.nodes
        };
        let pool = pools.get(node, &mut self.addrs, &self.spec, &self.events);
        let sent = match pool {
            Some(pool) if asking => pool.request_asking(write),
            Some(pool) => pool.request_with(write),
            None => Err(RedisError::Unavailable),
        };
        sent.inspect_err(|_| {
            self.failed();
        })
    }

    /// Counts a lookup that failed on the cluster's account and has the map read again (a node
    /// that failed may have been replaced).
    pub fn failed(&mut self) -> RedisError {
        self.bump(Counter::ClusterFailures, 1);
        self.refresh.want();
        RedisError::Unavailable
    }

    /// A node answered `-MOVED`: the slot lives on `node` now; the whole map is read again.
    pub fn moved(&mut self, slot: u16, node: &[u8]) {
        self.bump(Counter::ClusterRedirects, 1);
        if self.map.owner(slot) != Some(node) {
            self.map.moved(slot, node);
            self.changed();
        }
        self.refresh.want();
    }

    /// A node answered `-ASK`.
    pub fn asked(&mut self) {
        self.bump(Counter::ClusterRedirects, 1);
    }

    /// Queues a visit batch on the node serving `key`'s slot (a visit stream), or spools it
    /// while that node is unknown.
    pub fn send_event(&mut self, key: &[u8], visits: usize, write: impl FnOnce(&mut Vec<u8>)) {
        self.poll();
        let pool = self.map.owner(key_slot(key)).and_then(|owner| {
            self.nodes
                .get(owner, &mut self.addrs, &self.spec, &self.events)
        });
        match pool {
            Some(pool) => pool.send_event(visits, write),
            None => {
                self.refresh.want();
                self.events.spool(visits, write);
            }
        }
    }
}

/// A worker's pools of one kind, by node name, each made on first use.
struct Pools {
    /// Whether they read replicas (`READONLY`, lookups only).
    replica: bool,
    /// Looked up on every lookup: foldhash rather than SipHash (node names are no attacker's).
    by_node: HashMap<Vec<u8>, Pool, foldhash::fast::RandomState>,
}

impl Pools {
    fn new(replica: bool) -> Self {
        Self {
            replica,
            by_node: HashMap::default(),
        }
    }

    /// The pool of `node` (takes the cluster's other fields apart so that `node` may borrow its
    /// map).
    fn get(
        &mut self,
        node: &[u8],
        addrs: &mut Addrs,
        spec: &RedisSpec,
        events: &Rc<EventShared>,
    ) -> Option<&mut Pool> {
        if !self.by_node.contains_key(node) {
            let peer = addrs.get(node)?;
            let events = Rc::clone(events);
            let pool = if self.replica {
                Pool::for_replica(peer, spec, events)
            } else {
                Pool::for_peer(peer, spec, events)
            };
            self.by_node.insert(node.to_vec(), pool);
        }
        self.by_node.get_mut(node)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Connections before the addresses they point into (fields drop in order, but the
        // refresh task and trackers are made explicit here).
        self.refresh.stop();
        self.trackers = None;
        self.nodes.by_node.clear();
        self.replicas.by_node.clear();
    }
}

/// A key built on the stack: codes are at most an alias long, prefixes a few bytes.
struct KeyBuf([u8; 16 + shortcode::ALIAS_MAX_LEN]);

impl KeyBuf {
    fn new() -> Self {
        KeyBuf([0; 16 + shortcode::ALIAS_MAX_LEN])
    }

    fn key(&mut self, prefix: &[u8], code: &[u8]) -> Result<&[u8], RedisError> {
        let key = self
            .0
            .get_mut(..prefix.len() + code.len())
            .ok_or(RedisError::BadValue)?;
        let (head, rest) = key.split_at_mut(prefix.len());
        head.copy_from_slice(prefix);
        rest.copy_from_slice(code);
        Ok(key)
    }
}
