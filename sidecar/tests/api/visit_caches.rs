//! The consumer's caches change nothing it stores (issue 38): the same 20,000 events, enriched
//! with and without the user-agent cache (each agent's parse and its `user_agents` id) and written
//! through the visit store, leave every visit, user agent, visitor and rollup row identical.

use crate::helpers::*;
use shortlink_visit_enrich::{Enricher, GeoDb, Visit, VisitEvent};
use std::path::PathBuf;
use std::process::Command;

const EVENTS: usize = 20_000;
/// The agent cache's bound here, an eighth of the consumer's: the events bring more than twice as
/// many distinct agents, so it fills and is emptied (each path of it runs).
const AGENT_CACHE: usize = 512;
/// A visit batch as the consumer writes one.
const BATCH: usize = 1_000;
/// Every table a visit batch writes but the feed (whose rows carry the commit's own clock).
const VISIT_TABLES: [&str; 8] = [
    "visits",
    "user_agents",
    "link_visitors",
    "visit_buckets",
    "visit_agents",
    "visit_places",
    "visit_sources",
    "domain_clicks",
];

/// Agents a campaign's clicks come with: phones and desktops in many versions, messaging apps'
/// preview fetchers, bots, none at all.
fn agent(i: usize) -> String {
    match i % 10 {
        0..=3 => format!(
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_{} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.{} Mobile/15E148 Safari/604.1",
            i % 7,
            i % 5
        ),
        4..=6 => format!(
            "Mozilla/5.0 (Linux; Android {}; Pixel {}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{}.0.0.0 Mobile Safari/537.36",
            10 + i % 5,
            i % 9,
            110 + i % 17
        ),
        7 => "WhatsApp/2.23.20.0 A".to_owned(),
        8 => "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)".to_owned(),
        // One agent in ten never seen before, enough to fill the cache past its bound.
        _ => match i % 20 {
            9 => format!("junk-agent/{i}"),
            _ => String::new(),
        },
    }
}

/// Addresses the test geo database knows (GB, SE, US, JP) and documentation ranges it does not.
fn address(i: usize) -> String {
    match i % 6 {
        0 => "81.2.69.142".to_owned(),
        1 => "89.160.20.112".to_owned(),
        2 => "216.160.83.56".to_owned(),
        3 => format!("2001:218::{:x}", i % 500),
        _ => format!("203.0.{}.{}", (i / 256) % 256, i % 256),
    }
}

/// Visits of the last 24 hours: the app's domain health job forgets older per-minute domain
/// counts (`domain_clicks`) at its start, at a moment that varies with the machine's load, and
/// must find nothing to forget here.
fn events() -> Vec<VisitEvent> {
    let start =
        (chrono::Utc::now() - chrono::Duration::hours(4)).timestamp_millis() / 60_000 * 60_000;
    (0..EVENTS)
        .map(|i| {
            let fields = [
                ("c", format!("code{}", i % 50)),
                // Three hours of clicks: many minutes and hours' buckets.
                ("t", (start + (i as i64) * 540).to_string()),
                ("s", "302".to_owned()),
                ("ip", address(i / 3)),
                ("ua", agent(i * 7919 % 100_003)),
                ("ref", format!("https://m.facebook.com/{}", i % 3)),
                ("host", format!("s{}.example", i % 3)),
                ("lang", "pt-BR,pt;q=0.9".to_owned()),
            ];
            VisitEvent::from_fields(format!("{}-{}", start + i as i64, i % 3), fields).unwrap()
        })
        .collect()
}

fn geo_db() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../visit-enrich/testdata/test-city.mmdb")
}

/// The visit tables' rows as text: on SQLite as `sqlite3 .dump` writes them, on PostgreSQL each
/// table's rows in their text form (`row::text`), on MariaDB each row's columns in hex (`NULL`
/// for none), sorted, under an `INSERT INTO <table> ` line.
async fn dump(app: &TestApp) -> String {
    if let TestDb::Mysql(_) = &app.db {
        let mut dump = String::new();
        for table in VISIT_TABLES {
            let columns = (app.db)
                .texts(&format!(
                    "SELECT column_name FROM information_schema.columns WHERE \
                     table_schema = DATABASE() AND table_name = '{table}' \
                     ORDER BY ordinal_position"
                ))
                .await;
            let hex: Vec<String> = (columns.iter())
                .map(|c| format!("IFNULL(HEX(`{c}`), 'NULL')"))
                .collect();
            let rows = (app.db)
                .texts(&format!(
                    "SELECT CONCAT_WS(',', {}) AS r FROM {table} ORDER BY r",
                    hex.join(", ")
                ))
                .await;
            for row in rows {
                dump.push_str(&format!("INSERT INTO {table} {row}\n"));
            }
        }
        return dump;
    }
    if let TestDb::Postgres(_) = &app.db {
        let mut dump = String::new();
        for table in VISIT_TABLES {
            let rows = (app.db)
                .texts(&format!("SELECT t::text FROM {table} t ORDER BY 1"))
                .await;
            for row in rows {
                dump.push_str(&format!("INSERT INTO {table} {row}\n"));
            }
        }
        return dump;
    }
    let path = app.database_url.trim_start_matches("sqlite://");
    let output = Command::new("sqlite3")
        .arg(path)
        .arg(format!(".dump {}", VISIT_TABLES.join(" ")))
        .output()
        .expect("run sqlite3");
    assert!(output.status.success(), "sqlite3 .dump: {output:?}");
    String::from_utf8(output.stdout).expect("the dump is text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cache_changes_no_stored_row() {
    the_agent_cache_changes_no_stored_row_on(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cache_changes_no_stored_row_on_postgres() {
    the_agent_cache_changes_no_stored_row_on(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cache_changes_no_stored_row_on_mariadb() {
    the_agent_cache_changes_no_stored_row_on(Backend::Mariadb).await;
}

async fn the_agent_cache_changes_no_stored_row_on(backend: Backend) {
    let events = events();
    let agents: std::collections::HashSet<_> =
        events.iter().map(|event| &event.user_agent).collect();
    // More agents than the cache holds: it fills and is emptied, so every path of it runs.
    assert!(agents.len() > 2 * AGENT_CACHE, "{} agents", agents.len());
    let mut dumps = Vec::new();
    for cache in [AGENT_CACHE, 0] {
        let app = spawn_app(backend).await;
        let geo = GeoDb::open(geo_db()).expect("the test geo database");
        let enricher = Enricher::new(geo, false).with_agent_cache(cache);
        let store = app.visit_store().await;
        let mut most_cached = 0;
        for chunk in events.chunks(BATCH) {
            let visits: Vec<Visit> = chunk.iter().map(|event| enricher.enrich(event)).collect();
            let outcome = store.store_batch(&visits, true).await.unwrap();
            assert_eq!(outcome.inserted, chunk.len() as u64);
            most_cached = most_cached.max(enricher.cached_agents());
        }
        match cache {
            0 => assert_eq!(most_cached, 0),
            _ => assert!((1..=AGENT_CACHE).contains(&most_cached)),
        }
        dumps.push(dump(&app).await);
    }
    let rows = |dump: &str| dump.lines().filter(|l| l.starts_with("INSERT")).count();
    assert!(rows(&dumps[0]) > EVENTS, "every visit and its rollups");
    for table in VISIT_TABLES {
        assert!(
            dumps[0].contains(&format!("INSERT INTO {table} ")),
            "{table} has rows"
        );
    }
    // To compare two builds' rows (the SQLite batch write of issue 38 against the one before it):
    // VISIT_CACHES_DUMP=<dir> writes each backend's two dumps there.
    if let Some(dir) = std::env::var_os("VISIT_CACHES_DUMP") {
        for (dump, name) in dumps.iter().zip(["cached", "uncached"]) {
            let file = PathBuf::from(&dir).join(format!("{backend:?}-{name}.dump"));
            std::fs::write(file, dump).expect("write the dump");
        }
    }
    // Compared whole, not printed: the dumps are tens of megabytes. On a difference the first
    // differing lines are shown (a line one dump lacks as "(none)").
    if dumps[0] != dumps[1] {
        let cached: Vec<&str> = dumps[0].lines().collect();
        let uncached: Vec<&str> = dumps[1].lines().collect();
        let first = (0..cached.len().max(uncached.len()))
            .find(|&i| cached.get(i) != uncached.get(i))
            .unwrap_or(0);
        let short = |line: Option<&&str>| match line {
            Some(line) => line.chars().take(400).collect::<String>(),
            None => "(none)".to_owned(),
        };
        panic!(
            "the stored rows differ with and without the agent cache ({} and {} lines); first \
             difference, line {first}:\n  cached:   {}\n  uncached: {}",
            cached.len(),
            uncached.len(),
            short(cached.get(first)),
            short(uncached.get(first)),
        );
    }
}
