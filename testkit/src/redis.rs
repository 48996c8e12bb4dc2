//! A private redis-server per test.

use crate::process::{Lifeline, Signal};
use crate::{free_port, free_ports, temp_dir, wait_until};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A redis-server on a free loopback port, with no persistence, stopped on drop.
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    process: Option<Lifeline>,
    /// The port of the primary this server started as a replica of (`--replicaof`).
    replica_of: Option<u16>,
    /// A Redis Cluster node (`--cluster-enabled yes`): its node timeout in milliseconds and its
    /// cluster bus port (chosen free, not the default port + 10000, which may be taken).
    cluster: Option<(u64, u16)>,
}

impl RedisServer {
    pub fn start() -> Self {
        let mut server = RedisServer {
            port: free_port(),
            dir: temp_dir(),
            process: None,
            replica_of: None,
            cluster: None,
        };
        server.start_fresh();
        server
    }

    /// An empty Redis Cluster node (`--cluster-enabled yes`), not yet part of any cluster: see
    /// [`crate::RedisCluster`], which joins them.
    pub fn start_cluster_node(node_timeout: Duration) -> Self {
        // Drawn together: drawn one by one, the client port and the bus port could be the same
        // port, and the node would then fail to listen on its bus (seen in a cold test run).
        let [port, bus_port] = free_ports();
        let mut server = RedisServer {
            port,
            dir: temp_dir(),
            process: None,
            replica_of: None,
            cluster: Some((node_timeout.as_millis() as u64, bus_port)),
        };
        server.start_fresh();
        server
    }

    /// A replica of `primary` (`--replicaof`), returned once its link to the primary is up and
    /// the initial sync done.
    pub fn start_replica_of(primary: &RedisServer) -> Self {
        let mut server = RedisServer {
            port: free_port(),
            dir: temp_dir(),
            process: None,
            replica_of: Some(primary.port),
            cluster: None,
        };
        server.start_fresh();
        assert!(
            wait_until(Duration::from_secs(10), || server
                .cli_raw(&["INFO", "replication"])
                .contains("master_link_status:up")),
            "the replica on port {} did not sync; log:\n{}",
            server.port,
            server
                .process
                .as_ref()
                .map(Lifeline::log_text)
                .unwrap_or_default()
        );
        server
    }

    /// `ROLE`'s first word: `master` or `slave`.
    pub fn role(&self) -> String {
        self.cli_raw(&["ROLE"])
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster bus port of a cluster node.
    pub fn cluster_bus_port(&self) -> Option<u16> {
        self.cluster.map(|(_, bus_port)| bus_port)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The address as nginx directives take it.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn process(&self) -> Option<&Lifeline> {
        self.process.as_ref()
    }

    /// Stops the server (SIGTERM, data is not persisted).
    pub fn stop(&mut self) {
        self.process.take();
    }

    /// Kills the server with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.signal(Signal::Kill);
            process.stop();
        }
    }

    /// The first start, on ports this server chose: a port that was free when drawn may have
    /// been taken since by another process of a busy machine, so on "Address already in use" the
    /// server draws new ports and starts again (a few times), instead of failing the test.
    fn start_fresh(&mut self) {
        for _ in 0..4 {
            match self.try_start() {
                Ok(()) => return,
                Err(log) if log.contains("Address already in use") => {
                    if let Some((timeout, _)) = self.cluster {
                        let [port, bus_port] = free_ports();
                        self.port = port;
                        self.cluster = Some((timeout, bus_port));
                    } else {
                        self.port = free_port();
                    }
                }
                Err(log) => panic!(
                    "redis-server did not answer PING on port {}; log:\n{log}",
                    self.port
                ),
            }
        }
        self.start_again();
    }

    /// (Re)starts the server on the same port, empty.
    pub fn start_again(&mut self) {
        if let Err(log) = self.try_start() {
            panic!(
                "redis-server did not answer PING on port {}; log:\n{log}",
                self.port
            );
        }
    }

    /// Starts the server; on failure, its log.
    fn try_start(&mut self) -> Result<(), String> {
        assert!(self.process.is_none(), "redis-server is already running");
        let mut builder = Lifeline::builder("redis-server", self.dir.path().join("redis.log"))
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(self.dir.path());
        if let Some(primary) = self.replica_of {
            builder = builder.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        if let Some((timeout, bus_port)) = self.cluster {
            // nodes.conf is the node's identity: kept across a restart in the same directory,
            // so a restarted node rejoins its cluster as itself.
            builder = builder
                .args([
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ])
                .args(["--cluster-node-timeout", &timeout.to_string()])
                .args(["--cluster-port", &bus_port.to_string()]);
        }
        let process = builder.spawn();
        let port = self.port;
        // A server that could not listen exits at once: no need to wait out the deadline.
        let up = wait_until(Duration::from_secs(10), || {
            ping(port) || !process.is_alive()
        });
        if !up || !ping(port) {
            return Err(process.log_text());
        }
        self.process = Some(process);
        Ok(())
    }

    /// Runs one command through `redis-cli` and returns its raw output, trimmed.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = std::process::Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "--no-raw"])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// `SET key value` with a binary value (redis-cli arguments cannot hold every byte, such as
    /// a version 2 link record's).
    pub fn set_bytes(&self, key: &str, value: &[u8]) {
        let mut command = Vec::new();
        for arg in [b"SET".as_slice(), key.as_bytes(), value] {
            command.extend(format!("${}\r\n", arg.len()).into_bytes());
            command.extend_from_slice(arg);
            command.extend_from_slice(b"\r\n");
        }
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to Redis");
        stream
            .write_all(&[b"*3\r\n".as_slice(), &command].concat())
            .expect("send SET");
        let mut reply = [0; 5];
        stream
            .read_exact(&mut reply)
            .expect("read the reply to SET");
        assert_eq!(&reply, b"+OK\r\n", "SET {key}");
    }

    /// Runs one command through `redis-cli --raw` (plain values, no quoting).
    pub fn cli_raw(&self, args: &[&str]) -> String {
        let output = std::process::Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "--raw"])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout)
            .trim_end_matches('\n')
            .to_owned()
    }
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}
