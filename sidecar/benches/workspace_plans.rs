//! The query plans of the console's and the API's pages with workspaces (issue 53): the
//! workspace is the leading column of every index a listing, count or campaign page uses, so
//! isolation turns none of them into a scan. On PostgreSQL (`testkit`), `BENCH_LINKS` links
//! (default 1,000,000) over 10 workspaces (half of them in workspace 1, the rest spread, 100
//! campaigns each), migrated by the sidecar, analysed; then each query of
//! `shortlink-store`'s `sql/store.rs` in the form it runs for workspace 7 (a small one) and 1 (the
//! large one), with `EXPLAIN (ANALYZE, BUFFERS)`. Prints each plan and fails if one reads the
//! links table sequentially. Run with `bench/workspaces/run`.

use shortlink_store::{self, ConnectOptions};
use sqlx::{PgPool, Row};
use std::time::Duration;

/// The pages' queries, as `sql/store.rs` builds them (placeholders filled), for workspace `$W`.
const QUERIES: &[(&str, &str)] = &[
    (
        "links page (newest first)",
        "SELECT code, target, created_at FROM links WHERE workspace_id = $W \
         ORDER BY created_at DESC, code DESC LIMIT 51",
    ),
    (
        "links page, next (keyset cursor)",
        "SELECT code, target, created_at FROM links WHERE workspace_id = $W \
         AND (created_at, code) < (now() - interval '1 hour', 'zzz') \
         ORDER BY created_at DESC, code DESC LIMIT 51",
    ),
    (
        "a campaign's links",
        "SELECT code, target FROM links WHERE workspace_id = $W AND campaign = 'c-$W-7' \
         ORDER BY created_at DESC, code DESC LIMIT 51",
    ),
    (
        "campaign list (skip scan)",
        "WITH RECURSIVE c(name, n) AS ( \
           SELECT (SELECT MIN(campaign) FROM links WHERE workspace_id = $W AND campaign > ''), 1 \
           UNION ALL \
           SELECT (SELECT MIN(campaign) FROM links WHERE workspace_id = $W AND campaign > c.name), \
                  c.n + 1 FROM c WHERE c.name IS NOT NULL AND c.n < 51 \
         ) SELECT name FROM c WHERE name IS NOT NULL",
    ),
    (
        "campaign totals",
        "SELECT COUNT(*), SUM(visit_count) FROM links WHERE workspace_id = $W \
         AND campaign = 'c-$W-7'",
    ),
    (
        "a link by code",
        "SELECT code, target FROM links WHERE code = 'k-$W-12345' AND workspace_id = $W",
    ),
    (
        "a recipient's links",
        "SELECT code FROM links WHERE workspace_id = $W AND recipient_ref = 'r-12345'",
    ),
    (
        "export (code order)",
        "SELECT code FROM links WHERE workspace_id = $W AND code > '' ORDER BY code LIMIT 1000",
    ),
];

/// Fills `links` with `n` links: half in workspace 1, the rest over workspaces 2 to 10.
async fn fill(pool: &PgPool, n: usize) {
    sqlx::query(
        "INSERT INTO workspaces (id, slug, name, created_at) \
         SELECT w, 'brand-' || w, 'Brand ' || w, now() FROM generate_series(2, 10) w",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO links (code, target, url_hash, redirect_status, created_at, updated_at, \
           campaign, recipient_ref, workspace_id) \
         SELECT 'k-' || w || '-' || i, 'https://shop.example/' || i, md5(i::text) || md5(i::text), \
                302, now() - (i || ' seconds')::interval, now(), 'c-' || w || '-' || (i % 100), \
                'r-' || i, w \
         FROM (SELECT i, CASE WHEN i % 2 = 0 THEN 1 ELSE 2 + (i / 2) % 9 END AS w \
               FROM generate_series(1, $1) i) s",
    )
    .bind(i64::try_from(n).unwrap())
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE links").execute(pool).await.unwrap();
}

#[tokio::main]
async fn main() {
    let n = testkit::knob("BENCH_LINKS", 1_000_000);
    let url = testkit::postgres().fresh_database_url();
    // The sidecar's own migrations make the schema.
    let options = ConnectOptions {
        url: url.clone(),
        max_connections: 2,
        acquire_timeout: Duration::from_secs(30),
        sqlite_cache: Default::default(),
    };
    drop(shortlink_store::connect(&options).await.expect("migrate"));
    let pool = PgPool::connect(&url).await.unwrap();
    let started = std::time::Instant::now();
    fill(&pool, n).await;
    println!(
        "{n} links in 10 workspaces, filled in {:?}\n",
        started.elapsed()
    );
    let mut scans = Vec::new();
    for workspace in [7, 1] {
        for (name, sql) in QUERIES {
            let sql = sql.replace("$W", &workspace.to_string());
            let rows = sqlx::query(&format!("EXPLAIN (ANALYZE, BUFFERS) {sql}"))
                .fetch_all(&pool)
                .await
                .unwrap();
            let plan: Vec<String> = rows.iter().map(|row| row.get::<String, _>(0)).collect();
            println!(
                "### {name}, workspace {workspace}\n\n```text\n{}\n```\n",
                plan.join("\n")
            );
            if plan.iter().any(|line| line.contains("Seq Scan on links")) {
                scans.push(format!("{name} (workspace {workspace})"));
            }
        }
    }
    assert!(scans.is_empty(), "sequential scans of links: {scans:?}");
    println!("no query reads the links table sequentially");
}
