//! Preview cards through the real module: each messaging app's fetcher gets the card page with
//! its tags, escaped; browsers and phones get the redirect; a link without a card (or whose card
//! is gone) is answered to fetchers exactly as before. Cards are set through the sidecar's API.

use serde_json::json;
use shortlink_e2e::{status_and_location, System};
use shortlink_wire::keys::preview_key;
use shortlink_wire::preview::Card;

const TARGET: &str = "https://shop.example/spring?utm_source=sms";

/// As each service sends it (sources in wire::agent::RULES).
const FETCHERS: [(&str, &str); 10] = [
    ("iMessage", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0"),
    ("WhatsApp", "WhatsApp/2.23.20.0 A"),
    ("Signal", "WhatsApp/2"),
    ("Telegram", "TelegramBot (like TwitterBot)"),
    ("Messenger", "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"),
    ("Slack", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"),
    ("Discord", "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)"),
    ("Viber", "Viber/20.6.0"),
    ("Samsung Messages", "Mozilla/5.0 (X11; Ubuntu; Linux i686; rv:24.0) Gecko/20100101 Firefox/24.0"),
    ("Google Messages (RCS)", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Mobile Safari/537.36 (compatible; GoogleMessages; +https://developers.google.com/crawling/docs/crawlers-fetchers/google-messages)"),
];
const PEOPLE: [&str; 3] = [
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
];

fn with_card(system: &System, card: &Card<'_>) -> String {
    let mut preview =
        json!({"title": card.title, "description": card.description, "image": card.image});
    if !card.site_name.is_empty() {
        preview["site_name"] = json!(card.site_name);
    }
    system.create(json!({"url": TARGET, "preview": preview}))
}

fn get(system: &System, code: &str, agent: &str) -> reqwest::blocking::Response {
    system
        .nginx
        .get_with("s1.test", &format!("/{code}"), &[("User-Agent", agent)])
}

#[test]
fn fetchers_get_the_card_and_people_the_redirect() {
    let system = System::start();
    let card = Card {
        title: "Spring sale: 20% off <today>",
        description: "\"Everything\" & more",
        image: "https://cdn.example/spring.jpg",
        site_name: "Example Shop",
    };
    let code = with_card(&system, &card);
    for (name, agent) in FETCHERS {
        let response = get(&system, &code, agent);
        assert_eq!(response.status().as_u16(), 200, "{name}");
        let page = response.text().unwrap();
        for tag in [
            "<meta property=\"og:title\" content=\"Spring sale: 20% off &lt;today&gt;\">",
            "<meta property=\"og:description\" content=\"&quot;Everything&quot; &amp; more\">",
            "<meta property=\"og:image\" content=\"https://cdn.example/spring.jpg\">",
            "<meta property=\"og:site_name\" content=\"Example Shop\">",
            "<meta name=\"twitter:card\" content=\"summary_large_image\">",
            "<meta http-equiv=\"refresh\" content=\"0; url=https://shop.example/spring?utm_source=sms\">",
        ] {
            assert!(page.contains(tag), "{name}: no {tag} in {page}");
        }
        assert!(!page.contains("<today>"), "{name}: unescaped");
    }
    for agent in PEOPLE {
        let response = get(&system, &code, agent);
        assert_eq!(
            status_and_location(&response),
            (302, TARGET.to_owned()),
            "{agent}"
        );
    }
    assert_eq!(
        system.nginx.counters()["preview_cards"],
        FETCHERS.len() as u64
    );
}

#[test]
fn without_a_card_fetchers_get_the_redirect() {
    let system = System::start();
    let plain = system.create(json!({"url": TARGET}));
    // A card flag whose card is gone: the redirect, never an error.
    let orphan = with_card(
        &system,
        &Card {
            title: "Gone",
            description: "Soon",
            image: "https://cdn.example/gone.jpg",
            site_name: "",
        },
    );
    system.redis.cli(&["DEL", &preview_key(&orphan)]);
    for code in [&plain, &orphan] {
        for (name, agent) in FETCHERS {
            let response = get(&system, code, agent);
            assert_eq!(
                status_and_location(&response),
                (302, TARGET.to_owned()),
                "{name}"
            );
        }
    }
    assert_eq!(system.nginx.counters()["preview_cards"], 0);
}
