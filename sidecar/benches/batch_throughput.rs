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
//! and the speed-up printed. Prints a markdown table. Run through `bench/batch-throughput/run`.

use std::path::{Path, PathBuf};
use std::time::Instant;
use testkit::process::Lifeline;
use testkit::RedisServer;

const API_KEY: &str = "slk_bench000000000000000000000000000000000000000000000000000000000";
const SECRET_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn start_sidecar(
    binary: &Path,
    database_url: &str,
    redis_url: &str,
    log: &Path,
) -> (Lifeline, String) {
    testkit::Sidecar {
        database_url,
        redis_url,
        secret_hex: SECRET_HEX,
        api_key: API_KEY,
        args: &["--redis-timeout", "5s", "--db-timeout", "10s"],
    }
    .start(binary, log)
}

fn target(i: usize) -> String {
    format!("https://shop.example/spring-sale?utm_source=sms&utm_campaign=c42&r={i}")
}

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

/// CPU time a process has used (user + system), in seconds.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at its closing parenthesis.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |at: usize| {
        fields
            .get(at)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name; 100 ticks/s.
    (ticks(11) + ticks(12)) / 100.0
}

/// One `kB` field of `/proc/<pid>/status` (0 when the process or the field is gone).
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Peak resident memory of a process, in KiB.
fn vm_hwm_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM")
}

/// Resident memory of a process now, anonymous and file-backed, in KiB: the allocator's share
/// and the mapped files' (binary, SQLite's shared memory).
fn rss_split_kib(pid: u32) -> (u64, u64) {
    let file = status_kib(pid, "RssFile") + status_kib(pid, "RssShmem");
    (status_kib(pid, "RssAnon"), file)
}

async fn sql_count(database_url: &str) -> i64 {
    if database_url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(database_url).await.unwrap();
        sqlx::query_scalar("SELECT COUNT(*) FROM links")
            .fetch_one(&pool)
            .await
            .unwrap()
    } else if database_url.starts_with("mysql:") {
        let pool = sqlx::MySqlPool::connect(database_url).await.unwrap();
        sqlx::query_scalar("SELECT COUNT(*) FROM links")
            .fetch_one(&pool)
            .await
            .unwrap()
    } else {
        let pool = sqlx::PgPool::connect(database_url).await.unwrap();
        sqlx::query_scalar("SELECT COUNT(*) FROM links")
            .fetch_one(&pool)
            .await
            .unwrap()
    }
}

async fn dbsize(redis_url: &str) -> i64 {
    let mut connection = redis::Client::open(redis_url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // Link keys only (other features may keep keys of their own).
    let mut cursor = 0u64;
    let mut count = 0i64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("sl:c:*")
            .arg("COUNT")
            .arg(10_000)
            .query_async(&mut connection)
            .await
            .unwrap();
        count += keys.len() as i64;
        if next == 0 {
            return count;
        }
        cursor = next;
    }
}

/// Sends the batch, reads the streamed answer; returns (seconds, items answered 201).
async fn run_batch(base: &str, body: Vec<u8>) -> (f64, usize) {
    shortlink_e2e::install_tls_provider();
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut response = client
        .post(format!("{base}/api/v1/links/batch"))
        .bearer_auth(API_KEY)
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .expect("POST /links/batch");
    assert_eq!(response.status(), 200);
    let mut created = 0usize;
    let mut carry = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("read the answer") {
        carry.extend_from_slice(&chunk);
        let end = carry
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        created += carry[..end]
            .split(|&b| b == b'\n')
            .filter(|line| line.windows(12).any(|w| w == b"\"status\":201"))
            .count();
        carry.drain(..end);
    }
    (started.elapsed().as_secs_f64(), created)
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

/// One measured run of a sidecar binary.
struct Run {
    secs: f64,
    hwm_kib: u64,
    /// Sidecar CPU (user + system) for the whole run, start-up included.
    cpu: f64,
}

/// Issues `n` links through `binary` on a fresh database and Redis, and checks every one of them
/// is in both.
fn measure(
    runtime: &tokio::runtime::Runtime,
    binary: &Path,
    backend: &str,
    n: usize,
    dir: &Path,
    label: &str,
    through_nginx: bool,
) -> Run {
    let redis = RedisServer::start();
    // A directory of its own per cell, so that a size given twice (to see the spread of one
    // cell) starts from an empty database too; the database goes with the cell.
    let database_dir = testkit::temp_dir();
    let database_file = database_dir.path().join("bench.db");
    let database_url = match backend {
        "sqlite" => format!("sqlite://{}", database_file.display()),
        "mariadb" => testkit::mariadb().fresh_database_url(),
        _ => testkit::postgres().fresh_database_url(),
    };
    let log = dir.join(format!("sidecar-{label}-{backend}-{n}.log"));
    let (sidecar, direct) = start_sidecar(binary, &database_url, &redis.url(), &log);
    let nginx_dir = testkit::temp_dir();
    let nginx = through_nginx.then(|| {
        let port = direct.rsplit(':').next().and_then(|p| p.parse().ok());
        shortlink_e2e::Nginx::start(
            &nginx_dir,
            &redis.addr(),
            port.expect("the sidecar's port"),
            API_KEY,
            shortlink_e2e::NginxOptions::default(),
        )
    });
    let base = match &nginx {
        Some(nginx) => format!("http://127.0.0.1:{}", nginx.api_port),
        None => direct,
    };
    let payload = body(n);
    let (secs, created) = runtime.block_on(run_batch(&base, payload));
    let hwm_kib = vm_hwm_kib(sidecar.pid());
    let cpu = cpu_secs(sidecar.pid());
    let (in_sql, in_redis) =
        runtime.block_on(async { (sql_count(&database_url).await, dbsize(&redis.url()).await) });
    assert_eq!(
        created, n,
        "every item answered 201 ({label}, {backend}, {n})"
    );
    assert_eq!(in_sql, n as i64, "every link durable in SQL");
    assert_eq!(in_redis, n as i64, "every link in Redis");
    let (anon_kib, file_kib) = rss_split_kib(sidecar.pid());
    drop(nginx);
    drop(sidecar);
    let db_mib = match backend {
        "sqlite" => format!(
            ", database file {} MiB",
            std::fs::metadata(&database_file).map_or(0, |meta| meta.len() >> 20)
        ),
        _ => String::new(),
    };
    let path = if through_nginx { "via nginx" } else { "direct" };
    eprintln!(
        "{label} {path} {backend} {n}: {secs:.2} s, {:.0} links/s, sidecar CPU {cpu:.2} s, VmHWM {} MiB \
         (at the end: anonymous {} MiB, file-backed {} MiB){db_mib}",
        n as f64 / secs,
        hwm_kib / 1024,
        anon_kib / 1024,
        file_kib / 1024
    );
    Run { secs, hwm_kib, cpu }
}

struct Row {
    backend: &'static str,
    n: usize,
    run: Run,
    via_nginx: Option<Run>,
    baseline: Option<Run>,
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
    let current = PathBuf::from(env!("CARGO_BIN_EXE_shortlink-sidecar"));
    let through_nginx = std::env::var("BENCH_NGINX").map_or(true, |v| v != "0");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = testkit::temp_dir();
    let mut rows = Vec::new();
    for backend in ["sqlite", "postgres", "mariadb"] {
        if !backends.split(',').any(|b| b.trim() == backend) {
            continue;
        }
        for &n in &sizes {
            let run = measure(&runtime, &current, backend, n, dir.path(), "current", false);
            let via_nginx = through_nginx
                .then(|| measure(&runtime, &current, backend, n, dir.path(), "current", true));
            let baseline = baseline
                .as_deref()
                .map(|binary| measure(&runtime, binary, backend, n, dir.path(), "baseline", false));
            let reference_secs = runtime.block_on(redis_reference(n));
            rows.push(Row {
                backend,
                n,
                run,
                via_nginx,
                baseline,
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
}
