//! Sentinel failover end to end: the sidecar follows the primary through Redis Sentinel, an edge
//! reads a replica; `kill -9` of the primary under create and redirect load; afterwards every
//! acknowledged link redirects right through the edge and is on the new primary.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use shortlink_e2e::{http_client, NginxOptions, System};
use testkit::sentinel::SERVICE;
use testkit::{temp_dir, wait_until, SentinelGroup, SentinelTiming};

/// (status, Location) of a redirect through the edge on `port`; `None` when the request failed.
fn answer(client: &reqwest::blocking::Client, port: u16, code: &str) -> Option<(u16, String)> {
    let response = client
        .get(format!("http://127.0.0.1:{port}/{code}"))
        .header("Host", "s1.test")
        .send()
        .ok()?;
    Some(shortlink_e2e::status_and_location(&response))
}

#[derive(Default)]
struct Load {
    acked: Mutex<Vec<(String, String)>>,
    refused: AtomicU64,
    unexpected: Mutex<Vec<String>>,
    redirects: AtomicU64,
    /// Redirects that answered something else than the link's target (never allowed).
    wrong: Mutex<Vec<String>>,
    /// Redirects that failed (an error status or no answer).
    failed: AtomicU64,
    stop: AtomicBool,
}

#[test]
fn primary_killed_under_load_every_acknowledged_link_redirects_through_the_edge() {
    let SentinelGroup {
        primary,
        replicas,
        sentinels,
    } = SentinelGroup::start(2, 3, SentinelTiming::default());
    let addresses: Vec<String> = sentinels.iter().map(|s| s.addr()).collect();
    let addresses = addresses.join(",");
    let conf = temp_dir();
    // An edge on a replica: a miss of a link created a moment ago goes to the fallback.
    shortlink_e2e::templates_with(
        conf.path(),
        "shortlink_fallback @FALLBACK@;",
        "shortlink_miss_fallback on;",
    );
    let options = NginxOptions {
        cache: "size=10000 ttl=1h negative_ttl=1s",
        redis_addr: Some(replicas[0].addr()),
        conf_dir: Some(conf.path().to_owned()),
        ..NginxOptions::default()
    };
    let mut system = System::start_on_with(
        primary,
        options,
        &[
            "--redis-sentinels",
            &addresses,
            "--redis-sentinel-service",
            SERVICE,
            "--redis-wait-replicas",
            "1",
            "--projection-check-interval",
            "200ms",
        ],
    );
    let edge = system.nginx.redirect_port;
    let load = Arc::new(Load::default());

    let mut threads = Vec::new();
    for writer in 0..2 {
        let load = Arc::clone(&load);
        let api = system.sidecar.api();
        threads.push(std::thread::spawn(move || {
            let mut i = 0;
            while !load.stop.load(Ordering::Relaxed) {
                i += 1;
                let url = format!("https://example.com/{writer}/{i}");
                let (status, body) = api.post("/links", &json!({ "url": url }));
                match status {
                    201 => {
                        let code = body["code"].as_str().unwrap().to_owned();
                        load.acked.lock().unwrap().push((code, url));
                    }
                    503 => {
                        load.refused.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    _ => load.unexpected.lock().unwrap().push(body.to_string()),
                }
            }
        }));
    }
    {
        let load = Arc::clone(&load);
        threads.push(std::thread::spawn(move || {
            let client = http_client();
            let mut i = 0usize;
            while !load.stop.load(Ordering::Relaxed) {
                let link = {
                    let acked = load.acked.lock().unwrap();
                    (!acked.is_empty()).then(|| acked[i % acked.len()].clone())
                };
                i = i.wrapping_add(7919);
                let Some((code, target)) = link else {
                    std::thread::yield_now();
                    continue;
                };
                load.redirects.fetch_add(1, Ordering::Relaxed);
                match answer(&client, edge, &code) {
                    Some((302, location)) if location == target => {}
                    Some((status, _)) if status >= 500 => {
                        load.failed.fetch_add(1, Ordering::Relaxed);
                    }
                    None => {
                        load.failed.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(other) => load
                        .wrong
                        .lock()
                        .unwrap()
                        .push(format!("{code}: {other:?}")),
                }
            }
        }));
    }
    let acked = || load.acked.lock().unwrap().len();
    assert!(wait_until(Duration::from_secs(60), || acked() >= 200));

    let at_kill = acked();
    let killed = Instant::now();
    system.redis.kill();
    let promoted = || {
        replicas.iter().find(|replica| {
            replica.role() == "master"
                && sentinels
                    .iter()
                    .filter(|s| s.primary_port() == Some(replica.port()))
                    .count()
                    >= 2
        })
    };
    assert!(
        wait_until(Duration::from_secs(30), || promoted().is_some()),
        "no replica promoted; sentinel log:\n{}",
        sentinels[0].log_text()
    );
    let promoted_after = killed.elapsed();
    assert!(
        wait_until(Duration::from_secs(60), || acked() >= at_kill + 200),
        "creates did not come back: {} since the kill",
        acked() - at_kill
    );
    load.stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let unexpected = load.unexpected.lock().unwrap().clone();
    assert!(
        unexpected.is_empty(),
        "unexpected create answers: {unexpected:?}"
    );
    let wrong = load.wrong.lock().unwrap().clone();
    assert!(wrong.is_empty(), "wrong redirects under load: {wrong:?}");

    // Afterwards: every acknowledged link redirects right through the edge, and the new
    // primary holds it.
    let links = load.acked.lock().unwrap().clone();
    let primary = promoted().expect("a promoted primary");
    let client = http_client();
    let mut bad = Vec::new();
    let mut missing = Vec::new();
    for (code, target) in &links {
        match answer(&client, edge, code) {
            Some((302, location)) if &location == target => {}
            other => bad.push(format!("{code}: {other:?}")),
        }
        let record = primary.cli_raw(&["GET", &format!("sl:c:{code}")]);
        if !record.ends_with(&format!("|{target}")) {
            missing.push(format!("{code}: {record:?}"));
        }
    }
    eprintln!(
        "sentinel e2e: {} links acknowledged ({at_kill} before the kill), {} creates refused; \
         promoted after {:.2} s; {} redirects under load, {} failed, 0 wrong; afterwards {} of \
         {} wrong at the edge, {} missing on the new primary",
        links.len(),
        load.refused.load(Ordering::Relaxed),
        promoted_after.as_secs_f64(),
        load.redirects.load(Ordering::Relaxed),
        load.failed.load(Ordering::Relaxed),
        bad.len(),
        links.len(),
        missing.len()
    );
    assert!(
        bad.is_empty(),
        "wrong answers at the edge afterwards: {bad:?}"
    );
    assert!(
        missing.is_empty(),
        "missing on the new primary: {missing:?}"
    );
    assert_eq!(
        load.failed.load(Ordering::Relaxed),
        0,
        "redirect failures under load (the edge's replica and its fallback stayed up)"
    );
}
