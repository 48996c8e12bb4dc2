//! Password-protected links through the real module: the page, a wrong and a right password,
//! the attempt budgets per client (an IPv4 address, an IPv6 /64) and per link, what a Redis
//! failure does to a form, an empty form, and forms answered from the worker's cache. Links are
//! made through the sidecar's API, which keeps only the password's salted digest.

use serde_json::json;
use shortlink_e2e::cluster::ClusterSystem;
use shortlink_e2e::raw::raw_http;
use shortlink_e2e::{http_client, status_and_location, NginxOptions, System};
use shortlink_wire::keys::{password_client_key, password_link_key, visit_count_key};
use shortlink_wire::record::password::{
    CLIENT_BURST, CLIENT_INTERVAL_SECS, LINK_BURST, LINK_INTERVAL_SECS,
};
use std::time::Duration;
use testkit::RedisCluster;

const TARGET: &str = "https://private.example/report";

fn protected(system: &System, password: &str, max_visits: u64) -> String {
    let mut body = json!({"url": TARGET, "redirect": 307, "password": password});
    if max_visits > 0 {
        body["max_visits"] = json!(max_visits);
    }
    system.create(body)
}

fn submit(system: &System, code: &str, body: &str, client: &str) -> reqwest::blocking::Response {
    submit_to(system.nginx.redirect_port, code, body, client)
}

/// The form as a browser posts it, from `client` (nginx trusts `X-Forwarded-For` from loopback).
fn submit_to(port: u16, code: &str, body: &str, client: &str) -> reqwest::blocking::Response {
    http_client()
        .post(format!("http://127.0.0.1:{port}/{code}"))
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

/// The `Retry-After` of a 429, in seconds.
fn retry_after(response: &reqwest::blocking::Response) -> u64 {
    response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Lets `interval` seconds pass for a budget: its stored time (milliseconds, GCRA) moves back.
fn let_pass(system: &System, key: &[u8], interval: u64) {
    let key = String::from_utf8(key.to_vec()).unwrap();
    let tat: u64 = system.redis.cli_raw(&["GET", &key]).parse().unwrap();
    let earlier = (tat - interval * 1000).to_string();
    assert_eq!(
        system.redis.cli_raw(&["SET", &key, &earlier, "KEEPTTL"]),
        "OK"
    );
}

/// A client that used its burst of wrong passwords waits one interval for the next attempt (a
/// neighbour behind the same NAT is not locked out for long), and is told so; others are not
/// held back at all.
#[test]
fn a_client_waits_one_interval_after_its_burst() {
    let system = System::start();
    let code = protected(&system, "right password", 0);
    for _ in 0..CLIENT_BURST {
        let response = submit(&system, &code, "password=guess", "192.0.2.20");
        assert_eq!(response.status().as_u16(), 401);
    }
    // One more, even the right one, waits.
    let limited = submit(&system, &code, "password=right+password", "192.0.2.20");
    assert_eq!(limited.status().as_u16(), 429);
    let wait = retry_after(&limited);
    assert!(
        (1..=CLIENT_INTERVAL_SECS).contains(&wait),
        "Retry-After {wait}"
    );
    assert!(limited.text().unwrap().contains("Too many attempts"));
    // Another client is not held back by the first one's guesses.
    let other = submit(&system, &code, "password=right+password", "192.0.2.21");
    assert_eq!(status_and_location(&other), (303, TARGET.to_owned()));
    // The budget expires once it is full again.
    let key = password_client_key(code.as_bytes(), b"192.0.2.20");
    let ttl: u64 = system
        .redis
        .cli_raw(&["TTL", &String::from_utf8(key.clone()).unwrap()])
        .parse()
        .unwrap();
    assert!(
        (1..=CLIENT_BURST * CLIENT_INTERVAL_SECS).contains(&ttl),
        "ttl {ttl}"
    );
    // One interval later the client may try again.
    let_pass(&system, &key, CLIENT_INTERVAL_SECS);
    let again = submit(&system, &code, "password=right+password", "192.0.2.20");
    assert_eq!(status_and_location(&again), (303, TARGET.to_owned()));
}

/// An IPv6 client rotating through its /64 is one client: 20 addresses, one budget.
#[test]
fn twenty_addresses_of_one_ipv6_slash_64_are_one_client() {
    let system = System::start();
    let code = protected(&system, "right password", 0);
    let statuses: Vec<u16> = (1..=20)
        .map(|host| {
            let address = format!("2001:db8:5:6::{host:x}");
            submit(&system, &code, "password=guess", &address)
                .status()
                .as_u16()
        })
        .collect();
    let mut expected = vec![401; CLIENT_BURST as usize];
    expected.resize(20, 429);
    assert_eq!(statuses, expected);
    // The next /64 is another client.
    let next = submit(&system, &code, "password=right+password", "2001:db8:5:7::1");
    assert_eq!(status_and_location(&next), (303, TARGET.to_owned()));
}

/// However many addresses guess, a link takes `LINK_BURST` wrong passwords and then one per
/// interval: a fresh client is refused too, even with the right password (or a guesser would
/// learn which guess was right).
#[test]
fn a_links_budget_holds_across_many_ipv4_clients() {
    let system = System::start();
    let code = protected(&system, "right password", 0);
    for client in 1..=LINK_BURST {
        let address = format!("198.51.100.{client}");
        let response = submit(&system, &code, "password=guess", &address);
        assert_eq!(response.status().as_u16(), 401, "guess {client}");
    }
    let fresh = submit(&system, &code, "password=right+password", "203.0.113.1");
    assert_eq!(fresh.status().as_u16(), 429);
    let wait = retry_after(&fresh);
    assert!(
        (1..=LINK_INTERVAL_SECS).contains(&wait),
        "Retry-After {wait}"
    );
    // One interval later the link takes one more attempt.
    let_pass(
        &system,
        &password_link_key(code.as_bytes()),
        LINK_INTERVAL_SECS,
    );
    let later = submit(&system, &code, "password=right+password", "203.0.113.1");
    assert_eq!(status_and_location(&later), (303, TARGET.to_owned()));
}

/// One noisy client spends at most its own burst of the link's budget, however long it keeps
/// guessing: refused attempts cost nothing, so the others keep the rest of the link's budget.
#[test]
fn a_noisy_client_does_not_spend_the_others_budget() {
    let system = System::start();
    let code = protected(&system, "right password", 0);
    let refused = (0..3 * CLIENT_BURST)
        .filter(|_| {
            let response = submit(&system, &code, "password=guess", "192.0.2.90");
            response.status() == 429
        })
        .count() as u64;
    assert_eq!(refused, 2 * CLIENT_BURST);
    for client in 1..=LINK_BURST - CLIENT_BURST {
        let address = format!("198.51.100.{client}");
        let response = submit(&system, &code, "password=guess", &address);
        assert_eq!(response.status().as_u16(), 401, "guess {client}");
    }
    let right = submit(&system, &code, "password=right+password", "198.51.100.200");
    assert_eq!(right.status().as_u16(), 429, "the link's budget is spent");
}

/// On a Redis Cluster a link's two budgets share its hash slot: one `EVAL` on the slot's owner.
#[test]
fn the_budgets_hold_on_a_cluster() {
    let cluster = RedisCluster::start();
    let system = ClusterSystem::start(&cluster, NginxOptions::default());
    let (status, body) = system.api().post(
        "/links",
        &json!({"url": TARGET, "redirect": 307, "password": "right password"}),
    );
    assert_eq!(status, 201, "{body}");
    let code = body["code"].as_str().unwrap();
    let port = system.nginx.redirect_port;
    for host in 1..=CLIENT_BURST {
        let address = format!("2001:db8:9:9::{host:x}");
        let response = submit_to(port, code, "password=guess", &address);
        assert_eq!(response.status().as_u16(), 401, "guess {host}");
    }
    let limited = submit_to(port, code, "password=right+password", "2001:db8:9:9::99");
    assert_eq!(limited.status().as_u16(), 429);
    let other = submit_to(port, code, "password=right+password", "192.0.2.1");
    assert_eq!(status_and_location(&other), (303, TARGET.to_owned()));
}

/// Right passwords are checked, not counted: a link whose password is shared with many people
/// (or one person opening it again and again) is never throttled by them.
#[test]
fn right_passwords_do_not_spend_the_budgets() {
    let system = System::start();
    let code = protected(&system, "right password", 0);
    for _ in 0..LINK_BURST + 1 {
        let response = submit(&system, &code, "password=right+password", "192.0.2.80");
        assert_eq!(status_and_location(&response), (303, TARGET.to_owned()));
    }
}

#[test]
fn pages_do_not_count_against_max_visits_and_opens_do() {
    let system = System::start();
    let code = protected(&system, "open sesame", 1);
    for _ in 0..3 {
        let page = system.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(page.status().as_u16(), 401);
    }
    assert_eq!(
        system.redis.cli_raw(&["EXISTS", &visit_count_key(&code)]),
        "0"
    );
    let opened = submit(&system, &code, "password=open+sesame", "192.0.2.30");
    assert_eq!(status_and_location(&opened), (303, TARGET.to_owned()));
    let over = submit(&system, &code, "password=open+sesame", "192.0.2.30");
    assert_eq!(over.status().as_u16(), 410);
}

#[test]
fn a_form_meeting_a_redis_failure_gets_503_not_the_fallback() {
    let mut system = System::start();
    let code = protected(&system, "open sesame", 0);
    system.redis.stop();
    let response = submit(&system, &code, "password=open+sesame", "192.0.2.40");
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
