//! The links page's search (issue 80): a per-recipient link (one with a `ref`) is found by any
//! part of its target, its code, its ref, its campaign or a tag, in any case, on every backend,
//! a page at a time; a link of another workspace never is.

use crate::console::Browser;
use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

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

/// SQLite's index is kept off the write path (migration 85): no trigger on a create, an indexer
/// that catches up while the writer is idle. The answers are the same before and after it has; a
/// changed target is found by its new text at once and no longer by its old one, then
/// re-indexed; a deleted link leaves the index.
#[tokio::test]
async fn sqlite_search_answers_the_same_from_its_index_and_follows_changes() {
    let app = spawn_app(Backend::Sqlite).await;
    let items: Vec<serde_json::Value> = (0..300)
        .map(|i| {
            json!({"url": format!("https://shop.example/spring/{i}"), "ref": format!("r-{i}"),
            "campaign": if i == 7 { "spring-seven" } else { "spring" }})
        })
        .collect();
    let made = app.post_batch(&items).await;
    assert_eq!(made.status(), StatusCode::OK);
    let made: serde_json::Value = made.json().await.unwrap();
    assert!(
        made["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == 201),
        "{made}"
    );
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let before = search(&mut browser, "spring-seven").await;
    assert_eq!(before.len(), 1);
    let code = before[0].clone();

    let caught_up = "SELECT (SELECT last_rowid FROM link_search_progress) = \
                     (SELECT max(rowid) FROM links)";
    assert!(
        eventually(Duration::from_secs(30), || async {
            app.db.scalar(caught_up).await == 1
        })
        .await
    );
    assert_eq!(app.db.scalar("SELECT COUNT(*) FROM link_search").await, 300);
    assert_eq!(
        search(&mut browser, "spring-seven").await,
        before,
        "from the index"
    );
    // 7 and 70 to 79.
    assert_eq!(search(&mut browser, "/spring/7").await.len(), 11);

    let changed = app
        .patch_link(&code, &json!({"url": "https://shop.example/summer/7"}))
        .await;
    assert_eq!(changed.status(), StatusCode::OK);
    assert_eq!(
        search(&mut browser, "summer/7").await,
        before,
        "the new text at once"
    );
    let old_text = search(&mut browser, "/spring/7").await;
    assert_eq!(old_text.len(), 10, "no longer by the old text");
    assert!(!old_text.contains(&code));
    let reindexed = "SELECT COUNT(*) FROM link_search_dirty";
    assert!(
        eventually(Duration::from_secs(30), || async {
            app.db.scalar(reindexed).await == 0
        })
        .await
    );
    assert_eq!(
        search(&mut browser, "summer/7").await,
        before,
        "and from the index"
    );
    assert_eq!(search(&mut browser, "spring-seven").await, before);
    assert_eq!(search(&mut browser, "/spring/7").await.len(), 10);
}

/// The codes the links page lists for `query`.
async fn search(browser: &mut Browser<'_>, query: &str) -> Vec<String> {
    listed(
        &browser
            .page(&format!("/console/links?q={}", encode(query)))
            .await,
    )
}

fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
