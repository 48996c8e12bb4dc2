//! The cluster launcher against a real 3 + 3 cluster, and the project's slot function and
//! per-slot key names against the cluster's own hashing.

use shortlink_wire::cluster::{event_stream_keys, key_slot, marker_key_for};
use std::time::Duration;
use testkit::RedisCluster;

#[test]
fn a_cluster_starts_hashes_like_us_reshards_and_fails_over() {
    let mut cluster = RedisCluster::start();
    assert_eq!(cluster.primaries().len(), 3);
    assert_eq!(cluster.nodes().len(), 6);

    for key in [
        "sl:c:aB3xY9",
        "sl:c:0",
        "sl:meta:issued",
        "{x}y",
        "sl:c:{}zz",
    ] {
        assert_eq!(key_slot(key.as_bytes()), cluster.keyslot(key), "{key}");
        let marker = marker_key_for(key.as_bytes());
        assert_eq!(cluster.keyslot(&marker), cluster.keyslot(key), "{marker}");
    }
    for stream in event_stream_keys() {
        assert_eq!(key_slot(stream.as_bytes()), cluster.keyslot(&stream));
    }

    let first = cluster.owner_of(0).expect("slot 0 is served");
    let second = cluster
        .primaries()
        .into_iter()
        .find(|&p| p != first)
        .unwrap();
    cluster.reshard(first, second, 10);
    cluster.wait_ok(Duration::from_secs(30));
    assert_eq!(
        cluster.owner_of(0),
        Some(second),
        "slot 0 moved with the reshard"
    );

    let slot = key_slot(b"sl:c:aB3xY9");
    let owner = cluster.owner_of(slot).expect("every slot has an owner");

    cluster.kill(owner);
    cluster.wait_ok(Duration::from_secs(30));
    let promoted = cluster
        .owner_of(slot)
        .expect("a replica took the slot over");
    assert_ne!(promoted, owner);
}
