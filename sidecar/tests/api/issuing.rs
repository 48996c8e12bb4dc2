//! Several issuing domains (`X-Shortlink-Public-Base` with weights): new links spread by weight,
//! never on a draining domain, one domain per campaign under `spread=campaign`; reads show the
//! short URL the create returned; a malformed list is refused and nothing is stored.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashMap;

const WEIGHTED: &str =
    "https://a.example weight=3 https://b.example weight=1 https://c.example draining";

async fn batch(app: &TestApp, bases: &str, items: &Value) -> Vec<Value> {
    let response = app
        .api(Method::POST, "/links/batch")
        .header("X-Shortlink-Public-Base", bases)
        .json(items)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body: Value = response.json().await.unwrap();
    match body["results"].take() {
        Value::Array(results) => results,
        other => panic!("results is not an array: {other}"),
    }
}

/// Short URLs per base.
fn spread(results: &[Value]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for result in results {
        assert_eq!(result["status"], 201, "{result}");
        let url = result["link"]["short_url"].as_str().unwrap();
        let code = result["link"]["code"].as_str().unwrap();
        let base = url.strip_suffix(&format!("/{code}")).unwrap();
        *counts.entry(base.to_owned()).or_insert(0) += 1;
    }
    counts
}

#[tokio::test]
async fn ten_thousand_creates_spread_by_weight_and_never_on_a_draining_domain() {
    let app = spawn_app(Backend::Sqlite).await;
    let items: Vec<Value> = (0..10_000)
        .map(|i| json!({"url": format!("https://t.example/{i}")}))
        .collect();
    let results = batch(&app, WEIGHTED, &json!(items)).await;
    let counts = spread(&results);
    let a = counts.get("https://a.example").copied().unwrap_or(0);
    let b = counts.get("https://b.example").copied().unwrap_or(0);
    assert_eq!(a + b, 10_000, "{counts:?}");
    // 75/25 within ±2 percentage points.
    assert!((7_300..=7_700).contains(&a), "{counts:?}");
    assert!(!counts.contains_key("https://c.example"), "{counts:?}");
    println!("weighted issuing 3:1 over 10,000 creates: {counts:?}");

    // A read shows the URL the create handed out.
    let first = &results[0]["link"];
    let response = app
        .api(
            Method::GET,
            &format!("/links/{}", first["code"].as_str().unwrap()),
        )
        .header("X-Shortlink-Public-Base", WEIGHTED)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.json::<Value>().await.unwrap()["short_url"],
        first["short_url"]
    );
}

#[tokio::test]
async fn a_campaign_gets_one_domain_under_spread_campaign() {
    let app = spawn_app(Backend::Sqlite).await;
    let bases = format!("{WEIGHTED} spread=campaign");
    let mut seen = HashMap::new();
    for campaign in ["spring", "summer", "autumn", "winter", "easter", "xmas"] {
        let items: Vec<Value> = (0..200)
            .map(|i| json!({"url": format!("https://t.example/{i}"), "campaign": campaign}))
            .collect();
        let counts = spread(&batch(&app, &bases, &json!(items)).await);
        assert_eq!(counts.len(), 1, "{campaign}: {counts:?}");
        assert!(!counts.contains_key("https://c.example"));
        seen.extend(counts);
    }
    // Links without a campaign still spread per link.
    let items: Vec<Value> = (0..200)
        .map(|i| json!({"url": format!("https://t.example/n{i}")}))
        .collect();
    assert_eq!(spread(&batch(&app, &bases, &json!(items)).await).len(), 2);
}

#[tokio::test]
async fn a_malformed_issuing_list_is_refused_and_nothing_is_stored() {
    let app = spawn_app(Backend::Sqlite).await;
    for bad in [
        "https://a.example weight=three",
        "https://a.example weight=0",
        "weight=2 https://a.example",
        "https://a.example draining",
        "https://a.example spread=everywhere",
    ] {
        let response = app
            .api(Method::POST, "/links")
            .header("X-Shortlink-Public-Base", bad)
            .json(&json!({"url": "https://t.example/x"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{bad}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_header", "{bad}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message
                .to_ascii_lowercase()
                .contains("x-shortlink-public-base"),
            "{message}"
        );
    }
    let stored = app.stored().await;
    assert_eq!((stored.links, stored.redis_keys), (0, 0));
}
