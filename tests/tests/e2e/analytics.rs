//! Visits through nginx reach the stats API: the module queues events, the sidecar's consumer
//! enriches and counts them. The redirect path itself writes nothing to SQL.

use serde_json::{json, Value};
use shortlink_e2e::agents::{CHROME, CURL, IPHONE, SLACKBOT, SMS_SCANNER, WECHAT};
use shortlink_e2e::{NginxOptions, System};
use std::time::Duration;
use testkit::wait_until;

fn visit(system: &System, host: &str, path: &str, client_ip: &str, user_agent: &str) {
    let url = format!("http://127.0.0.1:{}{path}", system.nginx.redirect_port);
    let response = shortlink_e2e::http_client()
        .get(url)
        .header("Host", host)
        .header("X-Forwarded-For", client_ip)
        .header("User-Agent", user_agent)
        // Every browser sends one; a browser's agent without is a scanner's (docs/BOTS.md).
        .header("Accept-Language", "en")
        .header("Referer", "https://www.facebook.com/story")
        .send()
        .expect("reach nginx");
    assert_eq!(response.status(), 302, "{user_agent}");
}

fn breakdown(stats: &Value, name: &str) -> Vec<(Option<String>, i64)> {
    stats["breakdowns"][name]
        .as_array()
        .unwrap_or_else(|| panic!("no {name} breakdown: {stats}"))
        .iter()
        .map(|entry| {
            let value = entry["value"].as_str().map(str::to_owned);
            (value, entry["clicks"].as_i64().unwrap())
        })
        .collect()
}

fn s(text: &str) -> Option<String> {
    Some(text.to_owned())
}

#[test]
fn visits_through_nginx_show_up_in_stats_with_bots_and_previews_apart() {
    let system = System::start();
    let code = system.create(json!({"url": "https://shop.example/spring"}));
    let path = format!("/{code}");
    visit(&system, "s1.test", &path, "203.0.113.10", CHROME);
    visit(&system, "s1.test", &path, "203.0.113.10", CHROME);
    visit(&system, "s2.test", &path, "198.51.100.20", IPHONE);
    visit(&system, "s1.test", &path, "192.0.2.30", WECHAT);
    visit(&system, "s1.test", &path, "2001:db8:1::5", SMS_SCANNER);
    visit(&system, "s1.test", &path, "203.0.113.99", SLACKBOT);
    visit(&system, "s1.test", &path, "198.51.100.99", CURL);

    let mut stats = Value::Null;
    let counted = wait_until(Duration::from_secs(20), || {
        stats = system.api().get(&format!("/links/{code}/stats")).1;
        let totals = &stats["totals"];
        totals["clicks"] == 4 && totals["previews"] == 2 && totals["bots"] == 1
    });
    assert!(counted, "visits did not arrive: {stats}");
    assert_eq!(stats["totals"]["unique_visitors"], 3);
    for (name, expected) in [
        (
            "browser",
            vec![(s("Chrome"), 2), (s("Safari"), 1), (s("WeChat"), 1)],
        ),
        ("device", vec![(s("desktop"), 2), (s("mobile"), 2)]),
        ("country", vec![(s("AU"), 2), (s("DE"), 1), (s("US"), 1)]),
        ("short_domain", vec![(s("s1.test"), 3), (s("s2.test"), 1)]),
        ("referrer_host", vec![(s("facebook.com"), 4)]),
    ] {
        assert_eq!(breakdown(&stats, name), expected, "{name}");
    }

    let (_, link) = system.api().get(&format!("/links/{code}"));
    assert_eq!(link["visit_count"], 4, "{link}");
    let counters = system.nginx.counters();
    assert_eq!(counters["events_queued"], 7);
    assert_eq!(counters["events_dropped"], 0);
}

#[test]
fn redirects_keep_working_when_redis_is_gone_and_lost_events_are_counted() {
    // The module's own answers make the events, so the cache must keep answering while Redis is
    // gone: TTL-only mode. With invalidation on (the default) an outage makes the cache untrusted,
    // every redirect goes through the fallback, and those make no events
    // (`tests/tests/e2e/invalidation.rs`, docs/RELIABILITY.md).
    let conf = testkit::temp_dir();
    shortlink_e2e::templates_with(
        conf.path(),
        "shortlink_cache @CACHE@;",
        "shortlink_cache_invalidation off;",
    );
    let mut system = System::start_with(NginxOptions {
        events_buffer: 5,
        conf_dir: Some(conf.path().to_owned()),
        // A TTL no slow run outlives: the default 10 s expired in a loaded full run and sent
        // the last visits to the fallback, which makes none.
        cache: "size=1000 ttl=600s negative_ttl=1s",
        ..NginxOptions::default()
    });
    let code = system.create(json!({"url": "https://shop.example/outage"}));
    let path = format!("/{code}");
    visit(&system, "s1.test", &path, "203.0.113.10", CHROME);
    system.redis.kill();
    // Served from the cache or through the fallback: every redirect still succeeds.
    for _ in 0..20 {
        visit(&system, "s1.test", &path, "203.0.113.11", IPHONE);
    }
    // Visits leave in batches (`shortlink_events_flush`): wait until none is waiting in one, i.e.
    // every visit queued has been sent, spooled or dropped.
    let mut counters = system.nginx.counters();
    let settled = wait_until(Duration::from_secs(5), || {
        counters = system.nginx.counters();
        counters["events_queued"]
            == counters["events_sent"] + counters["events_dropped"] + counters["events_buffered"]
    });
    assert!(settled, "visits still batched: {counters:?}");
    println!(
        "redis down: events queued {}, buffered {}, dropped {}",
        counters["events_queued"], counters["events_buffered"], counters["events_dropped"]
    );
    assert!(counters["events_buffered"] <= 5);
    assert!(
        counters["events_dropped"] >= 15,
        "20 events while Redis was down, 5 buffered: {counters:?}"
    );
}
