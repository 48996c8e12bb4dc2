//! A million-entry feed: its load time, the memory its copy takes (the process's resident set
//! before and after) and a lookup's time, for a listed and an unlisted target. Run through
//! `bench/threat-feeds/run` (or `cargo bench -p shortlink-threats --bench feed_lookup`);
//! `BENCH_ENTRIES` (default 1000000).

use shortlink_threats::feed::Spec;
use shortlink_threats::{Settings, Threats};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let entries: usize = (std::env::var("BENCH_ENTRIES").ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hosts.txt");
    let body: String = (0..entries)
        .map(|i| format!("0.0.0.0 host{i}.bad{}.example\n", i % 997))
        .collect();
    std::fs::write(&path, &body).unwrap();
    drop(body);
    let settings = Settings {
        feeds: vec![format!("big=hosts:{}", path.display())
            .parse::<Spec>()
            .unwrap()],
        refresh_every: Duration::from_secs(300),
        max_bytes: 1 << 30,
        shorteners: Vec::new(),
        brand_hosts: Vec::new(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A file feed: the client is never used, but reqwest is built without a TLS provider.
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .unwrap();
    let threats = Threats::new(settings, client, None);
    let before = resident_kib();
    let started = Instant::now();
    runtime.block_on(threats.refresh());
    let load = started.elapsed();
    let after = resident_kib();
    assert_eq!(threats.feeds()[0].1, entries);
    let targets = |listed: bool| -> Vec<String> {
        (0..100_000)
            .map(|i| match listed {
                true => format!("https://www.host{i}.bad{}.example/spring?r={i}", i % 997),
                false => format!("https://www.shop{i}.example/spring?r={i}"),
            })
            .collect()
    };
    println!("| entries | load | resident set growth | lookup, listed target | lookup, unlisted target |");
    println!("|---:|---:|---:|---:|---:|");
    let mut per = Vec::new();
    for listed in [true, false] {
        let targets = targets(listed);
        let started = Instant::now();
        for target in &targets {
            assert_eq!(black_box(threats.check(target)).is_some(), listed);
        }
        per.push(started.elapsed() / targets.len() as u32);
    }
    println!(
        "| {entries} | {load:.2?} | {:.1} MiB | {:?} | {:?} |",
        after.saturating_sub(before) as f64 / 1024.0,
        per[0],
        per[1]
    );
}
