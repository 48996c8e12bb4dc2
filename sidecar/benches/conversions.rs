//! Conversions (issue 54): ingest through `POST /api/v1/conversions` as NDJSON, and the A/B
//! result's answer time, on PostgreSQL with the release sidecar.
//!
//! 1. `BENCH_LINKS` links (default 100) in one campaign, issued through the batch endpoint; then
//!    `BENCH_VISITS` human visits (default 1,000,000; the size is 10,000,000) spread over
//!    them, half on each variant of a split (`rule` `0.0` / `0.1`), stored through the visit
//!    store as the consumer stores them.
//! 2. `BENCH_CONVERSIONS` conversions (default 200,000; the size is 1,000,000) of
//!    distinct visits, posted as NDJSON in requests of `BENCH_LINES` lines (default 10,000),
//!    one request at a time: conversions/s from the first byte sent to the last answer read.
//!    Issue 54 asks for at least 20,000/s.
//! 3. `GET /api/v1/links/{code}/ab` of one link and `GET /api/v1/campaigns/{campaign}/ab` of the
//!    whole campaign, 20 times each: p50 and max. Issue 54 asks for at most 100 ms.
//!
//! 4. The reference in the same run: the campaign's per-arm clicks and distinct visitors counted
//!    from the raw visits by one SQL query (what the results did before their rollups), 5 times.
//!
//! Run through `bench/conversions/run`. Exits 1 below the ingest rate (fresh table or analyzed)
//! or above the answer time.

#[path = "common/mod.rs"]
mod common;

use common::{post_ndjson, start_sidecar, API_KEY};
use shortlink_sidecar::visits::store::VisitStore;
use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const CAMPAIGN: &str = "bench-ab";
const TRANSACTION: usize = 16_000;
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn visit_id(k: usize) -> String {
    format!("b{k:012}")
}

async fn store_visits(store: &dyn VisitStore, codes: &[String], n: usize, start_ms: i64) {
    let enricher = Enricher::new(GeoDb::disabled(), false);
    let mut k = 0;
    while k < n {
        let end = n.min(k + TRANSACTION);
        let visits: Vec<_> = (k..end)
            .map(|i| {
                let ip = format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255);
                let t = (start_ms + i as i64).to_string();
                let rule = if i % 2 == 0 { "0.0" } else { "0.1" };
                let fields = [
                    ("c", codes[i % codes.len()].as_str()),
                    ("t", t.as_str()),
                    ("s", "302"),
                    ("ip", ip.as_str()),
                    ("ua", IPHONE),
                    ("host", "s1.example"),
                    ("rule", rule),
                ];
                let event = VisitEvent::from_fields(visit_id(i), fields).unwrap();
                enricher.enrich(&event)
            })
            .collect();
        store.store_batch(&visits, false).await.unwrap();
        k = end;
    }
}

/// (p50, max) in ms of `n` GETs of `path`.
async fn answer_times(base: &str, path: &str, n: usize) -> (f64, f64) {
    let client = reqwest::Client::new();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let answer = client
            .get(format!("{base}/api/v1{path}"))
            .bearer_auth(API_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}");
        let _ = answer.bytes().await.unwrap();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    (times[n / 2], times[n - 1])
}

/// (p50, max) in ms of the campaign's per-arm clicks and distinct visitors counted from the raw
/// visits, `n` times.
async fn raw_campaign_times(pool: &sqlx::PgPool, n: usize) -> (f64, f64) {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let rows = sqlx::query(
            "SELECT v.rule, COUNT(*), COUNT(DISTINCT v.visitor) FROM links l \
             JOIN visits v ON v.code = l.code \
             WHERE l.campaign = $1 AND v.audience = 'human' GROUP BY v.rule",
        )
        .bind(CAMPAIGN)
        .fetch_all(pool)
        .await
        .unwrap();
        assert!(!rows.is_empty());
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    (times[n / 2], times[n - 1])
}

fn main() {
    let links = env_usize("BENCH_LINKS", 100);
    let visits = env_usize("BENCH_VISITS", 1_000_000);
    let conversions = env_usize("BENCH_CONVERSIONS", 200_000).min(visits);
    let per_request = env_usize("BENCH_LINES", 10_000);
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_shortlink-sidecar"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = testkit::temp_dir();
    let redis = testkit::RedisServer::start();
    let url = testkit::postgres().fresh_database_url();
    let (_sidecar, base) =
        start_sidecar(&binary, &url, &redis.url(), &dir.path().join("sidecar.log"));
    let failed = runtime.block_on(async {
        shortlink_e2e::install_tls_provider();
        let body: Vec<u8> = (0..links)
            .flat_map(|i| {
                let mut line = serde_json::to_vec(&serde_json::json!({
                    "url": common::target(i), "campaign": CAMPAIGN, "ref": format!("r-{i}")
                }))
                .unwrap();
                line.push(b'\n');
                line
            })
            .collect();
        let (_, created) = post_ndjson(&base, "/links/batch", body).await;
        assert_eq!(created, links);
        let options = shortlink_sidecar::storage::ConnectOptions {
            url: url.clone(),
            max_connections: 4,
            acquire_timeout: Duration::from_secs(10),
            sqlite_cache: Default::default(),
        };
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        let codes: Vec<String> = sqlx::query_scalar("SELECT code FROM links ORDER BY code")
            .fetch_all(&pool)
            .await
            .unwrap();
        let store = shortlink_sidecar::visits::store::connect(&options).await.unwrap();
        let start_ms = chrono::Utc::now().timestamp_millis() - 7 * 86_400_000;
        let started = Instant::now();
        store_visits(store.as_ref(), &codes, visits, start_ms).await;
        eprintln!(
            "{visits} visits stored in {:.0} s",
            started.elapsed().as_secs_f64()
        );
        sqlx::query("ANALYZE").execute(&pool).await.unwrap();

        // Every `visits / conversions`-th visit converts; variant 1 a little more often.
        let step = (visits / conversions).max(1);
        let chosen: Vec<usize> = (0..visits)
            .step_by(step)
            .take(conversions)
            .collect();
        let mut rates = Vec::new();
        // Two halves: the first into a table PostgreSQL has no statistics of yet (as right after
        // the migration), the second after ANALYZE (as autovacuum keeps a table in use).
        let half = chosen.len() / 2;
        let mut total = 0;
        for (label, part) in [("fresh table", &chosen[..half]), ("analyzed", &chosen[half..])] {
            let (mut secs, mut stored) = (0.0, 0);
            for (n, chunk) in part.chunks(per_request).enumerate() {
                let mut body = Vec::with_capacity(chunk.len() * 140);
                for (j, &k) in chunk.iter().enumerate() {
                    let line = serde_json::json!({
                        "click_id": visit_id(k), "name": "purchase", "value": "19.99",
                        "currency": "EUR", "event_id": format!("order-{label}-{n}-{j}")
                    });
                    serde_json::to_writer(&mut body, &line).unwrap();
                    body.push(b'\n');
                }
                let (took, created) = post_ndjson(&base, "/conversions", body).await;
                secs += took;
                stored += created;
            }
            assert_eq!(stored, part.len(), "every conversion stored");
            println!(
                "| ingest ({label}), NDJSON requests of {per_request} lines | {stored} conversions in {secs:.2} s | {:.0}/s | >= 20,000/s |",
                stored as f64 / secs
            );
            rates.push(stored as f64 / secs);
            total += stored;
            sqlx::query("ANALYZE conversions").execute(&pool).await.unwrap();
        }
        let stored = total;
        sqlx::query("ANALYZE").execute(&pool).await.unwrap();
        let link = answer_times(&base, &format!("/links/{}/ab", codes[0]), 20).await;
        let campaign = answer_times(&base, &format!("/campaigns/{CAMPAIGN}/ab"), 20).await;
        // The reference, in the same run: the campaign's clicks and visitors per arm counted
        // from the raw visits, as the results did before the rollups (migration 53).
        let raw = raw_campaign_times(&pool, 5).await;
        println!(
            "| A/B of one link ({} visits) | p50 {:.1} ms, max {:.1} ms | | <= 100 ms |",
            visits / links,
            link.0,
            link.1
        );
        println!(
            "| A/B of the campaign ({visits} visits, {stored} conversions) | p50 {:.1} ms, max {:.1} ms | | <= 100 ms |",
            campaign.0, campaign.1
        );
        println!(
            "| reference: the campaign's clicks and visitors per arm from the raw visits (one SQL query) | p50 {:.1} ms, max {:.1} ms | raw query / A/B answer {:.0}x | |",
            raw.0,
            raw.1,
            raw.0 / campaign.0
        );
        println!(
            "| ingest: fresh table / analyzed | | {:.2} | |",
            rates[0] / rates[1]
        );
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("\nLoad average at the end (1, 5, 15 min): {load}");
        rates[0] < 20_000.0 || rates[1] < 20_000.0 || link.0 > 100.0 || campaign.0 > 100.0
    });
    if failed {
        std::process::exit(1);
    }
}
