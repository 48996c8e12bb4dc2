//! The quarantine sweep's time among many links (issue 79's bench: a listed host's links among
//! 10M, within 5 s), run by `bench/threat-feeds/quarantine` (ignored in the suite: it fills a
//! database of `BENCH_LINKS` links first). SQLite, this test build's profile (SQLite's C at -O2).

use crate::helpers::*;
use shortlink_threats::FeedChange;
use std::time::Instant;

/// Every link's host: `h<i % HOSTS>.example`; one link in `1 / LISTED_EVERY` is on the listed host.
const HOSTS: u64 = 100_000;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: bench/threat-feeds/quarantine"]
async fn quarantine_sweep_among_many_links() {
    let links = env("BENCH_LINKS", 1_000_000);
    let listed = env("BENCH_LISTED", 1_000);
    let app = spawn_app(Backend::Sqlite).await;
    let started = Instant::now();
    // Rows as the insert writes them (host key included), by SQLite itself.
    let every = (links / listed).max(1);
    let sql = format!(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {links}) \
         INSERT INTO links (code, target, url_hash, redirect_status, flags, created_at, updated_at, \
           visit_count, workspace_id, url_prefix, target_host) \
         SELECT 'b' || i, \
           CASE WHEN i % {every} = 0 THEN 'https://www.listed.example/p' || i \
                ELSE 'https://h' || (i % {HOSTS}) || '.example/p' || i END, \
           printf('%064d', i), 302, 0, '2026-11-28T00:00:00.000000Z', '2026-11-28T00:00:00.000000Z', \
           0, 1, printf('%016d', i), \
           CASE WHEN i % {every} = 0 THEN 'example.listed.www.' \
                ELSE 'example.h' || (i % {HOSTS}) || '.' END \
         FROM n"
    );
    let inserted = app.db.execute(&sql).await;
    assert_eq!(inserted, links);
    println!("{links} links stored in {:.1?}", started.elapsed());

    // A feed adds the listed host: its links are found through the index and quarantined.
    let change = FeedChange {
        feed: "bench".into(),
        added_hosts: vec!["listed.example".into()],
        added_urls: Vec::new(),
    };
    let started = Instant::now();
    let quarantined = app.state.links.quarantine_added(&change).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(quarantined, links.div_ceil(every));
    println!(
        "| {links} | listed.example | {quarantined} | {:.2} s | {:.2} ms |",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / quarantined as f64
    );
    let sample = app.redis_record("b0").await.unwrap();
    assert_eq!(sample, shortlink_wire::record::QUARANTINED.as_bytes());

    // A first load: 20,000 new hosts, none linked, walks the links' distinct hosts once.
    let change = FeedChange {
        feed: "bench-first".into(),
        added_hosts: (0..20_000)
            .map(|i| format!("unlinked{i}.example"))
            .collect(),
        added_urls: Vec::new(),
    };
    let distinct = app
        .db
        .scalar("SELECT COUNT(DISTINCT target_host) FROM links")
        .await;
    let started = Instant::now();
    assert_eq!(app.state.links.quarantine_added(&change).await.unwrap(), 0);
    println!(
        "first load of 20,000 hosts: the walk of {distinct} distinct hosts took {:.2} s",
        started.elapsed().as_secs_f64()
    );
}
