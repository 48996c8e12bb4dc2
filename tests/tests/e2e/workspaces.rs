//! Workspaces end to end (issue 53): the operator makes two brands through nginx's API server,
//! each brand's key creates its links, and nginx answers each brand's codes on its own hosts only
//! (404 elsewhere, as an unknown code), from Redis and, with Redis stopped, from the fallback.

use std::path::Path;

use serde_json::json;
use shortlink_e2e::{status_and_location, templates_with, Api, NginxOptions, System};

const A_HOST: &str = "s1.brand-a.test";
const B_HOST: &str = "s1.brand-b.test";
const DEFAULT_HOST: &str = "s1.test";

fn start(dir: &Path) -> System {
    templates_with(
        dir,
        "map $host $shortlink_workspace {",
        &format!("    {A_HOST} brand-a; {B_HOST} brand-b;"),
    );
    System::start_with(NginxOptions {
        conf_dir: Some(dir.to_owned()),
        pool: Some(vec![DEFAULT_HOST.into(), A_HOST.into(), B_HOST.into()]),
        ..NginxOptions::default()
    })
}

/// An operator key, as the installation's operator makes one.
pub(crate) fn operator(system: &System) -> Api {
    let output =
        system.sidecar_cli(&["keys", "create", "--name", "operator", "--role", "operator"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let key = String::from_utf8(output.stdout).unwrap();
    Api::new(
        format!("http://127.0.0.1:{}", system.nginx.api_port),
        key.trim(),
    )
}

/// Creates the workspace `slug` and returns its admin's API.
pub(crate) fn brand(system: &System, operator: &Api, slug: &str) -> Api {
    let (status, body) = operator.post("/workspaces", &json!({"slug": slug}));
    assert_eq!(status, 201, "{body}");
    let (status, key) = operator.post(
        &format!("/workspaces/{slug}/keys"),
        &json!({"name": format!("{slug} tool"), "role": "admin"}),
    );
    assert_eq!(status, 201, "{key}");
    Api::new(
        format!("http://127.0.0.1:{}", system.nginx.api_port),
        key["key"].as_str().unwrap(),
    )
}

fn code_of(api: &Api, url: &str) -> String {
    let (status, link) = api.post("/links", &json!({"url": url}));
    assert_eq!(status, 201, "{link}");
    link["code"].as_str().unwrap().to_owned()
}

/// What each host answers for each code: status and location.
fn answers(system: &System, codes: &[&str]) -> Vec<(String, u16, String)> {
    let mut seen = Vec::new();
    for host in [A_HOST, B_HOST, DEFAULT_HOST] {
        for code in codes {
            let (status, location) =
                status_and_location(&system.nginx.get(host, &format!("/{code}")));
            seen.push((format!("{host}/{code}"), status, location));
        }
    }
    seen
}

#[test]
fn each_brand_answers_on_its_own_hosts_from_redis_and_from_the_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let mut system = start(dir.path());
    let operator = operator(&system);
    let a = brand(&system, &operator, "brand-a");
    let b = brand(&system, &operator, "brand-b");
    let ours = code_of(&a, "https://shop.brand-a.example/spring");
    let theirs = code_of(&b, "https://shop.brand-b.example/autumn");
    let default = system.create(json!({"url": "https://shop.example/default"}));
    // B cannot read A's link through the API either: as if it did not exist.
    let (status, body) = b.get(&format!("/links/{ours}"));
    assert_eq!(status, 404, "{body}");
    let unknown = "no-such-alias";
    let expected = |host: &str, code: &str| -> (u16, &'static str) {
        match (host, code) {
            (A_HOST, c) if c == ours => (302, "https://shop.brand-a.example/spring"),
            (B_HOST, c) if c == theirs => (302, "https://shop.brand-b.example/autumn"),
            (DEFAULT_HOST, c) if c == default => (302, "https://shop.example/default"),
            _ => (404, ""),
        }
    };
    let codes = [ours.as_str(), theirs.as_str(), default.as_str(), unknown];
    let from_redis = answers(&system, &codes);
    for (at, status, location) in &from_redis {
        let (host, code) = at.split_once('/').unwrap();
        assert_eq!(
            (*status, location.as_str()),
            expected(host, code),
            "{at} from Redis"
        );
    }

    // Redis stopped: nginx's fallback asks the sidecar, which answers the same, host by host.
    system.redis.stop();
    let from_fallback = answers(&system, &codes);
    let fallbacks = system.nginx.counters()["fallbacks"];
    assert!(fallbacks > 0, "nothing went through the fallback");
    assert_eq!(
        from_fallback, from_redis,
        "the fallback answers as Redis did"
    );
}
