//! Workspaces (issue 53): what the operator does with them, and what one workspace's keys can
//! learn of another's objects (nothing: [`isolation`]), their short domains ([`domains`]).

mod deletion;
mod domains;
mod isolation;
mod jobs;
mod migration;
mod not_found;
mod operator;
mod orphans;
mod own_metrics;
mod records;

use crate::helpers::*;
use serde_json::{json, Value};
use shortlink_api::{generate_api_key, hash_api_key};
use shortlink_store::{self, Role};

/// An operator key, made as `keys create --role operator` makes it.
pub async fn operator_key(app: &TestApp) -> String {
    let key = generate_api_key().unwrap();
    let storage = app.storage().await;
    (storage.create_api_key(
        "operator",
        Role::Operator,
        None,
        &hash_api_key(&key),
        shortlink_store::now(),
    ))
    .await
    .unwrap();
    key
}

/// A request with `key` instead of the bootstrap key.
pub fn with_key(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
) -> reqwest::RequestBuilder {
    app.client
        .request(method, app.url(&format!("/api/v1{path}")))
        .bearer_auth(key)
}

/// Creates the workspace `slug` as the operator.
pub async fn create_workspace(app: &TestApp, operator: &str, slug: &str) -> Value {
    let answer = with_key(app, operator, reqwest::Method::POST, "/workspaces")
        .json(&json!({"slug": slug, "name": format!("Brand {slug}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201, "{:?}", answer.text().await);
    answer.json().await.unwrap()
}

/// A key of `role` in `slug`, made by the operator; returns the key.
pub async fn workspace_key(app: &TestApp, operator: &str, slug: &str, role: &str) -> String {
    let answer = with_key(
        app,
        operator,
        reqwest::Method::POST,
        &format!("/workspaces/{slug}/keys"),
    )
    .json(&json!({"name": format!("{slug}-{role}"), "role": role}))
    .send()
    .await
    .unwrap();
    assert_eq!(answer.status(), 201, "{:?}", answer.text().await);
    let key: Value = answer.json().await.unwrap();
    key["key"].as_str().unwrap().to_owned()
}

/// A fresh app (SQLite) with the workspaces `slugs`: the app and its operator's key.
pub async fn app_with_workspaces(slugs: &[&str]) -> (TestApp, String) {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    for slug in slugs {
        create_workspace(&app, &operator, slug).await;
    }
    (app, operator)
}

/// The console's Domains page in a session of `key`, behind nginx (the issuing `lists` and the
/// `pool` sent as it sends them): its status and text.
pub async fn console_domains_page(
    app: &TestApp,
    key: &str,
    (lists, pool): (&str, &str),
) -> (u16, String) {
    let mut browser = crate::console::Browser::new(app);
    assert_eq!(browser.sign_in(key).await.status(), 303);
    let request = (browser.request(reqwest::Method::GET, "/console/domains"))
        .header("x-shortlink-public-base", lists)
        .header("x-shortlink-pool", pool);
    let answer = browser.send(request).await;
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// Suspends workspace `slug` as the operator (panics unless 200).
pub async fn suspend(app: &TestApp, operator: &str, slug: &str) {
    let path = format!("/workspaces/{slug}");
    let suspended = with_key(app, operator, reqwest::Method::PATCH, &path)
        .json(&json!({"suspended": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(suspended.status(), 200, "{:?}", suspended.text().await);
}

/// Creates a link from `body` with `key`, in that key's workspace: the link (panics unless 201).
pub async fn link_in(app: &TestApp, key: &str, body: Value) -> Value {
    let answer = with_key(app, key, reqwest::Method::POST, "/links")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201, "{:?}", answer.text().await);
    answer.json().await.unwrap()
}

/// Sends `request` and reads its JSON answer, whatever the status.
pub async fn send_json(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// Sends `request` and reads its answer as text, whatever the status.
pub async fn send_text(request: reqwest::RequestBuilder) -> String {
    request.send().await.unwrap().text().await.unwrap()
}

/// Writes `batch` to the visit stream as one entry, as a worker of the module does.
pub async fn queue_batch(app: &TestApp, batch: &shortlink_wire::event::Batch) {
    let _: String = redis::cmd("XADD")
        .arg(shortlink_wire::keys::EVENT_STREAM)
        .arg("*")
        .arg(shortlink_wire::event::BATCH_FIELD)
        .arg(batch.bytes())
        .query_async(&mut app.redis().await)
        .await
        .unwrap();
}

/// The sidecar's visit consumer named `name`, on the app's database and Redis.
pub async fn stream_consumer(app: &TestApp, name: &str) -> shortlink_visits::consumer::Consumer {
    let config = app.config(&["--consumer-name", name]);
    shortlink_visits::consumer(&config, app.visit_store().await).expect("consumer")
}
