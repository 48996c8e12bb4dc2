//! Redirects through real nginx, Redis and sidecar.

use reqwest::Method;
use serde_json::json;
use shortlink_e2e::{location, NginxOptions, System};
use std::time::{Duration, Instant};
use testkit::{wait_until, RedisServer};

/// GET commands Redis has executed: proof of whether the module asked it.
fn redis_gets(redis: &RedisServer) -> u64 {
    redis
        .cli_raw(&["INFO", "commandstats"])
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_get:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

#[test]
fn a_new_link_redirects_on_every_pool_domain_with_its_status() {
    let system = System::start();
    let code = system.create(json!({"url": "https://example.com/landing?x=1"}));
    for host in ["s1.test", "s2.test", "S2.TEST:8080"] {
        let response = system.nginx.get(host, &format!("/{code}"));
        assert_eq!(response.status(), 302, "on {host}");
        assert_eq!(location(&response), "https://example.com/landing?x=1");
    }
    let outside = system.nginx.get("elsewhere.test", &format!("/{code}"));
    assert_eq!(outside.status(), 404, "a host outside the pool");

    for status in [301, 307, 308] {
        let code = system.create(json!({"url": "https://example.com/s", "redirect": status}));
        let response = system.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(response.status(), status);
        assert_eq!(location(&response), "https://example.com/s");
    }
}

#[test]
fn head_answers_the_redirect_without_a_body() {
    let system = System::start();
    let code = system.create(json!({"url": "https://example.com/head"}));
    let response = system
        .nginx
        .request(Method::HEAD, "s2.test", &format!("/{code}"));
    assert_eq!(response.status(), 302);
    assert_eq!(location(&response), "https://example.com/head");
    assert_eq!(response.bytes().unwrap().len(), 0);
}

#[test]
fn impossible_codes_are_refused_without_asking_redis() {
    let system = System::start();
    let code = system.create(json!({"url": "https://example.com/"}));
    let mut forged = code.clone().into_bytes();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == b'a' { b'b' } else { b'a' };
    let forged = String::from_utf8(forged).unwrap();
    // A worker trusts its check character once a lookup showed that the projection marker
    // names its code scheme (ngx-module/src/scheme.rs).
    assert_eq!(
        system.nginx.get("s1.test", &format!("/{code}")).status(),
        302
    );

    let gets = redis_gets(&system.redis);
    let before = system.nginx.counters();
    for path in [
        format!("/{forged}"),
        "/ab".to_owned(),
        format!("/{code}/x"),
        "/%41bcdefg".to_owned(),
        "/has.dot".to_owned(),
    ] {
        let response = system.nginx.get("s1.test", &path);
        assert_eq!(response.status(), 404, "{path}");
        assert!(
            response.text().unwrap().contains("Link not found"),
            "branded page for {path}"
        );
    }
    let after = system.nginx.counters();
    assert_eq!(redis_gets(&system.redis), gets, "Redis was asked");
    assert_eq!(after["check_rejects"], before["check_rejects"] + 1);
}

#[test]
fn unknown_revoked_and_expired_links() {
    let system = System::start_with(NginxOptions {
        cache: "off",
        ..NginxOptions::default()
    });
    let unknown = system.nginx.get("s1.test", "/no-such-alias");
    assert_eq!(unknown.status(), 404);

    let code = system.create(json!({"url": "https://example.com/revoked"}));
    assert_eq!(
        system.nginx.get("s1.test", &format!("/{code}")).status(),
        302
    );
    let (status, body) = system.api().delete(&format!("/links/{code}"));
    assert!((200..300).contains(&status), "revoke: {status} {body}");
    let revoked = system.nginx.get("s1.test", &format!("/{code}"));
    assert_eq!(revoked.status(), 410);
    assert!(revoked.text().unwrap().contains("no longer available"));

    let expires_at = chrono::Utc::now() + chrono::Duration::seconds(2);
    let code = system.create(json!({
        "url": "https://example.com/expiring",
        "expires_at": expires_at.to_rfc3339(),
    }));
    assert_eq!(
        system.nginx.get("s1.test", &format!("/{code}")).status(),
        302
    );
    // Waiting for the clock, not for a server: poll until the expiry has passed.
    let expired = wait_until(Duration::from_secs(10), || {
        system.nginx.get("s1.test", &format!("/{code}")).status() == 410
    });
    assert!(expired, "the link did not expire");
}

#[test]
fn query_strings_are_forwarded_when_the_link_asks() {
    let system = System::start();
    let plain = system.create(json!({"url": "https://example.com/p"}));
    let forwarding = system.create(json!({"url": "https://example.com/f", "forward_query": true}));
    let with_query =
        system.create(json!({"url": "https://example.com/q?a=1", "forward_query": true}));

    let response = system.nginx.get("s1.test", &format!("/{plain}?utm=sms"));
    assert_eq!(location(&response), "https://example.com/p");
    let response = system
        .nginx
        .get("s1.test", &format!("/{forwarding}?utm=sms"));
    assert_eq!(location(&response), "https://example.com/f?utm=sms");
    let response = system
        .nginx
        .get("s1.test", &format!("/{with_query}?utm=sms"));
    assert_eq!(location(&response), "https://example.com/q?a=1&utm=sms");
}

#[test]
fn a_hot_code_is_answered_from_the_cache() {
    let system = System::start();
    let code = system.create(json!({"url": "https://example.com/hot"}));
    assert_eq!(
        system.nginx.get("s1.test", &format!("/{code}")).status(),
        302
    );
    let gets = redis_gets(&system.redis);
    let before = system.nginx.counters();
    for _ in 0..5 {
        let response = system.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(location(&response), "https://example.com/hot");
    }
    let after = system.nginx.counters();
    assert_eq!(redis_gets(&system.redis), gets, "a cached code asked Redis");
    assert_eq!(after["cache_hits"], before["cache_hits"] + 5);
}

#[test]
fn redis_down_falls_back_to_the_sidecar_and_recovers() {
    let mut system = System::start_with(NginxOptions {
        cache: "off",
        ..NginxOptions::default()
    });
    let code = system.create(json!({"url": "https://example.com/fallback", "redirect": 301}));
    system.redis.kill();

    let before = system.nginx.counters();
    let response = system.nginx.get("s1.test", &format!("/{code}?q=1"));
    assert_eq!(response.status(), 301);
    assert_eq!(location(&response), "https://example.com/fallback");
    assert_eq!(system.nginx.get("s1.test", "/unknown-alias").status(), 404);
    assert!(system.nginx.counters()["fallbacks"] > before["fallbacks"]);

    // Redis comes back empty; a link created now is served from Redis again without any restart.
    system.redis.start_again();
    let fresh = system.create(json!({"url": "https://example.com/after"}));
    let recovered = wait_until(Duration::from_secs(5), || {
        let fallbacks = system.nginx.counters()["fallbacks"];
        let response = system.nginx.get("s1.test", &format!("/{fresh}"));
        response.status() == 302 && system.nginx.counters()["fallbacks"] == fallbacks
    });
    assert!(recovered, "lookups did not return to Redis");
}

#[test]
fn redis_down_without_fallback_fails_fast_with_503() {
    let mut system = System::start_with(NginxOptions {
        fallback: "off",
        cache: "off",
        ..NginxOptions::default()
    });
    let code = system.create(json!({"url": "https://example.com/x"}));
    system.redis.kill();
    for _ in 0..3 {
        let started = Instant::now();
        let response = system.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(response.status(), 503);
        // A bound on hanging, far above the 300 ms configured: not a speed measurement.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn status_location_counts_requests() {
    let system = System::start();
    let code = system.create(json!({"url": "https://example.com/c"}));
    let before = system.nginx.counters();
    system.nginx.get("s1.test", &format!("/{code}"));
    system.nginx.get("s1.test", "/missing-alias");
    let after = system.nginx.counters();
    assert_eq!(after["requests"], before["requests"] + 2);
    assert_eq!(after["redirects"], before["redirects"] + 1);
    assert_eq!(after["not_found"], before["not_found"] + 1);
}

#[test]
fn the_public_server_does_not_route_the_api() {
    let system = System::start();
    let response = system.nginx.get("s1.test", "/api/v1/links");
    assert_eq!(response.status(), 404);
}

#[test]
fn short_urls_use_the_public_domain_from_nginx() {
    let system = System::start();
    let (status, body) = system
        .api()
        .post("/links", &json!({"url": "https://example.com/pub"}));
    assert_eq!(status, 201);
    let code = body["code"].as_str().unwrap();
    assert_eq!(body["short_url"], format!("http://s1.test/{code}"));
    let (status, body) = system
        .api()
        .post("/links", &json!({"url": "https://s2.test/loop"}));
    assert_eq!(status, 422, "a target on a pool domain: {body}");
}
