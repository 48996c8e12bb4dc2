//! Console page render time (issue 21): every console page for a campaign of `BENCH_LINKS` links
//! (default 1,000,000, each with a recipient reference) whose hot link and all-links rollups hold
//! 10,000,000 visits over 30 days, on SQLite, timed over HTTP from a signed-in session against
//! `GET /healthz` in the same run.
//!
//! The links are inserted with SQL (the write path has benches of its own), the rollups written
//! synthetically as in `analytics.rs` (stats never read raw visits). Then `BENCH_N` (default 100)
//! sequential requests per page after 5 warm-ups; p50, p99 and max per page.
//!
//! Run through `bench/console/run`. Exits 1 if a page's p99 is over 50 ms.

#[path = "common/rollups.rs"]
mod rollups;

use clap::Parser;
use std::time::{Duration, Instant};

const API_KEY: &str = "slk_bench000000000000000000000000000000000000000000000000000000000";
const SECRET_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const VISITS: i64 = 10_000_000;
const P99_LIMIT: Duration = Duration::from_millis(50);

fn code(i: usize) -> String {
    format!("bench{i:07}")
}

async fn insert_links(pool: &sqlx::SqlitePool, links: usize) {
    let mut tx = pool.begin().await.unwrap();
    for i in 0..links {
        sqlx::query(
            "INSERT INTO links (code, target, url_hash, redirect_status, created_at, updated_at, \
             campaign, recipient_ref, visit_count) \
             VALUES (?1, 'https://shop.example/', 'x', 302, ?2, ?2, 'bench', ?3, ?4)",
        )
        .bind(code(i))
        .bind(format!(
            "2026-01-01T00:{:02}:{:02}.000000Z",
            (i / 60) % 60,
            i % 60
        ))
        .bind(format!("r{i}"))
        .bind((i % 3) as i64)
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
}

/// Rollups of `visits` visits over 30 days for `code` (`*`: all links), as the consumer writes them.
async fn synthetic_rollups(pool: &sqlx::SqlitePool, code: &str, visits: i64) {
    let (_, statements) = rollups::statements(code, visits);
    let mut tx = pool.begin().await.unwrap();
    for statement in &statements {
        sqlx::query(statement).execute(&mut *tx).await.unwrap();
    }
    tx.commit().await.unwrap();
}

/// Signs in as a browser would; returns the session cookie.
async fn sign_in(client: &reqwest::Client, base: &str) -> String {
    let page = client
        .get(format!("{base}/console/sign-in"))
        .send()
        .await
        .unwrap();
    let cookie = page.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let body = page.text().await.unwrap();
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let signed_in = client
        .post(format!("{base}/console/sign-in"))
        .header("cookie", cookie)
        .form(&[("key", API_KEY), ("csrf", &csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303, "sign-in");
    signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|v| v.starts_with("shortlink_console="))
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if !runtime.block_on(run()) {
        std::process::exit(1);
    }
}

async fn run() -> bool {
    let links = testkit::knob("BENCH_LINKS", 1_000_000);
    let n = testkit::knob("BENCH_N", 100);
    let dir = testkit::temp_dir();
    let redis = testkit::RedisServer::start();
    let database = format!("sqlite://{}", dir.path().join("links.db").display());
    let cli = shortlink_sidecar::cli::Cli::try_parse_from([
        "shortlink-sidecar",
        "--listen",
        "127.0.0.1:0",
        "--database-url",
        &database,
        "--redis-url",
        &redis.url(),
        "--code-secret",
        SECRET_HEX,
        "--public-base-url",
        "https://s.example",
        "--bootstrap-api-key",
        API_KEY,
    ])
    .expect("bench configuration");
    let app = shortlink_sidecar::Application::build(&cli.config)
        .await
        .expect("build the sidecar");
    let base = format!("http://{}", app.local_addr());

    let started = Instant::now();
    let pool = sqlx::SqlitePool::connect(&database).await.unwrap();
    insert_links(&pool, links).await;
    for code in ["*", &code(0)] {
        synthetic_rollups(&pool, code, VISITS).await;
    }
    sqlx::query("ANALYZE").execute(&pool).await.unwrap();
    pool.close().await;
    println!(
        "console bench: {links} links in campaign `bench`, {VISITS} visits in the rollups \
         (set up in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    tokio::spawn(async move { app.run_until(std::future::pending()).await });

    // The workspace builds reqwest with rustls and no default provider (tests/Cargo.toml).
    shortlink_e2e::install_tls_provider();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let session = sign_in(&client, &base).await;
    let hot = code(0);
    let pages = [
        "/healthz".to_owned(),
        "/console/".to_owned(),
        "/console/links".to_owned(),
        "/console/links?campaign=bench&state=live".to_owned(),
        format!("/console/links?q={hot}"),
        format!("/console/links/{hot}"),
        format!("/console/links/{hot}?interval=hour"),
        "/console/campaigns".to_owned(),
        "/console/campaigns?name=bench".to_owned(),
        "/console/campaigns/totals?name=bench".to_owned(),
        "/console/domains".to_owned(),
        "/console/create".to_owned(),
        "/console/bulk".to_owned(),
    ];
    println!(
        "{:<44} {:>9} {:>9} {:>9}",
        "page", "p50 ms", "p99 ms", "max ms"
    );
    let mut ok = true;
    for page in &pages {
        // A page that counts in the background (a campaign's totals) first answers "counting"
        // and reloads itself: time the count, then the page as it is read from then on.
        let started = Instant::now();
        let mut reloads = 0;
        while client
            .get(format!("{base}{page}"))
            .header("cookie", &session)
            .send()
            .await
            .unwrap()
            .headers()
            .contains_key("refresh")
        {
            reloads += 1;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if reloads > 0 {
            println!(
                "{page}: counted in the background in {:.0} ms",
                started.elapsed().as_secs_f64() * 1000.0
            );
        }
        let mut times = Vec::with_capacity(n);
        for i in 0..n + 5 {
            let at = Instant::now();
            let response = client
                .get(format!("{base}{page}"))
                .header("cookie", &session)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{page}");
            response.bytes().await.unwrap();
            if i >= 5 {
                times.push(at.elapsed());
            }
        }
        times.sort();
        let p = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let p99 = p(0.99);
        let over = page != "/healthz" && p99 > P99_LIMIT;
        ok &= !over;
        println!(
            "{:<44} {:>9.2} {:>9.2} {:>9.2}{}",
            page,
            ms(p(0.5)),
            ms(p99),
            ms(*times.last().unwrap()),
            if over { "  over 50 ms" } else { "" }
        );
    }
    ok
}
