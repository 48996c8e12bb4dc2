//! Visits XADDed (as the module writes them on a cluster) to several of the 16 streams reach the
//! stats through the sidecar's consumer; the metrics' stream length and lag are the sums over
//! the streams.

use super::*;
use crate::helpers::{config, eventually, API_KEY};
use crate::sentinel::client;
use serde_json::Value;
use shortlink_visits::consumer::GROUP;
use shortlink_wire::cluster::event_stream_keys;
use std::time::Duration;

const BROWSER: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visits_on_several_streams_reach_the_stats() {
    let cluster = RedisCluster::start();
    let sidecar = start_on_cluster(&cluster, &[]).await;
    let http = client();
    let code = create(&sidecar, 1, "v").await.remove(0);

    // One visit on each of 5 streams, two on stream 0: 7 visits, different visitors.
    let streams = event_stream_keys();
    let mut connection = cluster_connection(&cluster).await;
    let chosen = [0usize, 0, 3, 7, 8, 12, 15];
    for (n, &stream) in chosen.iter().enumerate() {
        let t = chrono::Utc::now().timestamp_millis().to_string();
        let ip = format!("203.0.113.{}", n + 1);
        let mut cmd = redis::cmd("XADD");
        cmd.arg(&streams[stream])
            .arg("MAXLEN")
            .arg("~")
            .arg(1_000_000)
            .arg("*");
        for (k, v) in [
            ("c", code.as_str()),
            ("t", &t),
            ("s", "302"),
            ("ip", &ip),
            ("ua", BROWSER),
        ] {
            cmd.arg(k).arg(v);
        }
        let _: String = cmd.query_async(&mut connection).await.unwrap();
    }
    let owners: std::collections::BTreeSet<usize> = chosen
        .iter()
        .map(|&s| cluster.owner_of(key_slot(streams[s].as_bytes())).unwrap())
        .collect();
    assert!(
        owners.len() >= 2,
        "the streams chosen are on several primaries"
    );

    let stats_url = format!("{}/api/v1/links/{code}/stats", sidecar.address);
    let stats = || async {
        let response = http.get(&stats_url).bearer_auth(API_KEY).send().await;
        response.unwrap().json::<Value>().await.unwrap()
    };
    let counted = eventually(Duration::from_secs(20), || async {
        stats().await["totals"]["clicks"] == 7
    })
    .await;
    let stats = stats().await;
    assert!(counted, "7 visits counted: {stats}");
    assert_eq!(stats["totals"]["unique_visitors"], 7, "{stats}");

    // Every entry acknowledged on its own stream; the metrics sum the streams.
    let seeds = cluster.seeds();
    let config = config(
        &sidecar.database_url,
        &cluster.urls()[0],
        &["--redis-cluster", &seeds],
    );
    let projection = shortlink_sidecar::open_projection(&config).unwrap();
    let acknowledged = eventually(Duration::from_secs(10), || {
        let projection = &projection;
        async move {
            let state = projection.pipeline_state("sl:events", GROUP).await.unwrap();
            state.lag == Some(0) && state.stream_length == 7 && state.marker
        }
    })
    .await;
    let state = projection.pipeline_state("sl:events", GROUP).await.unwrap();
    assert!(
        acknowledged,
        "stream length 7, lag 0, markers whole: {state:?}"
    );
    for &stream in &chosen {
        let mut cmd = redis::cmd("XPENDING");
        cmd.arg(&streams[stream]).arg(GROUP);
        let pending: Vec<redis::Value> = cmd.query_async(&mut connection).await.unwrap();
        assert_eq!(
            pending[0],
            redis::Value::Int(0),
            "nothing pending on {}",
            streams[stream]
        );
    }
}
