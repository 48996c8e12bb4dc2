//! Sticky splits by recipient and by cookie (issue 54), through nginx: a per-recipient link
//! (`ref`) shows its person one variant from any address and browser; a link without one keeps a
//! visitor on one variant by the first-party cookie the module sets, from any address, and the
//! fallback (Redis down) reads that cookie as the module does.

use serde_json::json;
use shortlink_e2e::{status_and_location, System};
use std::collections::{HashMap, HashSet};

const AGENTS: [&str; 5] = [
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:126.0) Gecko/20100101 Firefox/126.0",
];

fn split(sticky: serde_json::Value) -> serde_json::Value {
    json!([{"if": {}, "split": {"sticky": sticky, "variants": [
        {"weight": 1, "url": "https://shop.example/a"},
        {"weight": 1, "url": "https://shop.example/b"}]}}])
}

/// Click `n`'s address and agent: a different client each time.
fn client(n: usize) -> (String, &'static str) {
    (
        format!("198.51.{}.{}", n / 250 % 250, n % 250 + 1),
        AGENTS[n % AGENTS.len()],
    )
}

/// A click on `code` by client `n`, with `cookie` if given: the location and any `Set-Cookie`.
fn click(system: &System, code: &str, n: usize, cookie: Option<&str>) -> (String, Option<String>) {
    let (ip, agent) = client(n);
    let mut headers = vec![("X-Forwarded-For", ip.as_str()), ("User-Agent", agent)];
    if let Some(cookie) = cookie {
        headers.push(("Cookie", cookie));
    }
    let response = system
        .nginx
        .get_with("s1.test", &format!("/{code}"), &headers);
    let set_cookie =
        (response.headers().get("set-cookie")).map(|value| value.to_str().unwrap().to_owned());
    let (status, location) = status_and_location(&response);
    assert_eq!(status, 302, "{code}");
    (location, set_cookie)
}

#[test]
fn a_recipient_sees_one_variant_from_any_address_and_browser() {
    let system = System::start();
    let mut by_link = HashMap::new();
    for (i, sticky) in [json!(true), json!("ref")]
        .into_iter()
        .cycle()
        .take(12)
        .enumerate()
    {
        let code = system.create(json!({
            "url": "https://shop.example/home", "ref": format!("r-{i}"), "rules": split(sticky),
        }));
        let variants: HashSet<String> = (0..50)
            .map(|n| {
                let (location, set_cookie) = click(&system, &code, n, None);
                // The recipient decides: no cookie is needed, none is set.
                assert_eq!(set_cookie, None);
                location
            })
            .collect();
        assert_eq!(variants.len(), 1, "recipient r-{i} saw {variants:?}");
        by_link.insert(code, variants.into_iter().next().unwrap());
    }
    // Recipients are spread over both variants (one link each would not show it).
    let seen: HashSet<_> = by_link.values().collect();
    assert_eq!(seen.len(), 2, "{by_link:?}");
}

#[test]
fn a_visitor_keeps_a_variant_by_cookie_from_any_address_and_through_the_fallback() {
    let mut system = System::start();
    for sticky in [json!(true), json!("cookie")] {
        let code =
            system.create(json!({"url": "https://shop.example/home", "rules": split(sticky)}));
        // Without a cookie the variant follows address and agent: both show up.
        let cookieless: HashSet<String> =
            (0..40).map(|n| click(&system, &code, n, None).0).collect();
        assert_eq!(cookieless.len(), 2, "{cookieless:?}");
        for first in [0, 1, 2, 3] {
            let (variant, set_cookie) = click(&system, &code, first, None);
            let set_cookie = set_cookie.expect("a first click gets the visitor cookie");
            let (pair, attributes) = set_cookie.split_once("; ").unwrap();
            assert_eq!(
                attributes,
                "Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax"
            );
            assert!(
                pair.starts_with("sl_v=") && pair.len() == 21,
                "{set_cookie}"
            );
            let cookie = format!("theme=dark; {pair}");
            for n in 100..130 {
                let (location, again) = click(&system, &code, n, Some(&cookie));
                assert_eq!(location, variant, "client {n} with {pair}");
                assert_eq!(again, None, "a click with the cookie is not given another");
            }
        }
    }
    // The fallback reads the cookie too.
    let code =
        system.create(json!({"url": "https://shop.example/home", "rules": split(json!("cookie"))}));
    let kept: Vec<(String, String)> = (0..6)
        .map(|n| {
            let (variant, set_cookie) = click(&system, &code, n, None);
            let pair = set_cookie.unwrap().split("; ").next().unwrap().to_owned();
            (variant, pair)
        })
        .collect();
    system.redis.stop();
    for (n, (variant, pair)) in kept.iter().enumerate() {
        assert_eq!(&click(&system, &code, 200 + n, Some(pair)).0, variant);
    }
}
