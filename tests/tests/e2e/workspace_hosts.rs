//! Domains per workspace (issue 53): nginx maps each host to its workspace (`$shortlink_workspace`
//! in domains.conf) and the module answers a code only on a host of the code's workspace; on any
//! other host the code answers exactly as an unknown code does. The records are written straight
//! into Redis with wire's encoder, as the sidecar will write them for links of a workspace.

use std::collections::HashMap;
use std::path::Path;

use reqwest::Method;
use serde_json::json;
use shortlink_e2e::{status_and_location, templates_with, NginxOptions, System};
use shortlink_wire::keys::{link_key, password_link_key, visit_count_key};
use shortlink_wire::record::password::Password;
use shortlink_wire::record::{Extras, Record, WorkspaceName};

const A_HOST: &str = "s1.brand-a.test";
const B_HOST: &str = "s1.brand-b.test";
const DEFAULT_HOST: &str = "s1.test";
const TARGET: &str = "https://shop.brand-a.example/spring";
/// Valid as an alias, held by no record: what an unknown code answers (one per request of a
/// round, so that in the first each is a lookup, and in the second each is a cached miss).
fn unknown(n: usize) -> String {
    format!("/no-such-alias-{n}")
}

fn brand_a() -> WorkspaceName {
    WorkspaceName::parse(b"brand-a").unwrap()
}

/// The project's templates with two brands' hosts in the workspace map; `check`: whether the
/// redirect location keeps `shortlink_workspace` (a configuration from before workspaces has
/// none).
fn templates(dir: &Path, check: bool) {
    templates_with(
        dir,
        "map $host $shortlink_workspace {",
        &format!("    {A_HOST} brand-a; {B_HOST} brand-b;"),
    );
    if !check {
        let path = dir.join("redirect.conf.template");
        let text = std::fs::read_to_string(&path).unwrap();
        let directive = "shortlink_workspace $shortlink_workspace;";
        assert!(text.contains(directive), "no {directive} in {path:?}");
        std::fs::write(&path, text.replace(directive, "")).unwrap();
    }
}

fn start(dir: &Path, check: bool) -> System {
    templates(dir, check);
    System::start_with(NginxOptions {
        conf_dir: Some(dir.to_owned()),
        pool: Some(vec![DEFAULT_HOST.into(), A_HOST.into(), B_HOST.into()]),
        // Long enough that a second request is always a cache hit, a miss included.
        cache: "size=1000 ttl=60s negative_ttl=60s",
        ..NginxOptions::default()
    })
}

/// A link created through the API (so its code exists and is projected), then given the record
/// the sidecar writes for it in workspace brand-a.
fn link_in_a(system: &System, extras: Extras) -> String {
    let code = system.create(json!({"url": TARGET}));
    let extras = Extras {
        workspace: Some(brand_a()),
        ..extras
    };
    system.put_live_record(&code, TARGET, &extras);
    code
}

fn revoked_in_a(system: &System) -> String {
    let code = system.create(json!({"url": TARGET}));
    let record = Record::revoked(Some(brand_a()));
    system.redis.set_bytes(&link_key(&code), &record.encode());
    code
}

/// What one request answered, and what it changed on the status page.
#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    body: String,
    counted: HashMap<String, u64>,
}

/// Counters the event flush moves on its own timer: a 404 on a pool host queues an orphan event,
/// and its batch may be written while another request is being looked at.
const DELIVERED_IN_THE_BACKGROUND: [&str; 4] = [
    "events_sent",
    "events_failed",
    "events_buffered",
    "events_rerouted",
];

/// The cache's own lookups: an unknown code is cached only for the short negative TTL, so whether
/// the second round finds it still cached depends on the time between the rounds, which a busy
/// machine stretches. Which way the module found an answer is not what the oracle compares.
const CACHE_PATH: [&str; 2] = ["cache_hits", "cache_misses"];

fn seen(system: &System, method: Method, host: &str, path: &str) -> Seen {
    let before = system.nginx.counters();
    let response = if method == Method::POST {
        shortlink_e2e::http_client()
            .post(format!(
                "http://127.0.0.1:{}{path}",
                system.nginx.redirect_port
            ))
            .header("Host", host)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("password=wrong")
            .send()
            .unwrap()
    } else {
        system.nginx.request(method, host, path)
    };
    let status = response.status().as_u16();
    let body = response.text().unwrap();
    let after = system.nginx.counters();
    let counted = after
        .into_iter()
        .filter(|(name, _)| !DELIVERED_IN_THE_BACKGROUND.contains(&name.as_str()))
        .filter(|(name, _)| !CACHE_PATH.contains(&name.as_str()))
        .filter_map(|(name, value)| {
            let delta = value - before.get(&name).copied().unwrap_or(0);
            (delta != 0).then_some((name, delta))
        })
        .collect();
    Seen {
        status,
        body,
        counted,
    }
}

#[test]
fn a_code_answers_only_on_a_host_of_its_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let system = start(dir.path(), true);
    let plain = link_in_a(&system, Extras::default());
    // Its own code: each request of the first round must be a lookup.
    let headed = link_in_a(&system, Extras::default());
    let capped = link_in_a(
        &system,
        Extras {
            max_visits: 100,
            ..Extras::default()
        },
    );
    let locked = link_in_a(
        &system,
        Extras {
            password: Some(Password::new(b"secret", [7; 16])),
            ..Extras::default()
        },
    );
    let carded = link_in_a(
        &system,
        Extras {
            has_card: true,
            ..Extras::default()
        },
    );
    let revoked = revoked_in_a(&system);
    let default = system.create(json!({"url": TARGET}));

    // First from Redis, then from the cache: each answers on brand B's host as an unknown code
    // does, to the byte and to the counter (no visit queued, nothing else counted).
    for round in ["lookup", "cache hit"] {
        for (n, (method, code)) in [
            (Method::GET, &plain),
            (Method::HEAD, &headed),
            (Method::GET, &capped),
            (Method::POST, &locked),
            (Method::GET, &carded),
            (Method::GET, &revoked),
            (Method::GET, &default),
        ]
        .into_iter()
        .enumerate()
        {
            let unknown = seen(&system, method.clone(), B_HOST, &unknown(n));
            assert_eq!(unknown.status, 404, "{round}: {unknown:?}");
            let foreign = seen(&system, method.clone(), B_HOST, &format!("/{code}"));
            assert_eq!(foreign, unknown, "{round}: {method} of {code} on {B_HOST}");
        }
    }
    // A wrong host counted no click and no password attempt.
    assert_eq!(
        system.redis.cli_raw(&["EXISTS", &visit_count_key(&capped)]),
        "0"
    );
    let attempts = String::from_utf8(password_link_key(locked.as_bytes())).unwrap();
    assert_eq!(system.redis.cli_raw(&["EXISTS", &attempts]), "0");

    // On brand A's host they answer as links do; `default`'s code on `default`'s host.
    for round in ["cache hit", "again"] {
        let redirect = system.nginx.get(A_HOST, &format!("/{plain}"));
        assert_eq!(
            status_and_location(&redirect),
            (302, TARGET.to_owned()),
            "{round}"
        );
        let gone = system.nginx.get(A_HOST, &format!("/{revoked}"));
        assert_eq!(gone.status(), 410, "{round}");
        let head = system
            .nginx
            .request(Method::HEAD, A_HOST, &format!("/{plain}"));
        assert_eq!(head.status(), 302, "{round}");
        let own = system.nginx.get(DEFAULT_HOST, &format!("/{default}"));
        assert_eq!(
            status_and_location(&own),
            (302, TARGET.to_owned()),
            "{round}"
        );
        assert_eq!(
            system.nginx.get(A_HOST, &format!("/{default}")).status(),
            404,
            "{round}: default's code on brand A's host"
        );
    }
    let capped_once = system.nginx.click(A_HOST, &format!("/{capped}"));
    assert_eq!(status_and_location(&capped_once), (302, TARGET.to_owned()));
    assert_eq!(
        system.redis.cli_raw(&["GET", &visit_count_key(&capped)]),
        "1"
    );
    assert_eq!(
        seen(&system, Method::POST, A_HOST, &format!("/{locked}")).status,
        401,
        "the password form on brand A's host"
    );
}

#[test]
fn a_host_mapped_to_no_workspace_name_answers_no_code() {
    let dir = tempfile::tempdir().unwrap();
    templates_with(
        dir.path(),
        "map $host $shortlink_workspace {",
        &format!("    {A_HOST} Brand_A;"),
    );
    let system = System::start_with(NginxOptions {
        conf_dir: Some(dir.path().to_owned()),
        pool: Some(vec![DEFAULT_HOST.into(), A_HOST.into()]),
        ..NginxOptions::default()
    });
    let default = system.create(json!({"url": TARGET}));
    let warned = || system.nginx.error_log_lines("not a workspace name").len();
    for round in ["lookup", "cache hit"] {
        let path = format!("/{default}");
        assert_eq!(system.nginx.get(A_HOST, &path).status(), 404, "{round}");
        assert_eq!(
            system.nginx.get(DEFAULT_HOST, &path).status(),
            302,
            "{round}"
        );
    }
    // Said, once per worker (the tests' nginx has one).
    assert_eq!(warned(), 1, "{}", system.nginx.error_log());
}

#[test]
fn without_the_directive_every_code_answers_on_every_host() {
    let dir = tempfile::tempdir().unwrap();
    let system = start(dir.path(), false);
    let plain = link_in_a(&system, Extras::default());
    let revoked = revoked_in_a(&system);
    for host in [B_HOST, A_HOST, DEFAULT_HOST] {
        let redirect = system.nginx.get(host, &format!("/{plain}"));
        assert_eq!(
            status_and_location(&redirect),
            (302, TARGET.to_owned()),
            "{host}"
        );
        assert_eq!(
            system.nginx.get(host, &format!("/{revoked}")).status(),
            410,
            "{host}"
        );
    }
}

/// Each worker evaluates the map once per host and keeps the answer (the module's per-worker
/// table): a reload that changes the map must be seen, from lookups and from the cache alike.
#[test]
fn a_reload_that_changes_the_map_changes_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let system = start(dir.path(), true);
    let code = link_in_a(&system, Extras::default());
    let path = format!("/{code}");
    let answers = |round: &str, own: &str, other: &str| {
        // The first request of a host after a (re)start is a lookup, the second a cache hit.
        for hit in ["lookup", "cache hit"] {
            let redirect = system.nginx.get(own, &path);
            assert_eq!(
                status_and_location(&redirect),
                (302, TARGET.to_owned()),
                "{round}, {hit}: {own}"
            );
            assert_eq!(
                system.nginx.get(other, &path).status(),
                404,
                "{round}, {hit}: {other}"
            );
        }
    };
    answers("before the reload", A_HOST, B_HOST);

    // The two brands' hosts swapped.
    let domains = system.nginx.domains_file();
    let text = std::fs::read_to_string(&domains).unwrap();
    let mapped = format!("{A_HOST} brand-a; {B_HOST} brand-b;");
    assert!(text.contains(&mapped), "no {mapped:?} in {domains:?}");
    let swapped = format!("{A_HOST} brand-b; {B_HOST} brand-a;");
    std::fs::write(&domains, text.replace(&mapped, &swapped)).unwrap();
    system.nginx.reload_and_retire_old_workers();
    answers("after the reload", B_HOST, A_HOST);
}

/// More hosts than a worker keeps (64): those past the table are evaluated each time and still
/// answer per the map, and those in it keep answering right; hosts of equal length alternate
/// between two workspaces, so an answer taken from another host shows.
#[test]
fn more_hosts_than_a_worker_keeps_each_answer_per_the_map() {
    const HOSTS: usize = 80;
    let host = |n: usize| format!("s{n:03}.brands.test");
    let workspace = |n: usize| if n % 2 == 0 { "brand-a" } else { "brand-b" };
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..HOSTS)
        .map(|n| format!("{} {}; ", host(n), workspace(n)))
        .collect();
    templates_with(dir.path(), "map $host $shortlink_workspace {", &lines);
    let system = System::start_with(NginxOptions {
        conf_dir: Some(dir.path().to_owned()),
        pool: Some((0..HOSTS).map(host).collect()),
        cache: "size=1000 ttl=60s negative_ttl=60s",
        ..NginxOptions::default()
    });
    let code = link_in_a(&system, Extras::default());
    let path = format!("/{code}");
    // Round 1 fills the table with the first 64 hosts (a lookup, then cache hits); rounds 2
    // and 3 answer the first 64 from the table and the rest by evaluating the map each time.
    for round in 1..=3 {
        for n in 0..HOSTS {
            let response = system.nginx.get(&host(n), &path);
            let expected = if workspace(n) == "brand-a" { 302 } else { 404 };
            assert_eq!(response.status(), expected, "round {round}: {}", host(n));
        }
    }
}
