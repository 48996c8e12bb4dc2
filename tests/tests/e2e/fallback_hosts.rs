//! The module and nginx's fallback agree on every kind of host (issue 66): brand A's links of
//! every answer kind, asked on A's host, on B's, on a host the map does not name (its default,
//! `default`), on one mapped to `""` and on one mapped to a malformed name, first from Redis and
//! then with Redis stopped (the fallback: `@resolve` and the sidecar). Only A's host answers A's
//! links; every other host answers each of them exactly as it answers an unknown code (status,
//! body and headers), on both paths alike.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use shortlink_e2e::{http_client, paths, templates_with, NginxOptions, System, PHONE};
use shortlink_wire::fallback::{header_value, WORKSPACE_HEADER, WORKSPACE_PREFIX};

use super::workspaces::{brand, operator};

const DEFAULT_HOST: &str = "s1.test";
const A_HOST: &str = "s1.brand-a.test";
const B_HOST: &str = "s1.brand-b.test";
const UNMAPPED_HOST: &str = "s1.nobody.test";
const EMPTY_HOST: &str = "s1.empty.test";
const MALFORMED_HOST: &str = "s1.malformed.test";
/// Every host but A's: none may answer A's links.
const OTHER_HOSTS: [&str; 4] = [B_HOST, UNMAPPED_HOST, EMPTY_HOST, MALFORMED_HOST];
const TARGET: &str = "https://shop.brand-a.example/spring?token=secret";
/// A link preview fetcher (wire::agent).
const FETCHER: &str = "WhatsApp/2.23.20.0 A";

fn start(dir: &Path) -> System {
    templates_with(
        dir,
        "map $host $shortlink_workspace {",
        &format!(
            "    {A_HOST} brand-a; {B_HOST} brand-b; {EMPTY_HOST} \"\"; {MALFORMED_HOST} Brand_A;"
        ),
    );
    System::start_with(NginxOptions {
        conf_dir: Some(dir.to_owned()),
        pool: Some(
            [
                DEFAULT_HOST,
                A_HOST,
                B_HOST,
                UNMAPPED_HOST,
                EMPTY_HOST,
                MALFORMED_HOST,
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        // Long enough that a link cached before Redis stops is still cached after.
        cache: "size=1000 ttl=600s negative_ttl=1s",
        ..NginxOptions::default()
    })
}

/// What a request answered, as a visitor sees it.
#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    body: String,
    /// The headers but `Date` (and `Connection`, `Content-Length`, which the body decides).
    headers: Vec<(String, String)>,
}

fn seen(system: &System, host: &str, path: &str, agent: Option<&str>) -> Seen {
    let agent = agent.map(|agent| ("User-Agent", agent));
    let response = system.nginx.get_with(host, path, agent.as_slice());
    let status = response.status().as_u16();
    let mut headers: Vec<(String, String)> = (response.headers().iter())
        .filter(|(name, _)| !["date", "connection", "content-length"].contains(&name.as_str()))
        .map(|(name, value)| {
            let value = value.to_str().unwrap_or_default();
            (name.as_str().to_owned(), value.to_owned())
        })
        .collect();
    headers.sort();
    let body = response.text().unwrap();
    Seen {
        status,
        body,
        headers,
    }
}

/// One of A's links and what A's own host answers it.
struct Kind {
    name: &'static str,
    code: String,
    agent: Option<&'static str>,
    own: u16,
}

/// A's links of every kind the API makes: (name, body, the agent that asks).
fn kinds_of_a(
    a: &shortlink_e2e::Api,
    expires_at: &str,
    opens_at: &str,
) -> Vec<(&'static str, String, Option<&'static str>)> {
    let card = json!({"title": "Spring sale", "description": "20% off", "image": "https://cdn.example/s.jpg"});
    let bodies = [
        ("plain redirect", json!({"url": TARGET}), None),
        (
            "password page",
            json!({"url": TARGET, "password": "hunter22"}),
            None,
        ),
        (
            "card page",
            json!({"url": TARGET, "preview": card}),
            Some(FETCHER),
        ),
        (
            "not yet",
            json!({"url": TARGET, "valid_since": opens_at}),
            None,
        ),
        (
            "expired",
            json!({"url": TARGET, "expires_at": expires_at}),
            None,
        ),
        ("capped", json!({"url": TARGET, "max_visits": 1}), None),
        ("edge-cache hit", json!({"url": TARGET}), None),
    ];
    bodies
        .into_iter()
        .map(|(name, body, agent)| {
            let (status, link) = a.post("/links", &body);
            assert_eq!(status, 201, "{name}: {link}");
            (name, link["code"].as_str().unwrap().to_owned(), agent)
        })
        .collect()
}

/// Asks every host for each of A's links, and an unknown code of the same shape beside each:
/// A's host answers `kind.own`, every other host exactly what it answers the unknown code.
/// Returns each other host's answer to an unknown code.
fn round(system: &System, path: &str, kinds: &[Kind], unknowns: &mut usize) -> Vec<Seen> {
    let mut unknown_answers = Vec::new();
    for kind in kinds {
        let own = seen(system, A_HOST, &format!("/{}", kind.code), kind.agent);
        assert_eq!(
            own.status, kind.own,
            "{path}: {} on A's host: {own:?}",
            kind.name
        );
        if own.status == 302 {
            assert!(
                own.headers.contains(&("location".into(), TARGET.into())),
                "{own:?}"
            );
        }
        for host in OTHER_HOSTS {
            // A code no record holds, asked once (a miss is not cached for long).
            *unknowns += 1;
            let unknown = seen(
                system,
                host,
                &format!("/no-such-alias-{unknowns}"),
                kind.agent,
            );
            assert_eq!(unknown.status, 404, "{path}: an unknown code on {host}");
            let foreign = seen(system, host, &format!("/{}", kind.code), kind.agent);
            assert_eq!(foreign, unknown, "{path}: {} of A's on {host}", kind.name);
            assert!(!foreign.body.contains("brand-a.example"), "{foreign:?}");
            unknown_answers.push(unknown);
        }
    }
    unknown_answers
}

#[test]
fn only_a_hosts_answer_its_links_from_redis_and_from_the_fallback_alike() {
    let dir = tempfile::tempdir().unwrap();
    let mut system = start(dir.path());
    let operator = operator(&system);
    let a = brand(&system, &operator, "brand-a");
    brand(&system, &operator, "brand-b");
    let expiry = chrono::Utc::now() + chrono::Duration::seconds(2);
    let expires_at = expiry.to_rfc3339();
    let opens_at = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    // One set per path: a link asked with Redis up is in nginx's cache afterwards, and the
    // fallback must be asked for links it has not seen.
    let from_redis = kinds_of_a(&a, &expires_at, &opens_at);
    let from_fallback = kinds_of_a(&a, &expires_at, &opens_at);
    let expired = testkit::wait_until(Duration::from_secs(10), || chrono::Utc::now() > expiry);
    assert!(expired, "the clock did not pass the expiry");

    let code = |kinds: &[(&str, String, Option<&str>)], name: &str| {
        let kind = kinds.iter().find(|kind| kind.0 == name).unwrap();
        kind.1.clone()
    };
    // The capped link's one visit, on A's host; the cached one's first ask, so the round's
    // requests are cache hits.
    for name in ["capped", "edge-cache hit"] {
        // A person's tap: a machine's would not spend the cap.
        let first = system
            .nginx
            .click(A_HOST, &format!("/{}", code(&from_redis, name)));
        assert_eq!(first.status(), 302, "{name}'s first visit");
    }
    // The fallback's capped link used up through the sidecar, so that nginx never cached it.
    let used = http_client()
        .get(format!(
            "http://127.0.0.1:{}/api/v1/resolve/{}",
            system.sidecar.port,
            code(&from_fallback, "capped")
        ))
        .bearer_auth(&system.resolve_key)
        .header(WORKSPACE_HEADER, header_value("brand-a"))
        .header("User-Agent", PHONE[0].1)
        .header("Accept-Language", PHONE[1].1)
        .send()
        .unwrap();
    assert_eq!(used.status(), 302, "the capped link's one visit");

    let own = |name: &str, redis_up: bool| match name {
        "plain redirect" | "edge-cache hit" => 302,
        "password page" => 401,
        "card page" => 200,
        "not yet" => 403,
        "expired" => 410,
        // Past its cap (410) with Redis; without it the click cannot be counted, and an
        // uncounted click is never redirected (503).
        "capped" if redis_up => 410,
        "capped" => 503,
        other => panic!("{other}"),
    };
    let kinds = |set: &[(&'static str, String, Option<&'static str>)], redis_up: bool| {
        (set.iter())
            .map(|(name, code, agent)| Kind {
                name,
                code: code.clone(),
                agent: *agent,
                own: own(name, redis_up),
            })
            .collect::<Vec<_>>()
    };
    let mut unknowns = 0;
    let hits = system.nginx.counters()["cache_hits"];
    let up = round(
        &system,
        "Redis up",
        &kinds(&from_redis, true),
        &mut unknowns,
    );
    assert!(
        system.nginx.counters()["cache_hits"] >= hits + 1 + OTHER_HOSTS.len() as u64,
        "the cached link was not answered from the cache on every host"
    );

    system.redis.stop();
    let fallbacks = system.nginx.counters()["fallbacks"];
    let down = round(
        &system,
        "Redis stopped",
        &kinds(&from_fallback, false),
        &mut unknowns,
    );
    assert!(
        system.nginx.counters()["fallbacks"] >= fallbacks + down.len() as u64,
        "the unknown codes did not go through the fallback"
    );
    // What every other host answers an unknown code is the same on both paths.
    assert_eq!(up, down, "an unknown code from Redis and from the fallback");

    // A link nginx cached before Redis stopped: the cache is not read while its invalidation
    // connection is down (docs/ARCHITECTURE.md, "Cache coherence"), so the fallback answers it
    // too, and agrees.
    let fallbacks = system.nginx.counters()["fallbacks"];
    let cached = [Kind {
        name: "edge-cache hit",
        code: code(&from_redis, "edge-cache hit"),
        agent: None,
        own: 302,
    }];
    let from_cache = round(&system, "Redis stopped, cached", &cached, &mut unknowns);
    assert_eq!(from_cache, up[..OTHER_HOSTS.len()]);
    assert!(
        system.nginx.counters()["fallbacks"] >= fallbacks + 1 + 2 * OTHER_HOSTS.len() as u64,
        "the cached link did not go through the fallback"
    );
}

/// Every shipped location that proxies to the fallback's route sends the host's workspace as
/// `X-Shortlink-Workspace: ws=$shortlink_workspace` (a value nginx never leaves out), and no
/// other proxy sends that header (the API server must not let a caller's `Host` pick one).
#[test]
fn every_shipped_fallback_location_names_the_hosts_workspace() {
    let root = paths::workspace_dir();
    let sent = format!(
        "proxy_set_header X-Shortlink-Workspace \"{WORKSPACE_PREFIX}$shortlink_workspace\";"
    );
    let mut fallbacks = 0;
    for file in paths::SHIPPED_NGINX_FILES {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        // Statements only, one a line: comments say what the header is for.
        let lines: Vec<&str> = (text.lines())
            .map(|line| line.split('#').next().unwrap().trim())
            .filter(|line| !line.is_empty())
            .collect();
        for (at, line) in lines.iter().enumerate() {
            let fallback = line.starts_with("proxy_pass") && line.contains("/api/v1/resolve/");
            if fallback {
                fallbacks += 1;
                let block = block_around(&lines, at);
                assert!(
                    block.contains(&sent.as_str()),
                    "{file}: {block:?} sends no {sent}"
                );
            }
            if line.contains("X-Shortlink-Workspace") {
                let block = block_around(&lines, at);
                assert!(
                    block.iter().any(|l| l.contains("/api/v1/resolve/")),
                    "{file}: {line} outside the fallback's location"
                );
            }
        }
    }
    assert_eq!(
        fallbacks, 3,
        "the fallback locations: redirect, imported domain, Debian's"
    );
}

/// The lines of the innermost block around line `at`, from its opening line to its `}`.
fn block_around<'a>(lines: &[&'a str], at: usize) -> Vec<&'a str> {
    let opens = |line: &str| line.ends_with('{');
    let closes = |line: &str| line == "}";
    let mut start = at;
    let mut depth = 0;
    while start > 0 {
        start -= 1;
        if closes(lines[start]) {
            depth += 1;
        } else if opens(lines[start]) {
            if depth == 0 {
                break;
            }
            depth -= 1;
        }
    }
    let mut end = at;
    let mut depth = 0;
    while end + 1 < lines.len() {
        end += 1;
        if opens(lines[end]) {
            depth += 1;
        } else if closes(lines[end]) {
            if depth == 0 {
                break;
            }
            depth -= 1;
        }
    }
    lines[start..=end].to_vec()
}
