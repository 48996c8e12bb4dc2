//! Click-time rules and the lifecycle, answered by the real module in nginx from a version 2
//! record: each condition alone and combined, rule order, splits (proportions and stickiness),
//! `valid_since` and the expired URL, and a record field the module does not know going to the
//! fallback. The records are written as the sidecar writes them (`wire::record::Record::encode`).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use shortlink_e2e::{http_client, status_and_location, NginxOptions, System, PHONE};
use shortlink_wire::keys::link_key;
use shortlink_wire::record::{Extras, Record};
use shortlink_wire::rules::{Action, Cidr, Condition, Device, Rule, Target, Variant};

const HOME: &str = "https://shop.example/home";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36";
const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
/// Countries in the end-to-end geo database (`shortlink_e2e::paths::test_geo_db`).
const AUSTRALIA: &str = "203.0.113.9";
const GERMANY: &str = "198.51.100.200";

/// A path suffix (the query string) and request headers.
type Click<'a> = (&'a str, &'a [(&'a str, &'a str)]);

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn target(url: &str) -> Target {
    Target {
        url: url.as_bytes().into(),
        status: 302,
        forward_query: false,
    }
}

fn rule(conditions: Vec<Condition>, url: &str) -> Rule {
    Rule {
        conditions: conditions.into(),
        action: Action::Target(target(url)),
    }
}

fn rules(rules: Vec<Rule>) -> Extras {
    Extras {
        rules: rules.into(),
        ..Extras::default()
    }
}

/// A link created through the API, then given `extras` in Redis as the sidecar would write them.
fn link_with(system: &System, extras: &Extras) -> String {
    let code = system.create(json!({"url": HOME}));
    system.put_live_record(&code, HOME, extras);
    code
}

/// Where `code` sends a click with these headers.
fn location(system: &System, code: &str, path_suffix: &str, headers: &[(&str, &str)]) -> String {
    let response = system
        .nginx
        .get_with("s1.test", &format!("/{code}{path_suffix}"), headers);
    let (status, location) = status_and_location(&response);
    assert_eq!(status, 302, "{code}{path_suffix} {headers:?}");
    location
}

#[test]
fn each_condition_alone_and_combined() {
    let system = System::start();
    let at = now();
    let cases: Vec<(Condition, Vec<Click>)> = vec![
        (
            Condition::Device(Device::Ios.bit() | Device::Android.bit()),
            vec![
                ("", &[("User-Agent", IPHONE)]),
                ("", &[("User-Agent", ANDROID)]),
            ],
        ),
        (
            Condition::Language(vec![b"pt"[..].into()].into()),
            vec![("", &[("Accept-Language", "fr;q=0.4, pt-BR, en;q=0.8")])],
        ),
        (
            Condition::Country(vec![*b"AU"].into()),
            vec![("", &[("X-Forwarded-For", AUSTRALIA)])],
        ),
        (
            Condition::Query {
                name: b"src"[..].into(),
                value: Some(b"sms"[..].into()),
            },
            vec![("?src=sms", &[]), ("?a=1&src=sms", &[])],
        ),
        (
            Condition::Ip(vec![Cidr::parse("192.0.2.0/24").unwrap()].into()),
            vec![("", &[("X-Forwarded-For", "192.0.2.77")])],
        ),
        (Condition::After(at - 3600), vec![("", &[])]),
        (Condition::Before(at + 3600), vec![("", &[])]),
    ];
    let misses: [Click; 6] = [
        ("", &[("User-Agent", DESKTOP)]),
        ("", &[("Accept-Language", "en-GB, pt;q=0.5")]),
        ("", &[("X-Forwarded-For", GERMANY)]),
        ("?src=email", &[]),
        ("", &[("X-Forwarded-For", "192.0.3.1")]),
        ("?src", &[]),
    ];
    for (condition, hits) in cases {
        let code = link_with(
            &system,
            &rules(vec![rule(vec![condition.clone()], "https://rule.example/")]),
        );
        for (suffix, headers) in hits {
            assert_eq!(
                location(&system, &code, suffix, headers),
                "https://rule.example/",
                "{condition:?} should hold for {suffix} {headers:?}"
            );
        }
        let holds_for_all = matches!(condition, Condition::After(_) | Condition::Before(_));
        for (suffix, headers) in misses {
            let expected = if holds_for_all {
                "https://rule.example/"
            } else {
                HOME
            };
            assert_eq!(
                location(&system, &code, suffix, headers),
                expected,
                "{condition:?} for {suffix} {headers:?}"
            );
        }
    }
    // A closed time window holds for nobody.
    let code = link_with(
        &system,
        &rules(vec![rule(
            vec![Condition::Before(at - 1)],
            "https://rule.example/",
        )]),
    );
    assert_eq!(location(&system, &code, "", &[]), HOME);

    // Combined: an iPhone in Australia, and only that.
    let code = link_with(
        &system,
        &rules(vec![rule(
            vec![
                Condition::Device(Device::Ios.bit()),
                Condition::Country(vec![*b"AU"].into()),
            ],
            "https://au.example/ios",
        )]),
    );
    let both = [("User-Agent", IPHONE), ("X-Forwarded-For", AUSTRALIA)];
    assert_eq!(
        location(&system, &code, "", &both),
        "https://au.example/ios"
    );
    let elsewhere = [("User-Agent", IPHONE), ("X-Forwarded-For", GERMANY)];
    assert_eq!(location(&system, &code, "", &elsewhere), HOME);
    let android = [("User-Agent", ANDROID), ("X-Forwarded-For", AUSTRALIA)];
    assert_eq!(location(&system, &code, "", &android), HOME);
    assert!(system.nginx.counters()["rule_redirects"] > 0);
}

#[test]
fn the_first_rule_that_holds_answers() {
    let system = System::start();
    let code = link_with(
        &system,
        &rules(vec![
            rule(
                vec![Condition::Device(Device::Ios.bit())],
                "https://apps.apple.com/app/id1",
            ),
            rule(
                vec![Condition::Country(vec![*b"AU"].into())],
                "https://au.example/",
            ),
            rule(vec![], "https://catch-all.example/"),
        ]),
    );
    let iphone_in_au = [("User-Agent", IPHONE), ("X-Forwarded-For", AUSTRALIA)];
    assert_eq!(
        location(&system, &code, "", &iphone_in_au),
        "https://apps.apple.com/app/id1"
    );
    let android_in_au = [("User-Agent", ANDROID), ("X-Forwarded-For", AUSTRALIA)];
    assert_eq!(
        location(&system, &code, "", &android_in_au),
        "https://au.example/"
    );
    // A rule without conditions always holds: the link's own target is never reached.
    assert_eq!(
        location(&system, &code, "", &[("User-Agent", DESKTOP)]),
        "https://catch-all.example/"
    );
}

fn split(sticky: bool) -> Extras {
    rules(vec![Rule {
        conditions: Box::new([]),
        action: Action::Split {
            variants: vec![
                Variant {
                    weight: 50,
                    target: target("https://a.example/"),
                },
                Variant {
                    weight: 50,
                    target: target("https://b.example/"),
                },
            ]
            .into(),
            sticky: sticky.into(),
        },
    }])
}

#[test]
fn a_split_keeps_its_proportions_and_a_sticky_one_its_visitors() {
    let system = System::start();
    let client = http_client();
    let url = |code: &str| format!("http://127.0.0.1:{}/{code}", system.nginx.redirect_port);
    let click = |code: &str, ip: &str| {
        let response = client
            .get(url(code))
            .header("Host", "s1.test")
            .header("User-Agent", ANDROID)
            .header("X-Forwarded-For", ip)
            .send()
            .expect("click");
        status_and_location(&response).1
    };

    let random = link_with(&system, &split(false));
    let mut counts: HashMap<String, u32> = HashMap::new();
    for _ in 0..10_000 {
        *counts.entry(click(&random, "192.0.2.1")).or_default() += 1;
    }
    assert_eq!(counts.len(), 2, "{counts:?}");
    for (location, n) in &counts {
        // 50% ± 2 points of 10,000 (the binomial's standard deviation is 50).
        assert!((4_800..=5_200).contains(n), "{location}: {n} of 10,000");
    }

    let sticky = link_with(&system, &split(true));
    let mut seen: HashMap<String, u32> = HashMap::new();
    for visitor in 0..200 {
        let ip = format!("192.0.2.{visitor}");
        let first = click(&sticky, &ip);
        for _ in 0..5 {
            assert_eq!(click(&sticky, &ip), first, "visitor {ip} changed variant");
        }
        *seen.entry(first).or_default() += 1;
    }
    // Different phones still spread over both variants.
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.values().all(|&n| n >= 60), "{seen:?}");
}

#[test]
fn valid_since_answers_not_yet_then_opens() {
    let system = System::start();
    let opens = now() + 3600;
    let code = link_with(
        &system,
        &Extras {
            valid_since: opens,
            ..Extras::default()
        },
    );
    let response = system.nginx.get("s1.test", &format!("/{code}"));
    assert_eq!(response.status().as_u16(), 403);
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let page = response.text().unwrap();
    assert!(page.contains("not open yet"), "{page}");
    assert!(page.contains(&opens.to_string()), "{page}");
    let head = system
        .nginx
        .request(reqwest::Method::HEAD, "s1.test", &format!("/{code}"));
    assert_eq!(head.status().as_u16(), 403);
    assert_eq!(system.nginx.counters()["not_yet"], 2);

    // With a "not yet" URL the early click goes there instead.
    let code = link_with(
        &system,
        &Extras {
            valid_since: opens,
            not_yet_url: Some(b"https://shop.example/soon"[..].into()),
            ..Extras::default()
        },
    );
    assert_eq!(
        location(&system, &code, "", &[]),
        "https://shop.example/soon"
    );

    // Once open, the link answers as usual.
    let code = link_with(
        &system,
        &Extras {
            valid_since: now() - 1,
            ..Extras::default()
        },
    );
    assert_eq!(location(&system, &code, "", &[]), HOME);
}

/// Wall-clock seconds, with their fraction.
fn now_precise() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn valid_since_opens_at_its_second_under_concurrency() {
    let system = System::start_with(NginxOptions {
        workers: 2,
        ..NginxOptions::default()
    });
    let opens = now() + 2;
    let code = link_with(
        &system,
        &Extras {
            valid_since: opens,
            ..Extras::default()
        },
    );
    let url = format!("http://127.0.0.1:{}/{code}", system.nginx.redirect_port);
    // Clicks from 32 clients until each has been redirected 20 times, across the opening second.
    let (clients, redirects_each, most_each) = (32, 20, 5_000);
    let deadline = now_precise() + 30.0;
    // (sent at, answered at, status, location) of every click.
    let clicks: Vec<(f64, f64, u16, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(|| {
                    let client = http_client();
                    let mut seen = Vec::new();
                    let mut redirected = 0;
                    while redirected < redirects_each
                        && seen.len() < most_each
                        && now_precise() < deadline
                    {
                        let sent = now_precise();
                        let response = client
                            .get(&url)
                            .header("Host", "s1.test")
                            .send()
                            .expect("click");
                        let answered = now_precise();
                        let (status, location) = status_and_location(&response);
                        redirected += usize::from(status == 302);
                        seen.push((sent, answered, status, location));
                    }
                    assert_eq!(redirected, redirects_each, "this client was never let in");
                    seen
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    let opens_at = opens as f64;
    let mut not_yet: u64 = 0;
    for (sent, answered, status, location) in &clicks {
        match status {
            // nginx's clock never runs ahead of the wall clock: no redirect before the second.
            302 => {
                assert_eq!(location, HOME);
                assert!(
                    *answered >= opens_at,
                    "redirected at {answered}, opens {opens}"
                );
            }
            // And it lags by at most a turn of its event loop: no "not yet" a second after.
            403 => {
                not_yet += 1;
                assert!(*sent < opens_at + 1.0, "not yet at {sent}, opened {opens}");
            }
            other => panic!("a click across the opening got {other}"),
        }
    }
    assert!(not_yet > 0, "no click came before the opening");
    assert_eq!(system.nginx.counters()["not_yet"], not_yet);
}

#[test]
fn an_expired_link_goes_to_its_expired_url_or_answers_410() {
    let system = System::start();
    let code = system.create(json!({"url": HOME}));
    let expired = |extras: &Extras| {
        Record::Live {
            status: 302,
            expires_at: now() as i64 - 10,
            flags: 0,
            target: HOME,
            extras: Some(extras),
        }
        .encode()
    };
    let with_url = Extras {
        expired_url: Some(b"https://shop.example/over"[..].into()),
        ..rules(vec![rule(vec![], "https://rule.example/")])
    };
    system
        .redis
        .set_bytes(&link_key(&code), &expired(&with_url));
    assert_eq!(
        location(&system, &code, "", &[]),
        "https://shop.example/over"
    );

    // Rules alone do not outlive the link.
    let without = rules(vec![rule(vec![], "https://rule.example/")]);
    system.redis.set_bytes(&link_key(&code), &expired(&without));
    let response = system.nginx.get("s1.test", &format!("/{code}"));
    assert_eq!(response.status().as_u16(), 410);
}

#[test]
fn a_field_the_module_does_not_know_goes_to_the_fallback() {
    let system = System::start();
    let code = system.create(json!({"url": "https://example.com/v1", "redirect": 301}));
    // A version 2 record with a field a later sidecar might add (tag `z`), pointing elsewhere.
    let mut value = b"2|L|302|0|0|https://example.com/elsewhere\n".to_vec();
    value.extend_from_slice(b"z\x00\x02on");
    system.redis.set_bytes(&link_key(&code), &value);
    system.assert_answered_by_fallback(&code, (301, "https://example.com/v1"));
}

#[test]
fn max_visits_redirects_exactly_the_cap_under_concurrency() {
    let system = System::start_with(NginxOptions {
        workers: 2,
        ..NginxOptions::default()
    });
    let cap = 250;
    // Through the API, so the database holds what Redis does: a click the module hands to the
    // fallback on a loaded machine (its lookup past `shortlink_timeout`) gets the same link, rule
    // and cap there, not the plain link a record written only into Redis would leave it.
    let code = system.create(json!({
        "url": HOME,
        "max_visits": cap,
        "expired_url": "https://shop.example/sold-out",
        "rules": [{"if": {"device": ["android"]}, "then": {"url": "https://play.example/"}}],
    }));
    let url = format!("http://127.0.0.1:{}/{code}", system.nginx.redirect_port);
    let (clients, per_client) = (64, 10);
    let answers: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(|| {
                    let client = http_client();
                    (0..per_client)
                        .map(|_| {
                            let response = client
                                .get(&url)
                                .header("Host", "s1.test")
                                .header("User-Agent", ANDROID)
                                .header("Accept-Language", "en")
                                .send()
                                .expect("click");
                            let (status, location) = status_and_location(&response);
                            assert_eq!(status, 302);
                            location
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    let redirected = answers
        .iter()
        .filter(|location| *location == "https://play.example/")
        .count();
    let sold_out = answers
        .iter()
        .filter(|location| *location == "https://shop.example/sold-out")
        .count();
    assert_eq!(
        redirected as u64, cap,
        "exactly the cap, whichever worker answered"
    );
    assert_eq!(redirected + sold_out, clients * per_client);
    let counted = system
        .redis
        .cli_raw(&["GET", &shortlink_wire::keys::visit_count_key(&code)]);
    assert_eq!(counted, (clients * per_client).to_string());
}

#[test]
fn max_visits_counts_only_clicks_that_would_redirect() {
    let system = System::start();
    let code = link_with(
        &system,
        &Extras {
            max_visits: 1,
            valid_since: now() + 3600,
            ..Extras::default()
        },
    );
    let counter = shortlink_wire::keys::visit_count_key(&code);
    // Before it opens: the page, and nothing counted.
    for _ in 0..3 {
        let response = system.nginx.get("s1.test", &format!("/{code}"));
        assert_eq!(response.status().as_u16(), 403);
    }
    assert_eq!(system.redis.cli_raw(&["EXISTS", &counter]), "0");
    // Open: one redirect, then 410 (no expired URL).
    let open = Extras {
        max_visits: 1,
        ..Extras::default()
    };
    system.put_live_record(&code, HOME, &open);
    assert_eq!(location(&system, &code, "", PHONE), HOME);
    for _ in 0..2 {
        let response = system.nginx.click("s1.test", &format!("/{code}"));
        assert_eq!(response.status().as_u16(), 410);
    }
    assert_eq!(system.redis.cli_raw(&["GET", &counter]), "3");
}

#[test]
fn the_geo_database_is_checked_by_nginx_t_and_swapped_on_reload() {
    let system = System::start();
    let code = link_with(
        &system,
        &rules(vec![rule(
            vec![Condition::Country(vec![*b"DE"].into())],
            "https://de.example/",
        )]),
    );
    let from_germany = [("X-Forwarded-For", GERMANY)];
    assert_eq!(
        location(&system, &code, "", &from_germany),
        "https://de.example/"
    );

    let conf = system.nginx.prefix.join("nginx.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    let current = shortlink_e2e::paths::test_geo_db().display().to_string();
    assert!(text.contains(&current), "nginx.conf maps {current}");
    let with_geo = |path: &str| std::fs::write(&conf, text.replace(&current, path)).unwrap();

    // A file that is not a geo database fails the configuration test, naming it.
    let bogus = system.nginx.prefix.join("not-a-database.mmdb");
    std::fs::write(&bogus, b"not a database").unwrap();
    with_geo(bogus.to_str().unwrap());
    let (ok, output) = system.nginx.test_config();
    assert!(
        !ok && output.contains("cannot open geo database"),
        "{output}"
    );
    with_geo("/nonexistent/geo.mmdb");
    assert!(!system.nginx.test_config().0);

    // Another database, mapped by the reload: this one does not place the German address.
    let other =
        shortlink_e2e::paths::workspace_dir().join("visit-enrich/testdata/test-dbip-city.mmdb");
    with_geo(other.to_str().unwrap());
    system.nginx.reload();
    let swapped = testkit::wait_until(std::time::Duration::from_secs(10), || {
        location(&system, &code, "", &from_germany) == HOME
    });
    assert!(swapped, "the reload did not swap the geo database");
    // Australia is in both.
    let australia = link_with(
        &system,
        &rules(vec![rule(
            vec![Condition::Country(vec![*b"AU"].into())],
            "https://au.example/",
        )]),
    );
    assert_eq!(
        location(&system, &australia, "", &[("X-Forwarded-For", AUSTRALIA)]),
        "https://au.example/"
    );
}
