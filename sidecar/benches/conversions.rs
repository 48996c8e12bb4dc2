//! Conversions (issue 54): ingest through `POST /api/v1/conversions` as NDJSON, and the A/B
//! result's answer time, on PostgreSQL with the release sidecar.
//!
//! 1. `BENCH_LINKS` links (default 100) in one campaign, issued through the batch endpoint; then
//!    `BENCH_VISITS` human visits (default 1,000,000; the size is 10,000,000) spread over
//!    them, half on each variant of a split (`rule` `0.0` / `0.1`), stored through the visit
//!    store as the consumer stores them. Loaded once; each cell below runs on its own copy
//!    (`CREATE DATABASE ... TEMPLATE`), so every binary ingests into the same rows.
//! 2. Per cell (a sidecar binary on its copy): `BENCH_CONVERSIONS` conversions (default 200,000;
//!    the size is 1,000,000) of distinct visits, posted as NDJSON in requests of
//!    `BENCH_LINES` lines (default 10,000), one request at a time: conversions/s from the first
//!    byte sent to the last answer read, and CPU per conversion of the sidecar and of its
//!    PostgreSQL backends (from /proc). The first half goes into a table PostgreSQL has no
//!    statistics of, the second after ANALYZE. Issue 54 asks for at least 20,000/s.
//! 3. Per cell: `GET /api/v1/links/{code}/ab` of one link and `GET /api/v1/campaigns/{campaign}/ab`
//!    of the whole campaign, 20 times each: p50 and max. Issue 54 asks for at most 100 ms.
//! 4. The reference in the same run: the campaign's per-arm clicks and distinct visitors counted
//!    from the raw visits by one SQL query (what the results did before their rollups), 5 times.
//!
//! `BENCH_SIDECAR_BEFORE=<binary>`: that build is measured too, in the same run, in the order
//! before, this, this, before, ... over `BENCH_ROUNDS` rounds (default 1), and the ratios
//! printed; it migrates the loaded database, so it must be the older build.
//! `BENCH_CONSUMER_VISITS=<n>` (default 0: not run): the visit consumer of this build drains `n`
//! visits of the links, split over two variants (so each batch upserts `ab_arms`), written to
//! the stream while it runs, on a fresh database: visits/s and CPU per visit of the sidecar and
//! its PostgreSQL backends; with `BENCH_CONSUMER_BEFORE=<binary>` that build too, in the same
//! order as above, and the ratios. `BENCH_SIDECAR=<binary>`: measure that copy as this build.
//! `BENCH_PG_LOG=1`: every statement of the cells and its duration go to the PostgreSQL log.
//!
//! Run through `bench/conversions/run`. Exits 1 below the ingest rate (fresh table or analyzed)
//! or above the answer time, for this build.

#[path = "common/mod.rs"]
mod common;

use common::{cpu_secs, create_links, post_ndjson, start_sidecar, store_visits, API_KEY, IPHONE};
use shortlink_wire::keys::EVENT_STREAM;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CAMPAIGN: &str = "bench-ab";

fn visit_id(k: usize) -> String {
    format!("b{k:012}")
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

/// The visits' database, loaded once: links issued through `binary` (which migrates it), then
/// the visits stored through the visit store. Returns the links' codes.
async fn load(
    binary: &Path,
    url: &str,
    redis_url: &str,
    dir: &Path,
    links: usize,
    visits: usize,
) -> Vec<String> {
    let (mut sidecar, base) = start_sidecar(binary, url, redis_url, &dir.join("sidecar-load.log"));
    let items = (0..links).map(|i| {
        serde_json::json!({"url": common::target(i), "campaign": CAMPAIGN, "ref": format!("r-{i}")})
    });
    assert_eq!(create_links(&base, items).await, links);
    sidecar.stop();
    let options = shortlink_store::ConnectOptions {
        url: url.to_owned(),
        max_connections: 4,
        acquire_timeout: Duration::from_secs(10),
        sqlite_cache: Default::default(),
    };
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let codes: Vec<String> = sqlx::query_scalar("SELECT code FROM links ORDER BY code")
        .fetch_all(&pool)
        .await
        .unwrap();
    let store = shortlink_visits_sql::connect(&options)
        .await
        .unwrap()
        .visits;
    let start_ms = chrono::Utc::now().timestamp_millis() - 7 * 86_400_000;
    let started = Instant::now();
    // Every other visit answered by the A/B rule's second variant.
    let rule = |i: usize| Some(if i % 2 == 0 { "0.0" } else { "0.1" });
    let at = |i: usize| start_ms + i as i64;
    store_visits(store.as_ref(), &codes, visits, visit_id, at, rule).await;
    eprintln!(
        "{visits} visits stored in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    sqlx::query("ANALYZE").execute(&pool).await.unwrap();
    drop(store);
    pool.close().await;
    codes
}

/// CPU seconds used so far by the database's client backends (the sidecar's connections), by
/// pid, read from /proc (the server runs on this machine).
async fn backend_cpu(pool: &sqlx::PgPool) -> HashMap<u32, f64> {
    let pids: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
         AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    (pids.into_iter())
        .map(|pid| (pid as u32, cpu_secs(pid as u32)))
        .collect()
}

/// One binary's ingest on its own copy of the loaded database.
struct Cell {
    label: String,
    /// (conversions/s, sidecar CPU µs per conversion, PostgreSQL backends' CPU µs per
    /// conversion), fresh table then analyzed.
    halves: Vec<(f64, f64, f64)>,
    link: (f64, f64),
    campaign: (f64, f64),
}

#[allow(clippy::too_many_arguments)]
async fn cell(
    label: &str,
    binary: &Path,
    url: &str,
    redis_url: &str,
    dir: &Path,
    chosen: &[usize],
    per_request: usize,
    codes: &[String],
) -> Cell {
    let (sidecar, base) = start_sidecar(
        binary,
        url,
        redis_url,
        &dir.join(format!("sidecar-{label}.log")),
    );
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let mut halves = Vec::new();
    // Two halves: the first into a table PostgreSQL has no statistics of yet (as right after
    // the migration), the second after ANALYZE (as autovacuum keeps a table in use).
    let half = chosen.len() / 2;
    for (name, part) in [
        ("fresh table", &chosen[..half]),
        ("analyzed", &chosen[half..]),
    ] {
        let (mut secs, mut stored) = (0.0, 0);
        let sidecar_cpu = cpu_secs(sidecar.pid());
        let mut backends = backend_cpu(&pool).await;
        for (n, chunk) in part.chunks(per_request).enumerate() {
            let mut body = Vec::with_capacity(chunk.len() * 140);
            for (j, &k) in chunk.iter().enumerate() {
                let line = serde_json::json!({
                    "click_id": visit_id(k), "name": "purchase", "value": "19.99",
                    "currency": "EUR", "event_id": format!("order-{name}-{n}-{j}")
                });
                serde_json::to_writer(&mut body, &line).unwrap();
                body.push(b'\n');
            }
            let (took, created) = post_ndjson(&base, "/conversions", body).await;
            secs += took;
            stored += created;
            // Backends the pool opened meanwhile count from zero.
            for (pid, _) in backend_cpu(&pool).await {
                backends.entry(pid).or_insert(0.0);
            }
        }
        assert_eq!(stored, part.len(), "every conversion stored");
        let sidecar_cpu = cpu_secs(sidecar.pid()) - sidecar_cpu;
        let pg_cpu: f64 = (backends.iter())
            .map(|(&pid, &at)| (cpu_secs(pid) - at).max(0.0))
            .sum();
        let micros = |cpu: f64| cpu * 1e6 / stored as f64;
        halves.push((stored as f64 / secs, micros(sidecar_cpu), micros(pg_cpu)));
        println!(
            "| {label}: ingest ({name}), NDJSON requests of {per_request} lines | {stored} conversions in {secs:.2} s | {:.0}/s | sidecar {:.1} µs CPU, PostgreSQL backends {:.1} µs CPU per conversion |",
            stored as f64 / secs,
            micros(sidecar_cpu),
            micros(pg_cpu)
        );
        sqlx::query("ANALYZE conversions")
            .execute(&pool)
            .await
            .unwrap();
    }
    sqlx::query("ANALYZE").execute(&pool).await.unwrap();
    let link = answer_times(&base, &format!("/links/{}/ab", codes[0]), 20).await;
    let campaign = answer_times(&base, &format!("/campaigns/{CAMPAIGN}/ab"), 20).await;
    println!(
        "| {label}: A/B of one link, of the campaign | p50 {:.1} ms (max {:.1}), p50 {:.1} ms (max {:.1}) | | |",
        link.0, link.1, campaign.0, campaign.1
    );
    pool.close().await;
    drop(sidecar);
    Cell {
        label: label.to_owned(),
        halves,
        link,
        campaign,
    }
}

/// The visit consumer of `binary`, on a fresh database and Redis: `n` human visits of `links`
/// links (half on each variant of a split, so each batch upserts `ab_arms`) written to the
/// stream as field groups while it runs; (visits/s, sidecar CPU µs per visit, PostgreSQL
/// backends' CPU µs per visit) until the group has read and acknowledged all of them.
async fn consumer_cell(
    label: &str,
    binary: &Path,
    dir: &Path,
    links: usize,
    n: usize,
) -> (f64, f64, f64) {
    let redis = testkit::RedisServer::start();
    let url = testkit::postgres().fresh_database_url();
    let log = dir.join(format!("sidecar-consumer-{label}.log"));
    let (sidecar, base) = start_sidecar(binary, &url, &redis.url(), &log);
    let items =
        (0..links).map(|i| serde_json::json!({"url": common::target(i), "campaign": CAMPAIGN}));
    assert_eq!(create_links(&base, items).await, links);
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let codes: Vec<String> = sqlx::query_scalar("SELECT code FROM links ORDER BY code")
        .fetch_all(&pool)
        .await
        .unwrap();
    let mut redis_conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let now = chrono::Utc::now().timestamp_millis();
    let started = Instant::now();
    let sidecar_cpu = cpu_secs(sidecar.pid());
    let mut backends = backend_cpu(&pool).await;
    let mut i = 0;
    while i < n {
        let mut pipe = redis::pipe();
        for _ in 0..1000.min(n - i) {
            let ip = format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255);
            let rule = if i % 2 == 0 { "0.0" } else { "0.1" };
            pipe.cmd("XADD")
                .arg(EVENT_STREAM)
                .arg("*")
                .arg("c")
                .arg(&codes[i % codes.len()])
                .arg("t")
                .arg(now - (n - i) as i64)
                .arg("s")
                .arg("302")
                .arg("ip")
                .arg(ip)
                .arg("ua")
                .arg(IPHONE)
                .arg("host")
                .arg("s1.example")
                .arg("rule")
                .arg(rule)
                .ignore();
            i += 1;
        }
        pipe.query_async::<()>(&mut redis_conn).await.unwrap();
    }
    // Drained: the group has read every entry (lag 0) and acknowledged it (nothing pending),
    // and a consumer acknowledges only what it committed.
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let groups: Vec<HashMap<String, redis::Value>> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(EVENT_STREAM)
            .query_async(&mut redis_conn)
            .await
            .unwrap();
        let int = |g: &HashMap<String, redis::Value>, k: &str| match g.get(k) {
            Some(redis::Value::Int(v)) => Some(*v),
            _ => None,
        };
        if let Some(g) = groups.first() {
            if int(g, "lag") == Some(0) && int(g, "pending") == Some(0) {
                break;
            }
        }
        for (pid, _) in backend_cpu(&pool).await {
            backends.entry(pid).or_insert(0.0);
        }
        assert!(
            Instant::now() < deadline,
            "the consumer did not drain in time"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let sidecar_cpu = cpu_secs(sidecar.pid()) - sidecar_cpu;
    let pg_cpu: f64 = (backends.iter())
        .map(|(&pid, &at)| (cpu_secs(pid) - at).max(0.0))
        .sum();
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM visits")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, n as i64, "{label}: every visit stored");
    let arms: i64 =
        sqlx::query_scalar("SELECT CAST(COALESCE(SUM(humans), 0) AS BIGINT) FROM ab_arms")
            .fetch_one(&pool)
            .await
            .unwrap_or(0);
    let micros = |cpu: f64| cpu * 1e6 / n as f64;
    println!(
        "| consumer, {label} | {n} visits in {secs:.2} s (ab_arms humans {arms}) | {:.0}/s | sidecar {:.1} µs CPU, PostgreSQL backends {:.1} µs CPU per visit |",
        n as f64 / secs,
        micros(sidecar_cpu),
        micros(pg_cpu)
    );
    pool.close().await;
    drop(sidecar);
    let name = url.rsplit('/').next().unwrap().to_owned();
    testkit::postgres()
        .query(&format!("DROP DATABASE {name}"))
        .ok();
    (n as f64 / secs, micros(sidecar_cpu), micros(pg_cpu))
}

/// `CREATE DATABASE copy TEMPLATE template`, once the pools of the load have let go of it (a
/// template must have no session).
fn copy_database(pg: &testkit::Postgres, template: &str, copy: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match pg.query(&format!("CREATE DATABASE {copy} TEMPLATE {template}")) {
            Ok(_) => return,
            Err(error) if Instant::now() < deadline && error.contains("other users") => {
                std::thread::sleep(Duration::from_millis(200))
            }
            Err(error) => panic!("copy the loaded database: {error}"),
        }
    }
}

fn database_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap()
}

fn main() {
    let links = testkit::knob("BENCH_LINKS", 100);
    let visits = testkit::knob("BENCH_VISITS", 1_000_000);
    let conversions = testkit::knob("BENCH_CONVERSIONS", 200_000).min(visits);
    let per_request = testkit::knob("BENCH_LINES", 10_000);
    let rounds = testkit::knob("BENCH_ROUNDS", 1).max(1);
    // Another build's target/release may be rewritten meanwhile: `BENCH_SIDECAR` names a copy.
    let current = std::env::var_os("BENCH_SIDECAR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_shortlink-sidecar")));
    let before = std::env::var_os("BENCH_SIDECAR_BEFORE").map(PathBuf::from);
    // before, this, this, before, ...: a drift of the machine's load over the run falls on both.
    let mut binaries: Vec<(&str, &Path)> = Vec::new();
    for round in 0..rounds {
        let mut pair = vec![("this build", current.as_path())];
        if let Some(before) = &before {
            pair.insert(0, ("before", before.as_path()));
        }
        if round % 2 == 1 {
            pair.reverse();
        }
        binaries.extend(pair);
    }
    let runtime = common::runtime();
    let dir = testkit::temp_dir();
    let redis = testkit::RedisServer::start();
    let pg = testkit::postgres();
    let loaded = pg.fresh_database_url();
    let uptime = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("Load average at the start (1, 5, 15 min): {uptime}");
    let failed = runtime.block_on(async {
        shortlink_e2e::install_tls_provider();
        // Migrated by the oldest binary: a newer one adds its migrations to its copy.
        let oldest = before.as_deref().unwrap_or(&current);
        let codes = load(oldest, &loaded, &redis.url(), dir.path(), links, visits).await;
        // Every `visits / conversions`-th visit converts.
        let step = (visits / conversions).max(1);
        let chosen: Vec<usize> = (0..visits).step_by(step).take(conversions).collect();
        let mut cells = Vec::new();
        for (n, (label, binary)) in binaries.iter().enumerate() {
            let copy = format!("{}_cell{n}", database_name(&loaded));
            copy_database(pg, database_name(&loaded), &copy);
            if std::env::var_os("BENCH_PG_LOG").is_some() {
                // Every statement and its duration in the server's log (the profile of a batch).
                pg.query(&format!("ALTER DATABASE {copy} SET log_min_duration_statement = 0"))
                    .unwrap();
            }
            let url = pg.database_url(&copy);
            let redis = testkit::RedisServer::start();
            cells.push(cell(label, binary, &url, &redis.url(), dir.path(), &chosen, per_request, &codes).await);
            pg.query(&format!("DROP DATABASE {copy}")).unwrap();
        }
        // The reference, in the same run: the campaign's clicks and visitors per arm counted
        // from the raw visits, as the results did before the rollups (migration 53).
        let pool = sqlx::PgPool::connect(&loaded).await.unwrap();
        let raw = raw_campaign_times(&pool, 5).await;
        pool.close().await;
        println!(
            "| reference: the campaign's clicks and visitors per arm from the raw visits ({visits} visits, one SQL query) | p50 {:.1} ms, max {:.1} ms | | |",
            raw.0, raw.1
        );
        let mean = |label: &str, half: usize, at: fn(&(f64, f64, f64)) -> f64| {
            let of: Vec<f64> = (cells.iter())
                .filter(|c| c.label == label)
                .map(|c| at(&c.halves[half]))
                .collect();
            of.iter().sum::<f64>() / of.len() as f64
        };
        for (half, name) in [(0, "fresh table"), (1, "analyzed")] {
            let rate = mean("this build", half, |h| h.0);
            if before.is_some() {
                let ratio = |at: fn(&(f64, f64, f64)) -> f64| {
                    mean("this build", half, at) / mean("before", half, at)
                };
                println!(
                    "| this build / before ({name}) | rate {:.2}x, sidecar CPU {:.2}x, PostgreSQL CPU {:.2}x per conversion | | |",
                    ratio(|h| h.0),
                    ratio(|h| h.1),
                    ratio(|h| h.2)
                );
            }
            println!("| this build ({name}), mean of its cells | {rate:.0}/s | {:.2}x of 20,000/s | >= 20,000/s |", rate / 20_000.0);
        }
        // The visit consumer with the `ab_arms` upsert, against a build without rollups.
        let consumer_visits = testkit::knob("BENCH_CONSUMER_VISITS", 0);
        if consumer_visits > 0 {
            let reference = std::env::var_os("BENCH_CONSUMER_BEFORE").map(PathBuf::from);
            let mut runs: Vec<(&str, (f64, f64, f64))> = Vec::new();
            for round in 0..rounds {
                let mut pair = vec![("this build", current.as_path())];
                if let Some(reference) = &reference {
                    pair.insert(0, ("reference", reference.as_path()));
                }
                if round % 2 == 1 {
                    pair.reverse();
                }
                for (label, binary) in pair {
                    let run = consumer_cell(label, binary, dir.path(), links, consumer_visits).await;
                    runs.push((label, run));
                }
            }
            if reference.is_some() {
                let mean = |label: &str, at: fn(&(f64, f64, f64)) -> f64| {
                    let of: Vec<f64> = (runs.iter())
                        .filter(|(l, _)| *l == label)
                        .map(|(_, r)| at(r))
                        .collect();
                    of.iter().sum::<f64>() / of.len() as f64
                };
                let ratio = |at: fn(&(f64, f64, f64)) -> f64| mean("this build", at) / mean("reference", at);
                println!(
                    "| consumer: this build / reference | visits/s {:.2}x, sidecar CPU {:.2}x, PostgreSQL CPU {:.2}x per visit | | |",
                    ratio(|r| r.0),
                    ratio(|r| r.1),
                    ratio(|r| r.2)
                );
            }
        }
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("\nLoad average at the end (1, 5, 15 min): {load}");
        (cells.iter()).filter(|c| c.label == "this build").any(|c| {
            c.halves.iter().any(|h| h.0 < 20_000.0) || c.link.0 > 100.0 || c.campaign.0 > 100.0
        })
    });
    pg.query(&format!("DROP DATABASE {}", database_name(&loaded)))
        .ok();
    if failed {
        std::process::exit(1);
    }
}
