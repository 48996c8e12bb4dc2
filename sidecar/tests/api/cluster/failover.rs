//! `kill -9` of a primary under create load with `--redis-wait-replicas 1`: its replica is
//! promoted, creates go on (those of its slots refused while it has no replica to `WAIT` for),
//! and no acknowledged link is missing or stale on its slot's owner.

use super::*;
use crate::helpers::eventually;
use crate::sentinel::failover::{spawn_writers, Load};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BEFORE: usize = 300;
/// Fewer after: the promoted replica has no replica of its own, so `WAIT 1` refuses (503) every
/// create that lands in its slots, and on SQLite each such create holds the write lock for the
/// whole `--redis-wait-timeout`.
const AFTER: usize = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_killed_under_create_load_loses_no_acknowledged_link() {
    let mut cluster = RedisCluster::start();
    let sidecar = start_on_cluster(&cluster, &[]).await;
    let load = Arc::new(Load::default());
    let writers = spawn_writers(&sidecar.address, &load);
    assert!(
        eventually(Duration::from_secs(60), || async { load.acked() >= BEFORE }).await,
        "creates before the kill: {} acknowledged",
        load.acked()
    );
    assert!(eventually(Duration::from_secs(20), || async { all_markers(&cluster) }).await);

    let victim = cluster.primaries()[0];
    // Links on the primary about to die: among those checked below like all the others.
    let early: Vec<String> = load.acked.lock().unwrap()[..30]
        .iter()
        .map(|(code, _)| code.clone())
        .collect();
    assert!(
        early
            .iter()
            .any(|code| record_on_owner(&cluster, code).0 == victim),
        "some acknowledged links are on the primary killed"
    );
    let acked_at_kill = load.acked();
    let killed = Instant::now();
    cluster.kill(victim);
    cluster.wait_ok(Duration::from_secs(30));
    let promoted_after = killed.elapsed();
    let target = acked_at_kill + AFTER;
    assert!(
        eventually(Duration::from_secs(120), || async {
            load.acked() >= target
        })
        .await,
        "creates after the failover: {}",
        load.acked() - acked_at_kill
    );
    load.stop_writers(writers).await;

    let acked: Vec<(String, String)> = load.acked.lock().unwrap().clone();
    let codes: Vec<String> = acked.iter().map(|(code, _)| code.clone()).collect();
    for (code, url) in &acked {
        let link = sidecar.storage.link_by_code(code).await.unwrap().unwrap();
        assert_eq!(&link.target, url, "SQL holds {code} as created");
    }
    let mut connection = cluster_connection(&cluster).await;
    let wrong = not_as_in_sql(&sidecar, &mut connection, &codes).await;
    eprintln!(
        "cluster failover: {} acknowledged ({acked_at_kill} before the kill), {} refused with \
         503; slots served again {:.2} s after the kill",
        acked.len(),
        load.refused.load(Ordering::Relaxed),
        promoted_after.as_secs_f64()
    );
    assert!(
        wrong.is_empty(),
        "of {} acknowledged links, {} missing or stale on their slot's owner: {wrong:?}",
        acked.len(),
        wrong.len()
    );
    assert_eq!(
        sidecar.links_in_sql().await,
        acked.len(),
        "SQL holds exactly the acknowledged links"
    );
    assert!(
        eventually(Duration::from_secs(20), || async { all_markers(&cluster) }).await,
        "every marker back after the failover: {}",
        markers_on_primaries(&cluster)
    );
}
