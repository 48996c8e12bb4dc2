//! The slot map as a worker sees it, read from `CLUSTER SHARDS` (or `CLUSTER SLOTS`), and the
//! redirections (`-MOVED`, `-ASK`) a node may answer instead of a reply. Pure: no nginx here.

use std::net::{IpAddr, SocketAddr};

use shortlink_wire::cluster::SLOTS;
use shortlink_wire::resp::Frame;
use shortlink_wire::rules::Cidr;

/// No primary serves the slot (as far as the last map said).
const NO_OWNER: u16 = u16::MAX;

/// Which primary serves each slot, and which node this edge reads it from; nodes named
/// `ip:port`.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotMap {
    owners: Box<[u16]>,
    primaries: Vec<Vec<u8>>,
    /// Per primary (same index): the online replica in the edge's zone that its slots are read
    /// from, if it has one.
    replicas: Vec<Option<Vec<u8>>>,
}

impl SlotMap {
    pub fn empty() -> Self {
        Self {
            owners: vec![NO_OWNER; usize::from(SLOTS)].into_boxed_slice(),
            primaries: Vec::new(),
            replicas: Vec::new(),
        }
    }

    /// The primary serving `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&[u8]> {
        let i = *self.owners.get(usize::from(slot))?;
        self.primaries.get(usize::from(i)).map(Vec::as_slice)
    }

    /// Every primary that serves at least one slot.
    pub fn primaries(&self) -> &[Vec<u8>] {
        &self.primaries
    }

    /// The node `slot` is read from, and whether it is a replica (which must be told
    /// `READONLY`): its primary's replica in the edge's zone, else the primary.
    pub fn reader(&self, slot: u16) -> Option<(&[u8], bool)> {
        let i = usize::from(*self.owners.get(usize::from(slot))?);
        match self.replicas.get(i)? {
            Some(replica) => Some((replica, true)),
            None => self.primaries.get(i).map(|p| (p.as_slice(), false)),
        }
    }

    /// Every node lookups read, one per primary: where the cache's invalidations must come from.
    pub fn readers(&self) -> impl Iterator<Item = &[u8]> {
        self.primaries
            .iter()
            .zip(&self.replicas)
            .map(|(primary, replica)| replica.as_deref().unwrap_or(primary))
    }

    /// How many primaries' slots are read from a replica.
    pub fn replicas_read(&self) -> usize {
        self.replicas.iter().filter(|r| r.is_some()).count()
    }

    /// Records that `slot` moved to `node` (a `-MOVED` reply), ahead of the next full map.
    pub fn moved(&mut self, slot: u16, node: &[u8]) {
        if usize::from(slot) >= self.owners.len() {
            return;
        }
        let i = self.index_of(node);
        self.owners[usize::from(slot)] = i;
    }

    fn index_of(&mut self, node: &[u8]) -> u16 {
        match self.primaries.iter().position(|p| p == node) {
            Some(i) => i as u16,
            None => {
                self.primaries.push(node.to_vec());
                self.replicas.push(None);
                (self.primaries.len() - 1) as u16
            }
        }
    }

    fn assign(&mut self, start: i64, end: i64, node: &[u8]) -> Result<(), MapError> {
        let slots = i64::from(SLOTS);
        if !(0..slots).contains(&start) || !(start..slots).contains(&end) {
            return Err(MapError);
        }
        let i = self.index_of(node);
        self.owners[start as usize..=end as usize].fill(i);
        Ok(())
    }

    /// Puts the primaries in name order, so that two reads of the same assignment compare
    /// equal whatever order the node listed its shards in.
    fn normalized(mut self) -> Self {
        let mut order: Vec<usize> = (0..self.primaries.len()).collect();
        order.sort_by(|&a, &b| self.primaries[a].cmp(&self.primaries[b]));
        let mut rank = vec![0u16; order.len()];
        for (new, &old) in order.iter().enumerate() {
            rank[old] = new as u16;
        }
        for owner in self.owners.iter_mut().filter(|o| **o != NO_OWNER) {
            *owner = rank[usize::from(*owner)];
        }
        self.primaries = order.iter().map(|&i| self.primaries[i].clone()).collect();
        self.replicas = order.iter().map(|&i| self.replicas[i].take()).collect();
        self
    }

    /// Primaries that appear only because a `-MOVED` named them and own nothing now are kept:
    /// the next full map replaces the whole map anyway.
    pub fn served_slots(&self) -> usize {
        self.owners.iter().filter(|&&o| o != NO_OWNER).count()
    }

    /// Reads `primary`'s replica: the lowest-named of `candidates` (so that every worker of
    /// every edge in the zone picks the same one and its cache follows one node).
    fn read_from(&mut self, primary: &[u8], candidates: impl Iterator<Item = Vec<u8>>) {
        if let Some(replica) = candidates.min() {
            let i = usize::from(self.index_of(primary));
            self.replicas[i] = Some(replica);
        }
    }

    /// Reads a `CLUSTER SHARDS` reply (Redis 7): per shard its slot ranges and its nodes; the
    /// owner is the shard's primary while its health is `online`, and its slots are read from
    /// an `online` replica in `zone` if there is one.
    pub fn from_shards(reply: &Frame, zone: &[Cidr]) -> Result<Self, MapError> {
        let Frame::Array(shards) = reply else {
            return Err(MapError);
        };
        let mut map = Self::empty();
        for shard in shards {
            let ranges = field(shard, b"slots").ok_or(MapError)?;
            let nodes = field(shard, b"nodes").ok_or(MapError)?;
            let Frame::Array(nodes) = nodes else {
                return Err(MapError);
            };
            let primary = nodes.iter().find(|node| {
                bulk(field(node, b"role")) == Some(b"master")
                    && bulk(field(node, b"health")) == Some(b"online")
            });
            let Some(primary) = primary else {
                continue; // the shard's slots have no live owner now
            };
            let ip = bulk(field(primary, b"ip")).ok_or(MapError)?;
            let port = int(field(primary, b"port"))
                .or_else(|| int(field(primary, b"tls-port")))
                .ok_or(MapError)?;
            let name = node_name(ip, port).ok_or(MapError)?;
            let Frame::Array(ranges) = ranges else {
                return Err(MapError);
            };
            for pair in ranges.chunks(2) {
                match pair {
                    [Frame::Integer(start), Frame::Integer(end)] => {
                        map.assign(*start, *end, &name)?
                    }
                    _ => return Err(MapError),
                }
            }
            if ranges.is_empty() {
                continue;
            }
            let replicas = nodes.iter().filter_map(|node| {
                let online = bulk(field(node, b"role")) == Some(b"replica")
                    && bulk(field(node, b"health")) == Some(b"online");
                let ip = bulk(field(node, b"ip")).filter(|_| online)?;
                let port = int(field(node, b"port")).or_else(|| int(field(node, b"tls-port")))?;
                in_zone(ip, port, zone)
            });
            map.read_from(&name, replicas);
        }
        Ok(map.normalized())
    }

    /// Reads a `CLUSTER SLOTS` reply: `[start, end, [ip, port, id, ...], replicas...]` each
    /// (failed replicas are not listed).
    pub fn from_slots(reply: &Frame, zone: &[Cidr]) -> Result<Self, MapError> {
        let Frame::Array(ranges) = reply else {
            return Err(MapError);
        };
        let mut map = Self::empty();
        for range in ranges {
            let Frame::Array(items) = range else {
                return Err(MapError);
            };
            let [Frame::Integer(start), Frame::Integer(end), Frame::Array(primary), replicas @ ..] =
                items.as_slice()
            else {
                return Err(MapError);
            };
            let [Frame::Bulk(ip), Frame::Integer(port), ..] = primary.as_slice() else {
                return Err(MapError);
            };
            let name = node_name(ip, *port).ok_or(MapError)?;
            map.assign(*start, *end, &name)?;
            let replicas = replicas.iter().filter_map(|replica| match replica {
                Frame::Array(node) => match node.as_slice() {
                    [Frame::Bulk(ip), Frame::Integer(port), ..] => in_zone(ip, *port, zone),
                    _ => None,
                },
                _ => None,
            });
            map.read_from(&name, replicas);
        }
        Ok(map.normalized())
    }
}

/// A reply that is not a slot map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapError;

/// `ip:port` as the module names a node (IPv6 bracketed); only IP literals are accepted, so
/// that connecting to a node never waits on DNS inside the worker.
pub fn node_name(ip: &[u8], port: i64) -> Option<Vec<u8>> {
    let ip: IpAddr = std::str::from_utf8(ip).ok()?.parse().ok()?;
    let port = u16::try_from(port).ok().filter(|&p| p != 0)?;
    Some(SocketAddr::new(ip, port).to_string().into_bytes())
}

/// The name of the node at `ip:port` when that address lies in `zone`.
fn in_zone(ip: &[u8], port: i64, zone: &[Cidr]) -> Option<Vec<u8>> {
    let addr: IpAddr = std::str::from_utf8(ip).ok()?.parse().ok()?;
    zone.iter()
        .any(|net| net.contains(addr))
        .then(|| node_name(ip, port))
        .flatten()
}

/// The value after `name` in a RESP2 map given as a flat array.
fn field<'a>(map: &'a Frame, name: &[u8]) -> Option<&'a Frame> {
    let Frame::Array(items) = map else {
        return None;
    };
    items
        .chunks(2)
        .find(|pair| matches!(&pair[0], Frame::Bulk(k) | Frame::Simple(k) if k == name))
        .and_then(|pair| pair.get(1))
}

fn bulk(frame: Option<&Frame>) -> Option<&[u8]> {
    match frame? {
        Frame::Bulk(b) | Frame::Simple(b) => Some(b),
        _ => None,
    }
}

fn int(frame: Option<&Frame>) -> Option<i64> {
    match frame? {
        Frame::Integer(n) if *n > 0 => Some(*n),
        _ => None,
    }
}

/// What an error reply from a cluster node asks of the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// The slot lives on `node` now: update the map, retry there.
    Moved { slot: u16, node: Vec<u8> },
    /// The slot is migrating and this key is on `node` already: retry there once after `ASKING`.
    Ask { slot: u16, node: Vec<u8> },
}

/// Reads `MOVED <slot> <ip:port>` / `ASK <slot> <ip:port>`; anything else (`TRYAGAIN`,
/// `CLUSTERDOWN`, other errors) is `None`: a failure.
pub fn redirect(error: &[u8]) -> Option<Redirect> {
    let text = std::str::from_utf8(error).ok()?;
    let mut words = text.split(' ');
    let kind = words.next()?;
    let slot: u16 = words.next()?.parse().ok().filter(|&s| s < SLOTS)?;
    let (ip, port) = words.next()?.rsplit_once(':')?;
    let ip = ip.trim_start_matches('[').trim_end_matches(']');
    let node = node_name(ip.as_bytes(), port.parse().ok()?)?;
    match kind {
        "MOVED" => Some(Redirect::Moved { slot, node }),
        "ASK" => Some(Redirect::Ask { slot, node }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Frame {
        Frame::Bulk(s.as_bytes().to_vec())
    }

    fn node(port: i64, role: &str, health: &str) -> Frame {
        node_at("127.0.0.1", port, role, health)
    }

    fn node_at(ip: &str, port: i64, role: &str, health: &str) -> Frame {
        Frame::Array(vec![
            b("id"),
            b("abc"),
            b("port"),
            Frame::Integer(port),
            b("ip"),
            b(ip),
            b("role"),
            b(role),
            b("health"),
            b(health),
        ])
    }

    fn shard(ranges: &[i64], nodes: Vec<Frame>) -> Frame {
        Frame::Array(vec![
            b("slots"),
            Frame::Array(ranges.iter().map(|&n| Frame::Integer(n)).collect()),
            b("nodes"),
            Frame::Array(nodes),
        ])
    }

    #[test]
    fn shards_give_each_slot_its_online_primary() {
        let reply = Frame::Array(vec![
            shard(
                &[0, 5460, 10923, 10923],
                vec![
                    node(7001, "replica", "online"),
                    node(7000, "master", "online"),
                ],
            ),
            shard(&[5461, 10922], vec![node(7002, "master", "online")]),
            shard(&[10924, 16383], vec![node(7003, "master", "failed")]),
        ]);
        let map = SlotMap::from_shards(&reply, &[]).unwrap();
        assert_eq!(map.owner(0), Some(&b"127.0.0.1:7000"[..]));
        assert_eq!(map.owner(10923), Some(&b"127.0.0.1:7000"[..]));
        assert_eq!(map.owner(5461), Some(&b"127.0.0.1:7002"[..]));
        assert_eq!(map.owner(16383), None);
        assert_eq!(map.primaries().len(), 2);
        assert_eq!(map.served_slots(), 10924);
        // The same assignment listed in another order is the same map.
        let Frame::Array(mut shards) = reply else {
            unreachable!()
        };
        shards.reverse();
        assert!(SlotMap::from_shards(&Frame::Array(shards), &[]).unwrap() == map);
    }

    #[test]
    fn slots_reply_is_read_too() {
        let range = |s, e, port| {
            Frame::Array(vec![
                Frame::Integer(s),
                Frame::Integer(e),
                Frame::Array(vec![b("127.0.0.1"), Frame::Integer(port), b("id")]),
            ])
        };
        let map = SlotMap::from_slots(
            &Frame::Array(vec![range(0, 99, 7000), range(100, 16383, 7001)]),
            &[],
        )
        .unwrap();
        assert_eq!(map.owner(99), Some(&b"127.0.0.1:7000"[..]));
        assert_eq!(map.owner(100), Some(&b"127.0.0.1:7001"[..]));
        assert!(SlotMap::from_slots(&Frame::Array(vec![range(5, 16384, 7000)]), &[]).is_err());
        assert!(SlotMap::from_shards(&b("ERR unknown command"), &[]).is_err());
    }

    fn zone(nets: &[&str]) -> Vec<Cidr> {
        nets.iter().map(|n| Cidr::parse(n).unwrap()).collect()
    }

    #[test]
    fn slots_are_read_from_an_online_replica_in_the_zone() {
        let reply = Frame::Array(vec![
            shard(
                &[0, 8191],
                vec![
                    node_at("10.0.0.1", 7000, "master", "online"),
                    node_at("10.2.0.5", 7000, "replica", "online"),
                    node_at("10.1.0.9", 7000, "replica", "online"),
                    node_at("10.1.0.3", 7000, "replica", "online"),
                ],
            ),
            shard(
                &[8192, 16383],
                vec![
                    node_at("10.0.0.2", 7000, "master", "online"),
                    node_at("10.1.0.4", 7000, "replica", "loading"),
                ],
            ),
        ]);
        let map = SlotMap::from_shards(&reply, &zone(&["10.1.0.0/16"])).unwrap();
        // The lowest-named of the zone's online replicas; a loading one is not read.
        assert_eq!(map.reader(0), Some((&b"10.1.0.3:7000"[..], true)));
        assert_eq!(map.reader(8192), Some((&b"10.0.0.2:7000"[..], false)));
        assert_eq!(map.owner(0), Some(&b"10.0.0.1:7000"[..]));
        assert_eq!(map.replicas_read(), 1);
        let readers: Vec<&[u8]> = map.readers().collect();
        assert_eq!(readers, [&b"10.1.0.3:7000"[..], b"10.0.0.2:7000"]);
        // Without a zone, or with another one, the primaries are read.
        for other in [zone(&[]), zone(&["10.9.0.0/16"])] {
            let map = SlotMap::from_shards(&reply, &other).unwrap();
            assert_eq!(map.reader(0), Some((&b"10.0.0.1:7000"[..], false)));
            assert_eq!(map.replicas_read(), 0);
        }
        // A replica that moves or goes is a change of the map.
        let elsewhere = SlotMap::from_shards(&reply, &zone(&["10.2.0.0/16"])).unwrap();
        assert!(elsewhere != map);
        assert_eq!(elsewhere.reader(5), Some((&b"10.2.0.5:7000"[..], true)));
    }

    #[test]
    fn slots_reply_lists_replicas_after_the_primary() {
        let node = |ip: &str| Frame::Array(vec![b(ip), Frame::Integer(7000), b("id")]);
        let reply = Frame::Array(vec![Frame::Array(vec![
            Frame::Integer(0),
            Frame::Integer(16383),
            node("10.0.0.1"),
            node("10.1.0.7"),
        ])]);
        let map = SlotMap::from_slots(&reply, &zone(&["10.1.0.7"])).unwrap();
        assert_eq!(map.reader(16383), Some((&b"10.1.0.7:7000"[..], true)));
        // A -MOVED to a node the map does not know: read from that primary until the next map.
        let mut moved = map.clone();
        moved.moved(3, b"10.0.0.9:7000");
        assert_eq!(moved.reader(3), Some((&b"10.0.0.9:7000"[..], false)));
        assert_eq!(moved.reader(4), Some((&b"10.1.0.7:7000"[..], true)));
    }

    #[test]
    fn moved_and_ask_are_read_other_errors_are_failures() {
        assert_eq!(
            redirect(b"MOVED 3999 127.0.0.1:6381"),
            Some(Redirect::Moved {
                slot: 3999,
                node: b"127.0.0.1:6381".to_vec()
            })
        );
        assert_eq!(
            redirect(b"ASK 1 [::1]:7000"),
            Some(Redirect::Ask {
                slot: 1,
                node: b"[::1]:7000".to_vec()
            })
        );
        for other in [
            &b"TRYAGAIN Multiple keys request during rehashing of slot"[..],
            b"CLUSTERDOWN The cluster is down",
            b"MOVED 16384 127.0.0.1:1",
            b"MOVED 1 redis.example:6379",
            b"MOVED 1 :6379",
        ] {
            assert_eq!(redirect(other), None, "{}", String::from_utf8_lossy(other));
        }
        let mut map = SlotMap::empty();
        map.moved(7, b"127.0.0.1:1");
        assert_eq!(map.owner(7), Some(&b"127.0.0.1:1"[..]));
    }
}
