//! Password-protected links through the real module: the page, a wrong and a right password,
//! the limit on attempts per link and client, and what a Redis failure does to a form. Links are
//! made through the sidecar's API, which keeps only the password's salted digest.

use serde_json::json;
use shortlink_e2e::raw::raw_http;
use shortlink_e2e::{http_client, status_and_location, System};
use shortlink_wire::keys::{password_attempts_key, visit_count_key};
use shortlink_wire::record::password::MAX_ATTEMPTS;
use std::time::Duration;

const TARGET: &str = "https://private.example/report";

fn protected(system: &System, password: &str, max_visits: u64) -> String {
    let mut body = json!({"url": TARGET, "redirect": 307, "password": password});
    if max_visits > 0 {
        body["max_visits"] = json!(max_visits);
    }
    system.create(body)
}

fn submit(system: &System, code: &str, body: &str, client: &str) -> reqwest::blocking::Response {
    http_client()
        .post(format!(
            "http://127.0.0.1:{}/{code}",
            system.nginx.redirect_port
        ))
        .header("Host", "s1.test")
        .header("X-Forwarded-For", client)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.to_owned())
        .send()
        .expect("POST the form")
}

#[test]
fn the_page_then_a_wrong_and_a_right_password() {
    let system = System::start();
    let code = protected(&system, "sésame 42", 0);

    let page = system.nginx.get("s1.test", &format!("/{code}"));
    assert_eq!(page.status().as_u16(), 401);
    assert_eq!(page.headers()["cache-control"], "no-store");
    let html = page.text().unwrap();
    assert!(html.contains("<form method=\"post\">"), "{html}");
    assert!(!html.contains("not right"));

    let wrong = submit(&system, &code, "password=sesame+42", "192.0.2.10");
    assert_eq!(wrong.status().as_u16(), 401);
    assert!(wrong.text().unwrap().contains("not right"));

    // The browser's encoding of "sésame 42"; the answer a GET follows, whatever the link's status.
    let right = submit(&system, &code, "password=s%C3%A9same+42", "192.0.2.10");
    assert_eq!(
        status_and_location(&right),
        (303, TARGET.to_owned()),
        "a right password opens the link"
    );
    let counters = system.nginx.counters();
    assert_eq!(counters["password_prompts"], 1);
    assert_eq!(counters["password_rejects"], 1);
}

#[test]
fn attempts_are_limited_per_link_and_client() {
    let system = System::start();
    let code = protected(&system, "right", 0);
    for _ in 0..MAX_ATTEMPTS {
        let response = submit(&system, &code, "password=guess", "192.0.2.20");
        assert_eq!(response.status().as_u16(), 401);
    }
    // One more, even the right one, waits for the window.
    let limited = submit(&system, &code, "password=right", "192.0.2.20");
    assert_eq!(limited.status().as_u16(), 429);
    assert!(limited.text().unwrap().contains("Too many attempts"));
    // Another client is not held back by the first one's guesses.
    let other = submit(&system, &code, "password=right", "192.0.2.21");
    assert_eq!(status_and_location(&other), (303, TARGET.to_owned()));
    // The counter expires with its window.
    let ttl: i64 = system
        .redis
        .cli_raw(&[
            "TTL",
            &String::from_utf8(password_attempts_key(code.as_bytes(), b"192.0.2.20")).unwrap(),
        ])
        .parse()
        .unwrap();
    assert!((1..=600).contains(&ttl), "ttl {ttl}");
}

#[test]
fn pages_do_not_count_against_max_visits_and_opens_do() {
    let system = System::start();
    let code = protected(&system, "pw", 1);
    for _ in 0..3 {
        let page = system.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(page.status().as_u16(), 401);
    }
    assert_eq!(
        system.redis.cli_raw(&["EXISTS", &visit_count_key(&code)]),
        "0"
    );
    let opened = submit(&system, &code, "password=pw", "192.0.2.30");
    assert_eq!(status_and_location(&opened), (303, TARGET.to_owned()));
    let over = submit(&system, &code, "password=pw", "192.0.2.30");
    assert_eq!(over.status().as_u16(), 410);
}

#[test]
fn a_form_meeting_a_redis_failure_gets_503_not_the_fallback() {
    let mut system = System::start();
    let code = protected(&system, "pw", 0);
    system.redis.stop();
    let response = submit(&system, &code, "password=pw", "192.0.2.40");
    assert_eq!(response.status().as_u16(), 503);
}

#[test]
fn a_post_to_a_link_without_a_password_is_answered_like_a_get() {
    let system = System::start();
    let code = system.create(json!({"url": TARGET}));
    let response = submit(&system, &code, "anything=1", "192.0.2.50");
    assert_eq!(status_and_location(&response), (303, TARGET.to_owned()));
    let missing = submit(&system, "zzzzzzz", "password=x", "192.0.2.50");
    assert_eq!(missing.status().as_u16(), 404);
}

/// An empty form body (`Content-Length: 0`, a chunked body of no chunks) ends nginx's body chain
/// in a buffer without memory (`pos` null). Read as a slice it is undefined behaviour, which a
/// debug build of the module (what these tests load from target/debug) turns into an abort of the
/// worker. Anyone can send it: the body is read before the code is looked at.
#[test]
fn an_empty_form_body_leaves_the_worker_alive() {
    let system = System::start();
    let plain = system.create(json!({"url": TARGET}));
    let locked = protected(&system, "open sesame", 0);
    let workers = system.nginx.workers();
    assert!(!workers.is_empty(), "no workers");
    let bodies = [
        ("Content-Length: 0", "Content-Length: 0\r\n\r\n"),
        ("no chunks", "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ];
    for (what, body) in bodies {
        // A plain link answers the POST as a GET; a protected one takes it as a wrong attempt.
        for (code, status) in [(&plain, 303), (&locked, 401)] {
            let request = format!(
                "POST /{code} HTTP/1.1\r\nHost: s1.test\r\nConnection: close\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\n{body}"
            );
            let response = raw_http(
                system.nginx.redirect_port,
                request.as_bytes(),
                Duration::from_secs(5),
            );
            assert_eq!(response.status, status, "{what} to a {status} link");
        }
    }
    assert_eq!(system.nginx.workers(), workers, "a worker was replaced");
    assert_eq!(
        system.nginx.error_log_lines("exited on signal"),
        Vec::<String>::new()
    );
}

/// Calls of `command` Redis has executed (`INFO commandstats`).
fn redis_calls(system: &System, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:calls=");
    system
        .redis
        .cli_raw(&["INFO", "commandstats"])
        .lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

/// GETs `code` until one is a cache hit: the worker's cache holds it.
fn cached(system: &System, code: &str) {
    let held = testkit::wait_until(Duration::from_secs(10), || {
        let hits = system.nginx.counters()["cache_hits"];
        system.nginx.get("s1.test", &format!("/{code}"));
        system.nginx.counters()["cache_hits"] > hits
    });
    assert!(held, "{code} never came from the cache");
}

/// A POST is answered from the worker's cache like a GET: only a link that asks its password
/// costs Redis anything, and then only the attempt (no lookup). Otherwise anyone could force a
/// Redis lookup per request for any code.
#[test]
fn a_post_is_answered_from_the_cache() {
    let system = System::start();
    let plain = system.create(json!({"url": TARGET}));
    let locked = protected(&system, "open sesame", 0);
    cached(&system, &plain);
    cached(&system, &locked);

    let (lookups, attempts) = (redis_calls(&system, "mget"), redis_calls(&system, "eval"));
    let hits = system.nginx.counters()["cache_hits"];
    for _ in 0..5 {
        let response = submit(&system, &plain, "password=x", "192.0.2.70");
        assert_eq!(status_and_location(&response), (303, TARGET.to_owned()));
    }
    assert_eq!(redis_calls(&system, "mget"), lookups, "a POST looked up");
    assert_eq!(redis_calls(&system, "eval"), attempts, "a POST counted");
    assert_eq!(system.nginx.counters()["cache_hits"], hits + 5);

    let wrong = submit(&system, &locked, "password=wrong", "192.0.2.70");
    assert_eq!(wrong.status().as_u16(), 401);
    let right = submit(&system, &locked, "password=open+sesame", "192.0.2.70");
    assert_eq!(status_and_location(&right), (303, TARGET.to_owned()));
    assert_eq!(redis_calls(&system, "mget"), lookups, "an unlock looked up");
    assert_eq!(
        redis_calls(&system, "eval"),
        attempts + 2,
        "one EVAL per attempt"
    );
}
