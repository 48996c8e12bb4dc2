//! Sentinel failover end to end: the sidecar follows the primary through Redis Sentinel, an edge
//! reads a replica; `kill -9` of the primary under create and redirect load; afterwards every
//! acknowledged link redirects right through the edge and is on the new primary.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shortlink_e2e::load::{redirect_answer, LoadRun};
use shortlink_e2e::{http_client, NginxOptions, System};
use testkit::sentinel::SERVICE;
use testkit::{temp_dir, wait_until, SentinelGroup, SentinelTiming};

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
    let run = LoadRun::start(|| system.sidecar.api(), 2, edge);
    let load = Arc::clone(&run.load);
    let acked = || load.acked_count();
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
    let load = run.stop_after(at_kill + 200);

    // Afterwards: every acknowledged link redirects right through the edge, and the new
    // primary holds it.
    let links = load.acked.lock().unwrap().clone();
    let primary = promoted().expect("a promoted primary");
    let client = http_client();
    let mut bad = Vec::new();
    let mut missing = Vec::new();
    for (code, target) in &links {
        match redirect_answer(&client, edge, code) {
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
