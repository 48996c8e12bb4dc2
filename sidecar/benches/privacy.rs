//! Subject erasure (issue 56) on PostgreSQL with the release sidecar: how long
//! `POST /api/v1/subjects/erase` takes for a subject with `BENCH_SUBJECT_VISITS` visits (default
//! 1,000) among many, against a reference measured in the same run: the same erase of a subject
//! of the same size in a database holding only that subject's rows.
//!
//! 1. Reference: one link with `ref` `s-ref`, its visits stored, erased (timed).
//! 2. `BENCH_LINKS` other links (default 10,000, one recipient each) and `BENCH_VISITS` visits
//!    (default 2,000,000; the issue's size is 50,000,000 over 60 days) spread over them across
//!    60 days, stored through the visit store as the consumer stores them; then `ANALYZE`.
//! 3. Measured: a second subject of the same size, erased (timed); the plan of its visit
//!    delete printed (`EXPLAIN`), which must read `visits_code_time`.
//!
//! Prints the ratio measured / reference. Exits 1 over 1 s (the issue's bound).
//! Run through `bench/privacy/run`.

#[path = "common/mod.rs"]
mod common;

use common::{create_links, start_sidecar, store_visits, API_KEY};
use shortlink_visits::store::VisitStore;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const DAY_MS: i64 = 86_400_000;

/// Stores `n` visits spread over `codes` and 60 days from `start_ms`, ids `{prefix}{k}`.
/// `n` visits to `codes` spread over 60 days from `start_ms`, with ids `<prefix><i>`.
async fn store_spread(
    store: &dyn VisitStore,
    codes: &[String],
    n: usize,
    prefix: &str,
    start_ms: i64,
) {
    let step = ((60 * DAY_MS) / n.max(1) as i64).max(1);
    let id = |i: usize| format!("{prefix}{i:012}");
    store_visits(
        store,
        codes,
        n,
        id,
        |i| start_ms + i as i64 * step,
        |_| None,
    )
    .await;
}

/// The erase of `reference`'s data: (ms, visits it deleted).
async fn erase(base: &str, reference: &str) -> (f64, i64) {
    let started = Instant::now();
    let answer = reqwest::Client::new()
        .post(format!("{base}/api/v1/subjects/erase"))
        .bearer_auth(API_KEY)
        .json(&serde_json::json!({"request_id": format!("bench-{reference}"), "ref": reference}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let body: serde_json::Value = answer.json().await.unwrap();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    (ms, body["visits"].as_i64().unwrap())
}

fn main() {
    let links = testkit::knob("BENCH_LINKS", 10_000);
    let visits = testkit::knob("BENCH_VISITS", 2_000_000);
    let subject = testkit::knob("BENCH_SUBJECT_VISITS", 1_000);
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_shortlink-sidecar"));
    let runtime = common::runtime();
    let dir = testkit::temp_dir();
    let redis = testkit::RedisServer::start();
    let url = testkit::postgres().fresh_database_url();
    let (_sidecar, base) =
        start_sidecar(&binary, &url, &redis.url(), &dir.path().join("sidecar.log"));
    let failed = runtime.block_on(async {
        shortlink_e2e::install_tls_provider();
        let options = shortlink_store::ConnectOptions {
            url: url.clone(),
            max_connections: 4,
            acquire_timeout: Duration::from_secs(10),
            sqlite_cache: Default::default(),
        };
        let store = shortlink_visits_sql::connect(&options).await.unwrap().visits;
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        let start_ms = chrono::Utc::now().timestamp_millis() - 61 * DAY_MS;
        let code_of = |reference: &'static str| {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, String>("SELECT code FROM links WHERE recipient_ref = $1")
                    .bind(reference)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        };

        // The reference: the subject alone.
        let made = create_links(&base, std::iter::once(serde_json::json!({"url": common::target(0), "ref": "s-ref"}))).await;
        assert_eq!(made, 1);
        store_spread(store.as_ref(), &[code_of("s-ref").await], subject, "r", start_ms).await;
        let (reference_ms, n) = erase(&base, "s-ref").await;
        assert_eq!(n as usize, subject);

        // Everyone else, then the measured subject.
        let made = create_links(
            &base,
            (0..links).map(|i| serde_json::json!({"url": common::target(i), "campaign": "bench", "ref": format!("p-{i}")})),
        )
        .await;
        assert_eq!(made, links);
        let codes: Vec<String> = sqlx::query_scalar("SELECT code FROM links WHERE campaign = 'bench'")
            .fetch_all(&pool)
            .await
            .unwrap();
        let started = Instant::now();
        store_spread(store.as_ref(), &codes, visits, "b", start_ms).await;
        eprintln!("{visits} visits stored in {:.0} s", started.elapsed().as_secs_f64());
        create_links(&base, std::iter::once(serde_json::json!({"url": common::target(1), "campaign": "bench", "ref": "s-one"}))).await;
        let code = code_of("s-one").await;
        store_spread(store.as_ref(), std::slice::from_ref(&code), subject, "s", start_ms).await;
        sqlx::query("ANALYZE").execute(&pool).await.unwrap();
        let plan: Vec<String> = sqlx::query_scalar("EXPLAIN DELETE FROM visits WHERE code = $1")
            .bind(&code)
            .fetch_all(&pool)
            .await
            .unwrap();
        let (measured_ms, n) = erase(&base, "s-one").await;
        assert_eq!(n as usize, subject);
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM visits")
            .fetch_one(&pool)
            .await
            .unwrap();
        println!("plan of the visit delete:\n  {}", plan.join("\n  "));
        println!("| erase of {subject} visits, alone (reference) | {reference_ms:.1} ms | | |");
        println!(
            "| erase of {subject} visits among {rows} | {measured_ms:.1} ms | {:.2}x the reference | <= 1,000 ms |",
            measured_ms / reference_ms
        );
        // On partitions (migration 54) each day's copy of the index is `<partition>_code_visited_at_idx`.
        let by_code = |line: &String| {
            line.contains("visits_code_time") || line.contains("_code_visited_at_idx")
        };
        measured_ms > 1000.0 || !plan.iter().any(by_code)
    });
    if failed {
        std::process::exit(1);
    }
}
