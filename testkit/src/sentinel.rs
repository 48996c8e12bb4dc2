//! Redis Sentinel for tests: a primary, its replicas and the sentinels that watch them, each on
//! a free loopback port, stopped on drop.

use crate::process::{Lifeline, Signal};
use crate::redis::RedisServer;
use crate::{free_port, temp_dir, wait_until};
use std::time::Duration;

/// The service (master) name the sentinels monitor.
pub const SERVICE: &str = "shortlink";

/// One `redis-sentinel` (Debian's package; `redis-server --sentinel` is the same program).
pub struct SentinelServer {
    port: u16,
    dir: tempfile::TempDir,
    process: Option<Lifeline>,
}

/// How quickly the sentinels act: short, so a test's failover takes seconds, not a minute.
#[derive(Debug, Clone, Copy)]
pub struct SentinelTiming {
    /// `down-after-milliseconds`: silence before a sentinel thinks the primary is down.
    pub down_after: Duration,
    /// `failover-timeout`.
    pub failover_timeout: Duration,
}

impl Default for SentinelTiming {
    fn default() -> Self {
        Self {
            down_after: Duration::from_millis(1000),
            failover_timeout: Duration::from_millis(3000),
        }
    }
}

impl SentinelServer {
    /// A sentinel monitoring the primary on `primary_port` as [`SERVICE`], agreeing on a failure
    /// with `quorum` sentinels.
    pub fn start(primary_port: u16, quorum: u32, timing: SentinelTiming) -> Self {
        let port = free_port();
        let dir = temp_dir();
        // Sentinel rewrites its configuration file (what it learnt about replicas, sentinels,
        // epochs), so the file must be its own and writable.
        let conf = dir.path().join("sentinel.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\nloglevel notice\ndir {dir}\n\
             sentinel monitor {SERVICE} 127.0.0.1 {primary_port} {quorum}\n\
             sentinel down-after-milliseconds {SERVICE} {down}\n\
             sentinel failover-timeout {SERVICE} {failover}\n\
             sentinel parallel-syncs {SERVICE} 2\n",
            dir = dir.path().display(),
            down = timing.down_after.as_millis(),
            failover = timing.failover_timeout.as_millis(),
        );
        std::fs::write(&conf, text).expect("write sentinel.conf");
        let process = Lifeline::builder(program(), dir.path().join("sentinel.log"))
            .arg(&conf)
            .arg("--sentinel")
            .spawn();
        let server = SentinelServer {
            port,
            dir,
            process: Some(process),
        };
        assert!(
            wait_until(Duration::from_secs(10), || server.cli(&["PING"]) == "PONG"),
            "redis-sentinel did not answer on port {port}; log:\n{}",
            server.log_text()
        );
        server
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address as `--redis-sentinels` takes it.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log_text(&self) -> String {
        self.process
            .as_ref()
            .map(Lifeline::log_text)
            .unwrap_or_default()
    }

    /// The port of the primary this sentinel names now.
    pub fn primary_port(&self) -> Option<u16> {
        let reply = self.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE]);
        reply.lines().nth(1)?.trim().parse().ok()
    }

    /// How many replicas and other sentinels this sentinel knows of.
    pub fn known(&self) -> (usize, usize) {
        let count = |what: &str| {
            self.cli(&["SENTINEL", what, SERVICE])
                .lines()
                .filter(|line| *line == "name")
                .count()
        };
        (count("REPLICAS"), count("SENTINELS"))
    }

    /// Runs one command through `redis-cli --raw`.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = std::process::Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "--raw"])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Kills the sentinel with SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.signal(Signal::Kill);
            process.stop();
        }
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// `redis-sentinel` where Debian's package is installed, else `redis-server` (with
/// `--sentinel`, the same program).
fn program() -> &'static str {
    let installed = std::process::Command::new("redis-sentinel")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if installed {
        "redis-sentinel"
    } else {
        "redis-server"
    }
}

/// A primary, its replicas and the sentinels watching them (quorum: a majority of them).
pub struct SentinelGroup {
    pub primary: RedisServer,
    pub replicas: Vec<RedisServer>,
    pub sentinels: Vec<SentinelServer>,
}

impl SentinelGroup {
    /// Starts it and returns once every sentinel knows every replica and every other sentinel:
    /// before that, a failover may lack the votes or the candidates.
    pub fn start(replicas: usize, sentinels: usize, timing: SentinelTiming) -> Self {
        let primary = RedisServer::start();
        let replicas: Vec<RedisServer> = (0..replicas)
            .map(|_| RedisServer::start_replica_of(&primary))
            .collect();
        let quorum = u32::try_from(sentinels / 2 + 1).unwrap_or(u32::MAX);
        let sentinels: Vec<SentinelServer> = (0..sentinels)
            .map(|_| SentinelServer::start(primary.port(), quorum, timing))
            .collect();
        let group = SentinelGroup {
            primary,
            replicas,
            sentinels,
        };
        let expected = (group.replicas.len(), group.sentinels.len() - 1);
        // Sentinels find each other through hello messages every 2 s, and replicas from the
        // primary's INFO every 10 s (at once on start).
        let all_known = wait_until(Duration::from_secs(30), || {
            group.sentinels.iter().all(|s| s.known() == expected)
        });
        assert!(
            all_known,
            "the sentinels did not discover each other and the replicas: {:?}; log of the \
             first:\n{}",
            group
                .sentinels
                .iter()
                .map(SentinelServer::known)
                .collect::<Vec<_>>(),
            group.sentinels[0].log_text()
        );
        group
    }

    /// `--redis-sentinels`: every sentinel's address, comma-separated.
    pub fn addresses(&self) -> String {
        self.sentinels
            .iter()
            .map(SentinelServer::addr)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The server that is the primary now, as the sentinels say (the majority of them), among
    /// the replicas started (the first primary is not a candidate once killed).
    pub fn promoted(&self) -> Option<&RedisServer> {
        let mut ports: Vec<u16> = self
            .sentinels
            .iter()
            .filter_map(SentinelServer::primary_port)
            .collect();
        ports.sort_unstable();
        let majority = self.sentinels.len() / 2 + 1;
        let port = ports
            .windows(majority)
            .find(|w| w.first() == w.last())
            .and_then(|w| w.first().copied())?;
        self.replicas
            .iter()
            .find(|r| r.port() == port && r.role() == "master")
    }
}
