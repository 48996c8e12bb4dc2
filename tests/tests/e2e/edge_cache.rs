//! One record cache per edge in nginx shared memory (`shortlink_cache_zone`, issue 57), through
//! nginx with two workers: what one worker cached the other answers from, changes reach both
//! within the invalidation bound, a full zone evicts without serving a wrong record, a worker
//! killed mid-load leaves the zone usable, and with Redis down no revoked link redirects.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use shortlink_e2e::{http_client, NginxOptions, System};
use testkit::wait_until;

/// How late an old answer may still be seen after the API answered (as `invalidation::`).
const BOUND: Duration = Duration::from_millis(200);

/// Two workers sharing a zone of `size`; every answer names the worker that gave it.
fn edge(size: &str, cache: &'static str) -> (System, tempfile::TempDir) {
    edge_with(size, cache, "")
}

/// [`edge`] with more main-level directives (`shortlink_cache_prefetch on;`).
fn edge_with(size: &str, cache: &'static str, extra: &str) -> (System, tempfile::TempDir) {
    let conf = testkit::temp_dir();
    shortlink_e2e::templates_with(
        conf.path(),
        "shortlink_cache @CACHE@;",
        &format!(
            "shortlink_cache_zone shortlink_edge {size}; {extra} add_header X-Worker $pid always;"
        ),
    );
    let system = System::start_with(NginxOptions {
        cache,
        workers: 2,
        conf_dir: Some(conf.path().to_owned()),
        ..NginxOptions::default()
    });
    assert!(
        wait_until(Duration::from_secs(5), || subscribers(&system) == 2),
        "the workers did not subscribe to invalidations"
    );
    (system, conf)
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

/// One request on a connection of its own (so that either worker may take it): status,
/// `Location`, and the pid of the worker that answered.
fn click(system: &System, code: &str) -> (u16, String, String) {
    thread_local! {
        static CLIENT: reqwest::blocking::Client = http_client();
    }
    let response = CLIENT.with(|client| system.redirect_alone(client, code));
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    (
        response.status().as_u16(),
        header("location"),
        header("x-worker"),
    )
}

fn create_many(system: &System, n: usize, tag: &str) -> Vec<(String, String)> {
    let mut links = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let items: Vec<Value> = chunk
            .iter()
            .map(|i| json!({"url": format!("https://example.com/{tag}/{i}")}))
            .collect();
        let (status, answer) = system.api().post("/links/batch", &json!(items));
        assert_eq!(status, 200, "{answer}");
        for (item, result) in items.iter().zip(answer["results"].as_array().unwrap()) {
            assert_eq!(result["status"], 201, "{result}");
            let code = result["link"]["code"]
                .as_str()
                .or(result["code"].as_str())
                .expect("a code")
                .to_owned();
            links.push((code, item["url"].as_str().unwrap().to_owned()));
        }
    }
    links
}

#[test]
fn a_record_one_worker_looked_up_is_a_hit_in_the_other() {
    let (system, _conf) = edge("1m", "size=1000 ttl=1h negative_ttl=1s");
    let code = system.create(json!({"url": "https://example.com/shared"}));
    let before = system.nginx.counters();
    let mut workers = HashSet::new();
    let both = wait_until(Duration::from_secs(20), || {
        let (status, location, worker) = click(&system, &code);
        assert_eq!(
            (status, location.as_str()),
            (302, "https://example.com/shared")
        );
        workers.insert(worker);
        workers.len() == 2
    });
    assert!(both, "one worker answered every request: {workers:?}");
    let after = system.nginx.counters();
    // At most the first click's (none once the prefill read it in); never one per worker.
    let lookups = after["cache_misses"] - before["cache_misses"];
    assert!(
        lookups <= 1,
        "both workers asked Redis ({lookups}): the second did not find the first's record"
    );
    assert!(after["cache_zone_hits"] >= 1, "{after:?}");
    assert_eq!(after["cache_zone_entries"], 1, "{after:?}");
    assert_eq!(after["cache_zone_bytes"], 192);
    let prometheus = http_client()
        .get(system.nginx.status_url("?format=prometheus"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        prometheus.contains("# TYPE shortlink_cache_zone_hits_total counter\n"),
        "{prometheus}"
    );
    crate::metrics::promtool_check_metrics(&prometheus);
}

/// One answer seen by the load: when its request started, status and `Location`.
type Seen = (Instant, u16, String);

/// Redirect load on `codes` (round robin) from `connections` threads, each request on a new
/// connection, until stopped. Connection errors (a worker killed under it) are counted, not
/// answers.
struct Load {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<(String, Seen)>>>,
    errors: Arc<AtomicUsize>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Load {
    fn start(port: u16, codes: Vec<String>, connections: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(AtomicUsize::new(0));
        let codes = Arc::new(codes);
        let threads = (0..connections)
            .map(|t| {
                let (stop, seen, errors) =
                    (Arc::clone(&stop), Arc::clone(&seen), Arc::clone(&errors));
                let codes = Arc::clone(&codes);
                thread::spawn(move || {
                    let client = http_client();
                    let mut i = t * 7919;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let code = &codes[i % codes.len()];
                        let started = Instant::now();
                        let response = client
                            .get(format!("http://127.0.0.1:{port}/{code}"))
                            .header("Host", "s1.test")
                            .header("Connection", "close")
                            .send();
                        let Ok(response) = response else {
                            errors.fetch_add(1, Ordering::Relaxed);
                            continue;
                        };
                        let location = response
                            .headers()
                            .get("location")
                            .map(|v| v.to_str().unwrap().to_owned())
                            .unwrap_or_default();
                        let status = response.status().as_u16();
                        let answer = (started, status, location);
                        seen.lock().unwrap().push((code.clone(), answer));
                    }
                })
            })
            .collect();
        Load {
            stop,
            seen,
            errors,
            threads,
        }
    }

    fn answers(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn run_for(&self, n: usize) {
        let target = self.answers() + n;
        assert!(
            wait_until(Duration::from_secs(30), || self.answers() >= target),
            "the load stalled at {} answers",
            self.answers()
        );
    }

    fn finish(self) -> (Vec<(String, Seen)>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let errors = self.errors.load(Ordering::Relaxed);
        (
            Arc::try_unwrap(self.seen).unwrap().into_inner().unwrap(),
            errors,
        )
    }
}

#[test]
fn a_change_and_a_revoke_under_load_reach_both_workers() {
    // With the prefetch on: it reads the sets that writers change under it.
    let (system, _conf) = edge_with(
        "1m",
        "size=1000 ttl=1h negative_ttl=1s",
        "shortlink_cache_prefetch on;",
    );
    let code = system.create(json!({"url": "https://example.com/v1"}));
    let load = Load::start(system.nginx.redirect_port, vec![code.clone()], 6);
    load.run_for(300);
    let hits = system.nginx.counters()["cache_zone_hits"];
    assert!(hits > 0, "the load was not served from the zone");

    let (patched, delete_sent, deleted) = system.patch_then_revoke(&code, || load.run_for(600));
    let hits_after = system.nginx.counters()["cache_zone_hits"];
    let (seen, _) = load.finish();

    let late = |from: Instant, until: Instant, ok: &dyn Fn(u16, &str) -> bool| -> Vec<String> {
        seen.iter()
            .map(|(_, answer)| answer)
            .filter(|(started, ..)| *started > from + BOUND && *started < until)
            .filter(|(_, status, location)| !ok(*status, location))
            .map(|(started, status, location)| {
                format!("{status} {location} at +{:?}", *started - from)
            })
            .take(10)
            .collect()
    };
    let far = Instant::now() + Duration::from_secs(3600);
    let stale = late(patched, delete_sent, &|s, l| {
        s == 302 && l == "https://example.com/v2"
    });
    assert!(stale.is_empty(), "old answers after the PATCH: {stale:?}");
    let stale = late(deleted, far, &|s, _| s == 410);
    assert!(stale.is_empty(), "redirects after the DELETE: {stale:?}");
    assert!(
        hits_after > hits + 600,
        "the new answers did not come from the zone ({hits} → {hits_after})"
    );
}

#[test]
fn a_full_zone_evicts_and_never_answers_a_wrong_record() {
    // 256k holds ~900 records: 1,500 links overflow it.
    let (system, _conf) = edge_with(
        "256k",
        "size=100 ttl=1h negative_ttl=1s",
        "shortlink_cache_prefetch on;",
    );
    let links = create_many(&system, 1_500, "full");
    let check_all = |targets: &HashMap<String, String>| {
        for (code, target) in targets {
            let (status, location, _) = click(&system, code);
            assert_eq!((status, &location), (302, target), "{code}");
        }
    };
    let mut targets: HashMap<String, String> = links.into_iter().collect();
    check_all(&targets);
    let stats = system.nginx.counters();
    assert!(stats["cache_zone_evictions"] > 0, "{stats:?}");
    assert!(stats["cache_zone_entries"] <= stats["cache_zone_capacity"]);
    assert!(stats["cache_zone_entries"] > stats["cache_zone_capacity"] / 2);
    // Change some, cached or evicted alike, then read everything twice more.
    for code in targets.keys().take(60).cloned().collect::<Vec<_>>() {
        let url = format!("https://example.com/changed/{code}");
        let (status, body) = system
            .api()
            .patch(&format!("/links/{code}"), &json!({ "url": url }));
        assert_eq!(status, 200, "patch: {body}");
        targets.insert(code, url);
    }
    // The API answered after Redis had the record; its report may still be on its way.
    thread::sleep(BOUND);
    check_all(&targets);
    check_all(&targets);
    let after = system.nginx.counters();
    assert!(
        after["cache_zone_hits"] > stats["cache_zone_hits"],
        "{after:?}"
    );
}

#[test]
fn a_worker_killed_under_load_leaves_the_zone_usable() {
    // A short TTL keeps the workers writing the zone (a stale entry is looked up and stored
    // again), so the kills land among writes.
    let (system, _conf) = edge("1m", "size=100 ttl=20ms negative_ttl=20ms");
    let links = create_many(&system, 200, "kill");
    let targets: HashMap<String, String> = links.iter().cloned().collect();
    let load = Load::start(
        system.nginx.redirect_port,
        links.iter().map(|(code, _)| code.clone()).collect(),
        6,
    );
    load.run_for(500);
    for _ in 0..5 {
        let victim = system.nginx.workers()[0];
        system.nginx.kill_worker(victim);
        // Every worker, the new one included, keeps answering and writing.
        load.run_for(300);
    }
    let stats = system.nginx.counters();
    load.run_for(500);
    let (seen, errors) = load.finish();
    let after = system.nginx.counters();
    let wrong: Vec<_> = seen
        .iter()
        .filter(|(code, (_, status, location))| *status != 302 || location != &targets[code])
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "wrong answers: {wrong:?} ({errors} connection errors)"
    );
    // Each new worker's subscription emptied the zone (a new epoch): what it holds now was
    // stored after the last kill, so its writers were not wedged (a wedged mutex would have
    // stalled the load above).
    assert!(after["cache_zone_entries"] > 0, "{after:?}");
    assert!(after["cache_misses"] > stats["cache_misses"]);
    let locked = system.nginx.error_log_lines("was locked by");
    eprintln!("kills that interrupted a holder of the zone's lock: {locked:?}");
}

#[test]
fn with_redis_down_a_revoked_link_never_redirects() {
    let (mut system, _conf) = edge("1m", "size=1000 ttl=1h negative_ttl=1s");
    let code = system.create(json!({"url": "https://example.com/revoked"}));
    let live = system.create(json!({"url": "https://example.com/live"}));
    for _ in 0..10 {
        assert_eq!(click(&system, &code).0, 302);
        assert_eq!(click(&system, &live).0, 302);
    }
    let (status, body) = system.api().delete(&format!("/links/{code}"));
    assert!((200..300).contains(&status), "revoke: {status} {body}");
    assert!(wait_until(Duration::from_secs(2), || click(&system, &code)
        .0
        == 410));
    for _ in 0..10 {
        assert_eq!(click(&system, &code).0, 410);
    }
    system.redis.stop();
    // While the workers notice (ping, then timeout) and after: the fallback (SQL) or 503,
    // never the revoked target.
    let until = Instant::now() + Duration::from_secs(3);
    let mut answers = HashMap::<u16, usize>::new();
    while Instant::now() < until {
        let (status, location, _) = click(&system, &code);
        assert_ne!(status, 302, "a revoked link redirected to {location}");
        *answers.entry(status).or_default() += 1;
        let (status, location, _) = click(&system, &live);
        assert!(
            status == 503 || (status == 302 && location == "https://example.com/live"),
            "{status} {location}"
        );
    }
    eprintln!("answers for the revoked link with Redis down: {answers:?}");
}

#[test]
fn freshly_issued_links_are_hits_at_their_first_click() {
    let (system, _conf) = edge("1m", "size=1000 ttl=1h negative_ttl=1s");
    let before = system.nginx.counters();
    let links = create_many(&system, 300, "fresh");
    // Each worker reads what its subscription reported; the zone keeps one copy of each.
    assert!(
        wait_until(Duration::from_secs(10), || {
            system.nginx.counters()["cache_zone_entries"] >= links.len() as u64
        }),
        "not prefilled: {:?}",
        system.nginx.counters()
    );
    let prefilled = system.nginx.counters();
    assert!(prefilled["cache_zone_prefills"] - before["cache_zone_prefills"] >= 300);
    for (code, target) in &links {
        let (status, location, _) = click(&system, code);
        assert_eq!((status, &location), (302, target), "{code}");
    }
    let after = system.nginx.counters();
    assert_eq!(
        after["cache_misses"], prefilled["cache_misses"],
        "first clicks went to Redis"
    );
    // A change is read in again, in its new form.
    let (code, _) = &links[0];
    let (status, body) = system.api().patch(
        &format!("/links/{code}"),
        &json!({"url": "https://example.com/fresh/changed"}),
    );
    assert_eq!(status, 200, "patch: {body}");
    let misses = system.nginx.counters()["cache_misses"];
    assert!(wait_until(Duration::from_secs(2), || {
        click(&system, code).1 == "https://example.com/fresh/changed"
    }));
    assert_eq!(system.nginx.counters()["cache_misses"], misses);
}

#[test]
fn a_new_worker_refills_the_zone_it_emptied_with_the_newest_links() {
    // A new worker's subscription empties the zone (reports may have been missed before it), as
    // at nginx's start: it then reads the newest issued codes back, so a campaign issued before
    // is still a hit at its first click.
    let (system, _conf) = edge("1m", "size=1000 ttl=1h negative_ttl=1s");
    let links = create_many(&system, 300, "refill");
    assert!(
        wait_until(Duration::from_secs(10), || {
            system.nginx.counters()["cache_zone_entries"] >= links.len() as u64
        }),
        "not prefilled: {:?}",
        system.nginx.counters()
    );
    for victim in system.nginx.workers() {
        system.nginx.kill_worker(victim);
    }
    assert!(
        wait_until(Duration::from_secs(10), || subscribers(&system) == 2),
        "the new workers did not subscribe"
    );
    assert!(
        wait_until(Duration::from_secs(30), || {
            system.nginx.counters()["cache_zone_entries"] >= links.len() as u64
        }),
        "not refilled: {:?}",
        system.nginx.counters()
    );
    let refilled = system.nginx.counters();
    for (code, target) in &links {
        let (status, location, _) = click(&system, code);
        assert_eq!((status, &location), (302, target), "{code}");
    }
    assert_eq!(
        system.nginx.counters()["cache_misses"],
        refilled["cache_misses"],
        "first clicks after the new workers went to Redis"
    );
    let done = system.nginx.error_log_lines("cache zone refill done");
    eprintln!("{done:?}");
    assert!(!done.is_empty());
}

/// The zone's mapping asks for huge pages (`MADV_HUGEPAGE`, "hg" in the workers' smaps): where the
/// host allows them for shared memory (`shmem_enabled` = advise), a random hit's page walk then
/// stays within one 2 MiB page's entry. This host gives shared memory none, so only the request
/// is checked, not the pages.
#[test]
fn the_zone_asks_for_huge_pages() {
    // A size no other mapping of nginx has.
    let (system, _conf) = edge("6m", "size=1000 ttl=1h negative_ttl=1s");
    let (_, _, pid) = click(&system, "no-such-code");
    assert!(!pid.is_empty(), "no X-Worker header");
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("the worker's smaps");
    // One block per mapping: its range line, then `Key: value` lines ending with VmFlags.
    let mut size = String::new();
    let mut zone_flags = Vec::new();
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("Size:") {
            size = kb.trim().to_owned();
        } else if let Some(flags) = line.strip_prefix("VmFlags:") {
            if size == "6144 kB" {
                zone_flags.push(
                    flags
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect::<Vec<_>>(),
                );
            }
        }
    }
    assert_eq!(zone_flags.len(), 1, "one 6 MiB mapping: {zone_flags:?}");
    let flags = &zone_flags[0];
    assert!(flags.iter().any(|f| f == "sh"), "not shared: {flags:?}");
    assert!(
        flags.iter().any(|f| f == "hg"),
        "no MADV_HUGEPAGE: {flags:?}"
    );
}
