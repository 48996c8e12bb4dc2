//! The sidecar on a Redis Cluster (`--redis-cluster`; docs/REDIS-CLUSTER.md):
//! [`writes`] land on the node owning their slot, with every slot's marker set; [`markers`] a
//! primary flushed is refilled by the keeper, and `resync` covers every primary; [`visits`] the
//! 16 visit streams are consumed; [`failover`] a primary killed under create load loses no
//! acknowledged link; [`batch`] batch chunks go one pipeline per primary, through a primary
//! killed and a reshard mid-batch; [`config`] bad cluster settings are refused clearly. Real servers on
//! loopback: 3 primaries + 3 replicas (testkit::RedisCluster), one cluster per test.

mod batch;
mod config;
mod failover;
mod markers;
mod visits;
mod writes;

use crate::sentinel::{client, post, start_sidecar, Sidecar};
use redis::AsyncCommands;
use shortlink_core::projection::{encode_record, RecordWorkspace};
use shortlink_wire::cluster::{key_slot, SLOTS};
use std::time::Duration;
use testkit::RedisCluster;

/// A sidecar on `cluster`, `WAIT`ing for one replica per write, checking markers every 200 ms.
async fn start_on_cluster(cluster: &RedisCluster, extra: &[&str]) -> Sidecar {
    let seeds = cluster.seeds();
    let mut flags = vec![
        "--redis-cluster",
        seeds.as_str(),
        "--redis-wait-replicas",
        "1",
        "--redis-wait-timeout",
        "500ms",
        "--projection-check-interval",
        "200ms",
    ];
    flags.extend_from_slice(extra);
    // `--redis-url` is not used with a cluster.
    start_sidecar(&cluster.urls()[0], &flags).await
}

/// A cluster client of the test's own: commands go to the primary serving each key's slot.
async fn cluster_connection(cluster: &RedisCluster) -> redis::cluster_async::ClusterConnection {
    redis::cluster::ClusterClient::new(cluster.urls())
        .unwrap()
        .get_async_connection()
        .await
        .unwrap()
}

/// How many per-slot markers the running primaries hold together.
fn markers_on_primaries(cluster: &RedisCluster) -> usize {
    cluster
        .primaries()
        .into_iter()
        .map(|i| markers_on(cluster, i))
        .sum()
}

fn markers_on(cluster: &RedisCluster, node: usize) -> usize {
    cluster.nodes()[node]
        .cli_raw(&["KEYS", "sl:meta:projection:*"])
        .lines()
        .filter(|line| !line.is_empty())
        .count()
}

/// Whether every slot's marker is there.
fn all_markers(cluster: &RedisCluster) -> bool {
    markers_on_primaries(cluster) == usize::from(SLOTS)
}

/// The links of `codes` whose record (read through the cluster: from the owning primary) is not
/// what SQL says: missing or stale, with what Redis holds.
async fn not_as_in_sql(
    sidecar: &Sidecar,
    connection: &mut redis::cluster_async::ClusterConnection,
    codes: &[String],
) -> Vec<(String, Option<String>)> {
    let mut wrong = Vec::new();
    for code in codes {
        let link = sidecar
            .storage
            .link_by_code(code)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{code} is in SQL"));
        let record: Option<String> = connection.get(format!("sl:c:{code}")).await.unwrap();
        if record.as_deref()
            != Some(
                String::from_utf8(encode_record(&link, RecordWorkspace::DEFAULT))
                    .unwrap_or_default()
                    .as_str(),
            )
        {
            wrong.push((code.clone(), record));
        }
    }
    wrong
}

/// The record of `code` read directly on the node that owns its slot (found by the test, not by
/// a cluster client).
fn record_on_owner(cluster: &RedisCluster, code: &str) -> (usize, String) {
    let key = format!("sl:c:{code}");
    let slot = key_slot(key.as_bytes());
    assert_eq!(
        slot,
        cluster.keyslot(&key),
        "the wire crate's slot function"
    );
    let owner = cluster.owner_of(slot).expect("a primary owns the slot");
    (owner, cluster.nodes()[owner].cli_raw(&["GET", &key]))
}

/// Creates `count` links to `https://<host>.example/<i>` one by one; their codes. A 503 is what
/// the API promises while the cluster cannot take a write (nothing stored, retry later): on a
/// loaded machine a 3 + 3 cluster with a 2 s node timeout may fail a primary over, so a create is
/// tried again a few times, as a client would. Any other answer fails the test.
async fn create(sidecar: &Sidecar, count: usize, host: &str) -> Vec<String> {
    const ATTEMPTS: u32 = 20;
    let http = client();
    let mut codes = Vec::new();
    for i in 0..count {
        let url = format!("https://{host}.example/{i}");
        let mut attempt = 1;
        let body = loop {
            let (status, body) = post(&http, &sidecar.address, &url).await;
            if status == 503 && attempt < ATTEMPTS {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            assert_eq!(status, 201, "{body}");
            break body;
        };
        codes.push(body["code"].as_str().unwrap().to_owned());
    }
    codes
}
