//! The Privacy page's export and erase (issue 80): the export downloads what the API exports,
//! the erase first asks (nothing erased yet) and then erases as the API does, once.

use crate::console::Browser;
use crate::helpers::*;
use crate::workspaces::send_text;
use reqwest::header::CONTENT_DISPOSITION;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn the_privacy_page_exports_and_erases_after_asking() {
    let app = spawn_app(Backend::Sqlite).await;
    for (code, reference) in [("anna-1", "anna"), ("anna-2", "anna"), ("bert-1", "bert")] {
        app.create(json!({"url": "https://shop.example/", "code": code, "campaign": "spring", "ref": reference}))
            .await;
    }
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let csrf = browser.csrf().await;
    let page = browser.page("/console/privacy").await;
    assert!(
        page.contains("action=\"/console/privacy/export\""),
        "{page}"
    );

    let form = [
        ("csrf", csrf.as_str()),
        ("by", "ref"),
        ("value", "anna"),
        ("campaign", ""),
    ];
    let export = browser.post("/console/privacy/export", &form).await;
    assert_eq!(export.status(), StatusCode::OK);
    assert!(export.headers()[CONTENT_DISPOSITION]
        .to_str()
        .unwrap()
        .starts_with("attachment"));
    let shown = export.text().await.unwrap();
    let export_request = app.api(Method::POST, "/subjects/export");
    let api = send_text(export_request.json(&json!({"ref": "anna"}))).await;
    assert_eq!(shown, api);
    assert_eq!(shown.matches("\"type\":\"link\"").count(), 2, "{shown}");

    // The first step only asks.
    let asked = browser.post("/console/privacy/erase", &form).await;
    assert_eq!(asked.status(), StatusCode::OK);
    let asked = asked.text().await.unwrap();
    assert!(asked.contains("Erase every link with ref anna?"), "{asked}");
    let requests = app.get_json("/subjects/requests").await;
    assert_eq!(requests["requests"].as_array().unwrap().len(), 0);
    let request_id = asked
        .split("name=\"request_id\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the confirm form's request id")
        .to_owned();
    let mut confirm = form.to_vec();
    confirm.push(("request_id", &request_id));
    for _ in 0..2 {
        // Twice: the same request, finished once.
        let erased = browser.post("/console/privacy/erase", &confirm).await;
        assert_eq!(erased.status(), StatusCode::OK);
        assert!(erased
            .text()
            .await
            .unwrap()
            .contains("2 links kept working"));
    }
    let requests = app.get_json("/subjects/requests").await;
    assert_eq!(
        requests["requests"].as_array().unwrap().len(),
        1,
        "{requests}"
    );
    let anna: serde_json::Value = app.get_link("anna-1").await.json().await.unwrap();
    assert_ne!(anna["ref"], "anna");
    let bert: serde_json::Value = app.get_link("bert-1").await.json().await.unwrap();
    assert_eq!(bert["ref"], "bert");

    // Without the session's token: refused, nothing done.
    let refused = browser
        .post(
            "/console/privacy/erase",
            &[("by", "ref"), ("value", "bert")],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
}
