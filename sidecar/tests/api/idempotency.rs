//! `Idempotency-Key` on `POST /links` and `POST /links/batch`: a retry answers the same and
//! creates nothing new, also after the sidecar was killed in the middle of the first attempt.

use crate::helpers::*;
use crate::on_each_backend;
use redis::AsyncCommands;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use testkit::process::Signal;
use testkit::RedisServer;

on_each_backend!(
    single_create_retries,
    batch_retries_answer_identically,
    keys_past_retention_are_pruned
);

async fn single_create_retries(backend: Backend) {
    let app = spawn_app(backend).await;
    let body = json!({"url": "https://shop.example/x", "campaign": "c1", "ref": "u-1"});
    let send = |key: &'static str, body: Value| {
        app.api(Method::POST, "/links")
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
    };
    let first = send("key-1", body.clone()).await.unwrap();
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let again = send("key-1", body.clone()).await.unwrap();
    assert_eq!(again.status(), 201);
    let again: Value = again.json().await.unwrap();
    assert_eq!(first, again);
    assert_eq!(app.stored().await.links, 1);

    // Same key, another body: refused, nothing stored.
    let other = send("key-1", json!({"url": "https://shop.example/y"}))
        .await
        .unwrap();
    assert_eq!(other.status(), 422);
    let other: Value = other.json().await.unwrap();
    assert_eq!(other["error"]["code"], "idempotency_key_reused");
    // Another key creates another link, even for the same URL.
    let second: Value = send("key-2", body).await.unwrap().json().await.unwrap();
    assert_ne!(second["code"], first["code"]);
    assert_eq!(app.stored().await.links, 2);

    let bad = app
        .api(Method::POST, "/links")
        .header("Idempotency-Key", "")
        .json(&json!({"url": "https://shop.example/z"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

async fn batch_retries_answer_identically(backend: Backend) {
    let app = spawn_app(backend).await;
    let items: Vec<Value> = (0..2_300)
        .map(|i| match i % 100 {
            5 => json!({"url": "ftp://nope.example/"}),
            6 => json!({"url": format!("https://t.example/{i}"), "code": "taken-alias"}),
            _ => json!({"url": format!("https://t.example/{i}"), "campaign": "c"}),
        })
        .collect();
    let send = |key: &'static str, items: &Vec<Value>| {
        app.api(Method::POST, "/links/batch")
            .header("Idempotency-Key", key)
            .json(items)
            .send()
    };
    let first: Value = send("batch-1", &items).await.unwrap().json().await.unwrap();
    let stored = app.stored().await;
    // 2,300 items: 23 bad URLs, 23 uses of one alias (the first wins).
    assert_eq!(stored.links, 2_300 - 23 - 22);
    let again: Value = send("batch-1", &items).await.unwrap().json().await.unwrap();
    assert_eq!(first, again, "the same answer, item for item");
    assert_eq!(app.stored().await, stored, "nothing new in SQL or Redis");

    let mut changed = items.clone();
    changed[0] = json!({"url": "https://t.example/changed"});
    let response = send("batch-1", &changed).await.unwrap();
    assert_eq!(response.status(), 422);

    // A retry whose later items differ: those items are refused, one by one.
    let mut later = items.clone();
    later[2_000] = json!({"url": "https://t.example/other"});
    let mixed: Value = send("batch-1", &later).await.unwrap().json().await.unwrap();
    assert_eq!(mixed["results"][2_000]["status"], 409);
    assert_eq!(
        mixed["results"][2_000]["error"]["code"],
        "idempotency_mismatch"
    );
    assert_eq!(mixed["results"][1_999], first["results"][1_999]);
    assert_eq!(app.stored().await, stored);
}

/// Keys older than `--idempotency-retention` are forgotten (a retry is then a new request);
/// younger ones keep answering the same.
async fn keys_past_retention_are_pruned(backend: Backend) {
    let app = spawn_app(backend).await;
    let send = |key: &'static str, url: &'static str| {
        app.api(Method::POST, "/links")
            .header("Idempotency-Key", key)
            .json(&json!({ "url": url }))
            .send()
    };
    let old: Value = send("old", "https://t.example/a")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let young: Value = send("young", "https://t.example/b")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Eight days ago, behind the API's back (tests never sleep).
    let eight_days_ago = chrono::Utc::now() - chrono::Duration::days(8);
    let sql = format!(
        "UPDATE idempotency_keys SET created_at = {} WHERE \"key\" = 'old'",
        app.db.time_literal(eight_days_ago)
    );
    assert_eq!(app.db.execute(&sql).await, 1);
    let config = app.config(&[]);
    assert_eq!(
        config.idempotency_retention,
        Duration::from_secs(7 * 86_400)
    );
    let state = shortlink_sidecar::build_state(&config).await.unwrap();
    let pruned = state
        .links
        .prune_idempotency_keys(config.idempotency_retention)
        .await
        .unwrap();
    assert_eq!(pruned, 1);

    // The young key still replays; the old one is free again: another body is a new request.
    let replay: Value = send("young", "https://t.example/b")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(replay, young);
    let reused = send("old", "https://t.example/other").await.unwrap();
    assert_eq!(reused.status(), 201);
    let reused: Value = reused.json().await.unwrap();
    assert_ne!(reused["code"], old["code"]);
    assert_eq!(app.stored().await.links, 3);
}

/// Items in the crash test.
const CRASH_ITEMS: usize = 100_000;

fn ndjson_body() -> Vec<u8> {
    let mut body = Vec::with_capacity(CRASH_ITEMS * 60);
    for i in 0..CRASH_ITEMS {
        body.extend_from_slice(
            format!("{{\"url\":\"https://t.example/{i}\",\"ref\":\"r{i}\"}}\n").as_bytes(),
        );
    }
    body
}

async fn post_batch(
    base: &str,
    body: Vec<u8>,
    stop_after: Option<usize>,
) -> Result<Vec<Value>, String> {
    shortlink_e2e::install_tls_provider();
    let mut response = reqwest::Client::new()
        .post(format!("{base}/api/v1/links/batch"))
        .bearer_auth(API_KEY)
        .header("Idempotency-Key", "campaign-42")
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(response.status(), 200);
    let mut results = Vec::new();
    let mut pending = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(bytes)) => pending.extend_from_slice(&bytes),
            Ok(None) => break,
            Err(e) => return Err(format!("after {} results: {e}", results.len())),
        }
        while let Some(at) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            results.push(serde_json::from_slice(&line).unwrap());
        }
        if stop_after.is_some_and(|n| results.len() >= n) {
            return Ok(results);
        }
    }
    Ok(results)
}

async fn crash_and_retry(backend: Backend) {
    let dir = testkit::temp_dir();
    let database_url = backend.fresh_database_url(dir.path());
    let redis = RedisServer::start();
    let started = Instant::now();

    let (first, base) = serve_process(
        (&database_url, &redis.url()),
        &[],
        dir.path().join("first.log"),
    );
    let partial = post_batch(&base, ndjson_body(), Some(10_000))
        .await
        .unwrap();
    first.signal(Signal::Kill);
    // Reaped by its guardian.
    drop(first);
    assert!(
        partial.len() >= 10_000 && partial.len() < CRASH_ITEMS,
        "{}",
        partial.len()
    );
    eprintln!(
        "killed after {} results in {:?}",
        partial.len(),
        started.elapsed()
    );

    let (_second, base) = serve_process(
        (&database_url, &redis.url()),
        &[],
        dir.path().join("second.log"),
    );
    let results = post_batch(&base, ndjson_body(), None).await.unwrap();
    eprintln!(
        "retried {CRASH_ITEMS} items in {:?} in all",
        started.elapsed()
    );
    assert_eq!(results.len(), CRASH_ITEMS);
    let mut codes = HashSet::with_capacity(CRASH_ITEMS);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i as u64);
        assert_eq!(result["status"], 201, "{result}");
        assert_eq!(result["link"]["url"], format!("https://t.example/{i}"));
        assert!(codes.insert(result["link"]["code"].as_str().unwrap().to_owned()));
    }
    // What the first attempt answered before the crash is what the retry answers.
    for (i, result) in partial.iter().enumerate() {
        assert_eq!(result, &results[i], "item {i}");
    }

    let links = TestDb::connect(backend, &database_url)
        .await
        .scalar("SELECT COUNT(*) FROM links")
        .await;
    assert_eq!(links, CRASH_ITEMS as i64, "exactly one link per item");
    let mut connection = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let codes: Vec<String> = codes.into_iter().collect();
    for chunk in codes.chunks(5_000) {
        let keys: Vec<String> = chunk.iter().map(|code| format!("sl:c:{code}")).collect();
        let values: Vec<Option<String>> = connection.mget(&keys).await.unwrap();
        assert!(values.iter().all(Option::is_some), "every code in redis");
    }
    // Chunks killed between their Redis write and their commit may leave keys of codes that were
    // never committed (and are never issued again): harmless, and `resync` does not need them.
    let dbsize: i64 = redis::cmd("DBSIZE")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(dbsize >= CRASH_ITEMS as i64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_a_100k_batch_then_retried_sqlite() {
    crash_and_retry(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_a_100k_batch_then_retried_postgres() {
    crash_and_retry(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_a_100k_batch_then_retried_mariadb() {
    crash_and_retry(Backend::Mariadb).await;
}
