//! Threat feeds (issue 79): feeds in their public formats, served by a local HTTP server or read
//! from a file, refuse listed targets at create with 422 `unsafe_target` naming the feed,
//! nothing stored; in a batch only the listed line; a feed's new entry refuses from its next
//! refresh on.

use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, send_json, with_key, workspace_key};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A URLhaus CSV dump as the feed's server answers it, with an ETag per version.
#[derive(Clone, Default)]
struct Feed(Arc<Mutex<(u32, String)>>);

impl Feed {
    fn set(&self, urls: &[&str]) {
        let mut body = String::from(
            "################################################################\n\
             # abuse.ch URLhaus Database Dump (CSV - recent URLs only)\n\
             # id,dateadded,url,url_status,last_online,threat,tags,urlhaus_link,reporter\n",
        );
        for (i, url) in urls.iter().enumerate() {
            body.push_str(&format!(
                "\"{id}\",\"2026-11-28 10:00:00\",\"{url}\",\"online\",\"2026-11-28 10:00:00\",\
                 \"malware_download\",\"exe\",\"https://urlhaus.abuse.ch/url/{id}/\",\"tester\"\n",
                id = 3_200_000 + i
            ));
        }
        let mut current = self.0.lock().unwrap();
        *current = (current.0 + 1, body);
    }

    async fn serve(&self) -> String {
        let feed = self.clone();
        let app = axum::Router::new().route(
            "/downloads/csv_recent/",
            get(move |headers: HeaderMap| {
                let feed = feed.clone();
                async move {
                    let (version, body) = feed.0.lock().unwrap().clone();
                    let etag = format!("\"{version}\"");
                    let asked = headers.get(header::IF_NONE_MATCH);
                    if asked.and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
                        return StatusCode::NOT_MODIFIED.into_response();
                    }
                    ([(header::ETAG, etag)], body).into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{address}/downloads/csv_recent/")
    }
}

/// A sidecar with the URLhaus feed `name` served from `feed`, and a hosts file.
async fn app_with_feeds(name: &str, feed: &Feed, extra: &[&str]) -> (TestApp, tempfile::TempDir) {
    let url = feed.serve().await;
    let dir = testkit::temp_dir();
    let hosts = dir.path().join("hosts.txt");
    std::fs::write(
        &hosts,
        "# corp blocklist\n0.0.0.0 phish.example\n||tracker.example^\n",
    )
    .unwrap();
    let feeds = format!(
        "{name}=urlhaus-csv:{url},corp-{name}=hosts:{}",
        hosts.display()
    );
    let mut flags = vec!["--threat-feeds", feeds.as_str()];
    flags.extend_from_slice(extra);
    (spawn_app_with(Backend::Sqlite, &flags).await, dir)
}

async fn refused(app: &TestApp, url: &str) -> Value {
    let response = app.post_link(&json!({ "url": url })).await;
    assert_eq!(response.status(), 422, "{url}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unsafe_target", "{body}");
    body
}

#[tokio::test]
async fn a_listed_target_is_refused_naming_the_feed_and_nothing_is_stored() {
    let feed = Feed::default();
    feed.set(&["http://malware.example/payload.exe"]);
    let (app, _dir) = app_with_feeds("urlhaus-create", &feed, &[]).await;
    let body = refused(&app, "http://malware.example/payload.exe").await;
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"urlhaus-create\""), "{message}");
    let body = refused(&app, "https://login.phish.example/account").await;
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"corp-urlhaus-create\""), "{message}");
    assert!(message.contains("\"phish.example\""), "{message}");
    // A nested short link hides its target from every filter.
    let body = refused(&app, "https://bit.ly/3xyz").await;
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("\"shorteners\""));
    let stored = app.stored().await;
    assert_eq!((stored.links, stored.redis_keys), (0, 0));
    // Each refusal is in the workspace's audit log, with the feed and the entry.
    let audit = app.get_json("/audit?action=link.refused").await;
    let rows = audit["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let phish = rows
        .iter()
        .find(|row| row["object"] == "corp-urlhaus-create")
        .unwrap();
    assert_eq!(phish["changes"]["entry"][1], "phish.example");
    assert_eq!(
        phish["changes"]["target"][1],
        "https://login.phish.example/account"
    );
    // Another URL on the same host as a listed URL, and an unlisted host, are created.
    app.create_code("http://malware.example/other").await;
    app.create_code("https://notphish.example/").await;
    assert_eq!(app.stored().await.links, 2);
}

#[tokio::test]
async fn a_batch_refuses_only_its_listed_lines() {
    let feed = Feed::default();
    feed.set(&["https://evil.example/login"]);
    let (app, _dir) = app_with_feeds("urlhaus-batch", &feed, &[]).await;
    let items = json!([
        {"url": "https://shop.example/a"},
        {"url": "https://evil.example/login"},
        {"url": "https://shop.example/b"},
        {"url": "https://x.tracker.example/p"},
        {"url": "https://shop.example/c"},
    ]);
    let response = app.post_batch(&items).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let results = body["results"].as_array().unwrap();
    let statuses: Vec<u64> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [201, 422, 201, 422, 201]);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["index"], i as u64);
    }
    assert_eq!(results[1]["error"]["code"], "unsafe_target");
    assert!(results[3]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("\"corp-urlhaus-batch\""));
    assert_eq!(app.stored().await.links, 3);
    let audit = app.get_json("/audit?action=link.refused").await;
    assert_eq!(audit["rows"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_feed_update_refuses_from_the_next_refresh_on() {
    let feed = Feed::default();
    feed.set(&["https://old.example/x"]);
    let (app, _dir) = app_with_feeds("urlhaus-refresh", &feed, &["--threat-refresh", "1s"]).await;
    app.create_code("https://fresh.example/phish").await;
    feed.set(&["https://old.example/x", "https://fresh.example/phish"]);
    // The refresh job picks the new entry up: polled through the feed's entry count.
    let client = reqwest::Client::new();
    let entries = "shortlink_threat_feed_entries{feed=\"urlhaus-refresh\"} 2";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let page = client.get(app.metrics_url()).send().await.unwrap();
        if page.text().await.unwrap().contains(entries) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no refresh in 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    refused(&app, "https://fresh.example/phish").await;
    assert_eq!(app.stored().await.links, 1);
}

/// Creates a link to `url` with `key`; returns the status and the error's message, if any.
async fn create_with(app: &TestApp, key: &str, url: &str) -> (u16, String) {
    let answer = with_key(app, key, reqwest::Method::POST, "/links")
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    (status, message.to_owned())
}

async fn put_lists(app: &TestApp, key: &str, lists: Value) -> reqwest::Response {
    with_key(app, key, reqwest::Method::PUT, "/target-lists")
        .json(&lists)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn workspace_lists_apply_to_their_workspace_only_and_never_over_a_feed() {
    let feed = Feed::default();
    feed.set(&["https://listed.example/x"]);
    let (app, _dir) = app_with_feeds("urlhaus-lists", &feed, &[]).await;
    let operator = operator_key(&app).await;
    for slug in ["brand-a", "brand-b"] {
        create_workspace(&app, &operator, slug).await;
    }
    let a = workspace_key(&app, &operator, "brand-a", "admin").await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    let b_issuer = workspace_key(&app, &operator, "brand-b", "issuer").await;
    let answer = put_lists(
        &app,
        &b,
        json!({"block": ["Rival.example"], "allow": ["listed.example", "rival.example", "b.example"]}),
    )
    .await;
    assert_eq!(answer.status(), 200);
    let stored: Value = answer.json().await.unwrap();
    assert_eq!(stored["block"], json!(["rival.example"]));
    // An issuer cannot change them; a bad host is named.
    assert_eq!(put_lists(&app, &b_issuer, json!({})).await.status(), 403);
    let bad = put_lists(&app, &b, json!({"block": ["not a host"]})).await;
    assert_eq!(bad.status(), 422);
    // An array is no body of this route, though serde would read it as both lists empty.
    assert_eq!(put_lists(&app, &b, json!([])).await.status(), 422);

    // B's block list refuses B's links only.
    let (status, message) = create_with(&app, &b, "https://www.rival.example/").await;
    assert_eq!(status, 422);
    assert!(message.contains("\"workspace-block-list\""), "{message}");
    assert_eq!(
        create_with(&app, &a, "https://www.rival.example/").await.0,
        201
    );
    // B's allow list keeps B's links on its hosts, and A's links anywhere.
    let (status, message) = create_with(&app, &b, "https://elsewhere.example/").await;
    assert_eq!(status, 422);
    assert!(message.contains("\"workspace-allow-list\""), "{message}");
    assert_eq!(create_with(&app, &b, "https://b.example/p").await.0, 201);
    assert_eq!(
        create_with(&app, &a, "https://elsewhere.example/").await.0,
        201
    );
    // A feed-listed target stays refused, though B's allow list names its host.
    let (status, message) = create_with(&app, &b, "https://listed.example/x").await;
    assert_eq!(status, 422);
    assert!(message.contains("\"urlhaus-lists\""), "{message}");
    assert_eq!(app.stored().await.links, 3);
    let lists: Value = send_json(with_key(&app, &a, reqwest::Method::GET, "/target-lists")).await;
    assert_eq!(lists, json!({"block": [], "allow": []}));
}

#[tokio::test]
async fn bad_threat_settings_stop_the_start_naming_the_flag() {
    let redis = testkit::RedisServer::start();
    let dir = testkit::temp_dir();
    for (flags, needle) in [
        (
            ["--threat-feeds", "urlhaus=csv:/tmp/x"],
            "unknown feed format",
        ),
        (["--threat-feeds", "no-format"], "no `name=`"),
        (["--threat-shorteners", "not a host"], "--threat-shorteners"),
        (["--threat-brand-hosts", "bad host"], "--threat-brand-hosts"),
    ] {
        let database = format!("sqlite://{}", dir.path().join("links.db").display());
        let config = config(&database, &redis.url(), &flags);
        let error = match shortlink_sidecar::Application::build(&config).await {
            Ok(_) => panic!("{flags:?} accepted"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains(needle), "{flags:?}: {error}");
    }
}
