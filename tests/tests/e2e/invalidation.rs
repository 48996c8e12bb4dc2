//! The workers' caches follow Redis at once (server-assisted client-side caching), and stop
//! being trusted while they could miss a change.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use shortlink_e2e::{http_client, NginxOptions, System};
use testkit::wait_until;

/// Long enough that only an invalidation can explain a change seen in time.
const CACHE: &str = "size=1000 ttl=1h negative_ttl=1s";
/// How late an old answer may still be seen after the API answered.
const BOUND: Duration = Duration::from_millis(200);

/// One answer seen by the load: when its request started, status and `Location`.
type Seen = (Instant, u16, String);

/// Redirect load on `code` from several keep-alive connections (so both workers serve it)
/// until stopped; returns every answer.
struct Load {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Seen>>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Load {
    fn start(port: u16, code: &str, connections: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let threads = (0..connections)
            .map(|_| {
                let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
                let url = format!("http://127.0.0.1:{port}/{code}");
                thread::spawn(move || {
                    let client = http_client();
                    while !stop.load(Ordering::Relaxed) {
                        let started = Instant::now();
                        let response = client
                            .get(&url)
                            .header("Host", "s1.test")
                            .send()
                            .expect("redirect request");
                        let location = response
                            .headers()
                            .get("location")
                            .map(|v| v.to_str().unwrap().to_owned())
                            .unwrap_or_default();
                        let status = response.status().as_u16();
                        seen.lock().unwrap().push((started, status, location));
                    }
                })
            })
            .collect();
        Load {
            stop,
            seen,
            threads,
        }
    }

    fn answers(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Lets the load run until `n` more answers came in.
    fn run_for(&self, n: usize) {
        let target = self.answers() + n;
        assert!(
            wait_until(Duration::from_secs(20), || self.answers() >= target),
            "the load stalled"
        );
    }

    fn finish(self) -> Vec<Seen> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        Arc::try_unwrap(self.seen).unwrap().into_inner().unwrap()
    }
}

/// Old answers among those whose request started later than `bound` after `changed`.
fn late_old_answers(
    seen: &[Seen],
    changed: Instant,
    bound: Duration,
    is_new: impl Fn(u16, &str) -> bool,
) -> Vec<String> {
    seen.iter()
        .filter(|(started, ..)| *started > changed + bound)
        .filter(|(_, status, location)| !is_new(*status, location))
        .map(|(started, status, location)| {
            format!("{status} {location} at +{:?}", *started - changed)
        })
        .collect()
}

fn two_workers() -> System {
    System::start_with(NginxOptions {
        cache: CACHE,
        workers: 2,
        ..NginxOptions::default()
    })
}

/// Invalidation connections as Redis lists them (one per worker).
fn subscribers(system: &System) -> usize {
    system
        .redis
        .cli_raw(&["CLIENT", "LIST", "TYPE", "pubsub"])
        .lines()
        .filter(|line| line.contains("sub=1"))
        .count()
}

#[test]
fn patch_and_delete_reach_every_worker_under_load() {
    let system = two_workers();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&system) == 2));
    let code = system.create(json!({"url": "https://example.com/v1"}));
    let load = Load::start(system.nginx.redirect_port, &code, 6);
    load.run_for(500);
    let hits = system.nginx.counters()["cache_hits"];
    assert!(hits > 0, "the load was not served from the cache");

    let (patched, delete_sent, deleted) = system.patch_then_revoke(&code, || load.run_for(1000));
    let hits_after = system.nginx.counters()["cache_hits"];
    let seen = load.finish();

    let before_delete: Vec<Seen> = seen
        .iter()
        .filter(|(started, ..)| *started < delete_sent)
        .cloned()
        .collect();
    let stale = late_old_answers(&before_delete, patched, BOUND, |status, location| {
        status == 302 && location == "https://example.com/v2"
    });
    assert!(stale.is_empty(), "old answers after the PATCH: {stale:?}");
    let stale = late_old_answers(&seen, deleted, BOUND, |status, _| status == 410);
    assert!(stale.is_empty(), "redirects after the DELETE: {stale:?}");
    assert!(
        hits_after > hits + 1000,
        "the new answers did not come from the cache ({hits} → {hits_after})"
    );
}

#[test]
fn a_killed_invalidation_connection_never_leaves_a_stale_redirect() {
    let system = two_workers();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&system) == 2));
    let code = system.create(json!({"url": "https://example.com/before"}));
    let load = Load::start(system.nginx.redirect_port, &code, 4);
    load.run_for(300);

    // Killing tracking connections also ends their tracking: changes made now are reported
    // to nobody, so the workers must stop answering from their caches.
    let killed = system.redis.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_eq!(killed, "(integer) 2");
    let (status, body) = system.api().patch(
        &format!("/links/{code}"),
        &json!({"url": "https://example.com/after"}),
    );
    assert_eq!(status, 200, "patch: {body}");
    let patched = Instant::now();
    load.run_for(1000);

    // The workers subscribe again (later on a loaded machine: the bound is not what is tested),
    // and their caches follow changes again.
    assert!(wait_until(Duration::from_secs(30), || subscribers(&system) == 2));
    let again_sent = Instant::now();
    let (status, body) = system.api().patch(
        &format!("/links/{code}"),
        &json!({"url": "https://example.com/again"}),
    );
    assert_eq!(status, 200, "patch: {body}");
    let again = Instant::now();
    load.run_for(1000);
    let seen = load.finish();

    let between: Vec<Seen> = seen
        .iter()
        .filter(|(started, ..)| *started < again_sent)
        .cloned()
        .collect();
    let stale = late_old_answers(&between, patched, Duration::ZERO, |status, location| {
        status == 302 && location == "https://example.com/after"
    });
    assert!(stale.is_empty(), "stale answers after the kill: {stale:?}");
    let stale = late_old_answers(&seen, again, BOUND, |status, location| {
        status == 302 && location == "https://example.com/again"
    });
    assert!(
        stale.is_empty(),
        "old answers after resubscribing: {stale:?}"
    );
}

#[test]
fn flushall_empties_the_caches_and_ttl_only_mode_stays_available() {
    let system = two_workers();
    assert!(wait_until(Duration::from_secs(5), || subscribers(&system) == 2));
    let code = system.create(json!({"url": "https://example.com/flushed"}));
    let client = http_client();
    let url = format!("http://127.0.0.1:{}/{code}", system.nginx.redirect_port);
    let get = || {
        client
            .get(&url)
            .header("Host", "s1.test")
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    for _ in 0..10 {
        assert_eq!(get(), 302);
    }
    // Redis lost everything: no cached redirect may outlive it (the fallback answers).
    assert_eq!(system.redis.cli(&["FLUSHALL"]), "OK");
    let fallbacks = system.nginx.counters()["fallbacks"];
    assert_eq!(get(), 302);
    assert!(system.nginx.counters()["fallbacks"] > fallbacks);

    // `shortlink_cache_invalidation off` keeps the TTL-only cache and opens no subscription.
    let conf = testkit::temp_dir();
    shortlink_e2e::templates_with(
        conf.path(),
        "shortlink_cache @CACHE@;",
        "shortlink_cache_invalidation off;",
    );
    let ttl_only = System::start_with(NginxOptions {
        cache: "size=1000",
        conf_dir: Some(conf.path().to_owned()),
        ..NginxOptions::default()
    });
    let code = ttl_only.create(json!({"url": "https://example.com/ttl"}));
    let url = format!("http://127.0.0.1:{}/{code}", ttl_only.nginx.redirect_port);
    for _ in 0..3 {
        let response = client.get(&url).header("Host", "s1.test").send().unwrap();
        assert_eq!(response.status(), 302);
    }
    assert!(ttl_only.nginx.counters()["cache_hits"] >= 2);
    assert_eq!(subscribers(&ttl_only), 0);
}
