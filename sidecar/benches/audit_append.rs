//! What one audit row adds to a link create's SQL transaction (issue 53: create latency with the
//! audit log on must stay ≥ 0.95x), and to a batch's (one row per batch, not per link).
//!
//! On a fresh SQLite file (or PostgreSQL with `BENCH_DB=postgres`, started by `testkit`), one
//! writer: `BENCH_N` (default 3000) creates, each `begin; INSERT link; commit`, against the same
//! with the audit append (`link.create` with the link's fields as changes) before the commit;
//! the two kinds alternate in rounds of 100 so drift hits both alike. Then `BENCH_BATCHES`
//! (default 20) batches of 1,000 links with and without their one audit row. Only the SQL is
//! measured: the API's create also parses, encodes and writes Redis, so its ratio is closer to
//! 1 than the one printed here. Run with `cargo bench -p shortlink-sidecar --bench audit_append`.

use shortlink_model::{Link, WorkspaceId};
use shortlink_store::audit::{Actor, AuditEntry, Changes, RequestInfo};
use shortlink_store::{self, ConnectOptions, NewRow, Storage};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn link(code: String) -> Link {
    let now = shortlink_store::now();
    Link {
        campaign: Some("spring".into()),
        tags: vec!["sms".into()],
        ..Link::new(
            code.clone(),
            WorkspaceId::DEFAULT,
            format!("https://shop.example/spring/{code}"),
            format!("{code:0>64}"),
            now,
        )
    }
}

/// What the service would record for a create.
fn create_entry(link: &Link) -> AuditEntry {
    let changes = Changes::new()
        .set("target", link.target.clone())
        .set("campaign", link.campaign.clone())
        .set("tags", link.tags.clone());
    AuditEntry::new(
        Actor::key(1, "bench"),
        "link.create",
        link.code.clone(),
        changes,
    )
    .with_request(RequestInfo {
        request_id: Some("0123456789abcdef0123456789abcdef".into()),
        client_addr: Some("127.0.0.1".into()),
    })
}

async fn create(storage: &Arc<dyn Storage>, code: String, audit: bool) -> Duration {
    let link = link(code);
    let started = Instant::now();
    let mut tx = storage.begin().await.unwrap();
    tx.insert_link(&link, None).await.unwrap();
    if audit {
        tx.append_audit(&create_entry(&link)).await.unwrap();
    }
    tx.commit().await.unwrap();
    started.elapsed()
}

async fn batch(storage: &Arc<dyn Storage>, prefix: String, audit: bool) -> Duration {
    let rows: Vec<NewRow> = (0..1000)
        .map(|i| NewRow {
            link: link(format!("{prefix}{i}")),
            slot: None,
        })
        .collect();
    let started = Instant::now();
    let encoded = storage.encode_rows(&rows).unwrap();
    let mut tx = storage.begin().await.unwrap();
    tx.insert_links(&rows, encoded).await.unwrap();
    if audit {
        let mut entry = AuditEntry::new(Actor::key(1, "bench"), "links.batch", "", Changes::new());
        entry.batch_size = Some(1000);
        entry.idempotency_key = Some(format!("batch-{prefix}"));
        tx.append_audit(&entry).await.unwrap();
    }
    tx.commit().await.unwrap();
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn summary(name: &str, mut off: Vec<Duration>, mut on: Vec<Duration>, unit: f64) {
    off.sort_unstable();
    on.sort_unstable();
    let total = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64();
    let rate = |v: &[Duration]| v.len() as f64 * unit / total(v);
    println!(
        "| {name} | off | {} | {} | {:.0} |",
        ms(percentile(&off, 0.5)),
        ms(percentile(&off, 0.99)),
        rate(&off)
    );
    println!(
        "| {name} | on | {} | {} | {:.0} |",
        ms(percentile(&on, 0.5)),
        ms(percentile(&on, 0.99)),
        rate(&on)
    );
    println!(
        "| {name} | on/off throughput | p50 {:.3}x latency | p99 {:.3}x latency | **{:.3}x** |",
        percentile(&on, 0.5).as_secs_f64() / percentile(&off, 0.5).as_secs_f64(),
        percentile(&on, 0.99).as_secs_f64() / percentile(&off, 0.99).as_secs_f64(),
        rate(&on) / rate(&off)
    );
}

fn main() {
    let n = testkit::knob("BENCH_N", 3000);
    let batches = testkit::knob("BENCH_BATCHES", 20);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backend = std::env::var("BENCH_DB").unwrap_or_else(|_| "sqlite".into());
    let url = match backend.as_str() {
        "postgres" => testkit::postgres().fresh_database_url(),
        _ => format!("sqlite://{}", dir.path().join("bench.db").display()),
    };
    runtime.block_on(async {
        let storage = shortlink_store::connect(&ConnectOptions {
            url,
            max_connections: 4,
            acquire_timeout: Duration::from_secs(10),
            sqlite_cache: Default::default(),
        })
        .await
        .expect("open the database");
        // Warm-up: both kinds, so the first of either pays no page faults for the other.
        for i in 0..200 {
            create(&storage, format!("w{i}"), i % 2 == 0).await;
        }
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for round in 0..n / 100 {
            for i in 0..100 {
                off.push(create(&storage, format!("a{round}x{i}"), false).await);
            }
            for i in 0..100 {
                on.push(create(&storage, format!("b{round}x{i}"), true).await);
            }
        }
        let (mut batch_off, mut batch_on) = (Vec::new(), Vec::new());
        for b in 0..batches {
            batch_off.push(batch(&storage, format!("c{b}x"), false).await);
            batch_on.push(batch(&storage, format!("d{b}x"), true).await);
        }
        println!(
            "audit append, {backend}: {} creates each way, {batches} batches of 1,000 each way\n",
            off.len()
        );
        println!("| what | audit | p50 ms | p99 ms | per second |");
        println!("|---|---|---|---|---|");
        summary("create (1 link)", off, on, 1.0);
        summary("batch (1,000 links)", batch_off, batch_on, 1000.0);
    });
}
