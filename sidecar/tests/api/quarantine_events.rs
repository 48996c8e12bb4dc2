//! Quarantines and releases told to the link's workspace (issue 79): `link.quarantined` and
//! `link.released` webhook events, signed and delivered through the click webhooks' outbox to a
//! real receiver on loopback, once each, to the link's own workspace only; and a PATCH of a
//! quarantined link to a clean target lifts it, while a PATCH to a listed target is refused.

use crate::helpers::*;
use crate::threats::{
    app_with_feeds_on, create_in, put_lists, quarantined_in_redis, release, until_record,
    write_hosts, Feed,
};
use crate::webhooks::{Receiver, FLAGS, HOOK_SECRET};
use crate::workspaces::{create_workspace, operator_key, send_json, with_key, workspace_key};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The hosts file every app here starts with (`app_with_feeds` writes the same).
const HOSTS: [&str; 2] = ["phish.example", "tracker.example"];

/// An app with the feeds `name` refreshed every second and webhooks delivered to loopback, and
/// admin keys of workspaces `brand-a` and `brand-b`.
async fn app(backend: Backend, name: &str) -> (TestApp, tempfile::TempDir, String, String) {
    let feed = Feed::default();
    feed.set(&["https://old.example/x"]);
    let mut flags = vec!["--threat-refresh", "1s"];
    flags.extend_from_slice(FLAGS);
    let (app, dir) = app_with_feeds_on(backend, name, &feed, &flags).await;
    let operator = operator_key(&app).await;
    for slug in ["brand-a", "brand-b"] {
        create_workspace(&app, &operator, slug).await;
    }
    let a = workspace_key(&app, &operator, "brand-a", "admin").await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    (app, dir, a, b)
}

/// Subscribes `key`'s workspace to `receiver`, one event per POST.
async fn subscribe(app: &TestApp, key: &str, receiver: &Receiver) -> Value {
    let body =
        json!({"url": receiver.url(), "secret": HOOK_SECRET, "batch_size": 1, "batch_ms": 0});
    answered(
        with_key(app, key, reqwest::Method::POST, "/webhooks").json(&body),
        201,
    )
    .await
}

/// The link events `receiver` acknowledged so far, in order.
fn link_events(receiver: &Receiver) -> Vec<Value> {
    let events = receiver.state.events.lock().unwrap();
    (events.iter())
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("link.")))
        .cloned()
        .collect()
}

/// Waits (at most 60 s) until `receiver` has `n` link events.
async fn until_events(receiver: &Receiver, n: usize) -> Vec<Value> {
    let done = eventually(Duration::from_secs(60), || async {
        link_events(receiver).len() >= n
    })
    .await;
    assert!(done, "{n} link events: {:?}", link_events(receiver));
    link_events(receiver)
}

async fn told_once_each_to_the_links_workspace_only(backend: Backend) {
    let (app, dir, a, b) = app(backend, "urlhaus-told").await;
    let (to_a, to_b) = (Receiver::start().await, Receiver::start().await);
    let a_hook = subscribe(&app, &a, &to_a).await;
    assert_eq!(a_hook["link_events"], true, "chosen by default");
    subscribe(&app, &b, &to_b).await;
    let a_bad = create_in(&app, &a, "https://www.bad.example/a").await;
    let b_later = create_in(&app, &b, "https://later.example/b").await;

    write_hosts(&dir, &[HOSTS[0], HOSTS[1], "bad.example"]);
    until_record(&app, &a_bad, true).await;
    let told = until_events(&to_a, 1).await;
    let event = &told[0];
    assert_eq!(event["type"], "link.quarantined");
    assert_eq!(event["code"], a_bad.as_str());
    assert_eq!(event["workspace"], "brand-a");
    assert_eq!(event["feed"], "corp-urlhaus-told");
    assert_eq!(event["entry"], "bad.example");
    assert_eq!(event["reason"], "listed");
    assert!(event["id"].as_str().unwrap().starts_with("le_"));
    assert!(event.get("target").is_none(), "never the target: {event}");

    assert_eq!(release(&app, &a, &a_bad).await.status(), 200);
    let told = until_events(&to_a, 2).await;
    assert_eq!(told[1]["type"], "link.released");
    assert_eq!(told[1]["code"], a_bad.as_str());
    assert_eq!(told[1]["reason"], "released");
    assert_eq!(told[1]["entry"], "bad.example");

    // B's own quarantine, after A's in the feed: B's receiver gets it, and nothing of A's.
    write_hosts(&dir, &[HOSTS[0], HOSTS[1], "bad.example", "later.example"]);
    until_record(&app, &b_later, true).await;
    let b_told = until_events(&to_b, 1).await;
    let codes: Vec<&str> = (b_told.iter())
        .map(|event| event["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, [b_later.as_str()]);
    assert_eq!(b_told[0]["workspace"], "brand-b");
    // Once each (nothing failed, so nothing was sent again), every POST signed.
    assert_eq!(link_events(&to_a).len(), 2, "{:?}", link_events(&to_a));
    for receiver in [&to_a, &to_b] {
        assert_eq!(receiver.state.bad_signatures.load(Ordering::SeqCst), 0);
    }
    // The visit feed stays the visits'.
    let feed = with_key(&app, &a, reqwest::Method::GET, "/visits")
        .send()
        .await
        .unwrap();
    assert_eq!(feed.status(), 200);
    assert!(feed.text().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_subscription_that_declines_link_events_gets_none() {
    let (app, dir, a, _b) = app(Backend::Sqlite, "urlhaus-declined").await;
    let (chose, declined) = (Receiver::start().await, Receiver::start().await);
    subscribe(&app, &a, &chose).await;
    let body = json!({"url": declined.url(), "secret": HOOK_SECRET, "batch_size": 1,
                      "batch_ms": 0, "link_events": false});
    let answer: Value =
        send_json(with_key(&app, &a, reqwest::Method::POST, "/webhooks").json(&body)).await;
    assert_eq!(answer["link_events"], false);
    let id = answer["id"].as_str().unwrap().to_owned();
    let bad = create_in(&app, &a, "https://bad.example/").await;
    write_hosts(&dir, &[HOSTS[0], HOSTS[1], "bad.example"]);
    until_record(&app, &bad, true).await;
    let told = until_events(&chose, 1).await;
    // The declining subscription has read past the event (its cursor saved beyond it).
    let after = cursor_ms(&told[0]["cursor"]);
    let passed = eventually(Duration::from_secs(30), || async {
        let hook: Value = send_json(with_key(
            &app,
            &a,
            reqwest::Method::GET,
            &format!("/webhooks/{id}"),
        ))
        .await;
        cursor_ms(&hook["cursor"]) >= after
    })
    .await;
    assert!(passed);
    assert!(link_events(&declined).is_empty());
}

/// The milliseconds a stream cursor (`<ms>-<seq>`) starts with.
fn cursor_ms(cursor: &Value) -> i64 {
    let cursor = cursor.as_str().unwrap();
    cursor.split('-').next().unwrap().parse().unwrap()
}

async fn patch(app: &TestApp, key: &str, code: &str, body: Value) -> reqwest::Response {
    with_key(app, key, reqwest::Method::PATCH, &format!("/links/{code}"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn target_of(app: &TestApp, key: &str, code: &str) -> String {
    let link: Value = send_json(with_key(
        app,
        key,
        reqwest::Method::GET,
        &format!("/links/{code}"),
    ))
    .await;
    link["url"].as_str().unwrap().to_owned()
}

async fn unsafe_target(answer: reqwest::Response) -> String {
    assert_eq!(answer.status(), 422);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsafe_target", "{body}");
    body["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_patch_to_a_clean_target_lifts_the_quarantine_and_to_a_listed_one_is_refused() {
    let (app, dir, a, _b) = app(Backend::Sqlite, "urlhaus-patch").await;
    let to_a = Receiver::start().await;
    subscribe(&app, &a, &to_a).await;
    let bad = create_in(&app, &a, "https://bad.example/a").await;
    let good = create_in(&app, &a, "https://good.example/").await;
    write_hosts(&dir, &[HOSTS[0], HOSTS[1], "bad.example"]);
    until_record(&app, &bad, true).await;

    // To another listed target: refused, and it stays as it was (quarantined, its target).
    let refused = patch(
        &app,
        &a,
        &bad,
        json!({"url": "https://login.phish.example/"}),
    )
    .await;
    assert!(unsafe_target(refused).await.contains("\"phish.example\""));
    assert!(quarantined_in_redis(&app, &bad).await);
    assert_eq!(target_of(&app, &a, &bad).await, "https://bad.example/a");
    // A live link's PATCH to a listed target, or a listed expired target or rule: refused
    // whole, nothing written.
    for body in [
        json!({"url": "https://phish.example/x", "tags": ["changed"]}),
        json!({"expired_url": "https://tracker.example/"}),
        json!({"rules": [{"if": {"country": ["PT"]}, "split": {"variants": [
            {"weight": 1, "url": "https://good.example/b"},
            {"weight": 1, "url": "https://phish.example/c"}]}}]}),
    ] {
        unsafe_target(patch(&app, &a, &good, body).await).await;
    }
    let link: Value = send_json(with_key(
        &app,
        &a,
        reqwest::Method::GET,
        &format!("/links/{good}"),
    ))
    .await;
    assert_eq!(link["url"], "https://good.example/");
    assert_eq!(link["tags"], json!([]));
    assert!(
        link["expired_url"].is_null() && link["rules"].is_null(),
        "{link}"
    );
    let refusals: Value = send_json(with_key(
        &app,
        &a,
        reqwest::Method::GET,
        "/audit?action=link.refused",
    ))
    .await;
    assert_eq!(refusals["rows"].as_array().unwrap().len(), 4, "{refusals}");

    // To a clean target: it answers again, audited, its workspace told why.
    let lifted = patch(&app, &a, &bad, json!({"url": "https://fixed.example/"})).await;
    assert_eq!(lifted.status(), 200);
    until_record(&app, &bad, false).await;
    let told = until_events(&to_a, 2).await;
    assert_eq!(told[0]["type"], "link.quarantined");
    assert_eq!(told[1]["type"], "link.released");
    assert_eq!(told[1]["reason"], "target_changed");
    assert_eq!(told[1]["entry"], "bad.example");
    let audit: Value = send_json(with_key(
        &app,
        &a,
        reqwest::Method::GET,
        "/audit?action=link.update",
    ))
    .await;
    let row = (audit["rows"].as_array().unwrap().iter())
        .find(|row| row["object"] == bad.as_str())
        .unwrap();
    assert_eq!(row["changes"]["entry"][1], "bad.example", "{row}");
    let listed: Value = send_json(with_key(&app, &a, reqwest::Method::GET, "/quarantines")).await;
    assert!(
        listed["quarantines"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    // Counted: the feed's quarantine, and its release by the change.
    let page = app.metrics_page().await;
    for event in ["quarantined", "released"] {
        let series = format!(
            "shortlink_link_quarantines_total{{feed=\"corp-urlhaus-patch\",event=\"{event}\"}} 1"
        );
        assert!(page.contains(&series), "{series} in\n{page}");
    }
}

#[tokio::test]
async fn a_workspace_that_holds_for_review_has_a_patch_to_a_listed_target_held() {
    let (app, _dir, a, _b) = app(Backend::Sqlite, "urlhaus-patch-held").await;
    assert_eq!(
        put_lists(&app, &a, json!({"hold_for_review": true}))
            .await
            .status(),
        200
    );
    let to_a = Receiver::start().await;
    subscribe(&app, &a, &to_a).await;
    let code = create_in(&app, &a, "https://good.example/").await;
    let held = patch(&app, &a, &code, json!({"url": "https://phish.example/x"})).await;
    assert_eq!(held.status(), 200);
    assert!(quarantined_in_redis(&app, &code).await);
    let told = until_events(&to_a, 1).await;
    assert_eq!(told[0]["type"], "link.quarantined");
    assert_eq!(told[0]["reason"], "held");
    assert_eq!(told[0]["entry"], "phish.example");
}

#[tokio::test]
async fn a_listed_lifecycle_or_rule_target_is_refused_at_create() {
    let (app, _dir, a, _b) = app(Backend::Sqlite, "urlhaus-extras").await;
    for body in [
        json!({"url": "https://good.example/", "expired_url": "https://phish.example/"}),
        json!({"url": "https://good.example/", "valid_since": "2099-01-01T00:00:00Z",
               "not_yet_url": "https://tracker.example/soon"}),
        json!({"url": "https://good.example/", "rules": [
            {"if": {"country": ["PT"]}, "then": {"url": "https://login.phish.example/"}}]}),
    ] {
        let answer = with_key(&app, &a, reqwest::Method::POST, "/links")
            .json(&body)
            .send()
            .await
            .unwrap();
        unsafe_target(answer).await;
    }
    let batch = app
        .post_batch(&json!([
            {"url": "https://good.example/1"},
            {"url": "https://good.example/2", "expired_url": "https://phish.example/"}]))
        .await;
    let body: Value = batch.json().await.unwrap();
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["status"], 201, "{body}");
    assert_eq!(results[1]["status"], 422, "{body}");
    assert_eq!(results[1]["error"]["code"], "unsafe_target", "{body}");
}

/// Creates `body` with `key`: its code.
async fn create_with(app: &TestApp, key: &str, body: Value) -> String {
    let request = with_key(app, key, reqwest::Method::POST, "/links").json(&body);
    let link = answered(request, 201).await;
    link["code"].as_str().unwrap().to_owned()
}

async fn lifecycle_and_rule_targets_quarantined(backend: Backend) {
    let feed = Feed::default();
    feed.set(&["https://old.example/x"]);
    let mut flags = vec!["--threat-refresh", "1s"];
    flags.extend_from_slice(FLAGS);
    let (app, dir) = app_with_feeds_on(backend, "urlhaus-later", &feed, &flags).await;
    let key = API_KEY.to_owned();
    let create = |body: Value| create_with(&app, &key, body);
    let expired = create(json!({"url": "https://good.example/1",
        "expired_url": "https://over.example/sale"}))
    .await;
    let variant = create(json!({"url": "https://good.example/2",
        "rules": [{"if": {"country": ["PT"]}, "split": {"variants": [
            {"weight": 1, "url": "https://good.example/a"},
            {"weight": 1, "url": "https://cdn.variant.example/b"}]}}]}))
    .await;
    let by_url = create(json!({"url": "https://good.example/3",
        "rules": [{"if": {"country": ["PT"]}, "then": {"url": "https://rule.example/phish?id=7"}}]})).await;
    let moved = create(json!({"url": "https://good.example/4",
        "expired_url": "https://over.example/old"}))
    .await;
    let untouched = create(json!({"url": "https://good.example/5",
        "rules": [{"if": {"country": ["PT"]}, "then": {"url": "https://rule.example/other"}}]}))
    .await;
    // A change that drops its listed-to-be destination takes it out of the index.
    let answer = patch(&app, &key, &moved, json!({"expired_url": null})).await;
    assert_eq!(answer.status(), 200);

    write_hosts(
        &dir,
        &[HOSTS[0], HOSTS[1], "over.example", "variant.example"],
    );
    feed.set(&["https://old.example/x", "https://rule.example/phish?id=7"]);
    for code in [&expired, &variant, &by_url] {
        until_record(&app, code, true).await;
    }
    for code in [&moved, &untouched] {
        assert!(!quarantined_in_redis(&app, code).await, "{code}");
    }
    // Each under its entry (the record is written just before its row commits: read until
    // the three rows are there).
    let entries = || async {
        let listed = app.get_json("/quarantines").await;
        let mut entries: Vec<String> = (listed["quarantines"].as_array().unwrap().iter())
            .map(|q| q["entry"].as_str().unwrap().to_owned())
            .collect();
        entries.sort_unstable();
        entries
    };
    let expected = [
        "https://rule.example/phish?id=7",
        "over.example",
        "variant.example",
    ];
    let listed = eventually(Duration::from_secs(10), || async {
        entries().await == expected
    })
    .await;
    assert!(listed, "{:?}", entries().await);
}

crate::on_each_backend!(
    told_once_each_to_the_links_workspace_only,
    lifecycle_and_rule_targets_quarantined
);
