//! A primary that lost its data gets its slots' markers and records back from the keeper; a
//! `resync` rewrites records on every primary, removes orphans on every primary (its `SCAN`
//! walks them all) and sets all the markers.

use super::*;
use crate::helpers::{cli, eventually};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_primary_gets_its_markers_and_records_back() {
    let cluster = RedisCluster::start();
    let sidecar = start_on_cluster(&cluster, &[]).await;
    let codes = create(&sidecar, 60, "m").await;
    assert!(eventually(Duration::from_secs(20), || async { all_markers(&cluster) }).await);

    let flushed = cluster.primaries()[0];
    let lost: Vec<String> = codes
        .iter()
        .filter(|code| record_on_owner(&cluster, code).0 == flushed)
        .cloned()
        .collect();
    assert!(!lost.is_empty(), "some of the links are on node {flushed}");
    let others = markers_on_primaries(&cluster) - markers_on(&cluster, flushed);
    cluster.nodes()[flushed].cli_raw(&["FLUSHALL"]);
    assert_eq!(markers_on(&cluster, flushed), 0);

    assert!(
        eventually(Duration::from_secs(20), || async { all_markers(&cluster) }).await,
        "markers back: {} of {SLOTS}",
        markers_on_primaries(&cluster)
    );
    let mut connection = cluster_connection(&cluster).await;
    let wrong = not_as_in_sql(&sidecar, &mut connection, &codes).await;
    assert!(wrong.is_empty(), "records not back: {wrong:?}");
    assert_eq!(
        markers_on_primaries(&cluster) - markers_on(&cluster, flushed),
        others,
        "the other primaries' markers stayed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_covers_every_primary() {
    let cluster = RedisCluster::start();
    let mut sidecar = start_on_cluster(&cluster, &[]).await;
    let codes = create(&sidecar, 40, "m").await;
    assert!(eventually(Duration::from_secs(20), || async { all_markers(&cluster) }).await);
    // Stop the keeper (with the server): what follows is resync's job alone.
    sidecar.stop().await;
    let mut connection = cluster_connection(&cluster).await;
    // Records gone, a stale one, orphans (no link in SQL) and markers gone, on every primary.
    for code in codes.iter().step_by(3) {
        let _: () = connection.del(format!("sl:c:{code}")).await.unwrap();
    }
    let _: () = connection
        .set(
            format!("sl:c:{}", codes[1]),
            "1|L|302|0|0|https://stale.example/",
        )
        .await
        .unwrap();
    let orphans: Vec<String> = (0..30).map(|i| format!("sl:c:orphan{i}")).collect();
    for orphan in &orphans {
        let _: () = connection
            .set(orphan, "1|L|302|0|0|https://o.example/")
            .await
            .unwrap();
    }
    for primary in cluster.primaries() {
        let orphans_here = cluster.nodes()[primary].cli_raw(&["KEYS", "sl:c:orphan*"]);
        assert!(!orphans_here.is_empty(), "orphans on node {primary}");
        for marker in cluster.nodes()[primary]
            .cli_raw(&["KEYS", "sl:meta:projection:*"])
            .lines()
            .take(100)
        {
            cluster.nodes()[primary].cli_raw(&["DEL", marker]);
        }
    }
    assert!(!all_markers(&cluster));

    let seeds = cluster.seeds();
    let resync = cli(
        &sidecar.database_url,
        &cluster.urls()[0],
        &["--redis-cluster", &seeds, "resync"],
    );
    shortlink_sidecar::cli::run(resync).await.expect("resync");

    let wrong = not_as_in_sql(&sidecar, &mut connection, &codes).await;
    assert!(wrong.is_empty(), "records after resync: {wrong:?}");
    for orphan in &orphans {
        let left: bool = connection.exists(orphan).await.unwrap();
        assert!(!left, "{orphan} removed");
    }
    assert!(all_markers(&cluster), "resync set every slot's marker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reshard_keeps_markers_and_records_and_the_keeper_follows_it() {
    let cluster = RedisCluster::start();
    let sidecar = start_on_cluster(&cluster, &[]).await;
    let codes = create(&sidecar, 40, "r").await;
    assert!(eventually(Duration::from_secs(20), || async { all_markers(&cluster) }).await);
    let primaries = cluster.primaries();
    let (from, to) = (primaries[0], primaries[1]);
    let before = markers_on(&cluster, to);
    cluster.reshard(from, to, 500);
    assert_eq!(
        markers_on(&cluster, to),
        before + 500,
        "the markers moved with their slots"
    );
    assert!(all_markers(&cluster));

    // The sidecar writes to the slots' new owner, and its keeper still finds every marker: a
    // marker it found missing it would refill and set again, and a marker deleted now must come
    // back.
    let more = create(&sidecar, 40, "r2").await;
    let moved_marker = cluster.nodes()[to]
        .cli_raw(&["KEYS", "sl:meta:projection:*"])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    cluster.nodes()[to].cli_raw(&["DEL", &moved_marker]);
    assert!(
        eventually(Duration::from_secs(20), || async { all_markers(&cluster) }).await,
        "the keeper restored the deleted marker after the reshard"
    );
    let mut connection = cluster_connection(&cluster).await;
    let all: Vec<String> = codes.into_iter().chain(more).collect();
    let wrong = not_as_in_sql(&sidecar, &mut connection, &all).await;
    assert!(wrong.is_empty(), "records after the reshard: {wrong:?}");
}
