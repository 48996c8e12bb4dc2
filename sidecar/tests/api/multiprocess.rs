//! Four sidecar processes on one PostgreSQL (or MariaDB) database and one Redis, eight concurrent clients each,
//! 4,000 links in all: no duplicate code, and every link readable from Redis in the documented
//! format. The processes are real (`shortlink-sidecar serve`), each leasing its own sequence blocks
//! of 10 codes: 400 leases raced (the race this is about), twice as many as 20,000 links in blocks
//! of 100 did, in a fifth of the creates.

use crate::helpers::*;
use redis::AsyncCommands;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use testkit::process::Lifeline;
use testkit::RedisServer;

const PROCESSES: usize = 4;
const CLIENTS_PER_PROCESS: usize = 8;
const LINKS: usize = 4_000;
const SEQUENCE_BLOCK: &str = "10";
/// How often one create is retried after a 503 before the test fails.
const RETRIES: usize = 5;

/// A sidecar process on the test's database and Redis, leasing small blocks. No visit consumer:
/// it would add the `sl:events` stream to the keys counted below.
fn start_sidecar(
    database_url: &str,
    redis_url: &str,
    log: std::path::PathBuf,
) -> (Lifeline, String) {
    let args = ["--sequence-block", SEQUENCE_BLOCK, "--consumer", "false"];
    serve_process((database_url, redis_url), &args, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_processes_issue_unique_codes_on_postgres() {
    issue_unique_codes(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_processes_issue_unique_codes_on_mariadb() {
    issue_unique_codes(Backend::Mariadb).await;
}

async fn issue_unique_codes(backend: Backend) {
    let dir = testkit::temp_dir();
    let database_url = backend.fresh_database_url(dir.path());
    let redis = RedisServer::start();

    // Started together, so they also race on migrations and the bootstrap key.
    let starts: Vec<_> = (0..PROCESSES)
        .map(|i| {
            let database_url = database_url.clone();
            let redis_url = redis.url();
            let log = dir.path().join(format!("sidecar-{i}.log"));
            std::thread::spawn(move || start_sidecar(&database_url, &redis_url, log))
        })
        .collect();
    let sidecars: Vec<(Lifeline, String)> = starts.into_iter().map(|s| s.join().unwrap()).collect();

    let started = Instant::now();
    let per_client = LINKS / (PROCESSES * CLIENTS_PER_PROCESS);
    let mut clients = tokio::task::JoinSet::new();
    for (p, (_, base)) in sidecars.iter().enumerate() {
        shortlink_e2e::install_tls_provider();
        let http = reqwest::Client::new();
        for c in 0..CLIENTS_PER_PROCESS {
            let http = http.clone();
            let url = format!("{base}/api/v1/links");
            clients.spawn(async move {
                let mut created = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let target = format!("https://t.example/{p}/{c}/{i}");
                    let mut retries = 0;
                    let body = loop {
                        let response = http
                            .post(&url)
                            .bearer_auth(API_KEY)
                            .json(&json!({"url": target}))
                            .send()
                            .await
                            .expect("POST /links");
                        let status = response.status();
                        let body: Value = response.json().await.unwrap();
                        // On a loaded machine a sidecar's database pool can stay busy past its
                        // bound: the documented 503 "retry later", which stored nothing (SQL's
                        // count below holds exactly the links answered 201).
                        if status == 503
                            && body["error"]["code"] == "database_unavailable"
                            && retries < RETRIES
                        {
                            retries += 1;
                            continue;
                        }
                        assert_eq!(status, 201, "{body}");
                        break body;
                    };
                    created.push((body["code"].as_str().unwrap().to_owned(), target));
                }
                created
            });
        }
    }
    let mut links: HashMap<String, String> = HashMap::with_capacity(LINKS);
    let mut responses = 0;
    while let Some(created) = clients.join_next().await {
        for (code, target) in created.unwrap() {
            responses += 1;
            assert!(
                links.insert(code.clone(), target).is_none(),
                "duplicate code {code}"
            );
        }
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{LINKS} links through {PROCESSES} processes in {elapsed:?} ({:.0}/s)",
        LINKS as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(responses, LINKS);
    assert_eq!(links.len(), LINKS, "0 duplicate codes");

    let scheme = shortcode::CodeScheme::new(
        &shortcode::parse_hex_secret(SECRET_HEX).unwrap(),
        shortcode::DEFAULT_BODY_LEN,
        true,
    )
    .unwrap();
    let sequences: HashSet<u64> = links
        .keys()
        .map(|code| scheme.decode(code).expect("a generated code"))
        .collect();
    assert_eq!(sequences.len(), LINKS, "distinct sequence numbers");

    // SQL holds exactly these links.
    let count = TestDb::connect(backend, &database_url)
        .await
        .scalar("SELECT COUNT(*) FROM links")
        .await;
    assert_eq!(count, LINKS as i64);

    // Every link is in Redis, in the documented format.
    let mut connection = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let codes: Vec<&String> = links.keys().collect();
    for chunk in codes.chunks(1000) {
        let keys: Vec<String> = chunk.iter().map(|code| format!("sl:c:{code}")).collect();
        let values: Vec<Option<String>> = connection.mget(&keys).await.unwrap();
        for (code, value) in chunk.iter().zip(values) {
            let value = value.unwrap_or_else(|| panic!("sl:c:{code} missing"));
            assert_eq!(value, format!("1|L|302|0|0|{}", links[*code]));
        }
    }
    // Link keys only: the projection marker (`sl:meta:*`) is bookkeeping.
    let link_keys: Vec<String> = connection.keys("sl:c:*").await.unwrap();
    assert_eq!(link_keys.len(), LINKS);

    // Graceful stop on SIGTERM (the lifeline's stop signal).
    for (mut process, _) in sidecars {
        process.stop();
        assert!(!process.is_alive(), "stopped");
    }
}
