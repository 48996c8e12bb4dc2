//! Orphan visits end to end (issue 70): requests on pool hosts that no link answers (the bare
//! root, an unknown code, another workspace's code, a path no code has) and a tap saved from
//! trailing punctuation reach the sidecar through the module's event stream, each with its kind,
//! host and path; a workspace lists and counts those of its own hosts only, and a 404 on a host
//! outside the pool is not recorded. Whose each is travels with the event (issue 77), so a sidecar
//! started after they were recorded answers the same.

use std::time::Duration;

use serde_json::{json, Value};
use shortlink_e2e::{templates_with, Api, NginxOptions, System};
use testkit::wait_until;

use crate::workspaces::{brand, operator};

const A_HOST: &str = "s1.brand-a.test";
const DEFAULT_HOST: &str = "s1.test";

/// (kind, domain, path) of each orphan visit a key lists, oldest first.
fn listed(api: &Api) -> Vec<(String, String, String)> {
    let (status, page) = api.get("/visits/orphan");
    assert_eq!(status, 200, "{page}");
    (page["visits"].as_array().unwrap().iter())
        .map(|v| {
            let text = |field: &str| v[field].as_str().unwrap().to_owned();
            (text("kind"), text("domain"), text("path"))
        })
        .collect()
}

fn triples(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    (list.iter())
        .map(|(k, d, p)| (k.to_string(), d.to_string(), p.to_string()))
        .collect()
}

/// A system whose pool holds the default's host and brand-a's.
fn start(dir: &std::path::Path) -> System {
    templates_with(
        dir,
        "map $host $shortlink_workspace {",
        &format!("    {A_HOST} brand-a;"),
    );
    System::start_with(NginxOptions {
        conf_dir: Some(dir.to_owned()),
        pool: Some(vec![DEFAULT_HOST.into(), A_HOST.into()]),
        public_base: Some(format!("http://{DEFAULT_HOST} [brand-a] http://{A_HOST}")),
        ..NginxOptions::default()
    })
}

/// How long a test waits for the consumer to list what nginx recorded: a bound for a machine
/// made very busy (a 20 s wait ran out beside the suite at load ~14), not a measure of speed.
const ARRIVAL: Duration = Duration::from_secs(60);

/// What `api` lists once it lists at least `n` orphan visits (or after `ARRIVAL`).
fn listed_once(api: &Api, n: usize) -> Vec<(String, String, String)> {
    let mut seen = Vec::new();
    wait_until(ARRIVAL, || {
        seen = listed(api);
        seen.len() >= n
    });
    seen
}

#[test]
fn orphan_visits_reach_their_hosts_workspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let system = start(dir.path());
    let operator = operator(&system);
    let a = brand(&system, &operator, "brand-a");
    let (status, link) = a.post("/links", &json!({"url": "https://shop.brand-a.example/"}));
    assert_eq!(status, 201, "{link}");
    let ours = link["code"].as_str().unwrap().to_owned();
    let defaults = system.create(json!({"url": "https://default.example/"}));

    let get = |host: &str, path: &str| system.nginx.request(reqwest::Method::GET, host, path);
    for (host, path, status) in [
        (A_HOST, "/".to_owned(), 404),
        (A_HOST, format!("/{defaults}"), 404),
        (A_HOST, "/no-such-alias-1".to_owned(), 404),
        (A_HOST, "/a/b".to_owned(), 404),
        (A_HOST, format!("/{ours}."), 302),
        (DEFAULT_HOST, "/".to_owned(), 404),
        // Outside the pool: not recorded.
        ("outside.test", "/no-such-alias-2".to_owned(), 404),
    ] {
        assert_eq!(get(host, &path).status(), status, "{host}{path}");
    }

    let expected = triples(&[
        ("base_url", A_HOST, "/"),
        ("invalid_short_url", A_HOST, &format!("/{defaults}")),
        ("invalid_short_url", A_HOST, "/no-such-alias-1"),
        ("regular_404", A_HOST, "/a/b"),
        ("recovered", A_HOST, &format!("/{ours}.")),
    ]);
    let mut seen = Vec::new();
    let arrived = wait_until(ARRIVAL, || {
        seen = listed(&a);
        seen.len() >= expected.len()
    });
    assert!(arrived, "orphan visits did not arrive: {seen:?}");
    assert_eq!(seen, expected);

    // The default workspace's key: its own host's only, nothing of brand-a's or outside the pool.
    let default = system.api();
    let mut theirs = Vec::new();
    wait_until(ARRIVAL, || {
        theirs = listed(&default);
        !theirs.is_empty()
    });
    assert_eq!(theirs, triples(&[("base_url", DEFAULT_HOST, "/")]));

    // Counted per domain and kind, each workspace its own domains.
    let (_, domains) = a.get("/domains");
    assert_eq!(
        domains["orphan_visits"],
        json!({A_HOST: {"base_url": 1, "invalid_short_url": 2, "regular_404": 1, "recovered": 1}}),
        "{domains}"
    );
    let (_, domains) = default.get("/domains");
    let counts: &Value = &domains["orphan_visits"];
    assert!(counts.get(A_HOST).is_none(), "{domains}");
    assert_eq!(counts[DEFAULT_HOST]["base_url"], 1, "{domains}");
}

/// A sidecar started after the orphan visits were recorded (a restart, a deploy, another sidecar
/// behind a balancer) has learned nothing of the hosts yet: each workspace still reads its own,
/// the default's none of brand-a's.
#[test]
fn a_sidecar_started_after_the_visits_reads_each_workspaces_own() {
    let dir = tempfile::tempdir().unwrap();
    let mut system = start(dir.path());
    let operator = operator(&system);
    let a = brand(&system, &operator, "brand-a");
    let get = |host: &str, path: &str| system.nginx.request(reqwest::Method::GET, host, path);
    assert_eq!(get(A_HOST, "/no-such-alias-1").status(), 404);
    assert_eq!(get(A_HOST, "/wp-login.php").status(), 404);
    assert_eq!(get(DEFAULT_HOST, "/no-such-alias-2").status(), 404);
    let ours = triples(&[
        ("invalid_short_url", A_HOST, "/no-such-alias-1"),
        ("regular_404", A_HOST, "/wp-login.php"),
    ]);
    let defaults = triples(&[("invalid_short_url", DEFAULT_HOST, "/no-such-alias-2")]);
    assert_eq!(listed_once(&a, 2), ours, "stored");
    assert_eq!(listed_once(&system.api(), 1), defaults, "stored");

    system.restart_sidecar();
    assert_eq!(
        listed(&system.api()),
        defaults,
        "the default's after a restart"
    );
    assert_eq!(listed(&a), ours, "brand-a's after a restart");
    let (_, domains) = a.get("/domains");
    assert_eq!(
        domains["orphan_visits"],
        json!({A_HOST: {"base_url": 0, "invalid_short_url": 1, "regular_404": 1, "recovered": 0}}),
        "{domains}"
    );
}

/// A scanner's flood of 404s is counted, not recorded one by one: each worker queues at most
/// `shortlink_orphans_per_second` orphan events a second, and the status page counts the rest.
#[test]
fn a_flood_of_404s_is_recorded_at_the_workers_rate_and_counted_whole() {
    let dir = tempfile::tempdir().unwrap();
    templates_with(
        dir.path(),
        "shortlink_redis @REDIS@;",
        "    shortlink_orphans_per_second 1;",
    );
    let system = System::start_with(NginxOptions {
        conf_dir: Some(dir.path().to_owned()),
        pool: Some(vec![DEFAULT_HOST.into()]),
        ..NginxOptions::default()
    });
    const FLOOD: u64 = 40;
    let before = system.nginx.counters();
    for n in 0..FLOOD {
        let path = format!("/no-such-alias-{n}");
        let answer = system
            .nginx
            .request(reqwest::Method::GET, DEFAULT_HOST, &path);
        assert_eq!(answer.status(), 404, "{path}");
    }
    let after = system.nginx.counters();
    let unrecorded = after["orphans_unrecorded"] - before["orphans_unrecorded"];
    let recorded = FLOOD - unrecorded;
    // One a second a worker: however slow the machine, 40 requests do not take 20 seconds.
    assert!(
        (1..=FLOOD / 2).contains(&recorded),
        "{recorded} of {FLOOD} recorded"
    );
    let api = system.api();
    let mut seen = Vec::new();
    let arrived = wait_until(ARRIVAL, || {
        seen = listed(&api);
        seen.len() as u64 >= recorded
    });
    assert!(arrived, "{recorded} orphan visits expected: {seen:?}");
    assert_eq!(seen.len() as u64, recorded, "{seen:?}");
}
