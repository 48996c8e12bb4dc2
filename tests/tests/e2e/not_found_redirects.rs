//! Not-found redirects per workspace and per domain (issue 70): brand A's workspace sends its
//! bare root, unknown codes and revoked links to its own pages, one of its domains overrides the
//! unknown-code page; brand B's domain keeps today's 404s. Asked through the module (its worker
//! copy of `sl:nf`, refreshed without a reload) and then with Redis stopped (the fallback answers
//! from SQL): both give the same answers.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use shortlink_e2e::{templates_with, NginxOptions, System};

use super::workspaces::{brand, operator};

const A_HOST: &str = "s1.brand-a.test";
const A2_HOST: &str = "s2.brand-a.test";
const B_HOST: &str = "s1.brand-b.test";
const DEFAULT_HOST: &str = "s1.test";
const ROOT: &str = "https://brand-a.example/";
const UNKNOWN: &str = "https://brand-a.example/lost";
const UNKNOWN_LATER: &str = "https://brand-a.example/lost-v2";
const EXPIRED: &str = "https://brand-a.example/over";
const A2_UNKNOWN: &str = "https://brand-a.example/a2-lost";

fn start(dir: &Path) -> System {
    templates_with(
        dir,
        "map $host $shortlink_workspace {",
        &format!("    {A_HOST} brand-a; {A2_HOST} brand-a; {B_HOST} brand-b;"),
    );
    System::start_with(NginxOptions {
        conf_dir: Some(dir.to_owned()),
        pool: Some(
            [DEFAULT_HOST, A_HOST, A2_HOST, B_HOST]
                .map(str::to_owned)
                .to_vec(),
        ),
        public_base: Some(format!(
            "http://{DEFAULT_HOST} [brand-a] http://{A_HOST} http://{A2_HOST} [brand-b] http://{B_HOST}"
        )),
        ..NginxOptions::default()
    })
}

/// Status and `Location` of `path` on `host`.
fn answer(system: &System, host: &str, path: &str) -> (u16, Option<String>) {
    let response = system.nginx.get(host, path);
    let location =
        (response.headers().get("location")).map(|value| value.to_str().unwrap().to_owned());
    (response.status().as_u16(), location)
}

fn to(url: &str) -> (u16, Option<String>) {
    (302, Some(url.to_owned()))
}

const NOT_FOUND: (u16, Option<String>) = (404, None);

/// A link of `api` revoked at once: 410 without a setting.
fn revoked(api: &shortlink_e2e::Api) -> String {
    let (status, link) = api.post("/links", &json!({"url": "https://brand-a.example/sale"}));
    assert_eq!(status, 201, "{link}");
    let code = link["code"].as_str().unwrap().to_owned();
    let (status, body) = api.delete(&format!("/links/{code}"));
    assert!(status < 300, "revoke: {status} {body}");
    code
}

/// Every case on every host, for `unknown` (a code asked nowhere before) and `gone` (revoked).
fn check_all(system: &System, unknown: &str, gone: &str, a_unknown: &str, why: &str) {
    let cases = [
        (A_HOST, "/", to(ROOT)),
        (A_HOST, unknown, to(a_unknown)),
        (A_HOST, gone, to(EXPIRED)),
        // A2's own unknown-code page beats the workspace's; the rest falls through to it.
        (A2_HOST, unknown, to(A2_UNKNOWN)),
        (A2_HOST, "/", to(ROOT)),
        (A2_HOST, gone, to(EXPIRED)),
        // Another workspace's domain, and the default's, never get A's settings.
        (B_HOST, unknown, NOT_FOUND),
        (B_HOST, "/", NOT_FOUND),
        (B_HOST, gone, NOT_FOUND),
        (DEFAULT_HOST, unknown, NOT_FOUND),
    ];
    for (host, path, expected) in cases {
        assert_eq!(answer(system, host, path), expected, "{why}: {host}{path}");
    }
}

fn put(api: &shortlink_e2e::Api, path: &str, body: Value) -> Value {
    let (status, view) = api.put(path, &body);
    assert_eq!(status, 200, "PUT {path}: {view}");
    view
}

#[test]
fn a_domains_setting_beats_its_workspaces_on_the_module_and_on_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let mut system = start(dir.path());
    let operator = operator(&system);
    let a = brand(&system, &operator, "brand-a");
    let b = brand(&system, &operator, "brand-b");
    let gone = format!("/{}", revoked(&a));
    assert_eq!(answer(&system, A_HOST, "/"), NOT_FOUND, "no setting yet");
    assert_eq!(answer(&system, A_HOST, &gone).0, 410, "no setting yet");

    put(
        &a,
        "/not-found-redirects",
        json!({"root_url": ROOT, "unknown_url": UNKNOWN, "expired_url": EXPIRED}),
    );
    let view = put(
        &a,
        &format!("/domains/{A2_HOST}/not-found-redirects"),
        json!({"unknown_url": A2_UNKNOWN}),
    );
    assert_eq!(view["domain"], A2_HOST);
    assert_eq!(view["root_url"], Value::Null);
    // B's key cannot see or set A's domain.
    let (status, _) = b.put(
        &format!("/domains/{A2_HOST}/not-found-redirects"),
        &json!({"unknown_url": "https://brand-b.example/"}),
    );
    assert_eq!(status, 404, "another workspace's domain");

    // The worker's copy follows within its refresh: no reload.
    let seen = testkit::wait_until(Duration::from_secs(10), || {
        answer(&system, A_HOST, "/no-such-alias-1") == to(UNKNOWN)
    });
    assert!(seen, "the module never saw the setting");
    let response = system.nginx.get(A_HOST, "/no-such-alias-2");
    assert_eq!(response.headers()["cache-control"], "no-store");
    check_all(&system, "/no-such-alias-3", &gone, UNKNOWN, "module");

    // A change is seen without a reload too.
    put(
        &a,
        "/not-found-redirects",
        json!({"root_url": ROOT, "unknown_url": UNKNOWN_LATER, "expired_url": EXPIRED}),
    );
    let seen = testkit::wait_until(Duration::from_secs(10), || {
        answer(&system, A_HOST, "/no-such-alias-4") == to(UNKNOWN_LATER)
    });
    assert!(seen, "the module never saw the change");

    // Redis stopped: lookups go to the fallback, which answers from SQL the same; the bare
    // root never needs a lookup (the worker's copy stays).
    let gone_unseen = format!("/{}", revoked(&a));
    system.redis.stop();
    let fallbacks = system.nginx.counters()["fallbacks"];
    check_all(
        &system,
        "/no-such-alias-5",
        &gone_unseen,
        UNKNOWN_LATER,
        "fallback",
    );
    assert!(
        system.nginx.counters()["fallbacks"] > fallbacks,
        "the fallback was not asked"
    );
}

/// The hash is Redis state like a link's record: lost with Redis's data, it comes back from SQL
/// with the rest, by the sidecar's own restore and by `resync`.
#[test]
fn a_lost_hash_comes_back_from_sql() {
    let dir = tempfile::tempdir().unwrap();
    let system = start(dir.path());
    let a = brand(&system, &operator(&system), "brand-a");
    put(&a, "/not-found-redirects", json!({"unknown_url": UNKNOWN}));
    let field = shortlink_wire::not_found::workspace_field("brand-a");
    let projected = || {
        system
            .redis
            .cli_raw(&["HGET", shortlink_wire::not_found::KEY, &field])
    };
    let written = projected();
    assert!(written.contains(UNKNOWN), "{written:?}");

    assert_eq!(system.redis.cli(&["FLUSHALL"]), "OK");
    let back = testkit::wait_until(Duration::from_secs(20), || projected() == written);
    assert!(back, "the sidecar's restore did not write the hash again");
    let seen = testkit::wait_until(Duration::from_secs(10), || {
        answer(&system, A_HOST, "/no-such-alias-1") == to(UNKNOWN)
    });
    assert!(seen, "the module's copy did not follow");

    system.redis.cli(&["DEL", shortlink_wire::not_found::KEY]);
    let printed = system.resync();
    assert!(printed.contains("not-found redirects"), "{printed}");
    assert_eq!(projected(), written);
}

/// A domain moved from brand B to brand A (nginx's map and issuing list edited, reloaded; B is
/// the newer workspace, so its row sorts last) answers A's settings from then on, on the module
/// and on the fallback alike; B's row is dropped, and B's key is told the domain is not its own.
#[test]
fn a_moved_domain_answers_with_its_new_workspaces_settings_only() {
    const B_UNKNOWN: &str = "https://brand-b.example/lost";
    let dir = tempfile::tempdir().unwrap();
    let mut system = start(dir.path());
    let operator = operator(&system);
    let a = brand(&system, &operator, "brand-a");
    let b = brand(&system, &operator, "brand-b");
    let b_domain = format!("/domains/{B_HOST}/not-found-redirects");
    put(&b, &b_domain, json!({"unknown_url": B_UNKNOWN}));
    put(&a, "/not-found-redirects", json!({"unknown_url": UNKNOWN}));
    let seen = testkit::wait_until(Duration::from_secs(10), || {
        answer(&system, B_HOST, "/no-such-alias-1") == to(B_UNKNOWN)
    });
    assert!(seen, "the module never saw B's setting");

    // The move: B's host is mapped to brand-a and named in brand-a's part of the issuing list
    // (brand-b is left with no domain, so no part).
    let domains = system.nginx.domains_file();
    let text = std::fs::read_to_string(&domains).unwrap();
    let (mapped, part) = (
        format!("{B_HOST} brand-b;"),
        format!("http://{A2_HOST} [brand-b] http://{B_HOST}"),
    );
    assert!(text.contains(&mapped) && text.contains(&part), "{text}");
    let moved = text
        .replace(&mapped, &format!("{B_HOST} brand-a;"))
        .replace(&part, &format!("http://{A2_HOST} http://{B_HOST}"));
    std::fs::write(&domains, moved).unwrap();
    system.nginx.reload_and_retire_old_workers();

    // The module: A's workspace setting, never B's (the fallback's turn is last).
    let seen = testkit::wait_until(Duration::from_secs(10), || {
        answer(&system, B_HOST, "/no-such-alias-2") == to(UNKNOWN)
    });
    assert!(seen, "the module still answers the former owner's URL");
    // The next API request through nginx carries the new list: B's row goes.
    let (status, body) = b.get(&b_domain);
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "unknown_domain", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("this workspace's"),
        "{body}"
    );
    let (status, body) = a.get(&b_domain);
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("no_not_found_redirects")),
        "A has none of its own there, and B's did not pass to A: {body}"
    );
    let field = shortlink_wire::not_found::domain_field("brand-b", B_HOST);
    let stale = system
        .redis
        .cli_raw(&["HEXISTS", shortlink_wire::not_found::KEY, &field]);
    assert_eq!(stale.trim(), "0", "B's row is gone from Redis");

    // The fallback (Redis stopped) agrees.
    system.redis.stop();
    assert_eq!(
        answer(&system, B_HOST, "/no-such-alias-3"),
        to(UNKNOWN),
        "the fallback"
    );
}
