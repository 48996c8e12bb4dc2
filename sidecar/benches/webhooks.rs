//! Click webhook delivery to a local receiver, and what delivery costs the visit pipeline.
//!
//! On one database (`BENCH_BACKEND`: `sqlite`, the default, or `postgres`), in one run:
//!
//! 1. `BENCH_EVENTS` visits (default 100,000) stored as the consumer stores them (transactions of
//!    16,000); the reference is the feed read alone (`FeedReader`, no HTTP).
//! 2. One subscription from the start of the feed, `batch_size` 1000, `batch_ms` 0, to an axum
//!    receiver on loopback that parses each body and counts its events: events/s from the first
//!    POST's arrival until all arrived. Issue 36 asks for at least 20,000/s.
//! 3. The same with `batch_size` 1 (one event per POST) for the first `BENCH_SINGLE` events
//!    (default 10,000). At least 2,000/s.
//! 4. The consumer's work per visit (enrich + store, transactions of 16,000) for `BENCH_CONSUMER`
//!    visits (default 160,000) with no subscription, then with 3 subscriptions delivering each
//!    visit as it is stored (`batch_size` 100, `batch_ms` 100), then with none again: visits/s
//!    and the ratio of the middle run to the mean of the others. Redis is left out (the stream
//!    read is the same with or without webhooks); the SQL writer and the CPU are what delivery
//!    competes for.
//!
//! Run through `bench/webhooks/run`. Exits 1 below the delivery rates.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::de::IgnoredAny;
use serde::Deserialize;
use shortlink_model::validate::UrlPolicy;
use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
use shortlink_visits::store::VisitStore;
use shortlink_webhooks::deliver::Deliverer;
use shortlink_webhooks::feed::{FeedFilter, FeedReader};
use shortlink_webhooks::service::ReplayRequest;
use shortlink_webhooks::{Cursor, Privacy, WebhookService, WebhookSettings};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const TRANSACTION: usize = 16_000;
const CODE: &str = "benchlink";
const SECRET: &str = "bench-webhook-secret-0123";
const UAS: [&str; 3] = [
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
    "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
];

/// Enriches and stores visits `from..to` (ids `<tag>-<i>`) as the consumer does.
async fn consume(store: &dyn VisitStore, enricher: &Enricher, tag: &str, from: usize, to: usize) {
    let now = chrono::Utc::now().timestamp_millis().to_string();
    let mut i = from;
    while i < to {
        let end = to.min(i + TRANSACTION);
        let visits: Vec<_> = (i..end)
            .map(|k| {
                let ip = format!("203.0.{}.{}", k / 250 % 250, k % 250 + 1);
                let fields = [
                    ("c", CODE),
                    ("t", now.as_str()),
                    ("s", "302"),
                    ("ip", ip.as_str()),
                    ("ua", UAS[k % 3]),
                    ("host", "s1.example"),
                ];
                let event = VisitEvent::from_fields(format!("{tag}-{k}"), fields).unwrap();
                enricher.enrich(&event)
            })
            .collect();
        store.store_batch(&visits, false).await.unwrap();
        i = end;
    }
}

#[derive(Deserialize)]
struct Body {
    events: Vec<IgnoredAny>,
}

async fn receive(State(count): State<Arc<AtomicU64>>, body: Bytes) -> StatusCode {
    let Ok(body) = serde_json::from_slice::<Body>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    count.fetch_add(body.events.len() as u64, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}

/// A receiver on 127.0.0.1:0; returns its URL and its count of events.
async fn receiver() -> (String, Arc<AtomicU64>) {
    let count = Arc::new(AtomicU64::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(Arc::clone(&count));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, count)
}

/// Waits until `count` reaches `n` (polled every millisecond; fails after 10 minutes).
async fn until(count: &AtomicU64, n: u64) {
    let started = Instant::now();
    while count.load(Ordering::Relaxed) < n {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "delivery stalled"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Events per second from the first POST's arrival until `count` reaches `n` (a subscription is
/// picked up by the deliverer's next look, up to a second after it is made: not delivery).
async fn rate_until(count: &AtomicU64, n: u64) -> f64 {
    until(count, 1).await;
    let (started, first) = (Instant::now(), count.load(Ordering::Relaxed));
    until(count, n).await;
    (n - first) as f64 / started.elapsed().as_secs_f64()
}

async fn subscribe(service: &WebhookService, url: &str, batch_size: u32, batch_ms: u32) -> String {
    let request = serde_json::from_value(serde_json::json!({
        "url": url, "secret": SECRET, "batch_size": batch_size, "batch_ms": batch_ms,
        // Every visit, the bench's bots too: each one stored is one to deliver.
        "include_bots": true,
    }))
    .unwrap();
    service
        .create(
            // The bench acts as the operator on the server: no quota.
            &shortlink_core::limits::Budget::command_line(shortlink_model::WorkspaceId::DEFAULT),
            request,
            &bench_origin(),
        )
        .await
        .unwrap()
        .id
}

/// Who the audit log names for the bench's subscriptions.
fn bench_origin() -> shortlink_store::audit::Origin {
    shortlink_store::audit::Origin::new(shortlink_store::audit::Actor::cli())
}

fn main() {
    let events = testkit::knob("BENCH_EVENTS", 100_000);
    let single = testkit::knob("BENCH_SINGLE", 10_000).min(events);
    let consumed = testkit::knob("BENCH_CONSUMER", 160_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = testkit::temp_dir();
    let url = match std::env::var("BENCH_BACKEND").as_deref() {
        Ok("postgres") => testkit::postgres().fresh_database_url(),
        _ => format!("sqlite://{}", dir.path().join("bench.db").display()),
    };
    let failed = runtime.block_on(async {
        let options = shortlink_store::ConnectOptions {
            url: url.clone(),
            max_connections: 4,
            acquire_timeout: Duration::from_secs(10),
            sqlite_cache: Default::default(),
        };
        let storage = shortlink_store::connect(&options).await.expect("migrate");
        insert_link(&url).await;
        let stores = shortlink_visits_sql::connect(&options).await.unwrap();
        let store = Arc::clone(&stores.visits);
        let enricher = Enricher::new(GeoDb::disabled(), false);
        let cli = <shortlink_sidecar::cli::Cli as clap::Parser>::try_parse_from([
            "shortlink-sidecar",
            "--webhook-allow-private",
            "--webhook-poll",
            "10ms",
        ])
        .unwrap();
        let settings = WebhookSettings::from_config(&cli.config).unwrap();
        let policy = UrlPolicy::new(5000, &[], &[]).unwrap();
        let service = WebhookService::new(stores.clone(), storage, policy, Vec::new(), &settings);
        let (stop, stopped) = watch::channel(false);
        let deliverer = Deliverer::new(stores.clone(), settings).unwrap();
        let delivering = tokio::spawn(deliverer.run(stopped));

        consume(store.as_ref(), &enricher, "a", 0, events).await;
        eprintln!("stored {events} visits");
        let started = Instant::now();
        let mut reader = FeedReader::new(stores.clone(), Privacy::default());
        let mut all = FeedFilter::of(shortlink_model::WorkspaceId::DEFAULT);
        all.include_bots = true;
        let (mut cursor, mut read) = (Cursor::default(), 0);
        while read < events {
            let page = reader.read(cursor, &all, 1000).await.unwrap();
            read += page.events.len();
            cursor = page.next;
        }
        let feed_rate = events as f64 / started.elapsed().as_secs_f64();
        eprintln!("feed read: {feed_rate:.0} events/s");

        let from_start = || ReplayRequest {
            from: Some(chrono::DateTime::UNIX_EPOCH),
            failure: None,
        };
        let mut rates = Vec::new();
        for (batch_size, n) in [(1000, events), (1, single)] {
            let (hook, count) = receiver().await;
            let id = subscribe(&service, &hook, batch_size, 0).await;
            service
                .replay(shortlink_model::WorkspaceId::DEFAULT, &id, from_start())
                .await
                .unwrap();
            let rate = rate_until(&count, n as u64).await;
            service
                .delete(shortlink_model::WorkspaceId::DEFAULT, &id, &bench_origin())
                .await
                .unwrap();
            eprintln!("delivered {n}, {batch_size} per POST: {rate:.0} events/s");
            rates.push(rate);
        }
        println!("| delivery | events | events/s | feed read alone, events/s | ratio |");
        println!("|---|---:|---:|---:|---:|");
        println!(
            "| batched (1000 per POST) | {events} | {:.0} | {feed_rate:.0} | {:.2} |",
            rates[0],
            rates[0] / feed_rate
        );
        println!(
            "| one event per POST | {single} | {:.0} | {feed_rate:.0} | {:.2} |",
            rates[1],
            rates[1] / feed_rate
        );

        // The consumer's work with and without three subscriptions delivering.
        let mut at = events;
        let mut run = |label: &'static str| {
            let (store, enricher) = (Arc::clone(&store), &enricher);
            let from = at;
            at += consumed;
            async move {
                let started = Instant::now();
                consume(store.as_ref(), enricher, label, from, from + consumed).await;
                consumed as f64 / started.elapsed().as_secs_f64()
            }
        };
        let before = run("n").await;
        let mut hooks = Vec::new();
        for _ in 0..3 {
            let (hook, count) = receiver().await;
            hooks.push((subscribe(&service, &hook, 100, 100).await, count));
        }
        let with = run("w").await;
        for (_, count) in &hooks {
            until(count, consumed as u64).await;
        }
        for (id, _) in &hooks {
            service
                .delete(shortlink_model::WorkspaceId::DEFAULT, id, &bench_origin())
                .await
                .unwrap();
        }
        let after = run("m").await;
        let without = (before + after) / 2.0;
        println!();
        println!(
            "| consumer (enrich + store, {TRANSACTION} per transaction) | visits | visits/s |"
        );
        println!("|---|---:|---:|");
        println!("| no subscription (before) | {consumed} | {before:.0} |");
        println!("| 3 subscriptions delivering | {consumed} | {with:.0} |");
        println!("| no subscription (after) | {consumed} | {after:.0} |");
        println!(
            "| ratio, 3 subscriptions / none | | {:.2} |",
            with / without
        );
        let _ = stop.send(true);
        let _ = delivering.await;
        rates[0] < 20_000.0 || rates[1] < 2_000.0
    });
    if failed {
        eprintln!("below the issue's rates (20,000/s batched, 2,000/s one per POST)");
        std::process::exit(1);
    }
}

async fn insert_link(url: &str) {
    let sql = "INSERT INTO links (code, target, url_hash, redirect_status, created_at, updated_at, campaign) \
               VALUES ('benchlink', 'https://shop.example/', 'x', 302, '2026-01-01T00:00:00.000000Z', \
               '2026-01-01T00:00:00.000000Z', 'spring')";
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        sqlx::query(sql).execute(&pool).await.unwrap();
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
}
