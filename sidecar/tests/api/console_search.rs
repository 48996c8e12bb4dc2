//! The links page's search (issue 80): a per-recipient link (one with a `ref`) is found by any
//! part of its target, its code, its ref, its campaign or a tag, in any case, on every backend,
//! a page at a time; a link of another workspace never is.

use crate::console::Browser;
use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;

crate::on_each_backend!(a_recipient_link_is_found_by_each_of_its_fields);

/// The codes a links page lists, in order.
fn listed(page: &str) -> Vec<String> {
    page.split("<td><a href=\"/console/links/")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .filter(|code| !code.contains('/'))
        .collect()
}

async fn a_recipient_link_is_found_by_each_of_its_fields(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut items = vec![
        json!({"url": "https://shop.example/Autumn-Sale/shoes?utm_source=sms",
        "campaign": "autumn-2026", "ref": "cust-48151", "tags": ["loyalty", "fr"]}),
    ];
    // Neighbours sharing parts of it, so that a match on the wrong field shows.
    for i in 0..60 {
        items.push(json!({"url": format!("https://shop.example/winter/{i}"),
            "campaign": "winter-2026", "ref": format!("cust-{i}"), "tags": ["sms"]}));
    }
    let response = app.post_batch(&items).await;
    assert_eq!(response.status(), StatusCode::OK);
    let results: serde_json::Value = response.json().await.unwrap();
    let results = results["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{results}"));
    let code = results[0]["link"]["code"].as_str().unwrap().to_owned();
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;

    let mut queries = vec![
        "https://shop.example/Autumn-Sale/shoes?utm_source=sms",
        "autumn-sale/sh",
        "utm_source=sms",
        "SHOES",
        code.as_str(),
        "cust-48151",
        "48151",
        "autumn-2026",
        "loyalty",
    ];
    // The middle of a word: MariaDB's FULLTEXT index finds words by their beginning only.
    if backend != Backend::Mariadb {
        queries.extend([&code[1..code.len() - 1], "oyalt"]);
    }
    for query in queries {
        let page = browser
            .page(&format!("/console/links?q={}", encode(query)))
            .await;
        assert_eq!(listed(&page), std::slice::from_ref(&code), "{query}");
    }
    // Every neighbour, a page of 50 and then the rest.
    let first = browser.page("/console/links?q=winter-2026").await;
    assert_eq!(listed(&first).len(), 50);
    let next = first
        .split("&amp;cursor=")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let second = browser
        .page(&format!("/console/links?q=winter-2026&cursor={next}"))
        .await;
    assert_eq!(listed(&second).len(), 10);
    assert!(listed(&second).iter().all(|c| !listed(&first).contains(c)));
    // Nothing for text no link holds, and a `%` is only itself.
    for query in ["autumn-2027", "%", "shoes%"] {
        let page = browser
            .page(&format!("/console/links?q={}", encode(query)))
            .await;
        assert!(listed(&page).is_empty(), "{query}: {page}");
    }
}

fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
