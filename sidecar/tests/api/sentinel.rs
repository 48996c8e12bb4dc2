//! The sidecar on Redis Sentinel: a primary killed under create load, a replica promoted, creates
//! come back and no acknowledged link is missing or wrong on the new primary; and `WAIT`
//! refusing a write that too few replicas hold.

use crate::helpers::*;
use redis::AsyncCommands;
use serde_json::{json, Value};
use shortlink_sidecar::projection::{encode_record, marker::MARKER_KEY};
use shortlink_sidecar::storage::{LinkFilter, Storage};
use shortlink_sidecar::Application;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::{RedisServer, SentinelGroup, SentinelTiming};

/// Creates acknowledged before the kill, and after the promotion.
const BEFORE: usize = 300;
const AFTER: usize = 300;
/// Concurrent create loops.
const WRITERS: usize = 4;

/// The sidecar as `serve` runs it: the API, the visit consumer and the projection marker's
/// keeper, each on its own connection to the primary.
struct Sidecar {
    address: String,
    storage: Arc<dyn Storage>,
    server: tokio::task::JoinHandle<()>,
    keeper: tokio::task::JoinHandle<()>,
    _background: shortlink_sidecar::visits::Background,
    _dir: tempfile::TempDir,
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        self.server.abort();
        self.keeper.abort();
    }
}

async fn start_sidecar(redis_url: &str, extra: &[&str]) -> Sidecar {
    let dir = testkit::temp_dir();
    let database_url = format!("sqlite://{}", dir.path().join("var/links.db").display());
    let config = config(&database_url, redis_url, extra);
    std::sync::LazyLock::force(&TRACING);
    let app = Application::build(&config)
        .await
        .expect("build the sidecar");
    let address = format!("http://{}", app.local_addr());
    let background = shortlink_sidecar::visits::commands::start_background(&config, app.state())
        .expect("start the visit consumer");
    let keeper = shortlink_sidecar::projection::marker::spawn_keeper(&config, app.state())
        .expect("start the marker's keeper");
    let server = tokio::spawn(async move {
        app.run_until(std::future::pending()).await.expect("serve");
    });
    let storage = shortlink_sidecar::open_storage(&config).await.unwrap();
    Sidecar {
        address,
        storage,
        server,
        keeper,
        _background: background,
        _dir: dir,
    }
}

fn client() -> reqwest::Client {
    shortlink_e2e::install_tls_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

async fn post(client: &reqwest::Client, address: &str, url: &str) -> (u16, Value) {
    let response = client
        .post(format!("{address}/api/v1/links"))
        .bearer_auth(API_KEY)
        .json(&json!({ "url": url }))
        .send()
        .await
        .expect("POST /links");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// What the create loops saw.
#[derive(Default)]
struct Load {
    /// (code, target) of every 201.
    acked: Mutex<Vec<(String, String)>>,
    /// When each 201 came.
    acked_at: Mutex<Vec<Instant>>,
    refused: AtomicU64,
    /// Answers other than 201 and the 503s of an outage.
    unexpected: Mutex<Vec<(u16, Value)>>,
    stop: AtomicBool,
}

impl Load {
    fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }
}

fn spawn_writers(address: &str, load: &Arc<Load>) -> Vec<tokio::task::JoinHandle<()>> {
    (0..WRITERS)
        .map(|writer| {
            let load = Arc::clone(load);
            let address = address.to_owned();
            tokio::spawn(async move {
                let client = client();
                let mut i = 0u64;
                while !load.stop.load(Ordering::Relaxed) {
                    i += 1;
                    let url = format!("https://t.example/{writer}/{i}");
                    match post(&client, &address, &url).await {
                        (201, body) => {
                            let code = body["code"].as_str().unwrap().to_owned();
                            load.acked.lock().unwrap().push((code, url));
                            load.acked_at.lock().unwrap().push(Instant::now());
                        }
                        // Redis between two primaries; or, on SQLite, the one write lock held
                        // meanwhile by a create waiting for Redis. Refused, nothing stored.
                        (503, body)
                            if body["error"]["code"] == "redis_unavailable"
                                || body["error"]["code"] == "database_unavailable" =>
                        {
                            load.refused.fetch_add(1, Ordering::Relaxed);
                            // A client backs off a little before trying again.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        other => load.unexpected.lock().unwrap().push(other),
                    }
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_killed_under_create_load_loses_no_acknowledged_link() {
    let mut group = SentinelGroup::start(2, 3, SentinelTiming::default());
    let sentinels = group.addresses();
    let sidecar = start_sidecar(
        &group.primary.url(),
        &[
            "--redis-sentinels",
            &sentinels,
            "--redis-sentinel-service",
            testkit::sentinel::SERVICE,
            "--redis-wait-replicas",
            "1",
            "--redis-wait-timeout",
            "500ms",
            "--projection-check-interval",
            "200ms",
        ],
    )
    .await;

    let load = Arc::new(Load::default());
    let writers = spawn_writers(&sidecar.address, &load);
    assert!(
        eventually(Duration::from_secs(60), || async { load.acked() >= BEFORE }).await,
        "creates before the failover: {} acknowledged, {} refused",
        load.acked(),
        load.refused.load(Ordering::Relaxed)
    );

    // The keeper set the marker on the primary at start-up; the replicas have it too.
    assert!(
        testkit::wait_until(Duration::from_secs(10), || {
            std::iter::once(&group.primary)
                .chain(&group.replicas)
                .all(|server| server.cli_raw(&["EXISTS", MARKER_KEY]) == "1")
        }),
        "the projection marker is on the primary and its replicas before the kill"
    );
    let acked_at_kill = load.acked();
    let refused_at_kill = load.refused.load(Ordering::Relaxed);
    let killed = Instant::now();
    group.primary.kill();
    let promoted_within = Duration::from_secs(30);
    assert!(
        testkit::wait_until(promoted_within, || group.promoted().is_some()),
        "no replica promoted within {promoted_within:?}; first sentinel's log:\n{}",
        group.sentinels[0].log_text()
    );
    let promoted_after = killed.elapsed();
    let target = acked_at_kill + 1;
    assert!(
        eventually(Duration::from_secs(30), || async { load.acked() >= target }).await,
        "no create acknowledged after the failover ({} refused since the kill)",
        load.refused.load(Ordering::Relaxed) - refused_at_kill
    );
    let target = acked_at_kill + AFTER;
    assert!(
        eventually(Duration::from_secs(60), || async { load.acked() >= target }).await,
        "creates after the failover: {}",
        load.acked() - acked_at_kill
    );
    load.stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    let unexpected = load.unexpected.lock().unwrap().clone();
    assert!(unexpected.is_empty(), "unexpected answers: {unexpected:?}");

    let acked = load.acked.lock().unwrap().clone();
    let refused = load.refused.load(Ordering::Relaxed);
    // The create outage: the longest time without an acknowledgement around the kill.
    let outage = load
        .acked_at
        .lock()
        .unwrap()
        .windows(2)
        .filter(|w| w[1] > killed)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    eprintln!(
        "sentinel failover: {} acknowledged ({acked_at_kill} before the kill), {refused} refused \
         with 503 ({} before the kill); replica promoted {:.2} s after the kill (as the test \
         saw it), no create acknowledged for {:.2} s",
        acked.len(),
        refused_at_kill,
        promoted_after.as_secs_f64(),
        outage.as_secs_f64()
    );

    // Every acknowledged link is in SQL as created, and on the new primary exactly as SQL says.
    let primary = group.promoted().expect("a promoted primary");
    let mut redis = redis::Client::open(primary.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut missing = Vec::new();
    let mut wrong = Vec::new();
    for (code, url) in &acked {
        let link = sidecar
            .storage
            .get_link(code)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("acknowledged link {code} is not in SQL"));
        assert_eq!(&link.target, url, "SQL holds {code} as created");
        let record: Option<String> = redis.get(format!("sl:c:{code}")).await.unwrap();
        match record {
            None => missing.push(code.clone()),
            Some(record) if record != encode_record(&link) => wrong.push((code.clone(), record)),
            Some(_) => {}
        }
    }
    assert!(
        missing.is_empty() && wrong.is_empty(),
        "after the failover, of {} acknowledged links {} are missing from the new primary \
         ({missing:?}) and {} wrong ({wrong:?})",
        acked.len(),
        missing.len(),
        wrong.len()
    );
    // Nothing refused stayed in SQL: it holds exactly the acknowledged links.
    let in_sql = sidecar
        .storage
        .scan_links(&LinkFilter::default(), None, 100_000)
        .await
        .unwrap()
        .len();
    assert_eq!(
        in_sql,
        acked.len(),
        "SQL holds exactly the acknowledged links"
    );
    // The keeper refills the new primary from SQL and sets the marker again, so the module
    // answers 404 from Redis again for unknown codes.
    let marker_back = eventually(Duration::from_secs(20), || {
        let mut redis = redis.clone();
        async move { redis.exists::<_, bool>(MARKER_KEY).await.unwrap() }
    })
    .await;
    assert!(
        marker_back,
        "the projection marker is back on the new primary"
    );
    eprintln!(
        "sentinel failover: 0 of {} acknowledged links missing or wrong on the new primary",
        acked.len()
    );

    // The visit consumer follows the promotion too: a visit queued on the new primary is counted.
    let (code, _) = &acked[0];
    let t = chrono::Utc::now().timestamp_millis().to_string();
    let mut xadd = redis::cmd("XADD");
    xadd.arg(shortlink_sidecar::visits::consumer::STREAM)
        .arg("*");
    for (field, value) in [
        ("c", code.as_str()),
        ("t", t.as_str()),
        ("s", "302"),
        ("ip", "192.0.2.7"),
        (
            "ua",
            "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
        ),
    ] {
        xadd.arg(field).arg(value);
    }
    let _: String = xadd.query_async(&mut redis).await.unwrap();
    let storage = &sidecar.storage;
    assert!(
        eventually(Duration::from_secs(30), || async {
            storage.get_link(code).await.unwrap().unwrap().visit_count == 1
        })
        .await,
        "the visit queued on the new primary was counted"
    );
}

/// `--redis-wait-replicas` more than the replicas that hold a write: 503, and the link is in
/// neither SQL nor Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_refuse_the_write_and_store_nothing() {
    let primary = RedisServer::start();
    let mut replica = RedisServer::start_replica_of(&primary);
    let sidecar = start_sidecar(
        &primary.url(),
        &[
            "--redis-wait-replicas",
            "1",
            "--redis-wait-timeout",
            "200ms",
        ],
    )
    .await;
    let client = client();
    let (status, body) = post(&client, &sidecar.address, "https://a.example/").await;
    assert_eq!(status, 201, "{body}");
    let code = body["code"].as_str().unwrap().to_owned();
    let replicated = replica.cli_raw(&["GET", &format!("sl:c:{code}")]);
    assert!(
        replicated.ends_with("|https://a.example/"),
        "WAIT returned once the replica had it: {replicated:?}"
    );

    replica.kill();
    // The primary notices the replica gone when its connection drops.
    assert!(
        testkit::wait_until(Duration::from_secs(10), || primary
            .cli_raw(&["INFO", "replication"])
            .contains("connected_slaves:0")),
        "the primary still counts the replica"
    );
    let (status, body) = post(&client, &sidecar.address, "https://b.example/").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "redis_unavailable", "{body}");
    assert!(
        !body.to_string().contains("replica"),
        "no internals in the answer: {body}"
    );
    let in_sql = sidecar
        .storage
        .scan_links(&LinkFilter::default(), None, 100)
        .await
        .unwrap();
    assert_eq!(in_sql.len(), 1, "the refused link is not in SQL");
    assert_eq!(
        primary.cli_raw(&["KEYS", "sl:c:*"]),
        format!("sl:c:{code}"),
        "the refused link's record was taken back from the primary"
    );

    // A batch: every item refused, none stored.
    let response = client
        .post(format!("{}/api/v1/links/batch", sidecar.address))
        .bearer_auth(API_KEY)
        .json(&json!([{"url": "https://c.example/"}, {"url": "https://d.example/"}]))
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    assert!(text.contains("redis_unavailable"), "{text}");
    // An update: refused, and the record as before (SQL keeps the old target too).
    let before = primary.cli_raw(&["GET", &format!("sl:c:{code}")]);
    let response = client
        .patch(format!("{}/api/v1/links/{code}", sidecar.address))
        .bearer_auth(API_KEY)
        .json(&json!({"url": "https://e.example/"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(
        primary.cli_raw(&["GET", &format!("sl:c:{code}")]),
        before,
        "the unreplicated update was taken back"
    );
    let links = sidecar
        .storage
        .scan_links(&LinkFilter::default(), None, 100)
        .await
        .unwrap();
    assert_eq!(links.len(), 1, "nothing of the batch is in SQL");
    assert_eq!(
        links[0].target, "https://a.example/",
        "SQL keeps the old target"
    );
    assert_eq!(
        primary.cli_raw(&["KEYS", "sl:c:*"]),
        format!("sl:c:{code}"),
        "nothing of the batch is in Redis"
    );
}

/// The Sentinel settings from the `--config` file, as every other setting.
#[test]
fn sentinel_settings_come_from_the_config_file() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("sidecar.toml");
    std::fs::write(
        &path,
        "redis_sentinels = [\"10.0.0.1:26379\", \"redis://:pw@10.0.0.2:26379\"]\n\
         redis_sentinel_service = \"links\"\nredis_wait_replicas = 2\n\
         redis_wait_timeout = \"250ms\"\n",
    )
    .unwrap();
    let cli = shortlink_sidecar::config_file::parse_from([
        "shortlink-sidecar",
        "--config",
        path.to_str().unwrap(),
    ])
    .expect("a valid file");
    let config = cli.config;
    assert_eq!(
        config.redis_sentinels,
        ["10.0.0.1:26379", "redis://:pw@10.0.0.2:26379"]
    );
    assert_eq!(config.redis_sentinel_service, "links");
    assert_eq!(config.redis_wait_replicas, 2);
    assert_eq!(config.redis_wait_timeout, Duration::from_millis(250));
    assert!(
        !format!("{config:?}").contains(":pw@"),
        "sentinel passwords stay out of logs"
    );
}

/// Both replicas frozen (nothing replicates: `WAIT` refuses every change), the primary killed
/// meanwhile, then the replicas back. What a frozen replica's socket buffered may hold changes
/// the API refused (and their undo may not follow); after the promotion every link must again
/// be exactly as SQL has it, i.e. as last acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_frozen_then_primary_killed_keeps_every_acknowledged_change() {
    let mut group = SentinelGroup::start(2, 3, SentinelTiming::default());
    let sentinels = group.addresses();
    let sidecar = start_sidecar(
        &group.primary.url(),
        &[
            "--redis-sentinels",
            &sentinels,
            "--redis-sentinel-service",
            testkit::sentinel::SERVICE,
            "--redis-wait-replicas",
            "1",
            "--redis-wait-timeout",
            "300ms",
            "--projection-check-interval",
            "200ms",
        ],
    )
    .await;
    let http = client();
    let mut codes = Vec::new();
    for i in 0..20 {
        let (status, body) = post(&http, &sidecar.address, &format!("https://t.example/{i}")).await;
        assert_eq!(status, 201, "{body}");
        codes.push(body["code"].as_str().unwrap().to_owned());
    }

    // Each writer owns some links and changes their target again and again.
    let acked: Arc<Mutex<std::collections::HashMap<String, String>>> = Arc::default();
    let changes = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let mine: Vec<String> = codes
            .iter()
            .skip(writer)
            .step_by(WRITERS)
            .cloned()
            .collect();
        let (acked, changes, refused, stop) = (
            Arc::clone(&acked),
            Arc::clone(&changes),
            Arc::clone(&refused),
            Arc::clone(&stop),
        );
        let address = sidecar.address.clone();
        writers.push(tokio::spawn(async move {
            let client = client();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let code = &mine[n as usize % mine.len()];
                let target = format!("https://t.example/{code}/v{n}");
                let response = client
                    .patch(format!("{address}/api/v1/links/{code}"))
                    .bearer_auth(API_KEY)
                    .json(&json!({ "url": target }))
                    .send()
                    .await
                    .unwrap();
                match response.status().as_u16() {
                    200 => {
                        acked.lock().unwrap().insert(code.clone(), target);
                        changes.fetch_add(1, Ordering::Relaxed);
                    }
                    503 => {
                        refused.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    status => panic!("PATCH answered {status}"),
                }
            }
        }));
    }
    assert!(
        eventually(Duration::from_secs(30), || async {
            changes.load(Ordering::Relaxed) >= 100
        })
        .await
    );

    for replica in &group.replicas {
        replica.process().unwrap().signal(testkit::Signal::Stop);
    }
    let refused_at_freeze = refused.load(Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(30), || async {
            refused.load(Ordering::Relaxed) >= refused_at_freeze + 8
        })
        .await,
        "changes are refused while no replica acknowledges"
    );
    // The writers stop at the kill: a change made after the failover would overwrite whatever
    // the new primary got from the buffers, and hide it.
    group.primary.kill();
    stop.store(true, Ordering::Relaxed);
    for replica in &group.replicas {
        replica.process().unwrap().signal(testkit::Signal::Cont);
    }
    for writer in writers {
        writer.await.unwrap();
    }
    assert!(
        testkit::wait_until(Duration::from_secs(30), || group.promoted().is_some()),
        "no replica promoted; first sentinel's log:\n{}",
        group.sentinels[0].log_text()
    );
    // Writes come back (on a link of their own).
    let created = eventually(Duration::from_secs(60), || {
        let http = http.clone();
        let address = sidecar.address.clone();
        async move { post(&http, &address, "https://t.example/after").await.0 == 201 }
    })
    .await;
    assert!(created, "creates did not come back after the failover");

    let primary = group.promoted().expect("a promoted primary");
    let mut redis = redis::Client::open(primary.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let acked = acked.lock().unwrap().clone();
    for code in &codes {
        let link = sidecar.storage.get_link(code).await.unwrap().unwrap();
        if let Some(target) = acked.get(code) {
            assert_eq!(
                &link.target, target,
                "SQL holds {code}'s last acknowledged change"
            );
        }
    }
    // Records in doubt are written again from SQL within a check of the keeper.
    let deadline = Instant::now() + Duration::from_secs(10);
    let wrong = loop {
        let mut wrong = Vec::new();
        for code in &codes {
            let link = sidecar.storage.get_link(code).await.unwrap().unwrap();
            let record: Option<String> = redis.get(format!("sl:c:{code}")).await.unwrap();
            if record.as_deref() != Some(encode_record(&link).as_str()) {
                wrong.push((code.clone(), record, link.target));
            }
        }
        if wrong.is_empty() || Instant::now() >= deadline {
            break wrong;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "frozen replicas: {} changes acknowledged, {} refused; after the failover {} of {} links \
         differ from SQL on the new primary",
        changes.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        wrong.len(),
        codes.len()
    );
    assert!(
        wrong.is_empty(),
        "records differ from SQL on the new primary: {wrong:?}"
    );
}
