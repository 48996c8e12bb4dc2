//! The module against a real Redis Cluster (3 primaries, 3 replicas) whose records and per-slot
//! projection markers the test writes: routing by slot, the marker per slot, a reshard and a
//! failover under load, and cache invalidation from every primary.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shortlink_e2e::cluster::{record, slot_owners, ClusterNginx, NodeConn, FALLBACK_STATUS};
use shortlink_e2e::cluster_links::{
    answer, assert_all_served, code, load, missing_code, run_load, target, wait_for_agreement,
    Tally, CODES,
};
use shortlink_wire::cluster::{event_stream_keys, key_slot};
use shortlink_wire::event::{self, BATCH_FIELD};
use shortlink_wire::resp::Frame;
use testkit::{wait_until, RedisCluster};

#[test]
fn lookups_follow_the_slots_through_a_reshard() {
    lookups_through_a_reshard("", 0);
}

/// Each shard's replica is read: after the reshard too (a replica follows its primary's slots).
#[test]
fn lookups_on_replicas_follow_the_slots_through_a_reshard() {
    lookups_through_a_reshard(READ_REPLICAS, 3);
}

/// Every node of the test cluster listens on loopback: every replica is in the edge's zone.
const READ_REPLICAS: &str = "read_replicas=127.0.0.0/8";

fn lookups_through_a_reshard(params: &str, replicas_read: u64) {
    let cluster = RedisCluster::start();
    let links = Arc::new(load(&cluster));
    let nginx = ClusterNginx::start_with(&cluster, 2, "off", params);

    assert_all_served(nginx.port, &links);
    for marked in [true, false] {
        let code = missing_code(marked);
        let (status, _) = answer(nginx.port, &code).unwrap();
        let expected = if marked { 404 } else { FALLBACK_STATUS };
        assert_eq!(status, expected, "missing {code}, marked slot: {marked}");
    }

    // Half the slots change hands (a third of them twice over) while redirects run.
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let load = run_load(nginx.port, links.clone(), stop.clone(), tally.clone());
    let primaries = cluster.primaries();
    cluster.reshard(primaries[0], primaries[1], 4096);
    // redis-cli refuses to start a reshard while the nodes disagree about the last one.
    wait_for_agreement(&cluster);
    cluster.reshard(primaries[2], primaries[1], 4096);
    wait_for_agreement(&cluster);
    stop.store(true, Ordering::Relaxed);
    load.into_iter().for_each(|t| t.join().unwrap());

    let (right, fallback) = (
        tally.right.load(Ordering::Relaxed),
        tally.fallback.load(Ordering::Relaxed),
    );
    eprintln!("under reshard: {right} right, {fallback} to the fallback");
    assert_eq!(tally.wrong.load(Ordering::Relaxed), 0, "wrong answers");
    assert_eq!(
        tally.errors.load(Ordering::Relaxed),
        0,
        "failed requests; error log:\n{}",
        nginx.error_log()
    );
    assert!(right > 0);
    assert_all_served(nginx.port, &links);
    let counters = nginx.counters();
    assert!(counters["cluster_redirects"] > 0, "{counters:?}");
    assert_eq!(counters["cluster_primaries"], 3, "{counters:?}");
    assert_eq!(
        counters["cluster_replicas_read"], replicas_read,
        "{counters:?}"
    );
    nginx.assert_no_crash();
}

/// Visit batches keep flowing while the slots of the visit streams move: a node that answers a
/// batch `-ASK` (its stream's keys already moved) or `-MOVED` (the slot moved) did not store it,
/// and the module sends it to the node named; nodes that disagree on the owner (the old one was
/// told first) bounce it until they agree. Every visit made is in a stream, once.
#[test]
fn visit_batches_follow_their_streams_through_a_slot_migration() {
    let cluster = RedisCluster::start();
    let links = Arc::new(load(&cluster));
    let nginx = ClusterNginx::start(&cluster, 2, "off");
    let primaries = cluster.primaries();
    let (from, to) = (
        &cluster.nodes()[primaries[0]],
        &cluster.nodes()[primaries[1]],
    );
    let owners = slot_owners(&from.addr());
    let moving: Vec<u16> = event_stream_keys()
        .iter()
        .map(|key| key_slot(key.as_bytes()))
        .filter(|&slot| owners[usize::from(slot)] == from.addr())
        .collect();
    assert!(!moving.is_empty(), "no visit stream on the first primary");

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let load = run_load(nginx.port, links.clone(), stop.clone(), tally.clone());
    let rerouted_after = |count: u64| {
        wait_until(Duration::from_secs(20), || {
            nginx.counters()["events_rerouted"] > count
        })
    };
    // Keys moved, slots still migrating: the old owner answers `-ASK` for them.
    let (from_id, to_id) = (
        from.cli_raw(&["CLUSTER", "MYID"]),
        to.cli_raw(&["CLUSTER", "MYID"]),
    );
    for &slot in &moving {
        let slot = slot.to_string();
        to.cli_raw(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]);
        from.cli_raw(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]);
        let keys = from.cli_raw(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
        for key in keys.lines().filter(|key| !key.is_empty()) {
            let (host, port) = to
                .addr()
                .rsplit_once(':')
                .map(|(h, p)| (h.to_owned(), p.to_owned()))
                .unwrap();
            let reply = from.cli_raw(&["MIGRATE", &host, &port, key, "0", "5000"]);
            assert_eq!(reply.trim(), "OK", "MIGRATE {key}");
        }
    }
    assert!(
        rerouted_after(0),
        "no batch was redirected while its stream's slot migrated"
    );
    // The old owner is told first: it answers `-MOVED` to the new one, which, still importing,
    // answers `-MOVED` back. Batches bounce until the nodes agree; none is lost meanwhile.
    let failures = nginx.counters()["cluster_failures"];
    for &slot in &moving {
        from.cli_raw(&["CLUSTER", "SETSLOT", &slot.to_string(), "NODE", &to_id]);
    }
    assert!(
        wait_until(Duration::from_secs(20), || {
            nginx.counters()["cluster_failures"] > failures
        }),
        "nothing bounced between the nodes that disagree"
    );
    let bounced = nginx.counters()["events_rerouted"];
    assert!(
        rerouted_after(bounced),
        "no batch was redirected while the nodes disagreed"
    );
    // Every node agrees: the old owner keeps answering `-MOVED` until every worker reads the map.
    let asked = nginx.counters()["events_rerouted"];
    for &slot in &moving {
        let slot = slot.to_string();
        for node in cluster
            .nodes()
            .iter()
            .filter(|node| node.addr() != from.addr())
        {
            node.cli_raw(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
        }
    }
    assert!(
        rerouted_after(asked),
        "no batch was redirected once its stream's slot moved"
    );
    stop.store(true, Ordering::Relaxed);
    load.into_iter().for_each(|t| t.join().unwrap());
    wait_for_agreement(&cluster);

    assert_eq!(tally.wrong.load(Ordering::Relaxed), 0, "wrong answers");
    assert!(
        wait_until(Duration::from_secs(10), || {
            let c = nginx.counters();
            c["events_sent"] == c["events_queued"] && c["events_buffered"] == 0
        }),
        "visits still waiting: {:?}; error log:\n{}",
        nginx.counters(),
        nginx.error_log()
    );
    let counters = nginx.counters();
    let failed_or_dropped = counters["events_failed"] + counters["events_dropped"];
    assert_eq!(
        failed_or_dropped,
        0,
        "{counters:?}; error log:\n{}",
        nginx.error_log()
    );
    let redirects = tally.right.load(Ordering::Relaxed);
    assert_eq!(counters["events_queued"], redirects, "a visit per redirect");
    let owners = slot_owners(&to.addr());
    let stored: u64 = event_stream_keys()
        .iter()
        .map(|key| stream_visits(&owners[usize::from(key_slot(key.as_bytes()))], key))
        .sum();
    assert_eq!(
        stored, redirects,
        "visits in the streams; counters {counters:?}"
    );
    nginx.assert_no_crash();
}

/// The visits stored in `key`'s stream, on its owner.
fn stream_visits(owner: &str, key: &str) -> u64 {
    let reply = NodeConn::open(owner).pipeline(&[vec![
        b"XRANGE".to_vec(),
        key.as_bytes().to_vec(),
        b"-".to_vec(),
        b"+".to_vec(),
    ]]);
    let Frame::Array(entries) = &reply[0] else {
        panic!("XRANGE {key}: {:?}", reply[0]);
    };
    entries
        .iter()
        .map(|entry| match entry {
            Frame::Array(parts) => match parts.get(1) {
                Some(Frame::Array(fields)) => fields
                    .chunks(2)
                    .filter_map(|pair| match pair {
                        [Frame::Bulk(name), Frame::Bulk(batch)]
                            if name.as_slice() == BATCH_FIELD =>
                        {
                            Some(event::decode::visits(batch).filter(Result::is_ok).count() as u64)
                        }
                        _ => None,
                    })
                    .sum::<u64>(),
                other => panic!("entry of {key} without fields: {other:?}"),
            },
            other => panic!("entry of {key}: {other:?}"),
        })
        .sum()
}

#[test]
fn a_killed_primary_is_replaced_without_a_wrong_answer() {
    killed_primary("", 0);
}

/// The killed primary's replica is promoted: its slots are read from it as their primary, the
/// other shards' from their replicas.
#[test]
fn a_killed_primary_is_replaced_without_a_wrong_answer_on_replicas() {
    killed_primary(READ_REPLICAS, 2);
}

fn killed_primary(params: &str, replicas_read_after: u64) {
    let mut cluster = RedisCluster::start();
    let links = Arc::new(load(&cluster));
    let nginx = ClusterNginx::start_with(&cluster, 2, "size=10000 ttl=60s negative_ttl=1s", params);
    assert_all_served(nginx.port, &links);

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let load = run_load(nginx.port, links.clone(), stop.clone(), tally.clone());
    let victim = cluster.owner_of(key_slot(b"sl:c:k00000")).unwrap();
    let started = std::time::Instant::now();
    cluster.kill(victim);
    cluster.wait_ok(Duration::from_secs(30));
    eprintln!("failover done after {:?}", started.elapsed());
    // Served again by the promoted replica, without a restart of nginx.
    assert!(
        wait_until(Duration::from_secs(10), || links.iter().all(
            |(code, target)| answer(nginx.port, code).ok() == Some((302, target.clone()))
        )),
        "codes not all served after the failover; error log:\n{}",
        nginx.error_log()
    );
    eprintln!("all served after {:?}", started.elapsed());
    stop.store(true, Ordering::Relaxed);
    load.into_iter().for_each(|t| t.join().unwrap());
    eprintln!(
        "across the failover: {} right, {} to the fallback",
        tally.right.load(Ordering::Relaxed),
        tally.fallback.load(Ordering::Relaxed)
    );
    assert_eq!(tally.wrong.load(Ordering::Relaxed), 0, "wrong answers");
    assert_eq!(
        tally.errors.load(Ordering::Relaxed),
        0,
        "failed requests; error log:\n{}",
        nginx.error_log()
    );
    assert!(nginx.counters()["cluster_failures"] > 0);
    assert!(
        wait_until(Duration::from_secs(5), || nginx.counters()
            ["cluster_replicas_read"]
            == replicas_read_after),
        "{:?}",
        nginx.counters()
    );
    nginx.assert_no_crash();
}

#[test]
fn a_changed_record_is_seen_by_every_worker_at_once() {
    let cluster = RedisCluster::start();
    let links = load(&cluster);
    // A long TTL: only an invalidation can make the new target appear within the wait below.
    let nginx = ClusterNginx::start(&cluster, 2, "size=10000 ttl=600s negative_ttl=1s");
    let codes: Vec<usize> = (0..CODES).step_by(CODES / 6).collect();
    // Many times over (a connection each), so both workers cache every code.
    for _ in 0..20 {
        for &i in &codes {
            assert_eq!(
                answer(nginx.port, &code(i)).unwrap(),
                (302, links[&code(i)].clone())
            );
        }
    }
    let hits = nginx.counters()["cache_hits"];
    assert!(hits > 0, "the cache was not used");

    let owners = slot_owners(&cluster.nodes()[cluster.primaries()[0]].addr());
    for &i in &codes {
        let key = format!("sl:c:{}", code(i));
        let owner = &owners[usize::from(key_slot(key.as_bytes()))];
        let set = NodeConn::open(owner).pipeline(&[vec![
            b"SET".to_vec(),
            key.into_bytes(),
            record(&target(i, 2)).into_bytes(),
        ]]);
        assert_eq!(set[0], Frame::Simple(b"OK".to_vec()));
    }
    assert!(
        wait_until(Duration::from_secs(3), || (0..20).all(|_| codes
            .iter()
            .all(
                |&i| answer(nginx.port, &code(i)).ok() == Some((302, target(i, 2)))
            ))),
        "an old target was still served"
    );
    assert!(nginx.counters()["cache_hits"] > hits);

    // Every redirect made a visit event; the batches went to the cluster's streams, spread over
    // them, each on the primary serving the stream's slot.
    let counters = nginx.counters();
    assert!(
        wait_until(Duration::from_secs(5), || {
            let c = nginx.counters();
            c["events_sent"] == c["events_queued"]
        }),
        "{counters:?}"
    );
    assert_eq!(nginx.counters()["events_failed"], 0);
    let owners = slot_owners(&cluster.nodes()[cluster.primaries()[0]].addr());
    let entries: Vec<i64> = event_stream_keys()
        .iter()
        .map(|key| {
            let owner = &owners[usize::from(key_slot(key.as_bytes()))];
            let reply =
                NodeConn::open(owner).pipeline(&[vec![b"XLEN".to_vec(), key.as_bytes().to_vec()]]);
            match reply[0] {
                Frame::Integer(n) => n,
                ref other => panic!("XLEN {key}: {other:?}"),
            }
        })
        .collect();
    assert!(
        entries.iter().filter(|&&n| n > 0).count() >= 2,
        "visit batches not spread over the streams: {entries:?}"
    );
    nginx.assert_no_crash();
}

#[test]
fn nginx_refuses_one_redis_and_a_cluster_together() {
    let dir = testkit::temp_dir();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "load_module {};\nevents {{}}\nhttp {{\n    shortlink_redis 127.0.0.1:6379;\n    \
             shortlink_redis_cluster 127.0.0.1:7000 127.0.0.1:7001;\n}}\n",
            shortlink_e2e::paths::module_so().display()
        ),
    )
    .unwrap();
    let output = std::process::Command::new(shortlink_e2e::paths::nginx_bin())
        .arg("-t")
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(&conf)
        .output()
        .expect("run nginx -t");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("\"shortlink_redis_cluster\" is exclusive with \"shortlink_redis\""),
        "{stderr}"
    );
}
