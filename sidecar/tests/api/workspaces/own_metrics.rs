//! `GET /api/v1/workspace/metrics` (issue 66): a brand's own numbers, now that `/metrics` (every
//! workspace's domains by name) is the operator's alone. A workspace's keys get their links, their
//! clicks and their domains, never another workspace's slug or domains; the operator's key has no
//! workspace of its own to read.

use super::*;
use reqwest::Method;

/// As nginx's API server sends them: the default's part, then each brand's.
const LISTS: &str = "https://s.example [brand-a] https://a1.brand-a.example \
                     [brand-b] https://b1.brand-b.example https://b2.brand-b.example";
const POOL: &str = "s.example a1.brand-a.example b1.brand-b.example b2.brand-b.example";
const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 \
                     (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";

async fn create_with(app: &TestApp, key: &str, url: &str) -> String {
    let link =
        send_json(with_key(app, key, Method::POST, "/links").json(&json!({"url": url}))).await;
    link["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{link}"))
        .to_owned()
}

/// `count` human visits of `code`, stored as the consumer stores them.
async fn clicks(app: &TestApp, code: &str, count: usize) {
    use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
    let now = chrono::Utc::now().timestamp_millis().to_string();
    let visits: Vec<_> = (0..count)
        .map(|i| {
            let fields = [("c", code), ("t", &now), ("ua", PHONE), ("ip", "192.0.2.7")]
                .map(|(k, v)| (k, v.to_owned()));
            let event = VisitEvent::from_fields(format!("{now}-{code}-{i}"), fields).unwrap();
            Enricher::new(GeoDb::disabled(), false).enrich(&event)
        })
        .collect();
    let stored = app.visit_store().await.store_batch(&visits, false).await;
    assert_eq!(stored.unwrap().inserted, count as u64);
}

fn domains_of(answer: &Value) -> Vec<(String, String)> {
    (answer["domains"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter())
    .map(|d| {
        let text = |field: &str| d[field].as_str().unwrap().to_owned();
        (text("workspace"), text("domain"))
    })
    .collect()
}

#[tokio::test]
async fn each_workspace_reads_its_own_numbers_and_nothing_of_another() {
    let (app, operator) = app_with_workspaces(&["brand-a", "brand-b"]).await;
    let a = workspace_key(&app, &operator, "brand-a", "admin").await;
    let a_viewer = workspace_key(&app, &operator, "brand-a", "viewer").await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    let a1 = create_with(&app, &a, "https://shop.brand-a.example/one").await;
    create_with(&app, &a, "https://shop.brand-a.example/two").await;
    let b1 = create_with(&app, &b, "https://shop.brand-b.example/one").await;
    clicks(&app, &a1, 3).await;
    clicks(&app, &b1, 5).await;

    // Through nginx: the request names the pool and every workspace's part of the issuing list.
    let read = |key: &str| {
        with_key(&app, key, Method::GET, "/workspace/metrics")
            .header("x-shortlink-public-base", LISTS)
            .header("x-shortlink-pool", POOL)
    };
    let ours = send_json(read(&a)).await;
    assert_eq!(ours["workspace"], "brand-a", "{ours}");
    assert_eq!(ours["links"], 2, "{ours}");
    assert_eq!(ours["clicks"]["clicks"], 3, "{ours}");
    assert_eq!(
        domains_of(&ours),
        [("brand-a".to_owned(), "a1.brand-a.example".to_owned())],
        "{ours}"
    );
    let text = ours.to_string();
    for theirs in [
        "brand-b",
        "b1.brand-b",
        "b2.brand-b",
        "s.example\"",
        "default",
    ] {
        assert!(!text.contains(theirs), "{theirs} in {text}");
    }
    // A viewer reads the same numbers (the domains' probe may have run in between).
    let viewer = send_json(read(&a_viewer)).await;
    for field in ["workspace", "links", "clicks"] {
        assert_eq!(viewer[field], ours[field], "{viewer}");
    }
    assert_eq!(domains_of(&viewer), domains_of(&ours));

    let theirs = send_json(read(&b)).await;
    assert_eq!(theirs["workspace"], "brand-b", "{theirs}");
    assert_eq!(theirs["links"], 1, "{theirs}");
    assert_eq!(theirs["clicks"]["clicks"], 5, "{theirs}");
    let text = theirs.to_string();
    for ours in ["brand-a", "a1.brand-a"] {
        assert!(!text.contains(ours), "{ours} in {text}");
    }

    // The operator's key has no workspace here (its numbers are /metrics, on its listener).
    let answer = with_key(&app, &operator, Method::GET, "/workspace/metrics")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], "forbidden", "{body}");
}
