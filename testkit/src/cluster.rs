//! A real Redis Cluster for tests: N primaries with M replicas each, every node on a free
//! loopback port, joined by `redis-cli --cluster create`, stopped on drop.

use crate::redis::RedisServer;
use crate::wait_until;
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The cluster's nodes, in the order they were started (the first `primaries` were created as
/// primaries; roles change after a failover: ask [`RedisCluster::primaries`]).
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// The ports of killed nodes, held until the cluster is dropped: the live nodes keep calling
    /// a dead node's address, and a node of another test's cluster started on that port would
    /// answer, and the two clusters would learn each other's nodes by gossip.
    reserved: Option<Reserved>,
}

/// Listeners on the ports of killed nodes. By default they close every connection at once, as a
/// dead port refuses it; a blackholed node's ([`RedisCluster::blackhole`]) keep every connection
/// open and never answer, as a machine that vanished from the network does.
struct Reserved {
    stop: Arc<AtomicBool>,
    closer: Option<JoinHandle<()>>,
    listeners: Arc<Mutex<Vec<(TcpListener, Dead)>>>,
}

/// How a held port treats the connections it accepts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dead {
    Refusing,
    Blackholed,
}

impl Reserved {
    fn new() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let listeners: Arc<Mutex<Vec<(TcpListener, Dead)>>> = Arc::default();
        let closer = std::thread::spawn({
            let (stop, listeners) = (Arc::clone(&stop), Arc::clone(&listeners));
            move || {
                let mut swallowed = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for (listener, dead) in
                        listeners.lock().unwrap_or_else(|p| p.into_inner()).iter()
                    {
                        while let Ok((stream, _)) = listener.accept() {
                            if *dead == Dead::Blackholed {
                                swallowed.push(stream);
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        Self {
            stop,
            closer: Some(closer),
            listeners,
        }
    }

    fn hold(&self, port: u16, dead: Dead) {
        // Bound right after the process died, before another test asks for a free port; if one
        // got there first, nothing can be done about it here.
        let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) else {
            return;
        };
        if listener.set_nonblocking(true).is_ok() {
            self.listeners
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((listener, dead));
        }
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(closer) = self.closer.take() {
            let _ = closer.join();
        }
    }
}

impl RedisCluster {
    /// The topology: three primaries, one replica each.
    pub fn start() -> Self {
        Self::start_with(3, 1, Duration::from_millis(2000))
    }

    /// `primaries` primaries with `replicas` replicas each, `node_timeout` before a silent
    /// primary is failed over. Returns once every node sees every slot served
    /// (`cluster_state:ok`) and every replica has synced.
    pub fn start_with(primaries: usize, replicas: usize, node_timeout: Duration) -> Self {
        assert!(
            primaries >= 3,
            "redis-cli --cluster create needs 3 primaries"
        );
        let nodes: Vec<RedisServer> = (0..primaries * (1 + replicas))
            .map(|_| RedisServer::start_cluster_node(node_timeout))
            .collect();
        let cluster = RedisCluster {
            nodes,
            reserved: None,
        };
        let mut args = vec!["--cluster".to_owned(), "create".to_owned()];
        args.extend(cluster.nodes.iter().map(RedisServer::addr));
        args.extend([
            "--cluster-replicas".to_owned(),
            replicas.to_string(),
            "--cluster-yes".to_owned(),
        ]);
        let created = redis_cli(&args);
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&created.stdout),
            String::from_utf8_lossy(&created.stderr)
        );
        cluster.wait_ok(Duration::from_secs(30));
        let synced = wait_until(Duration::from_secs(30), || {
            cluster
                .nodes
                .iter()
                .filter(|node| node.role() == "slave")
                .all(|node| {
                    node.cli_raw(&["INFO", "replication"])
                        .contains("master_link_status:up")
                })
        });
        assert!(synced, "the cluster's replicas did not sync");
        cluster
    }

    /// Every node, in start order (killed ones included).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The indexes (in [`RedisCluster::nodes`]) of the running nodes that are primaries now.
    pub fn primaries(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].process().is_some() && self.nodes[i].role() == "master")
            .collect()
    }

    /// The index (in [`RedisCluster::nodes`]) of the running primary that owns `slot`.
    pub fn owner_of(&self, slot: u16) -> Option<usize> {
        self.nodes.iter().position(|node| {
            node.process().is_some() && node.role() == "master" && owns(node, slot)
        })
    }

    /// Seed addresses, `host:port` comma-separated, for clients that discover the rest.
    pub fn seeds(&self) -> String {
        self.running()
            .map(RedisServer::addr)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Seed URLs (`redis://host:port`) of the running nodes.
    pub fn urls(&self) -> Vec<String> {
        self.running().map(RedisServer::url).collect()
    }

    /// Kills node `index` with SIGKILL, as a crash would. Its ports stay reserved (see
    /// `reserved`) while this cluster lives.
    pub fn kill(&mut self, index: usize) {
        self.take_down(index, Dead::Refusing);
    }

    /// Kills node `index` and leaves its address swallowing connections: accepted, never
    /// answered, never closed (a host gone from the network, a partition), while this cluster
    /// lives. Clients learn of it only by their own timeouts.
    pub fn blackhole(&mut self, index: usize) {
        self.take_down(index, Dead::Blackholed);
    }

    fn take_down(&mut self, index: usize, dead: Dead) {
        let node = &mut self.nodes[index];
        node.kill();
        let ports = [Some(node.port()), node.cluster_bus_port()];
        let reserved = self.reserved.get_or_insert_with(Reserved::new);
        for port in ports.into_iter().flatten() {
            reserved.hold(port, dead);
        }
    }

    /// Waits until every running node reports `cluster_state:ok` and agrees on who serves every
    /// slot (after a failover, a reshard, a restart).
    pub fn wait_ok(&self, timeout: Duration) {
        let running: Vec<u16> = self.running().map(RedisServer::port).collect();
        let ok = wait_until(timeout, || {
            let states: Vec<String> = self
                .running()
                .map(|node| node.cli_raw(&["CLUSTER", "INFO"]))
                .collect();
            states.iter().all(|info| info.contains("cluster_state:ok"))
                && self
                    .running()
                    .all(|node| slots_on_running_nodes(node, &running))
        });
        assert!(
            ok,
            "the cluster did not reach cluster_state:ok: {:?}",
            self.running()
                .map(|node| node.cli_raw(&["CLUSTER", "INFO"]))
                .collect::<Vec<_>>()
        );
    }

    /// Moves `slots` slots from the primary `from` to the primary `to` (indexes in
    /// [`RedisCluster::nodes`]) with `redis-cli --cluster reshard`, keys included, and returns
    /// once it is done. Run it on a thread to reshard under load.
    pub fn reshard(&self, from: usize, to: usize, slots: u16) {
        let from_id = node_id(&self.nodes[from]);
        let to_id = node_id(&self.nodes[to]);
        let args = [
            "--cluster".to_owned(),
            "reshard".to_owned(),
            self.nodes[to].addr(),
            "--cluster-from".to_owned(),
            from_id,
            "--cluster-to".to_owned(),
            to_id,
            "--cluster-slots".to_owned(),
            slots.to_string(),
            "--cluster-yes".to_owned(),
            "--cluster-pipeline".to_owned(),
            "100".to_owned(),
        ];
        let output = redis_cli(&args);
        assert!(
            output.status.success(),
            "redis-cli --cluster reshard failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// `CLUSTER KEYSLOT key`, as the cluster computes it.
    pub fn keyslot(&self, key: &str) -> u16 {
        self.any()
            .cli_raw(&["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("CLUSTER KEYSLOT answers a number")
    }

    fn running(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|node| node.process().is_some())
    }

    fn any(&self) -> &RedisServer {
        self.running().next().expect("a running cluster node")
    }
}

/// Whether every slot `node` knows of is assigned to a running node: a killed primary keeps
/// its slots until a replica is promoted in its place.
fn slots_on_running_nodes(node: &RedisServer, running: &[u16]) -> bool {
    node.cli_raw(&["CLUSTER", "NODES"]).lines().all(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // <id> <ip:port@cport[,hostname]> <flags> <primary> <ping> <pong> <epoch> <link> <slot>...
        let port = fields
            .get(1)
            .and_then(|addr| addr.split('@').next())
            .and_then(|addr| addr.rsplit(':').next())
            .and_then(|port| port.parse::<u16>().ok());
        fields.len() <= 8 || port.is_some_and(|port| running.contains(&port))
    })
}

/// Whether `node` serves `slot`, from its own `CLUSTER NODES` line (`myself`).
fn owns(node: &RedisServer, slot: u16) -> bool {
    let nodes = node.cli_raw(&["CLUSTER", "NODES"]);
    let Some(line) = nodes.lines().find(|line| line.contains("myself")) else {
        return false;
    };
    line.split_whitespace().skip(8).any(|range| {
        let mut bounds = range.split('-');
        let start = bounds.next().and_then(|b| b.parse::<u16>().ok());
        let end = bounds.next().and_then(|b| b.parse::<u16>().ok()).or(start);
        matches!((start, end), (Some(start), Some(end)) if (start..=end).contains(&slot))
    })
}

fn node_id(node: &RedisServer) -> String {
    node.cli_raw(&["CLUSTER", "MYID"])
}

fn redis_cli(args: &[String]) -> Output {
    Command::new("redis-cli")
        .args(args)
        .output()
        .expect("run redis-cli")
}
