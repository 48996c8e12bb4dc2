//! Edges that read the cluster's replicas (`read_replicas=`), on the real 3 + 3 test cluster:
//! lookups leave the primaries, a record a replica lacks is asked of its primary, a change
//! reaches the cache through the replica read, and a frozen replica is never read stale for long.

use std::collections::HashMap;
use std::time::Duration;

use shortlink_e2e::cluster::{record, slot_owners, ClusterNginx, NodeConn, FALLBACK_STATUS};
use shortlink_e2e::cluster_links::{
    answer, assert_all_served, code, load, missing_code, target, CODES,
};
use shortlink_wire::cluster::key_slot;
use shortlink_wire::record::TOMBSTONE;
use shortlink_wire::resp::Frame;
use testkit::{wait_until, RedisCluster, Signal};

/// Every node of the test cluster listens on loopback: every replica is in the edge's zone.
const READ_REPLICAS: &str = "read_replicas=127.0.0.0/8";

/// Long enough that only an invalidation can change a cached answer within a test.
const CACHE: &str = "size=10000 ttl=600s negative_ttl=600s";

/// Codes spread over the slots, one in six of the loaded ones.
fn sample() -> Vec<usize> {
    (0..CODES).step_by(500).collect()
}

/// The primary (`host:port`) serving each slot, read once: asking later could ask a frozen node.
fn owners(cluster: &RedisCluster) -> Vec<String> {
    slot_owners(&cluster.nodes()[cluster.primaries()[0]].addr())
}

fn owner_of(owners: &[String], code: &str) -> String {
    owners[usize::from(key_slot(format!("sl:c:{code}").as_bytes()))].clone()
}

/// The index of the replica of the primary at `primary` (`host:port`).
fn replica_of(cluster: &RedisCluster, primary: &str) -> usize {
    let port = primary.rsplit_once(':').expect("host:port").1;
    (0..cluster.nodes().len())
        .find(|&i| {
            let node = &cluster.nodes()[i];
            node.process().is_some()
                && node.role() == "slave"
                && node
                    .cli_raw(&["INFO", "replication"])
                    .contains(&format!("master_port:{port}\r"))
        })
        .unwrap_or_else(|| panic!("no replica of {primary}"))
}

/// `MGET` calls each running node served since its statistics were last reset, by role.
fn mget_calls(cluster: &RedisCluster) -> HashMap<&'static str, Vec<u64>> {
    let mut calls: HashMap<&'static str, Vec<u64>> = HashMap::new();
    for node in cluster.nodes().iter().filter(|n| n.process().is_some()) {
        let stats = node.cli_raw(&["INFO", "commandstats"]);
        let n = stats
            .lines()
            .find_map(|line| line.strip_prefix("cmdstat_mget:calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse().expect("a call count"));
        let role = if node.role() == "master" {
            "primary"
        } else {
            "replica"
        };
        calls.entry(role).or_default().push(n);
    }
    calls
}

fn reset_stats(cluster: &RedisCluster) {
    for node in cluster.nodes().iter().filter(|n| n.process().is_some()) {
        assert_eq!(node.cli_raw(&["CONFIG", "RESETSTAT"]), "OK");
    }
}

/// `SET`s `code`'s record to `value` on `owner`, its primary.
fn set_record(owner: &str, code: &str, value: &str) {
    let reply = NodeConn::open(owner).pipeline(&[vec![
        b"SET".to_vec(),
        format!("sl:c:{code}").into_bytes(),
        value.as_bytes().to_vec(),
    ]]);
    assert_eq!(reply[0], Frame::Simple(b"OK".to_vec()));
}

/// Twenty answers for code `i`, each on a connection of its own (so both workers answer).
fn answers(port: u16, i: usize) -> Vec<(u16, String)> {
    (0..20)
        .map(|_| answer(port, &code(i)).expect("an answer"))
        .collect()
}

/// Whether every one of [`answers`] is `expected`.
fn always_answers(port: u16, i: usize, expected: &(u16, String)) -> bool {
    answers(port, i).iter().all(|a| a == expected)
}

#[test]
fn lookups_read_the_replicas_and_a_miss_there_asks_the_primary() {
    let cluster = RedisCluster::start();
    let links = load(&cluster);
    let nginx = ClusterNginx::start_with(&cluster, 2, "off", READ_REPLICAS);
    // A replica whose sync the seed has not heard of yet (offset still 0) is `loading`, not read:
    // within a map read or two every lookup reads a replica, and none a primary.
    let on_replicas = wait_until(Duration::from_secs(20), || {
        reset_stats(&cluster);
        assert_all_served(nginx.port, &links);
        let calls = mget_calls(&cluster);
        calls["primary"].iter().sum::<u64>() == 0 && calls["replica"].iter().all(|&n| n > 0)
    });
    assert!(
        on_replicas,
        "lookups read primaries: {:?}",
        mget_calls(&cluster)
    );
    assert_eq!(nginx.counters()["cluster_replicas_read"], 3);

    // A link its replica does not have yet: the replica's replication is cut (it can no longer
    // authenticate to its primary), then the link is written to the primary.
    let owners = owners(&cluster);
    let primary = owner_of(&owners, &code(7));
    let replica = &cluster.nodes()[replica_of(&cluster, &primary)];
    assert_eq!(
        replica.cli_raw(&["CONFIG", "SET", "masterauth", "not-the-password"]),
        "OK"
    );
    replica.cli_raw(&["CLIENT", "KILL", "TYPE", "master"]);
    let fresh = (0..)
        .map(|j| format!("n{j:05}"))
        .find(|c| owner_of(&owners, c) == primary)
        .unwrap();
    set_record(&primary, &fresh, &record("https://example.com/fresh"));
    let on_replica = NodeConn::open(&replica.addr()).pipeline(&[
        vec![b"READONLY".to_vec()],
        vec![b"GET".to_vec(), format!("sl:c:{fresh}").into_bytes()],
    ]);
    assert_eq!(on_replica[1], Frame::Null, "the replica got {fresh} anyway");

    reset_stats(&cluster);
    assert_eq!(
        answer(nginx.port, &fresh).unwrap(),
        (302, "https://example.com/fresh".to_owned())
    );
    let calls = mget_calls(&cluster);
    assert_eq!(calls["primary"].iter().sum::<u64>(), 1, "{calls:?}");
    assert_eq!(calls["replica"].iter().sum::<u64>(), 1, "{calls:?}");

    // A code no link has: a 404, the primary's word, not the fallback's.
    let missing = missing_code(true);
    assert_eq!(answer(nginx.port, &missing).unwrap().0, 404);
    let counters = nginx.counters();
    assert_eq!(counters["fallbacks"], 0, "{counters:?}");
    assert_eq!(counters["not_found"], 1, "{counters:?}");
    nginx.assert_no_crash();
}

#[test]
fn changes_reach_the_cache_through_the_replicas_read() {
    let cluster = RedisCluster::start();
    let links = load(&cluster);
    let nginx = ClusterNginx::start_with(&cluster, 2, CACHE, READ_REPLICAS);
    assert_all_served(nginx.port, &links);
    for &i in &sample() {
        assert!(always_answers(nginx.port, i, &(302, target(i, 1))));
    }
    assert!(nginx.counters()["cache_hits"] > 0);

    // Half the sample changes target, half is revoked, on the primaries: the replicas' reports
    // evict the cached answers (the cache would keep them 600 s).
    let owners = owners(&cluster);
    let changed: Vec<(usize, (u16, String))> = sample()
        .into_iter()
        .enumerate()
        .map(|(n, i)| {
            let owner = owner_of(&owners, &code(i));
            if n % 2 == 0 {
                set_record(&owner, &code(i), &record(&target(i, 2)));
                (i, (302, target(i, 2)))
            } else {
                set_record(&owner, &code(i), TOMBSTONE);
                (i, (410, String::new()))
            }
        })
        .collect();
    for (i, expected) in &changed {
        let settled = wait_until(Duration::from_secs(2), || {
            always_answers(nginx.port, *i, expected)
        });
        assert!(
            settled,
            "code {} still answered {:?}, expected {expected:?}",
            code(*i),
            answers(nginx.port, *i)
        );
    }
    let counters = nginx.counters();
    assert_eq!(counters["cluster_replicas_read"], 3, "{counters:?}");
    assert_eq!(counters["fallbacks"], 0, "{counters:?}");
    nginx.assert_no_crash();
}

#[test]
fn a_frozen_replica_is_not_read_stale() {
    let cluster = RedisCluster::start();
    let links = load(&cluster);
    let nginx = ClusterNginx::start_with(&cluster, 2, CACHE, READ_REPLICAS);
    assert_all_served(nginx.port, &links);
    let owners = owners(&cluster);
    let primary = owner_of(&owners, &code(0));
    let shard: Vec<usize> = (0..CODES)
        .step_by(97)
        .filter(|&i| owner_of(&owners, &code(i)) == primary)
        .collect();
    assert!(shard.len() >= 3, "too few sampled codes on {primary}");
    for &i in &shard {
        assert!(always_answers(nginx.port, i, &(302, target(i, 1))));
    }

    // The replica read for these codes stops (SIGSTOP): it neither answers nor reports the
    // changes its primary makes now. The cached old targets stop being trusted once its
    // invalidation connection misses a ping; from then on no old target is answered.
    let replica = &cluster.nodes()[replica_of(&cluster, &primary)];
    let frozen = replica.process().expect("a running replica");
    frozen.signal(Signal::Stop);
    for &i in &shard {
        set_record(&primary, &code(i), &record(&target(i, 2)));
    }
    let fresh = |i: usize, answer: &(u16, String)| {
        answer == &(302, target(i, 2)) || answer.0 == FALLBACK_STATUS
    };
    let untrusted = wait_until(Duration::from_secs(10), || {
        shard
            .iter()
            .all(|&i| answers(nginx.port, i).iter().all(|a| fresh(i, a)))
    });
    assert!(untrusted, "old targets served long after the replica froze");
    for _ in 0..3 {
        for &i in &shard {
            for a in answers(nginx.port, i) {
                assert!(fresh(i, &a), "code {} answered {a:?}", code(i));
            }
        }
    }
    frozen.signal(Signal::Cont);
    let new_target = |i: usize| always_answers(nginx.port, i, &(302, target(i, 2)));
    let thawed = wait_until(Duration::from_secs(20), || {
        shard.iter().all(|&i| new_target(i))
    });
    assert!(
        thawed,
        "the thawed replica's edge did not serve the new targets; error log:\n{}",
        nginx.error_log()
    );
    nginx.assert_no_crash();
}
