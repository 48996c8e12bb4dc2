//! Batch chunks on a cluster, one pipeline per primary (issue 39): every link lands on the
//! primary owning its slot with one `WAIT` per primary and chunk; a primary killed mid-batch
//! loses no acknowledged line, reports the rest, and a retry with the same `Idempotency-Key`
//! finishes the batch; a reshard mid-batch (`-MOVED`, `-ASK`) fails no line.

use super::*;
use crate::helpers::{eventually, API_KEY};
use crate::sentinel::client;
use serde_json::Value;
use shortlink_core::primary::RedisConnection;
use std::collections::HashMap;
use std::sync::Arc;

/// `n` NDJSON lines to `https://<host>.example/<i>`.
fn ndjson(n: usize, host: &str) -> String {
    (0..n)
        .map(|i| format!("{{\"url\":\"https://{host}.example/{i}\",\"ref\":\"r{i}\"}}\n"))
        .collect()
}

/// Posts an NDJSON batch; calls `progress` with the number of result lines read so far after
/// each piece of the streamed answer. Returns the results, in order.
async fn post_batch(
    sidecar: &Sidecar,
    body: String,
    key: &str,
    mut progress: impl FnMut(usize),
) -> Vec<Value> {
    let mut response = client()
        .post(format!("{}/api/v1/links/batch", sidecar.address))
        .bearer_auth(API_KEY)
        .header("content-type", "application/x-ndjson")
        .header("Idempotency-Key", key)
        .timeout(Duration::from_secs(300))
        .body(body)
        .send()
        .await
        .expect("POST /links/batch");
    assert_eq!(response.status(), 200);
    let mut text = Vec::new();
    while let Some(piece) = response.chunk().await.expect("the streamed answer") {
        text.extend_from_slice(&piece);
        progress(text.iter().filter(|&&b| b == b'\n').count());
    }
    let results: Vec<Value> = String::from_utf8(text)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i, "results in order");
    }
    results
}

fn code_of(result: &Value) -> Option<String> {
    (result["status"] == 201).then(|| result["link"]["code"].as_str().unwrap().to_owned())
}

/// The record of each of `codes` read directly on the primary that owns its slot (from the
/// cluster's own `CLUSTER SLOTS`, each primary asked with a pipeline of `GET`s per thousand keys): the
/// node's index in `cluster.nodes()` and the value.
async fn records_on_owners(
    cluster: &RedisCluster,
    codes: &[String],
) -> HashMap<String, (usize, Option<String>)> {
    let mut connection = RedisConnection::Cluster(cluster_connection(cluster).await);
    let shards = connection.shards().await.unwrap().unwrap();
    let mut owner = vec![usize::MAX; usize::from(SLOTS)];
    let mut nodes = Vec::new();
    for shard in &shards {
        let node = (cluster.nodes().iter())
            .position(|node| node.addr() == shard.primary)
            .unwrap_or_else(|| panic!("{} is a node of the cluster", shard.primary));
        for slot in shard.slots() {
            owner[usize::from(slot)] = nodes.len();
        }
        nodes.push(node);
    }
    let mut by_node: Vec<Vec<&String>> = vec![Vec::new(); nodes.len()];
    for code in codes {
        let slot = key_slot(format!("sl:c:{code}").as_bytes());
        by_node[owner[usize::from(slot)]].push(code);
    }
    let mut records = HashMap::new();
    for (at, codes) in by_node.into_iter().enumerate() {
        let node = &cluster.nodes()[nodes[at]];
        let mut direct = redis::Client::open(node.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        for part in codes.chunks(1000) {
            // One `GET` each: a node refuses an `MGET` across slots.
            let mut pipe = redis::pipe();
            for code in part {
                pipe.cmd("GET").arg(format!("sl:c:{code}"));
            }
            let values: Vec<Option<String>> = pipe.query_async(&mut direct).await.unwrap();
            for (code, value) in part.iter().zip(values) {
                records.insert((*code).clone(), (nodes[at], value));
            }
        }
    }
    records
}

/// The links of `codes` whose record on their slot's owner is not what SQL says.
async fn wrong_on_owners(
    sidecar: &Sidecar,
    cluster: &RedisCluster,
    codes: &[String],
) -> Vec<(String, Option<String>)> {
    let records = records_on_owners(cluster, codes).await;
    let mut wrong = Vec::new();
    for code in codes {
        let link = sidecar.storage.link_by_code(code).await.unwrap();
        let link = link.unwrap_or_else(|| panic!("{code} is in SQL"));
        let expected = String::from_utf8(encode_record(&link, RecordWorkspace::DEFAULT)).unwrap();
        let (_, record) = &records[code];
        if record.as_deref() != Some(expected.as_str()) {
            wrong.push((code.clone(), record.clone()));
        }
    }
    wrong
}

/// `INFO commandstats` calls of `command` on node `node` since the last `CONFIG RESETSTAT`.
fn calls(cluster: &RedisCluster, node: usize, command: &str) -> u64 {
    let stats = cluster.nodes()[node].cli_raw(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_goes_in_one_pipeline_per_primary_and_lands_on_the_owners() {
    const LINES: usize = 5_000;
    let cluster = RedisCluster::start();
    let sidecar = start_on_cluster(&cluster, &[]).await;
    // The keeper's markers first, so that the counts below are the batch's alone.
    assert!(eventually(Duration::from_secs(30), || async { all_markers(&cluster) }).await);
    for primary in cluster.primaries() {
        cluster.nodes()[primary].cli_raw(&["CONFIG", "RESETSTAT"]);
    }

    let results = post_batch(&sidecar, ndjson(LINES, "p"), "per-primary", |_| ()).await;
    let codes: Vec<String> = results.iter().filter_map(code_of).collect();
    assert_eq!(
        codes.len(),
        LINES,
        "every line created: {:?}",
        &results[..3]
    );

    let wrong = wrong_on_owners(&sidecar, &cluster, &codes).await;
    assert!(
        wrong.is_empty(),
        "missing or stale on their owner: {wrong:?}"
    );
    let records = records_on_owners(&cluster, &codes).await;
    for primary in cluster.primaries() {
        let links = records
            .values()
            .filter(|(node, _)| *node == primary)
            .count();
        let (sets, waits) = (
            calls(&cluster, primary, "set"),
            calls(&cluster, primary, "wait"),
        );
        eprintln!("node {primary}: {links} links, {sets} SETs, {waits} WAITs");
        assert!(links > LINES / 6, "node {primary} holds a share: {links}");
        assert!(sets >= links as u64, "{sets} SETs for {links} links");
        // One `WAIT` per chunk (5 chunks of 1,000) for all of the primary's slots, not one per
        // slot's transaction; the keeper may check a marker meanwhile.
        assert!(
            (1..=10).contains(&waits),
            "node {primary}: {waits} WAITs for {sets} SETs"
        );
    }
}

/// A primary killed while a 30,000-line batch streams: each line answered 201 is in SQL and on
/// its slot's owner as SQL has it, each other line is a 503 that stored nothing, and the same
/// request again (same `Idempotency-Key`) answers every line 201, the first attempt's codes
/// unchanged. Three primaries with two replicas each, so that the promoted replica still has
/// one to `WAIT` for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_mid_batch_loses_no_acknowledged_line_and_a_retry_finishes_it() {
    const LINES: usize = 30_000;
    let mut cluster = RedisCluster::start_with(3, 2, Duration::from_millis(2000));
    let sidecar = start_on_cluster(&cluster, &[]).await;
    assert!(eventually(Duration::from_secs(30), || async { all_markers(&cluster) }).await);
    let victim = cluster.primaries()[0];

    let mut killed_at = None;
    let first = post_batch(&sidecar, ndjson(LINES, "k"), "campaign-1", |lines| {
        if killed_at.is_none() && lines >= 1_000 {
            killed_at = Some(lines);
            cluster.kill(victim);
        }
    })
    .await;
    let killed_at = killed_at.expect("the batch streamed past its first chunk");
    assert_eq!(first.len(), LINES);
    let acked: Vec<String> = first.iter().filter_map(code_of).collect();
    for result in first.iter().filter(|result| result["status"] != 201) {
        assert_eq!(result["status"], 503, "{result}");
    }
    eprintln!(
        "killed after {killed_at} lines: {} of {LINES} acknowledged, {} reported",
        acked.len(),
        LINES - acked.len()
    );
    cluster.wait_ok(Duration::from_secs(30));
    assert_eq!(
        sidecar.links_in_sql().await,
        acked.len(),
        "SQL holds exactly the acknowledged lines"
    );
    let wrong = wrong_on_owners(&sidecar, &cluster, &acked).await;
    assert!(
        wrong.is_empty(),
        "of {} acknowledged lines, {} missing or stale on their slot's owner: {wrong:?}",
        acked.len(),
        wrong.len()
    );

    // The promoted replica's fellow replica follows it (a full sync): `WAIT 1` can be met again.
    let synced = eventually(Duration::from_secs(30), || async {
        cluster.primaries().into_iter().all(|primary| {
            let info = cluster.nodes()[primary].cli_raw(&["INFO", "replication"]);
            info.lines()
                .find_map(|line| line.strip_prefix("connected_slaves:"))
                .and_then(|n| n.trim().parse::<u32>().ok())
                .is_some_and(|n| n >= 1)
        }) && cluster.nodes().iter().enumerate().all(|(i, node)| {
            i == victim
                || node.role() != "slave"
                || node
                    .cli_raw(&["INFO", "replication"])
                    .contains("master_link_status:up")
        })
    })
    .await;
    assert!(synced, "every primary has a replica in sync again");
    let again = post_batch(&sidecar, ndjson(LINES, "k"), "campaign-1", |_| ()).await;
    let codes: Vec<String> = again.iter().filter_map(code_of).collect();
    assert_eq!(
        codes.len(),
        LINES,
        "the retry finishes the batch: {:?}",
        again.iter().find(|result| result["status"] != 201)
    );
    for (before, after) in first.iter().zip(&again) {
        if let Some(code) = code_of(before) {
            assert_eq!(
                Some(code),
                code_of(after),
                "an acknowledged line keeps its code"
            );
        }
    }
    assert_eq!(sidecar.links_in_sql().await, LINES);
    let wrong = wrong_on_owners(&sidecar, &cluster, &codes).await;
    assert!(wrong.is_empty(), "after the retry: {wrong:?}");
}

/// Slots move between primaries (`redis-cli --cluster reshard`, keys included) while batches
/// are written: the moved slots answer `-MOVED` (or `-ASK` while they move) and are written on
/// their new owner, so every line is created and every record is on the primary owning its slot
/// at the end, as SQL has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reshard_mid_batch_fails_no_line() {
    const LINES: usize = 3_000;
    let cluster = Arc::new(RedisCluster::start());
    let sidecar = start_on_cluster(&cluster, &[]).await;
    assert!(eventually(Duration::from_secs(30), || async { all_markers(&cluster) }).await);
    let primaries = cluster.primaries();
    let (from, to) = (primaries[0], primaries[1]);

    // A first batch before: its links are among those that move.
    let mut codes: Vec<String> = post_batch(&sidecar, ndjson(LINES, "r0"), "r0", |_| ())
        .await
        .iter()
        .filter_map(code_of)
        .collect();
    assert_eq!(codes.len(), LINES);
    let reshard = {
        let cluster = Arc::clone(&cluster);
        tokio::task::spawn_blocking(move || cluster.reshard(from, to, 2_000))
    };
    let mut batches = 0;
    let mut during = 0;
    while !reshard.is_finished() || batches == 0 {
        let moving = !reshard.is_finished();
        let host = format!("r{}", batches + 1);
        let results = post_batch(&sidecar, ndjson(LINES, &host), &host, |_| ()).await;
        for result in &results {
            assert_eq!(result["status"], 201, "batch {host}: {result}");
        }
        codes.extend(results.iter().filter_map(code_of));
        batches += 1;
        during += usize::from(moving);
    }
    reshard.await.unwrap();
    cluster.wait_ok(Duration::from_secs(30));
    eprintln!("{batches} batches of {LINES}, {during} begun while slots moved");
    assert!(during > 0, "a batch ran while slots moved");

    let wrong = wrong_on_owners(&sidecar, &cluster, &codes).await;
    assert!(
        wrong.is_empty(),
        "of {} links, {} missing or stale on their slot's owner: {wrong:?}",
        codes.len(),
        wrong.len()
    );
    let records = records_on_owners(&cluster, &codes).await;
    let moved = (records.values()).filter(|(node, _)| *node == to).count();
    assert!(moved > 0, "links on the primary the slots moved to");
}
