//! A/B arms named by where they send a click: each arm's URL and its rule's condition in the
//! API's answer and on the console's pages; a campaign's arm has a URL only where its links
//! agree on one.

use super::*;
use crate::console::Browser;

/// A link of campaign `spring` whose split's second variant goes to `second`.
async fn split_link(app: &TestApp, second: &str) -> String {
    let created = app
        .create(
            json!({"url": "https://shop.example/spring", "campaign": "spring", "rules": [
            {"if": {"country": ["PT", "BR"]}, "then": {"url": "https://pt.example/"}},
            {"if": {"device": ["ios"]}, "split": {"variants": [
                {"weight": 1, "url": "https://a.example/landing"},
                {"weight": 1, "url": second}]}}]}),
        )
        .await;
    created["code"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn arms_carry_their_url_and_condition_in_the_api_and_the_console() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = split_link(&app, "https://b.example/landing").await;
    let other = split_link(&app, "https://c.example/other").await;
    let t = now_ms() - 60_000;
    let mut visits = Vec::new();
    for rule in [None, Some("0"), Some("1.0"), Some("1.1")] {
        for on in [&code, &other] {
            let n = visits.len();
            let id = format!("1700000000{n:03}-0");
            let ip = format!("198.51.100.{}", n + 1);
            visits.push(visit(&id, on, t, &ip, IPHONE, rule));
        }
    }
    store(&app, &visits).await;

    let result = app.get_json(&format!("/links/{code}/ab")).await;
    let named: Vec<(Value, Value, Value)> = (result["arms"].as_array().unwrap().iter())
        .map(|a| (a["rule"].clone(), a["url"].clone(), a["condition"].clone()))
        .collect();
    assert_eq!(
        named,
        vec![
            (
                Value::Null,
                json!("https://shop.example/spring"),
                Value::Null
            ),
            (
                json!("0"),
                json!("https://pt.example/"),
                json!("country PT or BR")
            ),
            (
                json!("1.0"),
                json!("https://a.example/landing"),
                json!("device ios")
            ),
            (
                json!("1.1"),
                json!("https://b.example/landing"),
                json!("device ios")
            ),
        ],
        "{result}"
    );
    // The campaign: its two links agree on every arm but the split's second variant.
    let campaign = app.get_json("/campaigns/spring/ab").await;
    let url_of = |rule: &str| {
        (campaign["arms"].as_array().unwrap().iter())
            .find(|a| a["rule"] == json!(rule))
            .map(|a| a["url"].clone())
            .unwrap()
    };
    assert_eq!(
        url_of("1.0"),
        json!("https://a.example/landing"),
        "{campaign}"
    );
    assert_eq!(url_of("1.1"), Value::Null, "{campaign}");

    // The schema says so too.
    let doc = app.get_json("/openapi.json").await;
    let arm = &doc["components"]["schemas"]["ArmView"]["properties"];
    for field in ["url", "condition"] {
        assert!(
            arm[field]["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty()),
            "{field}: {arm}"
        );
    }

    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page(&format!("/console/links/{code}/ab")).await;
    for arm in [
        "<td class=\"arm\">https://b.example/landing<br><span class=\"hint\">when device ios · rule 2, arm B</span>",
        "<td class=\"arm\">https://pt.example/<br><span class=\"hint\">when country PT or BR · rule 1</span>",
        "<td class=\"arm\">https://shop.example/spring<br><span class=\"hint\">the link's own target</span>",
    ] {
        assert!(page.contains(arm), "{arm}: {page}");
    }
    assert!(
        page.contains("<strong class=\"arm-name\">https://a.example/landing</strong>"),
        "the chart's label, whole: {page}"
    );
    let page = browser.page("/console/campaigns/ab?campaign=spring").await;
    assert!(
        page.contains("<td class=\"arm\">https://a.example/landing<br>")
            && page.contains("<td class=\"arm\">rule 2, arm B<br>"),
        "{page}"
    );
}
