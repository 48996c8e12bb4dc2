//! Redirect edges reading their own Redis replica while the sidecar writes to the primary.

use std::time::{Duration, Instant};

use serde_json::json;
use shortlink_e2e::{http_client, Nginx, NginxOptions, System};
use testkit::{free_port, temp_dir, wait_until, Lifeline, Signal};

/// A `redis-server --replicaof` the primary, in sync when returned.
struct Replica {
    port: u16,
    process: Lifeline,
    _dir: tempfile::TempDir,
}

impl Replica {
    fn start(primary_port: u16) -> Self {
        let dir = temp_dir();
        let port = free_port();
        let process = Lifeline::builder("redis-server", dir.path().join("redis.log"))
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .args(["--replicaof", "127.0.0.1", &primary_port.to_string()])
            .arg("--dir")
            .arg(dir.path())
            .spawn();
        let replica = Replica {
            port,
            process,
            _dir: dir,
        };
        // Before the link is up a replica holds nothing and reports nothing.
        assert!(
            wait_until(Duration::from_secs(10), || replica
                .info()
                .contains("master_link_status:up")),
            "the replica did not sync; log:\n{}",
            replica.process.log_text()
        );
        replica
    }

    fn info(&self) -> String {
        let output = std::process::Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["INFO", "replication"])
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// The project's templates with `shortlink_miss_fallback on` in the redirect location.
fn replica_conf(dir: &std::path::Path) {
    shortlink_e2e::templates_with(
        dir,
        "shortlink_fallback @FALLBACK@;",
        "shortlink_miss_fallback on;",
    );
}

fn answer(port: u16, code: &str) -> (u16, String) {
    let response = http_client()
        .get(format!("http://127.0.0.1:{port}/{code}"))
        .header("Host", "s1.test")
        .send()
        .expect("redirect request");
    shortlink_e2e::status_and_location(&response)
}

#[test]
fn two_edges_on_replicas_follow_the_primary_and_survive_a_frozen_replica() {
    let primary = testkit::RedisServer::start();
    let replicas = [
        Replica::start(primary.port()),
        Replica::start(primary.port()),
    ];
    let conf = temp_dir();
    replica_conf(conf.path());
    let options = |replica: &Replica| NginxOptions {
        cache: "size=1000 ttl=1h negative_ttl=1s",
        workers: 2,
        redis_addr: Some(replica.addr()),
        conf_dir: Some(conf.path().to_owned()),
        ..NginxOptions::default()
    };
    let system = System::start_on(primary, options(&replicas[0]));
    let edge2_dir = temp_dir();
    let edge2 = Nginx::start(
        &edge2_dir,
        &system.redis.addr(),
        system.sidecar.port,
        &system.resolve_key,
        options(&replicas[1]),
    );
    let edges = [system.nginx.redirect_port, edge2.redirect_port];

    // Created on the primary, redirected at once on both edges: straight from the replica or,
    // when replication has not brought it yet, through the fallback. Never a 404.
    let mut links = Vec::new();
    for i in 0..30 {
        let target = format!("https://example.com/r{i}");
        let code = system.create(json!({"url": target}));
        for port in edges {
            assert_eq!(answer(port, &code), (302, target.clone()), "edge {port}");
        }
        links.push((code, target));
    }
    for _ in 0..3 {
        for (code, target) in &links {
            for port in edges {
                assert_eq!(answer(port, code), (302, target.clone()));
            }
        }
    }
    assert!(system.nginx.counters()["cache_hits"] > 0);
    assert!(edge2.counters()["cache_hits"] > 0);

    // A change on the primary reaches both edges' caches through their replicas.
    let (code, _) = &links[0];
    let (status, body) = system.api().patch(
        &format!("/links/{code}"),
        &json!({"url": "https://example.com/changed"}),
    );
    assert_eq!(status, 200, "patch: {body}");
    let changed = Instant::now();
    for port in edges {
        assert!(
            wait_until(Duration::from_secs(2), || answer(port, code)
                == (302, "https://example.com/changed".to_owned())),
            "edge {port} kept the old target"
        );
    }
    assert!(
        changed.elapsed() < Duration::from_millis(500),
        "the change took {:?} to reach both edges",
        changed.elapsed()
    );

    // The second edge's replica freezes: that edge answers every link through its fallback
    // (or its cache while that is still trusted), never with an error or a wrong target.
    replicas[1].process.signal(Signal::Stop);
    let fallbacks = edge2.counters()["fallbacks"];
    for i in 0..10 {
        let target = format!("https://example.com/frozen{i}");
        let code = system.create(json!({"url": target}));
        assert_eq!(answer(edges[1], &code), (302, target.clone()));
        links.push((code, target));
    }
    for (code, target) in &links[1..] {
        assert_eq!(answer(edges[1], code), (302, target.clone()));
        assert_eq!(answer(edges[0], code), (302, target.clone()));
    }
    assert!(edge2.counters()["fallbacks"] >= fallbacks + 10);
    replicas[1].process.signal(Signal::Cont);
}
