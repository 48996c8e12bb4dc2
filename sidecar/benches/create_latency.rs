//! Single-create latency over the REST API, on SQLite and on PostgreSQL.
//!
//! Starts a private redis-server (and PostgreSQL cluster) through `testkit`, runs the release
//! `shortlink-sidecar serve` binary on each backend, then with one HTTP/1.1 keep-alive client sends
//! sequential requests: `BENCH_WARMUP` creates (default 200), then `BENCH_N` creates (default 2000)
//! interleaved one-for-one with `GET /healthz`, the reference measured in the same run by the same
//! client over the same connection. Prints a markdown table. Run through
//! `bench/create-latency/run` (or `cargo bench -p shortlink-sidecar --bench create_latency`).

use std::path::Path;
use std::time::{Duration, Instant};
use testkit::process::Lifeline;
use testkit::RedisServer;

mod common;
use common::API_KEY;

struct Row {
    backend: &'static str,
    create: Vec<Duration>,
    healthz: Vec<Duration>,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn start_sidecar(database_url: &str, redis_url: &str, log: &Path) -> (Lifeline, String) {
    start_binary(
        env!("CARGO_BIN_EXE_shortlink-sidecar"),
        &[],
        database_url,
        redis_url,
        log,
    )
}

fn start_binary(
    binary: &str,
    extra: &[&str],
    database_url: &str,
    redis_url: &str,
    log: &Path,
) -> (Lifeline, String) {
    let mut args = vec!["--public-base-url", "https://s.example"];
    args.extend_from_slice(extra);
    common::start_binary(binary, database_url, redis_url, &args, log)
}

/// `BENCH_SIDECAR_BEFORE=<binary>`: this build (or `BENCH_SIDECAR_AFTER=<binary>`; with
/// `BENCH_AFTER_ARGS`, e.g. a rate limit) and that one side by side, each on its own database
/// and Redis, in alternating rounds of 100 creates so the machine's drift hits both alike;
/// prints p50 and p99 of each and their ratios.
fn compare(before: &str, warmup: usize, n: usize, only: &str) {
    let after_args = std::env::var("BENCH_AFTER_ARGS").unwrap_or_default();
    let after_args: Vec<&str> = after_args.split_ascii_whitespace().collect();
    // A copy of a build kept aside, so a rebuild of the workspace during the run changes nothing.
    let after = std::env::var("BENCH_SIDECAR_AFTER")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_shortlink-sidecar").to_owned());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = testkit::temp_dir();
    println!("Single create, {after} (after, `{}`) against {before} (before), alternating rounds of 100.", after_args.join(" "));
    println!();
    println!("| backend | before p50 | after p50 | before p99 | after p99 | speed after/before (p50) | (p99) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for backend in ["sqlite", "postgres"] {
        if !only.split(',').any(|b| b.trim() == backend) {
            continue;
        }
        let mut sides = Vec::new();
        for (name, binary, extra) in [
            ("before", before, &[][..]),
            ("after", after.as_str(), &after_args[..]),
        ] {
            let redis = RedisServer::start();
            let database_url = match backend {
                "sqlite" => format!(
                    "sqlite://{}",
                    dir.path().join(format!("{name}.db")).display()
                ),
                _ => testkit::postgres().fresh_database_url(),
            };
            let log = dir.path().join(format!("sidecar-{backend}-{name}.log"));
            let (sidecar, base) = start_binary(binary, extra, &database_url, &redis.url(), &log);
            sides.push((redis, sidecar, base, Vec::new()));
        }
        for side in &sides {
            runtime.block_on(measure(&side.2, warmup, 1));
        }
        for _ in 0..n.div_ceil(100) {
            for side in &mut sides {
                let (creates, _) = runtime.block_on(measure(&side.2, 0, 100));
                side.3.extend(creates);
            }
        }
        let stats: Vec<(Duration, Duration)> = (sides.iter_mut())
            .map(|side| {
                side.3.sort();
                (percentile(&side.3, 0.5), percentile(&side.3, 0.99))
            })
            .collect();
        let (before, after) = (stats[0], stats[1]);
        println!(
            "| {backend} | {} | {} | {} | {} | {:.2} | {:.2} |",
            ms(before.0),
            ms(after.0),
            ms(before.1),
            ms(after.1),
            before.0.as_secs_f64() / after.0.as_secs_f64(),
            before.1.as_secs_f64() / after.1.as_secs_f64(),
        );
        for (_, mut sidecar, _, _) in sides {
            sidecar.stop();
        }
    }
}

async fn measure(base: &str, warmup: usize, n: usize) -> (Vec<Duration>, Vec<Duration>) {
    shortlink_e2e::install_tls_provider();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let create_url = format!("{base}/api/v1/links");
    let health_url = format!("{base}/healthz");
    let create = |i: usize| {
        let request = client
            .post(&create_url)
            .bearer_auth(API_KEY)
            .header("content-type", "application/json")
            .body(format!(
                r#"{{"url":"https://shop.example/campaign/spring?recipient={i}"}}"#
            ));
        async move {
            let started = Instant::now();
            let response = request.send().await.expect("POST /links");
            let status = response.status();
            let _ = response.bytes().await.expect("body");
            let elapsed = started.elapsed();
            assert_eq!(status, 201, "create answered {status}");
            elapsed
        }
    };
    for i in 0..warmup {
        create(i).await;
    }
    let mut creates = Vec::with_capacity(n);
    let mut healths = Vec::with_capacity(n);
    for i in 0..n {
        creates.push(create(warmup + i).await);
        let started = Instant::now();
        let response = client.get(&health_url).send().await.expect("GET /healthz");
        let status = response.status();
        let _ = response.bytes().await;
        healths.push(started.elapsed());
        assert_eq!(status, 200);
    }
    creates.sort();
    healths.sort();
    (creates, healths)
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter.
    let warmup = testkit::knob("BENCH_WARMUP", 200);
    let n = testkit::knob("BENCH_N", 2000).max(1);
    let only = std::env::var("BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
    if let Ok(before) = std::env::var("BENCH_SIDECAR_BEFORE") {
        compare(&before, warmup, n, &only);
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = testkit::temp_dir();
    let redis = RedisServer::start();
    let mut rows = Vec::new();

    for backend in ["sqlite", "postgres"] {
        if !only.split(',').any(|b| b.trim() == backend) {
            continue;
        }
        let database_url = match backend {
            "sqlite" => format!("sqlite://{}", dir.path().join("bench.db").display()),
            _ => testkit::postgres().fresh_database_url(),
        };
        let log = dir.path().join(format!("sidecar-{backend}.log"));
        let (mut sidecar, base) = start_sidecar(&database_url, &redis.url(), &log);
        let (create, healthz) = runtime.block_on(measure(&base, warmup, n));
        sidecar.stop();
        rows.push(Row {
            backend,
            create,
            healthz,
        });
    }

    println!("Single-create latency, `POST /api/v1/links`, one keep-alive client, sequential; ");
    println!("{n} creates after {warmup} warm-up, each followed by a `GET /healthz` (reference).");
    println!();
    println!("| backend | create p50 (ms) | create p99 (ms) | healthz p50 (ms) | healthz p99 (ms) | create p50 / healthz p50 | target p50 <= 2 ms |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    let mut all_met = true;
    for row in &rows {
        let create_p50 = percentile(&row.create, 0.50);
        let health_p50 = percentile(&row.healthz, 0.50);
        let met = create_p50 <= Duration::from_millis(2);
        all_met &= met;
        println!(
            "| {} | {} | {} | {} | {} | {:.1} | {} |",
            row.backend,
            ms(create_p50),
            ms(percentile(&row.create, 0.99)),
            ms(health_p50),
            ms(percentile(&row.healthz, 0.99)),
            create_p50.as_secs_f64() / health_p50.as_secs_f64(),
            if met { "met" } else { "MISSED" },
        );
    }
    println!();
    println!(
        "SQLite: WAL, synchronous=NORMAL. PostgreSQL: testkit's cluster (fsync=off, \
         synchronous_commit=off). Redis: no persistence. All on loopback."
    );
    if !all_met {
        std::process::exit(1);
    }
}
