//! The fallback answers a click exactly as the module does: the same requests against one link
//! with rules, a schedule, a weekly window in a time zone and a sticky split, first through nginx
//! with Redis up (the module), then with Redis stopped (nginx's fallback, the sidecar reading SQL).

use serde_json::json;
use shortlink_e2e::{status_and_location, System};
use shortlink_wire::keys::visit_count_key;

const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36";
const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";

/// (query suffix, User-Agent, Accept-Language, client address)
const CLICKS: [(&str, &str, &str, &str); 11] = [
    ("", IPHONE, "en", "192.0.2.1"),
    ("", ANDROID, "en", "192.0.2.2"),
    ("", DESKTOP, "pt-BR,pt;q=0.9", "192.0.2.3"),
    ("", DESKTOP, "en", "203.0.113.9"),
    ("", DESKTOP, "en", "198.51.100.200"),
    ("?src=sms", DESKTOP, "en", "192.0.2.4"),
    ("", DESKTOP, "en", "10.1.2.3"),
    ("", DESKTOP, "de", "2001:db8:1:ffff::1"),
    ("", DESKTOP, "en", "192.0.2.77"),
    ("", DESKTOP, "en", "192.0.2.78"),
    ("?when", DESKTOP, "en", "192.0.2.5"),
];

/// A weekly window on the clock of a zone that is now on a day of its own: Kiritimati keeps
/// UTC+14 all year, so its weekday is computed here without a time-zone database, and is a day
/// ahead of UTC for most of the day. `open`: this hour and the next (the test cannot straddle
/// both); otherwise every hour but those two.
fn kiritimati_window(open: bool) -> serde_json::Value {
    let local = chrono::Utc::now() + chrono::Duration::hours(14);
    let (day, hour) = (
        chrono::Datelike::weekday(&local),
        chrono::Timelike::hour(&local),
    );
    let name =
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][day.num_days_from_monday() as usize];
    let now = [hour, (hour + 1) % 24];
    let hours: Vec<u32> = (0..24).filter(|h| now.contains(h) == open).collect();
    json!({"days": [name], "hours": hours, "zone": "Pacific/Kiritimati"})
}

fn answers(system: &System, code: &str) -> Vec<(u16, String)> {
    CLICKS
        .iter()
        .map(|(suffix, agent, language, client)| {
            let response = system.nginx.get_with(
                "s1.test",
                &format!("/{code}{suffix}"),
                &[
                    ("User-Agent", agent),
                    ("Accept-Language", language),
                    ("X-Forwarded-For", client),
                ],
            );
            status_and_location(&response)
        })
        .collect()
}

#[test]
fn the_fallback_gives_the_module_s_answers() {
    let mut system = System::start();
    let code = system.create(json!({
        "url": "https://shop.example/home",
        "rules": [
            {"if": {"device": ["ios"]}, "then": {"url": "https://apps.example/ios"}},
            {"if": {"device": ["android"], "language": ["en"]}, "then": {"url": "https://apps.example/android", "redirect": 307}},
            {"if": {"language": ["pt"]}, "then": {"url": "https://shop.example/pt"}},
            {"if": {"country": ["AU"]}, "then": {"url": "https://shop.example/au", "forward_query": true}},
            {"if": {"query": [{"name": "src", "value": "sms"}]}, "then": {"url": "https://shop.example/sms"}},
            {"if": {"ip": ["10.0.0.0/8"]}, "then": {"url": "https://intranet.example/"}},
            {"if": {"country": ["JP"]}, "then": {"url": "https://shop.example/jp"}},
            {"if": {"query": [{"name": "when"}], "weekly": kiritimati_window(false)},
             "then": {"url": "https://shop.example/closed"}},
            {"if": {"query": [{"name": "when"}], "weekly": kiritimati_window(true)},
             "then": {"url": "https://shop.example/open"}},
            {"if": {}, "split": {"sticky": true, "variants": [
                {"weight": 1, "url": "https://shop.example/a"},
                {"weight": 1, "url": "https://shop.example/b"}]}}
        ]
    }));
    let from_module = answers(&system, &code);
    // Every rule answered at least once: the comparison covers all of them.
    for expected in [
        "ios", "android", "/pt", "/au", "/sms", "intranet", "/jp", "/open",
    ] {
        assert!(
            from_module
                .iter()
                .any(|(_, location)| location.contains(expected)),
            "no click reached {expected}: {from_module:?}"
        );
    }
    assert!(
        !from_module
            .iter()
            .any(|(_, location)| location.contains("/closed")),
        "a window closed at this hour held: {from_module:?}"
    );
    let before = system.nginx.counters()["fallbacks"];
    system.redis.stop();
    let from_fallback = answers(&system, &code);
    assert_eq!(
        system.nginx.counters()["fallbacks"],
        before + CLICKS.len() as u64
    );
    assert_eq!(from_fallback, from_module);
}

#[test]
fn the_fallback_says_not_yet_like_the_module() {
    let mut system = System::start();
    let opens = chrono::Utc::now() + chrono::Duration::hours(2);
    let code = system.create(json!({
        "url": "https://shop.example/home",
        "valid_since": opens.to_rfc3339(),
    }));
    let page = |system: &System| {
        let response = system.nginx.get("s1.test", &format!("/{code}"));
        (response.status().as_u16(), response.text().unwrap())
    };
    let from_module = page(&system);
    assert_eq!(from_module.0, 403);
    system.redis.stop();
    assert_eq!(page(&system), from_module);
}

#[test]
fn the_fallback_draws_the_card_like_the_module() {
    let mut system = System::start();
    let code = system.create(json!({
        "url": "https://shop.example/home",
        "rules": [{"if": {"language": ["pt"]}, "then": {"url": "https://shop.example/pt"}}],
        "max_visits": 5,
        "preview": {"title": "Spring <sale>", "description": "20% off & more",
                    "image": "https://cdn.example/spring.jpg"}
    }));
    let get = |system: &System, agent: &str| {
        let response = system.nginx.get_with(
            "s1.test",
            &format!("/{code}"),
            &[("User-Agent", agent), ("Accept-Language", "pt-BR")],
        );
        let (status, location) = status_and_location(&response);
        (status, location, response.text().unwrap())
    };
    let fetcher = "WhatsApp/2.23.20.0 A";
    let from_module = (get(&system, fetcher), get(&system, IPHONE));
    // Only the person's click was counted: a preview is not a click.
    let counted = system.redis.cli_raw(&["GET", &visit_count_key(&code)]);
    assert_eq!(counted, "1");
    assert_eq!(from_module.0 .0, 200);
    assert!(
        from_module
            .0
             .2
            .contains("content=\"https://shop.example/pt\""),
        "the card is drawn for the rule's target: {}",
        from_module.0 .2
    );
    assert_eq!(from_module.1 .1, "https://shop.example/pt");
    system.redis.stop();
    // The card needs no count, so it is drawn with Redis down; a click on the capped link cannot
    // be counted, so it is not redirected.
    assert_eq!(get(&system, fetcher), from_module.0);
    assert_eq!(get(&system, IPHONE).0, 503);
}
