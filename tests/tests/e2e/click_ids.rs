//! Click ids through nginx (issue 54): a link with `click_id_param` sends the click's id to its
//! landing page in `Location` (after forwarded query parameters, before the fragment) for its own
//! target, a rule's and a split's; the same id is the visit's id in the feed and on the click
//! webhook; the fallback (Redis down) sends an id made the same way.

use serde_json::{json, Value};
use shortlink_e2e::{status_and_location, NginxOptions, System};
use std::collections::HashSet;
use std::time::Duration;
use testkit::{wait_until, RedisServer};

const CAMPAIGN: &str = "click-ids";

/// Where `code` sends a click (302), from `client`.
fn location(system: &System, path: &str, client: &str) -> String {
    let response = system.nginx.get_with(
        "s1.test",
        path,
        &[
            ("X-Forwarded-For", client),
            ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64)"),
        ],
    );
    let (status, location) = status_and_location(&response);
    assert_eq!(status, 302, "{path}");
    location
}

/// `location` split around the id of `param`: (before, id, after). The id is 16 base64url
/// characters.
fn id_in(location: &str, param: &str) -> (String, String, String) {
    let marker = format!("{param}=");
    let at = location
        .find(&marker)
        .unwrap_or_else(|| panic!("no {param} in {location}"));
    let start = at + marker.len();
    let end = start + 16;
    let id = &location[start..end.min(location.len())];
    assert_eq!(id.len(), 16, "{location}");
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{location}"
    );
    (
        location[..at].to_owned(),
        id.to_owned(),
        location[end..].to_owned(),
    )
}

fn feed(system: &System) -> Vec<Value> {
    let response = shortlink_e2e::http_client()
        .get(format!(
            "http://127.0.0.1:{}/api/v1/visits?campaign={CAMPAIGN}&limit=1000",
            system.nginx.api_port
        ))
        .bearer_auth(shortlink_e2e::API_KEY)
        .send()
        .expect("reach the API server");
    assert_eq!(response.status(), 200);
    let text = response.text().unwrap();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn ids_of(events: &[Value]) -> HashSet<String> {
    events
        .iter()
        .filter_map(|event| event["id"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn the_click_id_goes_to_the_landing_page_and_is_the_visit_id_in_the_feed_and_the_webhook() {
    let flags = ["--webhook-allow-private", "--webhook-poll", "50ms"];
    let system = System::start_on_with(RedisServer::start(), NginxOptions::default(), &flags);
    let (url, delivered) = shortlink_e2e::receiver::events();
    let (status, subscription) = system.api().post(
        "/webhooks",
        &json!({"url": url, "secret": "click-ids-webhook-secret-0123456789",
                "campaigns": [CAMPAIGN], "batch_size": 5, "batch_ms": 10,
                "include_bots": true}),
    );
    assert_eq!(status, 201, "{subscription}");
    let plain = system.create(json!({
        "url": "https://shop.example/p?x=1#frag", "forward_query": true,
        "campaign": CAMPAIGN, "click_id_param": "sl_click",
    }));
    let ruled = system.create(json!({
        "url": "https://shop.example/home", "campaign": CAMPAIGN, "click_id_param": "cid",
        "rules": [
            {"if": {"query": [{"name": "src", "value": "sms"}]},
             "then": {"url": "https://shop.example/sms#top", "forward_query": true}},
            {"if": {}, "split": {"variants": [
                {"weight": 1, "url": "https://shop.example/a"},
                {"weight": 1, "url": "https://shop.example/b?v=1"}]}}
        ],
    }));
    let without = system.create(json!({"url": "https://shop.example/none", "campaign": CAMPAIGN}));

    let mut sent = Vec::new();
    // The link's own target: after the forwarded query, before the fragment.
    for n in 0..3 {
        let (before, id, after) = id_in(
            &location(&system, &format!("/{plain}?utm=a"), &format!("192.0.2.{n}")),
            "sl_click",
        );
        assert_eq!(before, "https://shop.example/p?x=1&utm=a&");
        assert_eq!(after, "#frag");
        sent.push(id);
    }
    // A rule's target, with its own forwarded query and fragment.
    let (before, id, after) = id_in(
        &location(&system, &format!("/{ruled}?src=sms"), "192.0.2.9"),
        "cid",
    );
    assert_eq!(
        (before.as_str(), after.as_str()),
        ("https://shop.example/sms?src=sms&", "#top")
    );
    sent.push(id);
    // A split's variants, each with the id.
    let mut variants = HashSet::new();
    for n in 0..40 {
        let (before, id, after) = id_in(
            &location(&system, &format!("/{ruled}"), &format!("198.51.100.{n}")),
            "cid",
        );
        assert_eq!(after, "");
        variants.insert(before);
        sent.push(id);
    }
    assert_eq!(
        variants,
        HashSet::from([
            "https://shop.example/a?".to_owned(),
            "https://shop.example/b?v=1&".to_owned()
        ])
    );
    // A link without the parameter is answered as before.
    assert_eq!(
        location(&system, &format!("/{without}"), "192.0.2.1"),
        "https://shop.example/none"
    );

    let unique: HashSet<_> = sent.iter().cloned().collect();
    assert_eq!(unique.len(), sent.len(), "an id was given twice");
    let fed = wait_until(Duration::from_secs(30), || {
        ids_of(&feed(&system)).is_superset(&unique)
    });
    let in_feed = feed(&system);
    assert!(
        fed,
        "the feed's visit ids are not the click ids: {:?}",
        ids_of(&in_feed)
    );
    // The visit without a click id keeps an id of its own, not one of those.
    assert_eq!(in_feed.len(), sent.len() + 1);
    let hooked = wait_until(Duration::from_secs(30), || {
        ids_of(&delivered.lock().unwrap()).is_superset(&unique)
    });
    assert!(hooked, "the webhook's visit ids are not the click ids");
    let events = delivered.lock().unwrap();
    let event = events.iter().find(|e| e["id"] == sent[3].as_str()).unwrap();
    assert_eq!(event["target"], "https://shop.example/sms#top");
    assert_eq!(event["code"], ruled.as_str());
}

#[test]
fn the_fallback_sends_an_id_too() {
    let mut system = System::start();
    let code = system.create(json!({
        "url": "https://shop.example/p#frag", "forward_query": true, "click_id_param": "sl_click",
    }));
    let (before, from_module, after) = id_in(
        &location(&system, &format!("/{code}?a=b"), "192.0.2.1"),
        "sl_click",
    );
    system.redis.stop();
    let (fallback_before, from_fallback, fallback_after) = id_in(
        &location(&system, &format!("/{code}?a=b"), "192.0.2.1"),
        "sl_click",
    );
    assert_eq!(after, "#frag");
    assert_eq!((fallback_before, fallback_after), (before, after));
    assert_ne!(from_fallback, from_module);
    let (_, again, _) = id_in(
        &location(&system, &format!("/{code}?a=b"), "192.0.2.1"),
        "sl_click",
    );
    assert_ne!(again, from_fallback);
}

/// docs/CONVERSIONS.md's path, through nginx's API server: the landing page's id posted back as a
/// conversion (once, then again as its retry would be), a batch of the others as NDJSON, and the
/// link's A/B result counting each once against the variant its click was sent to.
#[test]
fn a_landing_pages_click_id_posted_back_through_nginx_is_one_conversion_of_its_variant() {
    let system = System::start();
    let code = system.create(json!({
        "url": "https://shop.example/home", "campaign": CAMPAIGN, "click_id_param": "sl_click",
        "rules": [{"if": {}, "split": {"variants": [
            {"weight": 1, "url": "https://shop.example/a"},
            {"weight": 1, "url": "https://shop.example/b"}]}}],
    }));
    let mut clicks = Vec::new();
    for n in 0..6 {
        let (before, id, _) = id_in(
            &location(&system, &format!("/{code}"), &format!("203.0.113.{n}")),
            "sl_click",
        );
        clicks.push((before, id));
    }
    let ids: HashSet<String> = clicks.iter().map(|(_, id)| id.clone()).collect();
    // A conversion needs its click stored: the visits reach SQL through the consumer.
    assert!(
        wait_until(Duration::from_secs(30), || ids_of(&feed(&system))
            .is_superset(&ids)),
        "the clicks never reached the feed"
    );

    let first = json!({"click_id": clicks[0].1, "name": "purchase", "value": "19.99",
                       "currency": "EUR", "event_id": "order-1"});
    let (status, stored) = system.api().post("/conversions", &first);
    assert_eq!(status, 201, "{stored}");
    let (status, again) = system.api().post("/conversions", &first);
    assert_eq!(
        (status, &again["duplicate"]),
        (200, &json!(true)),
        "{again}"
    );
    let lines: String = (clicks[1..].iter().enumerate())
        .map(|(n, (_, id))| {
            format!(
                "{}\n",
                json!({"click_id": id, "name": "purchase", "event_id": format!("order-b{n}")})
            )
        })
        .collect();
    let (status, answers) = system.api().post_ndjson("/conversions", lines);
    assert_eq!(status, 200, "{answers:?}");
    assert!(
        answers.iter().all(|line| line["status"] == 201),
        "{answers:?}"
    );

    let (status, result) = system.api().get(&format!("/links/{code}/ab"));
    assert_eq!(status, 200, "{result}");
    let arms = result["arms"].as_array().unwrap();
    let converted: i64 = arms
        .iter()
        .map(|arm| arm["conversions"].as_i64().unwrap())
        .sum();
    assert_eq!(converted, 6, "{result}");
    // Each variant has the conversions of the clicks sent to it (an arm no click was sent to
    // may be left out: the split is random).
    for (variant, target) in [
        (0, "https://shop.example/a?"),
        (1, "https://shop.example/b?"),
    ] {
        let sent = clicks.iter().filter(|(before, _)| before == target).count() as i64;
        let arm = arms.iter().find(|arm| arm["variant"] == variant);
        let counted = arm.map_or(0, |arm| arm["conversions"].as_i64().unwrap());
        assert_eq!(counted, sent, "variant {variant}: {result}");
    }
}
