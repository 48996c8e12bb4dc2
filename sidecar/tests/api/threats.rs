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
pub(crate) struct Feed(Arc<Mutex<(u32, String)>>);

impl Feed {
    pub(crate) fn set(&self, urls: &[&str]) {
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
pub(crate) async fn app_with_feeds(
    name: &str,
    feed: &Feed,
    extra: &[&str],
) -> (TestApp, tempfile::TempDir) {
    app_with_feeds_on(Backend::Sqlite, name, feed, extra).await
}

/// [`app_with_feeds`] on `backend`.
pub(crate) async fn app_with_feeds_on(
    backend: Backend,
    name: &str,
    feed: &Feed,
    extra: &[&str],
) -> (TestApp, tempfile::TempDir) {
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
    (spawn_app_with(backend, &flags).await, dir)
}

pub(crate) async fn refused(app: &TestApp, url: &str) -> Value {
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

pub(crate) async fn put_lists(app: &TestApp, key: &str, lists: Value) -> reqwest::Response {
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
    assert_eq!(
        lists,
        json!({"block": [], "allow": [], "hold_for_review": false})
    );
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
        let error = (start_error(dir.path(), &redis, &flags).await)
            .unwrap_or_else(|| panic!("{flags:?} accepted"));
        assert!(error.contains(needle), "{flags:?}: {error}");
    }
}

/// The decoded state of `code`'s record in Redis: what the module and its caches answer.
async fn record_of(app: &TestApp, code: &str) -> Option<shortlink_wire::record::Link> {
    let bytes = app.redis_record(code).await?;
    Some(shortlink_wire::record::decode(&bytes).unwrap())
}

pub(crate) async fn quarantined_in_redis(app: &TestApp, code: &str) -> bool {
    matches!(
        record_of(app, code).await,
        Some(shortlink_wire::record::Link::Quarantined { .. })
    )
}

/// Waits (at most 60 s, the bound) until `code`'s record is quarantined (`true`) or live.
pub(crate) async fn until_record(app: &TestApp, code: &str, quarantined: bool) {
    let done = eventually(Duration::from_secs(60), || async {
        quarantined_in_redis(app, code).await == quarantined
    })
    .await;
    assert!(
        done,
        "{code}: not {} within 60 s",
        if quarantined { "quarantined" } else { "live" }
    );
}

/// The fallback's answer for `code` on a host of `workspace`: status and body.
async fn fallback_answer(app: &TestApp, workspace: &str, code: &str) -> (u16, Vec<u8>) {
    let answer = app.resolve_on(workspace, code).await;
    let status = answer.status().as_u16();
    (status, answer.bytes().await.unwrap().to_vec())
}

pub(crate) async fn create_in(app: &TestApp, key: &str, url: &str) -> String {
    let answer = with_key(app, key, reqwest::Method::POST, "/links")
        .json(&json!({ "url": url }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201, "{url}");
    let body: Value = answer.json().await.unwrap();
    body["code"].as_str().unwrap().to_owned()
}

pub(crate) async fn release(app: &TestApp, key: &str, code: &str) -> reqwest::Response {
    with_key(
        app,
        key,
        reqwest::Method::POST,
        &format!("/links/{code}/release"),
    )
    .send()
    .await
    .unwrap()
}

/// Replaces the hosts file whole (written aside, then renamed): a refresh never reads half of
/// it, which would end the quarantines of the entries it had not reached.
pub(crate) fn write_hosts(dir: &tempfile::TempDir, hosts: &[&str]) {
    let body: String = hosts
        .iter()
        .map(|host| format!("0.0.0.0 {host}\n"))
        .collect();
    let aside = dir.path().join("hosts.txt.new");
    std::fs::write(&aside, body).unwrap();
    std::fs::rename(aside, dir.path().join("hosts.txt")).unwrap();
}

#[tokio::test]
async fn a_feed_update_quarantines_live_links_and_a_release_holds_until_the_entry_changes() {
    let feed = Feed::default();
    feed.set(&["https://old.example/x"]);
    let flags = ["--threat-refresh", "1s"];
    let (app, dir) = app_with_feeds("urlhaus-q", &feed, &flags).await;
    let operator = operator_key(&app).await;
    for slug in ["brand-a", "brand-b"] {
        create_workspace(&app, &operator, slug).await;
    }
    let a = workspace_key(&app, &operator, "brand-a", "admin").await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    let a_bad = create_in(&app, &a, "https://www.bad.example/a").await;
    let b_bad = create_in(&app, &b, "https://bad.example/b").await;
    let a_good = create_in(&app, &a, "https://notbad.example/").await;
    let a_url = create_in(&app, &a, "https://urls.example/phish?id=1").await;
    let a_same_host = create_in(&app, &a, "https://urls.example/other").await;
    let a_later = create_in(&app, &a, "https://later.example/").await;

    // The host list gains bad.example (its subdomains too), URLhaus one URL.
    write_hosts(&dir, &["phish.example", "tracker.example", "bad.example"]);
    feed.set(&["https://old.example/x", "https://urls.example/phish?id=1"]);
    for code in [&a_bad, &b_bad, &a_url] {
        until_record(&app, code, true).await;
    }
    for code in [&a_good, &a_same_host, &a_later] {
        assert!(!quarantined_in_redis(&app, code).await, "{code}");
    }
    // The fallback answers as the module: the warning page, never the target.
    let (status, page) = fallback_answer(&app, "brand-a", &a_bad).await;
    assert_eq!(status, 451);
    assert_eq!(page, shortlink_wire::record::quarantine_page());
    assert!(!String::from_utf8_lossy(&page).contains("bad.example"));
    assert_eq!(fallback_answer(&app, "brand-a", &a_good).await.0, 302);
    // Each workspace sees its own quarantines, with the feed and the entry, and its audit rows.
    let listed: Value = send_json(with_key(&app, &a, reqwest::Method::GET, "/quarantines")).await;
    let mut seen: Vec<(String, String)> = (listed["quarantines"].as_array().unwrap().iter())
        .map(|q| {
            (
                q["code"].as_str().unwrap().into(),
                q["entry"].as_str().unwrap().into(),
            )
        })
        .collect();
    seen.sort();
    let mut expected = vec![
        (a_bad.clone(), "bad.example".to_owned()),
        (a_url.clone(), "https://urls.example/phish?id=1".to_owned()),
    ];
    expected.sort();
    assert_eq!(seen, expected);
    let b_listed: Value = send_json(with_key(&app, &b, reqwest::Method::GET, "/quarantines")).await;
    assert_eq!(b_listed["quarantines"].as_array().unwrap().len(), 1);
    assert_eq!(b_listed["quarantines"][0]["feed"], "corp-urlhaus-q");
    let audit: Value = send_json(with_key(
        &app,
        &a,
        reqwest::Method::GET,
        "/audit?action=link.quarantined",
    ))
    .await;
    assert_eq!(audit["rows"].as_array().unwrap().len(), 2, "{audit}");

    // B's admin cannot release A's link (as if it did not exist); A's can, audited.
    assert_eq!(release(&app, &b, &a_bad).await.status(), 404);
    assert!(quarantined_in_redis(&app, &a_bad).await);
    let released = release(&app, &a, &a_bad).await;
    assert_eq!(released.status(), 200);
    until_record(&app, &a_bad, false).await;
    assert_eq!(fallback_answer(&app, "brand-a", &a_bad).await.0, 302);
    assert!(
        quarantined_in_redis(&app, &b_bad).await,
        "B's stays quarantined"
    );

    // The release holds while the entry stays: a later change (another host) is swept, and
    // a_bad stays live.
    write_hosts(
        &dir,
        &[
            "phish.example",
            "tracker.example",
            "bad.example",
            "later.example",
        ],
    );
    until_record(&app, &a_later, true).await;
    assert!(!quarantined_in_redis(&app, &a_bad).await);

    // The entry leaves the feed: B's link answers again (audited), and A's release is forgotten.
    write_hosts(&dir, &["phish.example", "tracker.example", "later.example"]);
    until_record(&app, &b_bad, false).await;
    // The record is published before its transaction commits (Redis first, ARCHITECTURE.md):
    // the audit row follows it.
    let ended = || async {
        let ended: Value = send_json(with_key(
            &app,
            &b,
            reqwest::Method::GET,
            "/audit?action=link.quarantine_ended",
        ))
        .await;
        ended["rows"].as_array().unwrap().len()
    };
    assert!(eventually(Duration::from_secs(60), || async { ended().await >= 1 }).await);
    assert_eq!(ended().await, 1);
    // It comes back: a changed entry quarantines again, released or not.
    write_hosts(
        &dir,
        &[
            "phish.example",
            "tracker.example",
            "later.example",
            "bad.example",
        ],
    );
    for code in [&a_bad, &b_bad] {
        until_record(&app, code, true).await;
    }
    // The operator releases from the command line, in any workspace.
    app.run_cli(&["quarantines", "release", &b_bad]).await;
    until_record(&app, &b_bad, false).await;
}

#[tokio::test]
async fn a_workspace_that_holds_for_review_stores_listed_links_quarantined() {
    let feed = Feed::default();
    feed.set(&["https://listed.example/x"]);
    let (app, _dir) = app_with_feeds("urlhaus-hold", &feed, &[]).await;
    let operator = operator_key(&app).await;
    for slug in ["brand-a", "brand-b"] {
        create_workspace(&app, &operator, slug).await;
    }
    let a = workspace_key(&app, &operator, "brand-a", "admin").await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    let answer = put_lists(&app, &a, json!({"hold_for_review": true})).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.json::<Value>().await.unwrap()["hold_for_review"],
        true
    );

    // A's listed target is stored, quarantined under the feed's entry; B's is refused as before.
    let answer = with_key(&app, &a, reqwest::Method::POST, "/links")
        .json(&json!({"url": "https://listed.example/x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    let held: Value = answer.json().await.unwrap();
    assert!(held["quarantined_at"].is_string(), "{held}");
    let code = held["code"].as_str().unwrap().to_owned();
    assert!(quarantined_in_redis(&app, &code).await);
    assert_eq!(fallback_answer(&app, "brand-a", &code).await.0, 451);
    assert_eq!(
        create_with(&app, &b, "https://listed.example/x").await.0,
        422
    );
    // In a batch, only the listed line is held; the others are plain links.
    let items = json!([{"url": "https://shop.example/a"}, {"url": "https://www.phish.example/b"}]);
    let answer = with_key(&app, &a, reqwest::Method::POST, "/links/batch")
        .json(&items)
        .send()
        .await
        .unwrap();
    let body: Value = answer.json().await.unwrap();
    let results = body["results"].as_array().unwrap();
    assert_eq!(
        (results[0]["status"].as_u64(), results[1]["status"].as_u64()),
        (Some(201), Some(201))
    );
    let batch_code = |i: usize| {
        (results[i]["link"]["code"]
            .as_str()
            .or(results[i]["code"].as_str()))
        .unwrap()
        .to_owned()
    };
    assert!(!quarantined_in_redis(&app, &batch_code(0)).await);
    assert!(quarantined_in_redis(&app, &batch_code(1)).await);
    let listed: Value = send_json(with_key(&app, &a, reqwest::Method::GET, "/quarantines")).await;
    let entries: Vec<&str> = (listed["quarantines"].as_array().unwrap().iter())
        .map(|q| q["entry"].as_str().unwrap())
        .collect();
    assert_eq!(entries.len(), 2, "{listed}");
    assert!(entries.contains(&"https://listed.example/x") && entries.contains(&"phish.example"));
    // Reviewed and released: it redirects.
    assert_eq!(release(&app, &a, &code).await.status(), 200);
    assert_eq!(fallback_answer(&app, "brand-a", &code).await.0, 302);
    assert!(!quarantined_in_redis(&app, &code).await);
}

#[tokio::test]
async fn the_console_lists_held_back_links_and_releases_them() {
    let feed = Feed::default();
    feed.set(&["https://listed.example/x"]);
    let (app, _dir) = app_with_feeds("urlhaus-console", &feed, &[]).await;
    refused(&app, "https://listed.example/x").await;
    let answer = put_lists(&app, API_KEY, json!({"hold_for_review": true})).await;
    assert_eq!(answer.status(), 200);
    let held = app.create(json!({"url": "https://listed.example/x"})).await;
    let code = held["code"].as_str().unwrap().to_owned();
    let mut browser = crate::console::Browser::new(&app);
    assert_eq!(browser.sign_in(API_KEY).await.status(), 303);
    let page = browser.page("/console/held").await;
    for shown in [
        &code,
        "urlhaus-console",
        "https://listed.example/x",
        "Release",
    ] {
        assert!(page.contains(shown), "{shown}: {page}");
    }
    let csrf = crate::console::csrf_of(&page);
    let released = browser
        .post(&format!("/console/held/{code}/release"), &[("csrf", &csrf)])
        .await;
    assert_eq!(released.status(), 303);
    assert!(!quarantined_in_redis(&app, &code).await);
    let page = browser.page("/console/held").await;
    assert!(page.contains("released"), "{page}");
    assert!(!page.contains(">Release<"), "{page}");
}

#[tokio::test]
async fn visitors_report_a_code_for_the_operators_queue_a_few_at_a_time() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://shop.example/").await;
    let report = |path: String, form: Vec<(&'static str, String)>| {
        app.client
            .post(app.url(&path))
            .header("x-shortlink-host", "s1.example")
            .form(&form)
            .send()
    };
    // The warning page's button (its own path) and the home page's form (a pasted short URL).
    let answer = report(format!("/report-abuse/{code}"), vec![])
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("Thank you"));
    let pasted = format!("https://s1.example/{code}?utm=sms");
    let answer = report("/report-abuse".into(), vec![("code", pasted)])
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let bad = report("/report-abuse".into(), vec![("code", "not a code!".into())]).await;
    assert_eq!(bad.unwrap().status(), 422);
    // Stored for the operator: the code and the host, newest first; no target.
    let storage = app.storage().await;
    let reports = storage.abuse_reports(10).await.unwrap();
    assert_eq!(reports.len(), 2);
    assert!(reports
        .iter()
        .all(|r| r.code == code && r.host == "s1.example"));
    // A few at once per address (here every request shares one: no proxy secret), then 429.
    for _ in 2..shortlink_api::abuse::BURST {
        let answer = report(format!("/report-abuse/{code}"), vec![])
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
    }
    let answer = report(format!("/report-abuse/{code}"), vec![])
        .await
        .unwrap();
    assert_eq!(answer.status(), 429);
    assert_eq!(
        storage.abuse_reports(100).await.unwrap().len(),
        shortlink_api::abuse::BURST as usize
    );
}

#[tokio::test]
async fn a_host_a_workspace_blocks_later_quarantines_its_links_only() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    for slug in ["brand-a", "brand-b"] {
        create_workspace(&app, &operator, slug).await;
    }
    let a = workspace_key(&app, &operator, "brand-a", "admin").await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    let a_link = create_in(&app, &a, "https://www.rival.example/a").await;
    let b_link = create_in(&app, &b, "https://rival.example/b").await;
    assert_eq!(
        put_lists(&app, &b, json!({"block": ["rival.example"]}))
            .await
            .status(),
        200
    );
    assert!(quarantined_in_redis(&app, &b_link).await);
    assert!(
        !quarantined_in_redis(&app, &a_link).await,
        "A's link is not B's to block"
    );
    let listed: Value = send_json(with_key(&app, &b, reqwest::Method::GET, "/quarantines")).await;
    assert_eq!(listed["quarantines"][0]["feed"], "workspace-block-list");
    assert_eq!(listed["quarantines"][0]["entry"], "rival.example");
    // Unblocked: B's link answers again.
    assert_eq!(put_lists(&app, &b, json!({})).await.status(), 200);
    assert!(!quarantined_in_redis(&app, &b_link).await);
    assert_eq!(fallback_answer(&app, "brand-b", &b_link).await.0, 302);
}

crate::on_each_backend!(the_quarantine_store_holds_on_every_backend);

/// The host index's range, the quarantine rows, a release and an end, on each database.
async fn the_quarantine_store_holds_on_every_backend(backend: Backend) {
    let app = spawn_app(backend).await;
    let listed = app.create_code("https://www.listed.example/a").await;
    let beside = app.create_code("https://notlisted.example/b").await;
    let change = shortlink_threats::FeedChange {
        feed: "feed".into(),
        added_hosts: vec!["listed.example".into()],
        added_urls: Vec::new(),
    };
    let links = &app.state.links;
    assert_eq!(links.quarantine_added(&change).await.unwrap(), 1);
    assert!(quarantined_in_redis(&app, &listed).await);
    assert!(!quarantined_in_redis(&app, &beside).await);
    assert_eq!(app.resolve(&listed).await.status(), 451);
    // Released: holds against the same entry.
    assert_eq!(release(&app, API_KEY, &listed).await.status(), 200);
    assert_eq!(links.quarantine_added(&change).await.unwrap(), 0);
    assert_eq!(app.resolve(&listed).await.status(), 302);
    // The entry gone, then back: quarantined again, then ended.
    assert_eq!(links.end_unlisted("feed", |_| false).await.unwrap(), 0);
    assert_eq!(links.quarantine_added(&change).await.unwrap(), 1);
    assert_eq!(links.end_unlisted("feed", |_| false).await.unwrap(), 1);
    assert_eq!(app.resolve(&listed).await.status(), 302);
    let listed_now: Value = app.get_json("/quarantines").await;
    assert_eq!(listed_now["quarantines"], json!([]));
}
