//! Batch issuance throughput: `POST /api/v1/links/batch` with an NDJSON body of N items against
//! the release `shortlink-sidecar serve` binary, on SQLite, PostgreSQL and MariaDB, at each size in
//! `BENCH_SIZES` (default 100000,1000000). Throughput counts links durable in SQL and present in
//! Redis (both counted at the end and checked equal to N); peak sidecar memory is its VmHWM. The
//! reference, measured in the same run on the same machine, is raw pipelined `SET`s of N records
//! of the same size into a fresh redis-server (chunks of 1000): the Redis half of the work alone.
//! The sidecar's CPU time per link (user + system, from /proc) is printed too: on a shared machine
//! it moves less than the wall-clock rate.
//! Each cell is measured twice on fresh databases: straight to the sidecar, and through nginx's
//! internal API server (the project's own configuration, the address the README gives users),
//! and the ratio printed (`BENCH_NGINX=0` skips the second).
//! With `BENCH_BASELINE_SIDECAR=<binary>`, that build is measured on the same cells right after,
//! and the speed-up printed; `BENCH_SIDECAR=<binary>` measures that build instead of the bench's
//! own (a profile the bench is not built in, such as `quick`). With `BENCH_CLUSTER=1`, each cell
//! is also measured on a fresh 3 + 3 Redis Cluster (`--redis-cluster`; nginx with
//! `shortlink_redis_cluster`), right after the same cell on one Redis, by the same route (through
//! nginx's API server unless `BENCH_NGINX=0`), and a second table gives the ratio cluster / one
//! Redis (issue 39: a chunk goes one pipeline per primary); `BENCH_ROUNDS` (default 3) pairs of
//! one-Redis and cluster cells, one after the other, so a change in the machine's load moves both
//! sides of a ratio, and the median ratio is the one to read. Prints markdown tables. Run through
//! `bench/batch-throughput/run`.

use std::path::PathBuf;
use std::time::Instant;
use testkit::RedisServer;

mod common;

use common::{measure, measure_on, target, Run};

fn body(n: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(n * 110);
    for i in 0..n {
        body.extend_from_slice(
            format!(
                "{{\"url\":\"{}\",\"campaign\":\"c42\",\"ref\":\"r{i}\"}}\n",
                target(i)
            )
            .as_bytes(),
        );
    }
    body
}

/// Reference: N records of the same shape `SET` through pipelines of 1000 on a fresh Redis.
async fn redis_reference(n: usize) -> f64 {
    let redis = RedisServer::start();
    let mut connection = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let started = Instant::now();
    for start in (0..n).step_by(1000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 1000).min(n) {
            pipe.cmd("SET")
                .arg(format!("sl:c:{i:07}"))
                .arg(format!("1|L|302|0|0|{}", target(i)))
                .ignore();
        }
        let () = pipe.query_async(&mut connection).await.unwrap();
    }
    started.elapsed().as_secs_f64()
}

struct Row {
    backend: &'static str,
    n: usize,
    run: Run,
    via_nginx: Option<Run>,
    baseline: Option<Run>,
    /// Rounds of the cell on one Redis, then on a 3 + 3 cluster (`BENCH_CLUSTER=1`); the first
    /// round's one-Redis side is `run`.
    cluster: Vec<(Run, Run)>,
    reference_secs: f64,
}

fn main() {
    let backends =
        std::env::var("BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres,mariadb".into());
    let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| "100000,1000000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    // Another build of the sidecar (e.g. the previous commit's), measured on the same cells in
    // the same run, right after this one: the honest before/after on a noisy machine.
    let baseline = std::env::var_os("BENCH_BASELINE_SIDECAR").map(PathBuf::from);
    // `BENCH_SIDECAR`: another build as "current" (a profile the bench itself is not built in).
    let current = std::env::var_os("BENCH_SIDECAR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_shortlink-sidecar")));
    let through_nginx = std::env::var("BENCH_NGINX").map_or(true, |v| v != "0");
    let on_cluster = std::env::var("BENCH_CLUSTER").is_ok_and(|v| v == "1");
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let runtime = common::runtime();
    let dir = testkit::temp_dir();
    let mut rows = Vec::new();
    for backend in ["sqlite", "postgres", "mariadb"] {
        if !backends.split(',').any(|b| b.trim() == backend) {
            continue;
        }
        for &n in &sizes {
            let cell = |binary: &std::path::Path, label, through_nginx| {
                let batch = ("/links/batch", body(n));
                measure(
                    &runtime,
                    binary,
                    backend,
                    batch,
                    n,
                    dir.path(),
                    label,
                    through_nginx,
                )
            };
            let run = cell(&current, "current", false);
            let on = |cluster| {
                let batch = ("/links/batch", body(n));
                measure_on(
                    &runtime,
                    &current,
                    backend,
                    batch,
                    n,
                    dir.path(),
                    "current",
                    through_nginx,
                    cluster,
                )
            };
            let via_nginx = through_nginx.then(|| cell(&current, "current", true));
            // Both sides of a pair take the same route; the first one-Redis side is a cell above.
            let mut cluster = Vec::new();
            for round in 0..if on_cluster { rounds } else { 0 } {
                let one = match (round, &via_nginx) {
                    (0, Some(via_nginx)) => via_nginx.clone(),
                    (0, None) => run.clone(),
                    _ => on(false),
                };
                cluster.push((one, on(true)));
            }
            let baseline = (baseline.as_deref()).map(|binary| cell(binary, "baseline", false));
            let reference_secs = runtime.block_on(redis_reference(n));
            rows.push(Row {
                backend,
                n,
                run,
                via_nginx,
                baseline,
                cluster,
                reference_secs,
            });
        }
    }
    println!("| backend | links | seconds | links/s (SQL + Redis, verified) | sidecar CPU µs/link | peak sidecar RSS (VmHWM) | reference: raw pipelined SET/s | ratio to reference | through nginx links/s | nginx / direct | baseline links/s | baseline CPU µs/link | baseline VmHWM | speed-up vs baseline |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let rate = row.n as f64 / row.run.secs;
        let reference = row.n as f64 / row.reference_secs;
        let (base_rate, base_cpu, base_hwm, speedup) = match &row.baseline {
            Some(base) => {
                let base_rate = row.n as f64 / base.secs;
                (
                    format!("{base_rate:.0}"),
                    format!("{:.1}", base.cpu * 1e6 / row.n as f64),
                    format!("{:.1} MiB", base.hwm_kib as f64 / 1024.0),
                    format!("{:.2}", rate / base_rate),
                )
            }
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let (via_rate, via_ratio) = match &row.via_nginx {
            Some(via) => (
                format!("{:.0}", row.n as f64 / via.secs),
                format!("{:.2}", row.run.secs / via.secs),
            ),
            None => ("-".into(), "-".into()),
        };
        println!(
            "| {} | {} | {:.2} | {:.0} | {:.1} | {:.1} MiB | {:.0} | {:.2} | {via_rate} | {via_ratio} | {base_rate} | {base_cpu} | {base_hwm} | {speedup} |",
            row.backend,
            row.n,
            row.run.secs,
            rate,
            row.run.cpu * 1e6 / row.n as f64,
            row.run.hwm_kib as f64 / 1024.0,
            reference,
            rate / reference
        );
    }
    if rows.iter().any(|row| !row.cluster.is_empty()) {
        println!();
        let route = if through_nginx {
            "through nginx's API server (`shortlink_redis_cluster` on the cluster side)"
        } else {
            "straight to the sidecar (BENCH_NGINX=0)"
        };
        println!("One Redis against a 3 + 3 Redis Cluster, each pair {route}:");
        println!();
        println!("| backend | links | round | one Redis links/s | 3 + 3 cluster links/s | cluster / one Redis | one Redis CPU µs/link | cluster CPU µs/link |");
        println!("|---|---:|---|---:|---:|---:|---:|---:|");
        for row in rows.iter().filter(|row| !row.cluster.is_empty()) {
            let per = |cpu: f64| cpu * 1e6 / row.n as f64;
            let mut ratios = Vec::new();
            for (round, (one, cluster)) in row.cluster.iter().enumerate() {
                ratios.push(one.secs / cluster.secs);
                println!(
                    "| {} | {} | {} | {:.0} | {:.0} | {:.2} | {:.1} | {:.1} |",
                    row.backend,
                    row.n,
                    round + 1,
                    row.n as f64 / one.secs,
                    row.n as f64 / cluster.secs,
                    one.secs / cluster.secs,
                    per(one.cpu),
                    per(cluster.cpu),
                );
            }
            ratios.sort_by(f64::total_cmp);
            println!(
                "| {} | {} | median | | | **{:.2}** (target ≥ 0.8) | | |",
                row.backend,
                row.n,
                ratios[ratios.len() / 2]
            );
        }
    }
}
