//! Conversions in the visit feed (and so on the click webhooks, whose deliverers read the same
//! feed): in commit order among the visits, with `type` `conversion`; another workspace's feed
//! does not have them.

use super::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};

crate::on_each_backend!(conversions_take_their_place_in_the_feed,);

async fn feed(request: reqwest::RequestBuilder) -> Vec<Value> {
    let text = request.send().await.unwrap().text().await.unwrap();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

async fn conversions_take_their_place_in_the_feed(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app
        .create(json!({"url": "https://shop.example/a", "campaign": "spring", "ref": "r-1", "tags": ["sms"]}))
        .await["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let t = now_ms() - 10_000;
    store(
        &app,
        &[visit(
            "1700000000001-0",
            &code,
            t,
            "203.0.113.1",
            IPHONE,
            Some("0.1"),
        )],
    )
    .await;
    let (status, conversion) = post(
        &app,
        &json!({"click_id": "1700000000001-0", "name": "purchase", "value": "9.90",
                "currency": "EUR", "event_id": "o-1"}),
    )
    .await;
    assert_eq!(status, 201, "{conversion}");
    store(
        &app,
        &[visit(
            "1700000000002-0",
            &code,
            t + 1,
            "203.0.113.2",
            IPHONE,
            None,
        )],
    )
    .await;

    let events = feed(app.api(reqwest::Method::GET, "/visits")).await;
    let summary: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [
            ("click", "1700000000001-0"),
            ("conversion", conversion["id"].as_str().unwrap()),
            ("click", "1700000000002-0"),
        ]
    );
    let event = &events[1];
    assert_eq!(event["conversion"]["click_id"], "1700000000001-0");
    assert_eq!(event["conversion"]["value"], "9.90");
    assert_eq!(event["conversion"]["name"], "purchase");
    assert_eq!(
        (&event["code"], &event["rule"]),
        (&json!(code), &json!("0.1"))
    );
    assert_eq!(event["tags"], json!(["sms"]));
    // Filters apply as to clicks; cursors go on past it.
    let tagged = feed(app.api(reqwest::Method::GET, "/visits?ref=r-1")).await;
    assert_eq!(tagged.len(), 3);
    let after = events[0]["cursor"].as_str().unwrap();
    let rest = feed(app.api(reqwest::Method::GET, &format!("/visits?after={after}"))).await;
    assert_eq!(rest[0]["type"], "conversion");

    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let b_key = workspace_key(&app, &operator, "brand-b", "viewer").await;
    let b = feed(with_key(&app, &b_key, reqwest::Method::GET, "/visits")).await;
    assert!(b.is_empty(), "{b:?}");
}
