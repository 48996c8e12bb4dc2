//! Redis Cluster support for the tests: a pipelined writer that routes each key to the primary
//! serving its slot, and nginx with the module pointed at a cluster (`shortlink_redis_cluster`),
//! with a fallback location of the test's own that answers [`FALLBACK_STATUS`].

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use shortlink_wire::cluster::key_slot;
use shortlink_wire::resp::{self, Frame};
use testkit::{free_port, port_open, temp_dir, wait_until, Lifeline, RedisCluster};

use crate::{nginx_conf, paths};

/// What the fallback location answers: distinct from anything the module says itself.
pub const FALLBACK_STATUS: u16 = 299;

/// The value of a live 302 link to `target` (record version 1, docs/ARCHITECTURE.md).
pub fn record(target: &str) -> String {
    let value = format!("1|L|302|0|0|{target}");
    assert!(shortlink_wire::record::decode(value.as_bytes()).is_ok());
    value
}

/// One connection to one node, for pipelines.
pub struct NodeConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl NodeConn {
    pub fn open(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set a read timeout");
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends every command at once, then reads one reply per command.
    pub fn pipeline(&mut self, commands: &[Vec<Vec<u8>>]) -> Vec<Frame> {
        let mut out = Vec::new();
        for command in commands {
            let parts: Vec<[&[u8]; 1]> = command.iter().map(|a| [a.as_slice()]).collect();
            let args: Vec<&[&[u8]]> = parts.iter().map(|p| p.as_slice()).collect();
            resp::encode_command(&mut out, &args);
        }
        self.stream.write_all(&out).expect("write to the node");
        (0..commands.len()).map(|_| self.read()).collect()
    }

    fn read(&mut self) -> Frame {
        loop {
            if let Some((frame, used)) = resp::parse(&self.buf).expect("RESP from the node") {
                self.buf.drain(..used);
                return frame;
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk).expect("read from the node");
            assert!(n > 0, "the node closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Which primary (`host:port`) serves each slot, from `CLUSTER SLOTS`.
pub fn slot_owners(any_node: &str) -> Vec<String> {
    let reply = NodeConn::open(any_node).pipeline(&[vec![b"CLUSTER".to_vec(), b"SLOTS".to_vec()]]);
    let mut owners = vec![String::new(); 16384];
    let Some(Frame::Array(ranges)) = reply.into_iter().next() else {
        panic!("CLUSTER SLOTS answered no array");
    };
    for range in ranges {
        let Frame::Array(items) = range else {
            panic!("a slot range that is no array")
        };
        let (Frame::Integer(start), Frame::Integer(end), Frame::Array(primary)) =
            (&items[0], &items[1], &items[2])
        else {
            panic!("unexpected slot range {items:?}");
        };
        let (Frame::Bulk(ip), Frame::Integer(port)) = (&primary[0], &primary[1]) else {
            panic!("unexpected node {primary:?}");
        };
        let addr = format!("{}:{port}", String::from_utf8_lossy(ip));
        for slot in *start..=*end {
            owners[slot as usize] = addr.clone();
        }
    }
    owners
}

/// `SET`s every pair on the primary serving its key's slot, one pipeline per primary, then waits
/// until each primary's replicas have them (so a failover loses none).
pub fn set_all(cluster: &RedisCluster, pairs: &[(String, String)]) {
    let any = cluster.nodes()[cluster.primaries()[0]].addr();
    let owners = slot_owners(&any);
    let mut by_node: HashMap<&str, Vec<Vec<Vec<u8>>>> = HashMap::new();
    for (key, value) in pairs {
        let owner = &owners[usize::from(key_slot(key.as_bytes()))];
        by_node.entry(owner).or_default().push(vec![
            b"SET".to_vec(),
            key.as_bytes().to_vec(),
            value.as_bytes().to_vec(),
        ]);
    }
    for (node, mut commands) in by_node {
        commands.push(vec![b"WAIT".to_vec(), b"1".to_vec(), b"5000".to_vec()]);
        let replies = NodeConn::open(node).pipeline(&commands);
        let (wait, sets) = replies.split_last().expect("replies");
        for reply in sets {
            assert_eq!(reply, &Frame::Simple(b"OK".to_vec()), "SET on {node}");
        }
        assert!(
            matches!(wait, Frame::Integer(n) if *n >= 1),
            "the replicas of {node} did not acknowledge: {wait:?}"
        );
    }
}

/// nginx with the module against a cluster, on a private prefix; stopped on drop.
pub struct ClusterNginx {
    pub port: u16,
    pub prefix: PathBuf,
    _process: Lifeline,
    _dir: tempfile::TempDir,
}

impl ClusterNginx {
    /// `workers` workers, `cache` the `shortlink_cache` arguments. Codes are 6 characters with
    /// no check character; a failure goes to a location answering [`FALLBACK_STATUS`]; every
    /// redirect makes a visit event.
    pub fn start(cluster: &RedisCluster, workers: u32, cache: &str) -> Self {
        Self::start_with(cluster, workers, cache, "")
    }

    /// [`Self::start`] with more `shortlink_redis_cluster` parameters (`read_replicas=...`).
    pub fn start_with(cluster: &RedisCluster, workers: u32, cache: &str, params: &str) -> Self {
        let dir = temp_dir();
        let prefix = dir.path().join("nginx");
        std::fs::create_dir_all(prefix.join("tmp")).expect("create the nginx prefix");
        let module = prefix.join("ngx_shortlink.so");
        std::fs::copy(paths::module_so(), &module).expect("copy the module");
        let port = free_port();
        let seeds = cluster.seeds().replace(',', " ");
        let conf = format!(
            r#"{head}    shortlink_redis_cluster {seeds} connect_timeout=200ms read_timeout=1s {params};
    shortlink_timeout 1s;
    shortlink_code_check off;
    shortlink_code_length 6;
    shortlink_cache {cache};
    server {{
        listen 127.0.0.1:{port};
        location / {{
            shortlink on;
            shortlink_fallback @fallback;
            shortlink_track on;
        }}
        location @fallback {{
            return {FALLBACK_STATUS};
        }}
        location = /shortlink_status {{
            shortlink_status;
        }}
    }}
}}
"#,
            head = nginx_conf::conf_head(&module, &prefix, workers, 1024),
        );
        std::fs::write(prefix.join("nginx.conf"), conf).expect("write nginx.conf");
        let process = nginx_conf::spawn_foreground(&paths::nginx_bin(), &prefix);
        let nginx = Self {
            port,
            prefix,
            _process: process,
            _dir: dir,
        };
        assert!(
            wait_until(Duration::from_secs(10), || port_open(port)),
            "nginx did not start; error log:\n{}",
            nginx.error_log()
        );
        nginx
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("error.log")).unwrap_or_default()
    }

    /// Fails the test if a worker died (a crash in the module shows only in the error log: the
    /// master starts another worker).
    pub fn assert_no_crash(&self) {
        let log = self.error_log();
        assert!(
            !log.contains("exited on signal"),
            "a worker crashed:\n{log}"
        );
    }

    /// The module's counters (`/shortlink_status`).
    pub fn counters(&self) -> HashMap<String, u64> {
        let body = crate::http_client()
            .get(format!("http://127.0.0.1:{}/shortlink_status", self.port))
            .send()
            .and_then(|r| r.text())
            .expect("status page");
        crate::nginx::parse_counters(&body)
    }
}

/// The whole system on a cluster: the sidecar with `--redis-cluster`, nginx with
/// `shortlink_redis_cluster` (the project's templates otherwise), a fresh SQLite database.
pub struct ClusterSystem {
    pub sidecar: crate::Sidecar,
    pub nginx: crate::Nginx,
    pub dir: tempfile::TempDir,
}

impl ClusterSystem {
    /// Returns once the sidecar has marked the slots (a sample of them) as projected.
    pub fn start(cluster: &RedisCluster, options: crate::NginxOptions) -> Self {
        Self::start_with(cluster, options, &[])
    }

    /// [`Self::start`] with more sidecar flags.
    pub fn start_with(
        cluster: &RedisCluster,
        options: crate::NginxOptions,
        sidecar_args: &[&str],
    ) -> Self {
        let dir = temp_dir();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .expect("make the system's directory private");
        let database = crate::sqlite_in(&dir);
        let seeds = cluster.seeds();
        let first = cluster.urls().into_iter().next().expect("a running node");
        let mut args = vec!["--redis-cluster".to_owned(), seeds.clone()];
        args.extend(sidecar_args.iter().map(|arg| (*arg).to_owned()));
        let sidecar = crate::Sidecar::launch(&dir, &first, &database, 0, args, || {
            markers_present(cluster)
        });
        let resolve_key = crate::create_resolve_key(&database);
        let options = crate::NginxOptions {
            redis_cluster: Some(seeds.replace(',', " ")),
            ..options
        };
        let any = cluster.nodes()[cluster.primaries()[0]].addr();
        let nginx = crate::Nginx::start(&dir, &any, sidecar.port, &resolve_key, options);
        Self {
            sidecar,
            nginx,
            dir,
        }
    }

    /// The REST API through nginx's internal API server.
    pub fn api(&self) -> crate::Api {
        crate::Api::new(
            format!("http://127.0.0.1:{}", self.nginx.api_port),
            crate::API_KEY,
        )
    }
}

/// Whether the per-slot projection markers of every 256th slot are set.
fn markers_present(cluster: &RedisCluster) -> bool {
    let Some(&first) = cluster.primaries().first() else {
        return false;
    };
    let owners = slot_owners(&cluster.nodes()[first].addr());
    (0..16384u16).step_by(256).all(|slot| {
        let key = shortlink_wire::cluster::marker_key(slot);
        let reply = NodeConn::open(&owners[usize::from(slot)])
            .pipeline(&[vec![b"EXISTS".to_vec(), key.into_bytes()]]);
        reply[0] == Frame::Integer(1)
    })
}
