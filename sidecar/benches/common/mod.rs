//! What the benches that issue links share: the sidecar under test, its CPU and memory from
//! /proc, the links counted in SQL and Redis, and a streamed NDJSON answer read and counted.
// Each bench uses its own part of this module.
#![allow(dead_code)]

use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
use shortlink_visits::store::VisitStore;
use std::path::Path;
use std::time::Instant;
use testkit::process::Lifeline;
use testkit::RedisServer;

/// The runtime a bench drives its clients on (tokio's default: a thread per core).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

pub const API_KEY: &str = "slk_bench000000000000000000000000000000000000000000000000000000000";
pub const SECRET_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

pub fn start_sidecar(
    binary: &Path,
    database_url: &str,
    redis_url: &str,
    log: &Path,
) -> (Lifeline, String) {
    start_sidecar_with(binary, database_url, redis_url, &[], log)
}

/// [`start_sidecar`] with flags of the cell's own after the common ones (`--redis-cluster ...`).
pub fn start_sidecar_with(
    binary: &Path,
    database_url: &str,
    redis_url: &str,
    extra: &[&str],
    log: &Path,
) -> (Lifeline, String) {
    let mut args = vec![
        "--redis-timeout",
        "5s",
        "--db-timeout",
        "10s",
        // An issuing domain, as nginx gives one: answers carry short URLs (compose needs them).
        "--public-base-url",
        "https://s1.example",
    ];
    args.extend_from_slice(extra);
    start_binary(binary, database_url, redis_url, &args, log)
}

/// The sidecar `binary` with the benches' code secret and key, and exactly `flags` besides.
pub fn start_binary(
    binary: impl AsRef<std::ffi::OsStr>,
    database_url: &str,
    redis_url: &str,
    flags: &[&str],
    log: &Path,
) -> (Lifeline, String) {
    testkit::Sidecar {
        database_url,
        redis_url,
        secret_hex: SECRET_HEX,
        api_key: API_KEY,
        args: flags,
    }
    .start(binary, log)
}

/// The browser of the visits [`store_visits`] stores.
pub const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

/// Visits stored per transaction.
const TRANSACTION: usize = 16_000;

/// Stores `n` iPhone visits, [`TRANSACTION`] a transaction: the `i`th to `codes[i % len]` from
/// an address of its own, with id `id(i)`, at `at_ms(i)`, answered by `rule(i)` (`None`: the
/// link's own target).
pub async fn store_visits(
    store: &dyn VisitStore,
    codes: &[String],
    n: usize,
    id: impl Fn(usize) -> String,
    at_ms: impl Fn(usize) -> i64,
    rule: impl Fn(usize) -> Option<&'static str>,
) {
    let enricher = Enricher::new(GeoDb::disabled(), false);
    let mut k = 0;
    while k < n {
        let end = n.min(k + TRANSACTION);
        let visits: Vec<_> = (k..end)
            .map(|i| {
                let ip = format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255);
                let t = at_ms(i).to_string();
                let mut fields = vec![
                    ("c", codes[i % codes.len()].as_str()),
                    ("t", t.as_str()),
                    ("s", "302"),
                    ("ip", ip.as_str()),
                    ("ua", IPHONE),
                    ("host", "s1.example"),
                ];
                fields.extend(rule(i).map(|rule| ("rule", rule)));
                let event = VisitEvent::from_fields(id(i), fields).unwrap();
                enricher.enrich(&event)
            })
            .collect();
        store.store_batch(&visits, false).await.unwrap();
        k = end;
    }
}

/// Creates `items` through one `POST /links/batch`: how many were created.
pub async fn create_links(base: &str, items: impl Iterator<Item = serde_json::Value>) -> usize {
    let mut body = Vec::new();
    for item in items {
        serde_json::to_writer(&mut body, &item).unwrap();
        body.push(b'\n');
    }
    post_ndjson(base, "/links/batch", body).await.1
}

pub fn target(i: usize) -> String {
    format!("https://shop.example/spring-sale?utm_source=sms&utm_campaign=c42&r={i}")
}

/// CPU time a process has used (user + system), in seconds.
pub fn cpu_secs(pid: u32) -> f64 {
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
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Peak resident memory of a process, in KiB.
pub fn vm_hwm_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM")
}

/// Resident memory of a process now, anonymous and file-backed, in KiB: the allocator's share
/// and the mapped files' (binary, SQLite's shared memory).
pub fn rss_split_kib(pid: u32) -> (u64, u64) {
    let file = status_kib(pid, "RssFile") + status_kib(pid, "RssShmem");
    (status_kib(pid, "RssAnon"), file)
}

pub async fn sql_count(database_url: &str) -> i64 {
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

/// How many keys matching `pattern` the Redis servers at `urls` hold together.
pub async fn count_keys(urls: &[String], pattern: &str) -> i64 {
    let mut count = 0;
    for url in urls {
        count += count_matching(url, pattern).await;
    }
    count
}

pub async fn dbsize(redis_url: &str) -> i64 {
    // Link keys only (other features may keep keys of their own).
    count_matching(redis_url, "sl:c:*").await
}

async fn count_matching(redis_url: &str, pattern: &str) -> i64 {
    let mut connection = redis::Client::open(redis_url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut cursor = 0u64;
    let mut count = 0i64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
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

/// Posts an NDJSON `body` to `path` (with its query), reads the streamed answer; returns
/// (seconds, lines answered 201).
pub async fn post_ndjson(base: &str, path: &str, body: Vec<u8>) -> (f64, usize) {
    shortlink_e2e::install_tls_provider();
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut response = client
        .post(format!("{base}/api/v1{path}"))
        .bearer_auth(API_KEY)
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .expect("POST");
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

/// One measured run of a sidecar binary.
#[derive(Debug, Clone)]
pub struct Run {
    pub secs: f64,
    pub hwm_kib: u64,
    /// Sidecar CPU (user + system) for the whole run, start-up included.
    pub cpu: f64,
}

/// Issues `n` links through `binary` on a fresh database and Redis by posting `payload` to
/// `path`, and checks every one of them is in both.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    runtime: &tokio::runtime::Runtime,
    binary: &Path,
    backend: &str,
    payload: (&str, Vec<u8>),
    n: usize,
    dir: &Path,
    label: &str,
    through_nginx: bool,
) -> Run {
    measure_on(
        runtime,
        binary,
        backend,
        payload,
        n,
        dir,
        label,
        through_nginx,
        false,
    )
}

/// [`measure`], on a fresh 3 + 3 Redis Cluster (`testkit::RedisCluster`, `--redis-cluster`, and
/// nginx with `shortlink_redis_cluster`) when `cluster` is set: links counted on every primary.
#[allow(clippy::too_many_arguments)]
pub fn measure_on(
    runtime: &tokio::runtime::Runtime,
    binary: &Path,
    backend: &str,
    (path, payload): (&str, Vec<u8>),
    n: usize,
    dir: &Path,
    label: &str,
    through_nginx: bool,
    cluster: bool,
) -> Run {
    let cluster = cluster.then(testkit::RedisCluster::start);
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
    let on = if cluster.is_some() {
        "cluster"
    } else {
        "redis"
    };
    let log = dir.join(format!("sidecar-{label}-{backend}-{on}-{n}.log"));
    let seeds = cluster.as_ref().map(testkit::RedisCluster::seeds);
    let extra: Vec<&str> = match &seeds {
        Some(seeds) => vec!["--redis-cluster", seeds.as_str()],
        None => Vec::new(),
    };
    let (sidecar, direct) = start_sidecar_with(binary, &database_url, &redis.url(), &extra, &log);
    let redis_urls: Vec<String> = match &cluster {
        Some(cluster) => (cluster.primaries().into_iter())
            .map(|i| cluster.nodes()[i].url())
            .collect(),
        None => vec![redis.url()],
    };
    // The projection marked whole before the clock starts (on a cluster the keeper sets 16,384
    // per-slot markers at start-up): the batch is measured against a running sidecar, not its
    // first seconds.
    let markers = if cluster.is_some() { 16_384 } else { 1 };
    let marked = testkit::wait_until(std::time::Duration::from_secs(60), || {
        runtime.block_on(count_keys(&redis_urls, "sl:meta:projection*")) >= markers
    });
    assert!(marked, "the sidecar marked the projection whole");
    let nginx_dir = testkit::temp_dir();
    let nginx = through_nginx.then(|| {
        let port = direct.rsplit(':').next().and_then(|p| p.parse().ok());
        let options = shortlink_e2e::NginxOptions {
            redis_cluster: seeds.as_ref().map(|seeds| seeds.replace(',', " ")),
            ..Default::default()
        };
        shortlink_e2e::Nginx::start(
            &nginx_dir,
            &redis.addr(),
            port.expect("the sidecar's port"),
            API_KEY,
            options,
        )
    });
    let base = match &nginx {
        Some(nginx) => format!("http://127.0.0.1:{}", nginx.api_port),
        None => direct,
    };
    let (secs, created) = runtime.block_on(post_ndjson(&base, path, payload));
    let hwm_kib = vm_hwm_kib(sidecar.pid());
    let cpu = cpu_secs(sidecar.pid());
    let (in_sql, in_redis) = runtime.block_on(async {
        let mut in_redis = 0;
        for url in &redis_urls {
            in_redis += dbsize(url).await;
        }
        (sql_count(&database_url).await, in_redis)
    });
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
    let route = match (through_nginx, &cluster) {
        (true, Some(_)) => "via nginx, 3 + 3 cluster",
        (true, None) => "via nginx",
        (false, Some(_)) => "direct, 3 + 3 cluster",
        (false, None) => "direct",
    };
    eprintln!(
        "{label} {route} {backend} {n}: {secs:.2} s, {:.0} links/s, sidecar CPU {cpu:.2} s, VmHWM {} MiB \
         (at the end: anonymous {} MiB, file-backed {} MiB){db_mib}",
        n as f64 / secs,
        hwm_kib / 1024,
        anon_kib / 1024,
        file_kib / 1024
    );
    Run { secs, hwm_kib, cpu }
}
