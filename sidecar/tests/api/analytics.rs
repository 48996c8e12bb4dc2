//! Visit analytics: events XADDed to `sl:events` exactly as the nginx module writes them, consumed
//! by the sidecar's consumer group reader, counted once, and read back through the stats API.

use crate::helpers::*;
use redis::AsyncCommands;
use serde_json::{json, Value};
use shortlink_e2e::agents::{CHROME, CURL, IPHONE, SLACKBOT, SMS_SCANNER, WECHAT};
use shortlink_visits::consumer::{Consumer, ConsumerCounters, GROUP};
use shortlink_visits::store::VisitStore;
use shortlink_wire::keys::EVENT_STREAM;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use testkit::process::Lifeline;
use testkit::Signal;

fn geo_db() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../visit-enrich/testdata/test-city.mmdb")
        .display()
        .to_string()
}

/// A visit as the consumer makes it of one event (event id, code, Unix ms, client IP, user
/// agent), without a geo database.
fn enriched(id: String, code: &str, t: i64, ip: &str, ua: &str) -> shortlink_visit_enrich::Visit {
    use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
    let fields = [("c", code), ("t", &t.to_string()), ("ip", ip), ("ua", ua)]
        .map(|(k, v)| (k, v.to_owned()));
    let event = VisitEvent::from_fields(id, fields).unwrap();
    Enricher::new(GeoDb::disabled(), false).enrich(&event)
}

async fn store(app: &TestApp) -> Arc<dyn VisitStore> {
    app.visit_store().await
}

/// A consumer on the app's Redis and database, with the test geo database.
async fn consumer(app: &TestApp, name: &str, extra: &[&str]) -> Consumer {
    let geo = geo_db();
    let mut args = vec!["--geoip-db", geo.as_str(), "--consumer-name", name];
    args.extend_from_slice(extra);
    let config = app.config(&args);
    shortlink_visits::consumer(&config, store(app).await).expect("consumer")
}

/// One event as the module queues it: `XADD sl:events MAXLEN ~ cap * c .. t .. s .. ip .. ua ..`.
async fn xadd(app: &TestApp, fields: &[(&str, &str)]) -> String {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(EVENT_STREAM)
        .arg("MAXLEN")
        .arg("~")
        .arg(1_000_000)
        .arg("*");
    for (k, v) in fields {
        cmd.arg(*k).arg(*v);
    }
    cmd.query_async(&mut app.redis().await).await.unwrap()
}

async fn visit(app: &TestApp, code: &str, ip: &str, ua: &str, extra: &[(&str, &str)]) -> String {
    let t = chrono::Utc::now().timestamp_millis().to_string();
    let mut fields = vec![
        ("c", code),
        ("t", t.as_str()),
        ("s", "302"),
        ("ip", ip),
        ("ua", ua),
    ];
    fields.extend_from_slice(extra);
    xadd(app, &fields).await
}

/// One entry carrying several visits, as the module packs them under load: the visits' field
/// groups one after the other, each beginning with `c`.
async fn xadd_packed(app: &TestApp, visits: &[Vec<(&str, &str)>]) -> String {
    assert!(
        visits.iter().all(|v| v[0].0 == "c"),
        "each group begins with c"
    );
    xadd(app, &visits.concat()).await
}

/// A visit's fields for [`xadd_packed`].
fn group<'a>(
    code: &'a str,
    t: &'a str,
    ip: &'a str,
    ua: &'a str,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut fields = vec![("c", code), ("t", t), ("s", "302"), ("ip", ip), ("ua", ua)];
    fields.extend_from_slice(extra);
    fields
}

/// The stored visit ids (raw visits), sorted.
async fn visit_ids(app: &TestApp) -> Vec<String> {
    let sql = "SELECT event_id FROM visits ORDER BY event_id";
    app.db.texts(sql).await
}

/// `{value: clicks}` of one breakdown.
fn breakdown(stats: &Value, name: &str) -> Vec<(Option<String>, i64)> {
    stats["breakdowns"][name]
        .as_array()
        .unwrap_or_else(|| panic!("breakdown {name}: {stats}"))
        .iter()
        .map(|e| {
            (
                e["value"].as_str().map(str::to_owned),
                e["clicks"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

/// Entries of the group not yet acknowledged.
async fn pending(app: &TestApp) -> i64 {
    let reply: redis::Value = redis::cmd("XPENDING")
        .arg(EVENT_STREAM)
        .arg(GROUP)
        .query_async(&mut app.redis().await)
        .await
        .unwrap();
    match reply {
        redis::Value::Array(parts) => match &parts[0] {
            redis::Value::Int(n) => *n,
            other => panic!("XPENDING: {other:?}"),
        },
        other => panic!("XPENDING: {other:?}"),
    }
}

async fn counts_and_breakdowns(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app
        .create(json!({"url": "https://shop.example/spring"}))
        .await["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let fb = [
        ("ref", "https://www.facebook.com/story"),
        ("host", "s1.example"),
    ];
    visit(&app, &code, "203.0.113.10", CHROME, &fb).await;
    visit(&app, &code, "203.0.113.10", CHROME, &fb).await; // same person again
                                                           // Three visits packed in one entry, with a garbage group (no time) between two of them and a
                                                           // visit with only the required fields and the ones it has (no referrer, host or language).
    let t = chrono::Utc::now().timestamp_millis().to_string();
    let packed = xadd_packed(
        &app,
        &[
            group(
                &code,
                &t,
                "198.51.100.20",
                IPHONE,
                &[("host", "S2.example:443")],
            ),
            vec![("c", code.as_str()), ("ua", CURL), ("zz", "junk")],
            group(
                &code,
                &t,
                "192.0.2.30",
                WECHAT,
                &[("lang", "zh-CN,zh;q=0.9")],
            ),
            vec![
                ("c", code.as_str()),
                ("t", &t),
                ("ip", "2001:db8:1::5"),
                ("ua", SMS_SCANNER),
            ],
        ],
    )
    .await;
    visit(&app, &code, "203.0.113.99", SLACKBOT, &[]).await;
    visit(&app, &code, "198.51.100.99", CURL, &[]).await;
    // Acknowledged and counted, never stored as visits: no time (invalid); a known link's 410
    // on a host (an orphan visit of kind invalid_short_url), and on none (ignored).
    xadd(&app, &[("c", code.as_str()), ("ua", CURL)]).await;
    xadd(&app, &[("c", code.as_str()), ("t", &t), ("s", "410")]).await;
    xadd(
        &app,
        &[
            ("c", code.as_str()),
            ("t", &t),
            ("s", "410"),
            ("host", "s1.example"),
        ],
    )
    .await;

    let mut consumer = consumer(&app, "test-1", &[]).await;
    let counters = consumer.counters();
    assert_eq!(consumer.drain().await.unwrap(), 8, "entries");
    assert_eq!(ConsumerCounters::get(&counters.visits), 11);
    assert_eq!(ConsumerCounters::get(&counters.inserted), 7);
    assert_eq!(ConsumerCounters::get(&counters.invalid), 2);
    assert_eq!(ConsumerCounters::get(&counters.ignored), 1);
    assert_eq!(ConsumerCounters::get(&counters.orphans), 1);
    assert_eq!(pending(&app).await, 0, "everything acknowledged");
    // The packed entry's visits: the entry id, then `<id>:<n>` by position (garbage included).
    let ids = visit_ids(&app).await;
    for id in [packed.clone(), format!("{packed}:2"), format!("{packed}:3")] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    assert!(!ids.contains(&format!("{packed}:1")), "the garbage group");

    let stats = app.get_json(&format!("/links/{code}/stats")).await;
    let totals = &stats["totals"];
    assert_eq!(totals["clicks"], 4, "{stats}");
    assert_eq!(totals["humans"], 4);
    assert_eq!(totals["unique_visitors"], 3);
    assert_eq!(totals["previews"], 2, "SMS scanner and Slack");
    assert_eq!(totals["bots"], 1, "curl");
    for (name, expected) in [
        (
            "browser",
            vec![(s("Chrome"), 2), (s("Safari"), 1), (s("WeChat"), 1)],
        ),
        ("device", vec![(s("desktop"), 2), (s("mobile"), 2)]),
        ("country", vec![(s("AU"), 2), (s("DE"), 1), (s("US"), 1)]),
        // Ties by value, unknown last.
        (
            "region",
            vec![(s("New South Wales"), 2), (s("Berlin"), 1), (None, 1)],
        ),
        ("city", vec![(s("Sydney"), 2), (s("Berlin"), 1), (None, 1)]),
        ("referrer_host", vec![(s("facebook.com"), 2), (None, 2)]),
        (
            "short_domain",
            vec![(s("s1.example"), 2), (s("s2.example"), 1), (None, 1)],
        ),
    ] {
        assert_eq!(breakdown(&stats, name), expected, "{name}");
    }
    let agents: Vec<(Option<String>, i64, i64)> = stats["breakdowns"]["agent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["value"].as_str().map(str::to_owned),
                e["bots"].as_i64().unwrap(),
                e["previews"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        agents,
        [
            (s("Samsung Messages"), 0, 1),
            (s("Slack"), 0, 1),
            (s("curl"), 1, 0)
        ]
    );
    // The day's point carries the totals.
    let series = stats["series"].as_array().unwrap();
    let last = series.last().unwrap();
    assert_eq!(
        (last["clicks"].as_i64(), last["previews"].as_i64()),
        (Some(4), Some(2))
    );

    let with_bots = app
        .get_json(&format!("/links/{code}/stats?include_bots=true"))
        .await;
    assert_eq!(with_bots["totals"]["clicks"], 7);
    assert_eq!(with_bots["totals"]["unique_visitors"], 3, "people only");

    let hourly = app
        .get_json(&format!("/links/{code}/stats?interval=hour"))
        .await;
    // From the link's creation hour to the end of the current hour.
    let points = hourly["series"].as_array().unwrap().len();
    assert!((1..=2).contains(&points), "{hourly}");
    let hour_clicks: i64 = hourly["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["clicks"].as_i64().unwrap())
        .sum();
    assert_eq!(hour_clicks, 4);

    // visit_count counts people only (no --count-bots).
    let link: Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["visit_count"], 4, "{link}");
    assert!(link["last_visit_at"].is_string(), "{link}");

    let global = app.get_json("/stats").await;
    assert_eq!(global["totals"]["clicks"], 4);
    assert_eq!(global["top_links"][0]["code"], code.as_str());
    assert_eq!(global["top_links"][0]["clicks"], 4);
    assert_eq!(global["code"], Value::Null);

    // Errors are the API's JSON errors.
    let missing = app
        .api(reqwest::Method::GET, "/links/nosuchcode/stats")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let bad = app
        .api(
            reqwest::Method::GET,
            &format!("/links/{code}/stats?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);
    let body: Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_range");
    let bad = app
        .api(reqwest::Method::GET, "/stats?interval=week")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    // Every parameter is checked as the OpenAPI document describes it: 400 and a JSON error.
    for query in [
        "top=0",
        "top=101",
        "top=1.5",
        "include_bots=yes",
        "from=yesterday",
    ] {
        let bad = app
            .api(reqwest::Method::GET, &format!("/stats?{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400, "{query}");
        let body: Value = bad.json().await.unwrap();
        assert!(body["error"]["message"].is_string(), "{query}: {body}");
    }
}

/// Crash after the commit and before XACK: the batch comes back and counts nothing twice. Crash
/// before the commit: another consumer claims the entries and they count once.
async fn redelivery_counts_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app.create_code("https://shop.example/a").await;
    // 50 visits: 20 single-visit entries, then 6 entries of 5 packed visits.
    let t = chrono::Utc::now().timestamp_millis().to_string();
    let ips: Vec<String> = (0..60).map(|i| format!("203.0.113.{i}")).collect();
    for ip in &ips[..20] {
        visit(&app, &code, ip, IPHONE, &[]).await;
    }
    let packed = |range: std::ops::Range<usize>| -> Vec<Vec<(&str, &str)>> {
        ips[range]
            .iter()
            .map(|ip| group(&code, &t, ip, IPHONE, &[]))
            .collect()
    };
    for i in (20..50).step_by(5) {
        xadd_packed(&app, &packed(i..i + 5)).await;
    }
    // Stored, then "killed" before acknowledging: 20 single entries and 2 packed ones.
    let mut first = consumer(&app, "crashy", &["--consumer-batch", "22"]).await;
    let batch = first.read_batch().await.unwrap();
    assert_eq!(batch.len(), 22);
    first.store(&batch).await.unwrap();
    drop(first);
    assert_eq!(pending(&app).await, 22);

    // Restarted under the same name: its pending entries come first.
    let mut again = consumer(&app, "crashy", &["--consumer-batch", "22"]).await;
    let counters = again.counters();
    assert_eq!(again.drain().await.unwrap(), 26);
    assert_eq!(ConsumerCounters::get(&counters.duplicates), 30);
    assert_eq!(ConsumerCounters::get(&counters.inserted), 20);
    assert_eq!(pending(&app).await, 0);

    // Read and "killed" before storing; a different consumer claims the idle entries.
    for i in (50..60).step_by(5) {
        xadd_packed(&app, &packed(i..i + 5)).await;
    }
    let mut lost = consumer(&app, "dies-early", &[]).await;
    assert_eq!(lost.read_batch().await.unwrap().len(), 2);
    drop(lost);
    let mut rescuer = consumer(&app, "rescuer", &["--consumer-claim-after", "200ms"]).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pending(&app).await > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle entries are claimed"
        );
        rescuer.step().await.unwrap();
    }

    let stats = app.get_json(&format!("/links/{code}/stats")).await;
    assert_eq!(stats["totals"]["clicks"], 60, "{stats}");
    assert_eq!(stats["totals"]["unique_visitors"], 60);
    let link: Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["visit_count"], 60);
    assert_eq!(store(&app).await.visit_rows().await.unwrap(), 60);
}

/// A batch of which some visits are stored already (a redelivered entry read together with new
/// ones, interleaved, one id twice): the new ones count once, the stored ones not again.
async fn partly_stored_batch_counts_the_new_visits(backend: Backend) {
    use shortlink_visit_enrich::Visit;
    let app = spawn_app(backend).await;
    let code = app.create_code("https://shop.example/p").await;
    let t = chrono::Utc::now().timestamp_millis();
    let visits: Vec<Visit> = (0..40)
        .map(|i| {
            enriched(
                format!("{t}-{i}"),
                &code,
                t,
                &format!("198.51.100.{i}"),
                IPHONE,
            )
        })
        .collect();
    let store = store(&app).await;
    let odd: Vec<Visit> = visits.iter().skip(1).step_by(2).cloned().collect();
    let first = store.store_batch(&odd, false).await.unwrap();
    assert_eq!((first.inserted, first.duplicates), (20, 0));
    let mut all = visits.clone();
    all.push(visits[0].clone());
    let second = store.store_batch(&all, false).await.unwrap();
    assert_eq!((second.inserted, second.duplicates), (20, 21));

    let stats = app.get_json(&format!("/links/{code}/stats")).await;
    assert_eq!(stats["totals"]["clicks"], 40, "{stats}");
    assert_eq!(stats["totals"]["unique_visitors"], 40);
    let all_links = app.get_json("/stats").await;
    assert_eq!(all_links["totals"]["clicks"], 40, "{all_links}");
    let link: Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["visit_count"], 40);
    assert_eq!(store.visit_rows().await.unwrap(), 40);
}

/// Reads are bounded in visits, not entries: with packed entries a read of `--consumer-batch`
/// entries would hold that many times the packing. Here 40 entries of 25 visits, 100 visits per
/// transaction and a batch of 1000 entries: no read holds more than 100 visits, and all count.
async fn reads_hold_about_one_transaction_of_visits(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app.create_code("https://shop.example/r").await;
    let t = chrono::Utc::now().timestamp_millis().to_string();
    let ips: Vec<String> = (0..1000)
        .map(|i| format!("10.0.{}.{}", i / 250, i % 250))
        .collect();
    for chunk in ips.chunks(25) {
        let groups: Vec<_> = chunk
            .iter()
            .map(|ip| group(&code, &t, ip, IPHONE, &[]))
            .collect();
        xadd_packed(&app, &groups).await;
    }
    let geo = geo_db();
    let args = [
        "--geoip-db",
        geo.as_str(),
        "--consumer-name",
        "bounded",
        "--consumer-batch",
        "1000",
    ];
    let config = app.config(&args);
    let mut settings = shortlink_visits::consumer_settings(&config).unwrap();
    settings.max_visits_per_transaction = Some(100);
    let enricher = shortlink_visits::enricher(&config).unwrap();
    let mut consumer = Consumer::new(
        &app.redis.url(),
        store(&app).await,
        Arc::new(enricher),
        settings,
    )
    .unwrap();
    // Before any read the packing is unknown: full entries (512 visits) are assumed.
    assert_eq!(consumer.read_count(), 1);
    assert_eq!(consumer.drain().await.unwrap(), 40);
    let counters = consumer.counters();
    assert_eq!(ConsumerCounters::get(&counters.inserted), 1000);
    let largest = ConsumerCounters::get(&counters.largest_read);
    assert!(largest <= 100, "a read held {largest} visits");
    assert!(
        largest >= 75,
        "reads grew to the transaction size: {largest}"
    );
    assert_eq!(consumer.read_count(), 4);
    let link: Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["visit_count"], 1000);
}

/// `shortlink-sidecar consume` SIGKILLed while events stream in, then restarted: every event is
/// counted exactly once.
async fn killed_consumer_process(backend: Backend) {
    const EVENTS: usize = 20_000;
    const LINKS: usize = 20;
    const PER_ENTRY: usize = 4;
    let app = spawn_app(backend).await;
    let mut codes = Vec::new();
    for i in 0..LINKS {
        let link = app
            .create(json!({"url": format!("https://shop.example/{i}")}))
            .await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    let dir = testkit::temp_dir();
    let start = |n: usize| {
        Lifeline::builder(
            env!("CARGO_BIN_EXE_shortlink-sidecar"),
            dir.path().join(format!("consume-{n}.log")),
        )
        .args(["consume", "--database-url", &app.database_url])
        .args(["--redis-url", &app.redis.url(), "--code-secret", SECRET_HEX])
        .args(["--consumer-name", "proc", "--consumer-batch", "125"])
        .env("RUST_LOG", "warn")
        .spawn()
    };
    let mut process = start(1);
    let store = store(&app).await;
    let producer = {
        let client = redis::Client::open(app.redis.url()).unwrap();
        let codes = codes.clone();
        tokio::spawn(async move {
            let mut redis = client.get_multiplexed_async_connection().await.unwrap();
            // PER_ENTRY visits per entry, as the module packs them under load.
            for chunk in (0..EVENTS).collect::<Vec<_>>().chunks(500) {
                let mut pipe = redis::pipe();
                for entry in chunk.chunks(PER_ENTRY) {
                    let t = chrono::Utc::now().timestamp_millis();
                    let cmd = pipe.cmd("XADD").arg(EVENT_STREAM).arg("*");
                    for &i in entry {
                        cmd.arg("c")
                            .arg(&codes[i % LINKS])
                            .arg("t")
                            .arg(t)
                            .arg("s")
                            .arg(302)
                            .arg("ip")
                            .arg(format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255))
                            .arg("ua")
                            .arg(if i % 2 == 0 { CHROME } else { IPHONE });
                    }
                    cmd.ignore();
                }
                pipe.query_async::<()>(&mut redis).await.unwrap();
            }
        })
    };
    assert!(
        eventually(Duration::from_secs(60), || async {
            store.visit_rows().await.unwrap_or(0) > 0
        })
        .await,
        "the consumer stores visits: {}",
        process.log_text()
    );
    process.signal(Signal::Kill);
    // Reaps it (a killed child stays a zombie until its guardian waits for it).
    process.stop();
    producer.await.unwrap();
    let before_restart = store.visit_rows().await.unwrap();
    assert!((before_restart as usize) < EVENTS, "killed mid-stream");

    let _restarted = start(2);
    let done = eventually(Duration::from_secs(120), || async {
        store.visit_rows().await.unwrap_or(0) as usize >= EVENTS && pending(&app).await == 0
    })
    .await;
    assert!(done, "all events stored and acknowledged");
    let len: i64 = app.redis().await.xlen(EVENT_STREAM).await.unwrap();
    assert_eq!(len as usize, EVENTS / PER_ENTRY);
    assert_eq!(store.visit_rows().await.unwrap() as usize, EVENTS);
    let global = app.get_json("/stats").await;
    assert_eq!(
        global["totals"]["clicks"], EVENTS as i64,
        "{}",
        global["totals"]
    );
    let mut visit_count = 0;
    for code in &codes {
        let link: Value = app.get_link(code).await.json().await.unwrap();
        visit_count += link["visit_count"].as_i64().unwrap();
    }
    assert_eq!(visit_count, EVENTS as i64);
}

/// The expiry job expires an idle link through the write path (SQL and the Redis record); the
/// retention job deletes old raw visits and leaves the rollups.
async fn cleanup_expires_idle_links(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut code = Vec::new();
    for name in ["idle", "visited", "new"] {
        let link = app
            .create(json!({"url": format!("https://shop.example/{name}")}))
            .await;
        code.push(link["code"].as_str().unwrap().to_owned());
    }
    let old = chrono::Utc::now() - chrono::Duration::days(100);
    for c in &code[..2] {
        app.set_link_time_in_sql(c, LinkTime::CreatedAt, old).await;
    }
    // "visited" was visited an hour ago; and an old visit (200 days) for the retention job.
    let hour_ago = (chrono::Utc::now().timestamp_millis() - 3_600_000).to_string();
    xadd(
        &app,
        &[
            ("c", &code[1]),
            ("t", &hour_ago),
            ("ip", "203.0.113.5"),
            ("ua", IPHONE),
        ],
    )
    .await;
    let long_ago = old.timestamp_millis() - 100 * 86_400_000;
    xadd(
        &app,
        &[
            ("c", &code[1]),
            ("t", &long_ago.to_string()),
            ("ua", IPHONE),
        ],
    )
    .await;
    consumer(&app, "c", &[]).await.drain().await.unwrap();

    app.run_cli(&[
        "cleanup",
        "--expire-idle-after",
        "90d",
        "--visit-retention",
        "180d",
    ])
    .await;

    let idle: Value = app.get_link(&code[0]).await.json().await.unwrap();
    assert_eq!(idle["state"], "expired", "{idle}");
    let record = app.redis_get(&code[0]).await.unwrap();
    let expires: i64 = record.split('|').nth(3).unwrap().parse().unwrap();
    assert!(
        record.starts_with("1|L|302|") && expires > 0 && expires <= now_secs(),
        "{record}"
    );
    assert_eq!(app.resolve(&code[0]).await.status(), 410);
    for c in &code[1..] {
        let link: Value = app.get_link(c).await.json().await.unwrap();
        assert_eq!(link["state"], "live", "{link}");
        assert_eq!(app.resolve(c).await.status(), 302);
    }
    assert_eq!(
        store(&app).await.visit_rows().await.unwrap(),
        1,
        "the old raw visit is gone"
    );
    let from = (old - chrono::Duration::days(200)).to_rfc3339();
    let stats = app
        .get_json(&format!(
            "/links/{}/stats?from={}",
            code[1],
            urlencode(&from)
        ))
        .await;
    assert_eq!(stats["totals"]["clicks"], 2, "rollups stay");
}

/// A create while the consumer writes one visit transaction after another (on SQLite, each holds
/// the file's one write lock) waits behind at most the transaction in progress: none is refused.
/// Two writers that met on SQLite's busy handler instead would starve the create, which polls for
/// a lock the consumer takes again the moment it lets go.
async fn creates_are_served_between_back_to_back_visit_batches(backend: Backend) {
    use shortlink_visit_enrich::{Enricher, GeoDb, Visit, VisitEvent};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const VISITS_PER_BATCH: usize = 2_000;
    const CREATES: usize = 20;
    // The test configuration's database timeout (2 s) bounds each create's wait.
    let app = spawn_app(backend).await;
    let code = app.create_code("https://shop.example/hot").await;
    let enricher = Enricher::new(GeoDb::disabled(), false);
    let t = chrono::Utc::now().timestamp_millis();
    let template: Vec<Visit> = (0..VISITS_PER_BATCH)
        .map(|i| {
            let event = VisitEvent::from_fields(
                format!("0-{i}"),
                [
                    ("c", code.clone()),
                    ("t", t.to_string()),
                    ("ip", format!("198.51.{}.{}", i / 256, i % 256)),
                    ("ua", CHROME.to_owned()),
                ],
            )
            .unwrap();
            enricher.enrich(&event)
        })
        .collect();
    let store = store(&app).await;
    let stop = Arc::new(AtomicBool::new(false));
    let batches = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn({
        let (stop, batches) = (Arc::clone(&stop), Arc::clone(&batches));
        async move {
            for round in 1.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut visits = template.clone();
                for (i, visit) in visits.iter_mut().enumerate() {
                    visit.event_id = format!("{round}-{i}");
                }
                let outcome = store.store_batch(&visits, false).await.unwrap();
                assert_eq!(outcome.inserted, VISITS_PER_BATCH as u64);
                batches.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    assert!(
        eventually(Duration::from_secs(30), || async {
            batches.load(Ordering::Relaxed) > 0
        })
        .await,
        "the visit writer stores batches"
    );

    let before = batches.load(Ordering::Relaxed);
    for i in 0..CREATES {
        let response = app
            .post_link(&json!({"url": format!("https://shop.example/r/{i}")}))
            .await;
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(status, 201, "create {i} during visit writes: {body}");
    }
    let during = batches.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("the visit writer");
    if backend == Backend::Sqlite {
        assert!(
            during >= 2,
            "visit transactions ran between the creates ({during}), so the creates had to queue"
        );
    }
    println!(
        "{CREATES} creates among {during} visit transactions of {VISITS_PER_BATCH}, none refused"
    );
}

/// Codes are case-sensitive: `aB3` and `Ab3` are two links, whose visits, visitors and rollups
/// never mix (MariaDB compares text case-insensitively unless a column says otherwise).
async fn codes_differing_in_case_keep_their_own_stats(backend: Backend) {
    use shortlink_visits::rollup::Interval;
    use shortlink_visits::store::StatsQuery;
    let app = spawn_app(backend).await;
    let t = chrono::Utc::now().timestamp_millis();
    // aB3: three people; Ab3: the first of them only.
    let visits: Vec<_> = [("aB3", 1), ("aB3", 2), ("aB3", 3), ("Ab3", 1)]
        .iter()
        .enumerate()
        .map(|(i, (code, person))| {
            let ip = format!("198.51.100.{person}");
            enriched(format!("1-{i}"), code, t, &ip, CHROME)
        })
        .collect();
    let store = store(&app).await;
    let outcome = store.store_batch(&visits, false).await.unwrap();
    assert_eq!(outcome.inserted, 4);
    let day = Interval::Day.floor(t / 1000);
    let query = |code: Option<&str>| StatsQuery {
        workspace: shortlink_model::WorkspaceId::DEFAULT,
        code: code.map(str::to_owned),
        from: day,
        to: day + 86_400,
        interval: Interval::Day,
        include_bots: false,
        top: 10,
    };
    for (code, humans, new_visitors) in [("aB3", 3, 3), ("Ab3", 1, 1), ("ab3", 0, 0)] {
        let stats = store.stats(&query(Some(code))).await.unwrap();
        assert_eq!(
            (stats.totals.humans, stats.totals.new_visitors),
            (humans, new_visitors),
            "{code}"
        );
    }
    let top = store.stats(&query(None)).await.unwrap().top_links;
    let top: Vec<(&str, i64)> = top.iter().map(|(c, n)| (c.as_str(), n.humans)).collect();
    assert_eq!(top, [("aB3", 3), ("Ab3", 1)]);
    let first = store.first_visits(&["Ab3".to_owned()]).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].0, "Ab3");
}

fn urlencode(s: &str) -> String {
    s.replace('+', "%2B").replace(':', "%3A")
}

crate::on_each_backend!(
    counts_and_breakdowns,
    redelivery_counts_once,
    partly_stored_batch_counts_the_new_visits,
    reads_hold_about_one_transaction_of_visits,
    killed_consumer_process,
    cleanup_expires_idle_links,
    creates_are_served_between_back_to_back_visit_batches,
    codes_differing_in_case_keep_their_own_stats,
    visits_carry_their_rule_and_link_stats_break_down_by_it,
    visits_written_before_format_7_are_stored_after_the_upgrade,
    domain_health_counts_equal_the_raw_visits,
);

/// The domain health check's clicks per domain (issue 41) come from per-minute counts kept as
/// visits are written: over a run with several domains, people, bots and previews, spread over
/// five minutes and partly delivered twice, they equal the raw visits' counts, from any minute on;
/// forgetting old minutes drops only those.
async fn domain_health_counts_equal_the_raw_visits(backend: Backend) {
    use std::collections::BTreeMap;
    let app = spawn_app(backend).await;
    let code = app.create_code("https://shop.example/d").await;
    let domains = ["s1.example", "s2.example", "S3.example:443"];
    let agents = [IPHONE, CHROME, SLACKBOT, CURL];
    let minute_now = chrono::Utc::now().timestamp() / 60 * 60;
    let mut sent: Vec<(i64, String, String)> = Vec::new(); // (Unix ms, host, user agent)
    for i in 0..240_i64 {
        // One visit every 1.25 s over the five minutes before this one.
        let t = (minute_now - 300) * 1000 + i * 1_250;
        let host = domains[(i % 3) as usize];
        let ua = agents[(i % 4) as usize];
        sent.push((t, host.to_owned(), ua.to_owned()));
    }
    let ips: Vec<String> = (0..sent.len())
        .map(|i| format!("198.51.100.{}", i % 250))
        .collect();
    for chunk in sent.chunks(8).zip(ips.chunks(8)) {
        let times: Vec<String> = chunk.0.iter().map(|(t, _, _)| t.to_string()).collect();
        let groups: Vec<Vec<(&str, &str)>> = (chunk.0.iter().zip(chunk.1).zip(&times))
            .map(|(((_, host, ua), ip), t)| group(&code, t, ip, ua, &[("host", host.as_str())]))
            .collect();
        xadd_packed(&app, &groups).await;
    }
    // Half the entries stored, then "killed" before acknowledging: delivered twice.
    let mut first = consumer(&app, "twice", &["--consumer-batch", "15"]).await;
    let batch = first.read_batch().await.unwrap();
    first.store(&batch).await.unwrap();
    drop(first);
    consumer(&app, "twice", &[]).await.drain().await.unwrap();
    assert_eq!(pending(&app).await, 0);
    let store = store(&app).await;
    assert_eq!(store.visit_rows().await.unwrap(), 240);

    let counted = |since: i64| {
        let store = Arc::clone(&store);
        async move {
            let since = chrono::DateTime::from_timestamp(since, 0).unwrap();
            let rows = store.clicks_by_domain(since).await.unwrap();
            rows.into_iter().collect::<BTreeMap<String, i64>>()
        }
    };
    let raw = |since_ms: i64| {
        let mut clicks: BTreeMap<String, i64> = BTreeMap::new();
        for (t, host, ua) in &sent {
            if *t >= since_ms && (ua == IPHONE || ua == CHROME) {
                let domain = host.to_ascii_lowercase().replace(":443", "");
                *clicks.entry(domain).or_default() += 1;
            }
        }
        clicks
    };
    // Everything: the same as the raw rows in the database.
    let all = counted(minute_now - 600).await;
    for (domain, clicks) in &all {
        let sql = format!(
            "SELECT COUNT(*) FROM visits WHERE audience = 'human' AND short_domain = '{domain}'"
        );
        assert_eq!(app.db.scalar(&sql).await, *clicks, "{domain}");
    }
    assert_eq!(all, raw(0));
    assert_eq!(all.values().sum::<i64>(), 120, "people only");
    // From within a minute on: that whole minute and the later ones.
    for back in [300, 240, 150, 61, 0] {
        let since = minute_now - back;
        let from_minute = since - since.rem_euclid(60);
        assert_eq!(
            counted(since).await,
            raw(from_minute * 1000),
            "since now-{back}s"
        );
    }
    // Forgetting the minutes before now-2min keeps the later ones whole.
    let cut = chrono::DateTime::from_timestamp(minute_now - 120, 0).unwrap();
    assert!(store.forget_domain_clicks_before(cut).await.unwrap() > 0);
    assert_eq!(
        counted(minute_now - 600).await,
        raw((minute_now - 120) * 1000)
    );
}

/// Visits name the click-time rule (and split variant) that answered (issue 34): the consumer
/// stores it, from the module's batches (format 2) and from plain fields, and link stats count
/// clicks and unique visitors per rule, the own target (`null`) included.
async fn visits_carry_their_rule_and_link_stats_break_down_by_it(backend: Backend) {
    use shortlink_wire::event::{Batch, Visit as WireVisit, BATCH_FIELD};
    use shortlink_wire::record::Chosen;
    let app = spawn_app(backend).await;
    let code = app.create_code("https://t.example/ab").await;
    let t = chrono::Utc::now().timestamp_millis().to_string();
    // The module's own encoder: three visits of variant 0 of rule 1 (two people), one of 1.1.
    let mut batch = Batch::default();
    for (ip, variant) in [
        ("203.0.113.1", 0),
        ("203.0.113.1", 0),
        ("203.0.113.2", 0),
        ("203.0.113.3", 1),
    ] {
        batch.push(&WireVisit {
            code: code.as_bytes(),
            time_ms: t.parse().unwrap(),
            status: 302,
            ip: ip.as_bytes(),
            ua: IPHONE.as_bytes(),
            referer: b"",
            host: b"s1.example",
            lang: b"",
            chosen: Some(Chosen {
                rule: 1,
                variant: Some(variant),
            }),
            click_id: None,
            orphan: None,
            workspace: b"",
            // A phone's request: a GET with its headers.
            signals: Default::default(),
        });
    }
    let _: String = redis::cmd("XADD")
        .arg(EVENT_STREAM)
        .arg("*")
        .arg(BATCH_FIELD)
        .arg(batch.bytes())
        .query_async(&mut app.redis().await)
        .await
        .unwrap();
    // Plain fields: rule 0, the own target, and a malformed rule field (stored as none).
    visit(&app, &code, "198.51.100.7", IPHONE, &[("rule", "0")]).await;
    visit(&app, &code, "198.51.100.8", IPHONE, &[]).await;
    visit(&app, &code, "198.51.100.9", IPHONE, &[("rule", "x.y")]).await;
    consumer(&app, "rules", &[]).await.drain().await.unwrap();

    let stored = app
        .db
        .texts("SELECT COALESCE(rule, '-') FROM visits ORDER BY event_id")
        .await;
    assert_eq!(stored, ["1.0", "1.0", "1.0", "1.1", "0", "-", "-"]);
    let stats = app.get_json(&format!("/links/{code}/stats")).await;
    assert_eq!(
        stats["rules"],
        json!([
            {"rule": null, "rule_index": null, "variant": null, "clicks": 2, "unique_visitors": 2},
            {"rule": "0", "rule_index": 0, "variant": null, "clicks": 1, "unique_visitors": 1},
            {"rule": "1.0", "rule_index": 1, "variant": 0, "clicks": 3, "unique_visitors": 2},
            {"rule": "1.1", "rule_index": 1, "variant": 1, "clicks": 1, "unique_visitors": 1},
        ]),
        "{stats}"
    );
    let all = app.get_json("/stats").await;
    assert!(all.get("rules").is_none(), "link stats only");
}

/// Visits an older module wrote (format 6, every field as text: recorded from its encoder,
/// wire/tests/data/format-6-batch.hex) and still in the stream when the modules move to format 7
/// are stored: a redirect by rule 1.0 sent as `HEAD`, and an orphan visit.
async fn visits_written_before_format_7_are_stored_after_the_upgrade(backend: Backend) {
    use shortlink_wire::event::{BATCH_FIELD, BATCH_FORMAT_6};
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://t.example/old", "code": "old-six"}))
        .await;
    let recorded = include_str!("../../../wire/tests/data/format-6-batch.hex").trim();
    let batch: Vec<u8> = (0..recorded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&recorded[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(batch[0], BATCH_FORMAT_6);
    let id: String = redis::cmd("XADD")
        .arg(EVENT_STREAM)
        .arg("*")
        .arg(BATCH_FIELD)
        .arg(&batch)
        .query_async(&mut app.redis().await)
        .await
        .unwrap();
    consumer(&app, "upgrade", &[]).await.drain().await.unwrap();

    let row = |column: &str| format!("SELECT {column} FROM visits WHERE event_id = '{id}'");
    assert_eq!(app.db.texts(&row("code")).await, ["old-six"]);
    assert_eq!(app.db.texts(&row("rule")).await, ["1.0"]);
    assert_eq!(app.db.texts(&row("ip")).await, ["203.0.113.9"]);
    assert_eq!(app.db.texts(&row("audience")).await, ["scanner"]);
    let with_status =
        format!("SELECT COUNT(*) FROM visits WHERE event_id = '{id}' AND status = 302");
    assert_eq!(app.db.scalar(&with_status).await, 1);
    assert_eq!(
        app.db.texts("SELECT kind FROM orphan_visits").await,
        ["regular_404"]
    );
    assert_eq!(
        app.db.scalar("SELECT at_ms FROM orphan_visits").await,
        1_764_400_000_124
    );
}
