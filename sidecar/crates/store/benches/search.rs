//! The console's link search on SQLite (issue 80): a million links, searched by `LIKE` over
//! every link (what the search did before migration 85, measured here with the same statement
//! shape) against the index the indexer keeps off the write path, once it has caught up; the
//! inserts' rate with the index's tables present (no trigger on a create), the catch-up time and
//! the file's growth.
//!
//! `BENCH_LINKS` (default 1,000,000) links, inserted 10,000 a transaction. Run through
//! `bench/search/run`.

use chrono::Utc;
use shortlink_model::{Link, WorkspaceId};
use shortlink_store::{ConnectOptions, LinkFilter, NewRow};
use sqlx::Connection;
use std::time::{Duration, Instant};

const QUERIES: [&str; 3] = ["campaign-4242", "t.example/0000777", "r-99999"];

fn link(i: usize) -> NewRow {
    let now = Utc::now();
    NewRow {
        link: Link {
            campaign: Some(format!("campaign-{}", i % 10_000)),
            recipient_ref: Some(format!("r-{i}")),
            tags: vec!["sms".into()],
            ..Link::new(
                format!("b{i:07}"),
                WorkspaceId::DEFAULT,
                format!("https://t.example/{i:07}?utm_source=sms"),
                format!("{i:0>64}"),
                now,
            )
        },
        slot: None,
    }
}

/// The median of `runs` timings of `search`, in milliseconds, and its last answer's length.
async fn timed<F, Fut>(runs: usize, mut search: F) -> (f64, usize)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let mut times = Vec::new();
    let mut found = 0;
    for _ in 0..runs {
        let started = Instant::now();
        found = search().await;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], found)
}

fn main() {
    let n: usize = std::env::var("BENCH_LINKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("search.db");
        let url = format!("sqlite://{}", file.display());
        let storage = shortlink_store::connect(&ConnectOptions {
            url: url.clone(),
            max_connections: 4,
            acquire_timeout: Duration::from_secs(60),
            sqlite_cache: Default::default(),
        })
        .await
        .unwrap();
        let started = Instant::now();
        for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
            let rows: Vec<NewRow> = chunk.iter().map(|&i| link(i)).collect();
            let mut tx = storage.begin().await.unwrap();
            let encoded = storage.encode_rows(&rows).unwrap();
            tx.insert_links(&rows, encoded).await.unwrap();
            tx.commit().await.unwrap();
        }
        let insert_secs = started.elapsed().as_secs_f64();
        let size = || std::fs::metadata(&file).map_or(0, |m| m.len()) as f64 / 1e6;
        let size_before = size();
        println!("| what | measured |\n|---|---|");
        println!(
            "| insert, 10,000 links a transaction | {n} links in {insert_secs:.1} s ({:.0}/s) |",
            n as f64 / insert_secs
        );

        // The statement the search ran before migration 85: every link of the workspace read.
        let mut own = sqlx::SqliteConnection::connect(&url).await.unwrap();
        let text = "lower(code || ' ' || target || ' ' || coalesce(recipient_ref, '') || ' ' || \
                    coalesce(campaign, '') || ' ' || coalesce(tags, ''))";
        let like = format!(
            "SELECT code FROM links WHERE workspace_id = 1 AND {text} LIKE ? ESCAPE '!' \
             ORDER BY created_at DESC, code DESC LIMIT 50"
        );
        let started = Instant::now();
        loop {
            let progress: i64 =
                sqlx::query_scalar("SELECT last_rowid FROM link_search_progress")
                    .fetch_one(&mut own)
                    .await
                    .unwrap();
            if progress as usize >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        println!(
            "| the indexer catching up (from the end of the inserts) | {:.1} s; file {size_before:.0} MB → {:.0} MB |",
            started.elapsed().as_secs_f64(),
            size()
        );
        // Measured once the indexer is done, so that it takes no CPU from the scan.
        let mut scans = Vec::new();
        for query in QUERIES {
            let pattern = format!("%{query}%");
            let mut times = Vec::new();
            let mut found = 0;
            for _ in 0..3 {
                let started = Instant::now();
                let rows: Vec<String> = sqlx::query_scalar(&like)
                    .bind(&pattern)
                    .fetch_all(&mut own)
                    .await
                    .unwrap();
                times.push(started.elapsed().as_secs_f64() * 1e3);
                found = rows.len();
            }
            times.sort_by(f64::total_cmp);
            let ms = times[1];
            scans.push((ms, found));
        }

        for (query, (scan_ms, scan_found)) in QUERIES.iter().zip(scans) {
            let (ms, found) = timed(5, || {
                let mut filter = LinkFilter::in_workspace(WorkspaceId::DEFAULT);
                filter.search = Some((*query).into());
                let storage = &storage;
                async move { storage.list_links(&filter, None, 50).await.unwrap().len() }
            })
            .await;
            assert_eq!(found, scan_found, "{query}: the same links");
            println!(
                "| search `{query}` ({found} found) | index {ms:.1} ms against LIKE over every link {scan_ms:.1} ms: {:.1}x faster |",
                scan_ms / ms
            );
        }
    });
}
