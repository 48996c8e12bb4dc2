//! What the API and the CLI record: webhook changes with the key and the request id, key
//! create/revoke from the CLI; `GET /api/v1/audit` for admin keys only, with filters and a cursor.

use super::verify_cli;
use crate::helpers::{sidecar_cli, spawn_app_with, Backend, TestApp, API_KEY};
use crate::on_each_backend;
use reqwest::Method;
use serde_json::{json, Value};

on_each_backend!(webhook_and_key_changes_are_recorded_with_their_actor_and_request);

const SECRET: &str = "a-webhook-secret-of-some-length";
const OTHER_SECRET: &str = "another-webhook-secret-entirely";

async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    request_id: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = app.api(method, path).header("x-request-id", request_id);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    assert_eq!(
        response.headers()["x-request-id"],
        request_id,
        "the request id is echoed"
    );
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response
}

async fn audit(app: &TestApp, query: &str) -> Value {
    app.get_json(&format!("/audit{query}")).await
}

async fn webhook_and_key_changes_are_recorded_with_their_actor_and_request(backend: Backend) {
    let app = spawn_app_with(backend, &["--webhook-allow-private", "--webhooks", "false"]).await;
    let bootstrap = app
        .db
        .scalar("SELECT id FROM api_keys WHERE name = 'bootstrap'")
        .await;

    let hook = |token: &str| json!({"url": format!("http://127.0.0.1:9/hook/{token}"), "secret": SECRET, "name": "crm"});
    let created = send(
        &app,
        Method::POST,
        "/webhooks",
        "req-create",
        Some(hook("tokenone")),
    )
    .await;
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/webhooks/{id}");
    let mut replaced = hook("tokentwo");
    replaced["name"] = json!("crm two");
    replaced["secret"] = json!(OTHER_SECRET);
    send(&app, Method::PUT, &path, "req-update", Some(replaced)).await;
    send(&app, Method::DELETE, &path, "req-delete", None).await;

    let page = audit(&app, "?action=webhook.*").await;
    let rows = page["rows"].as_array().unwrap();
    let seen: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap(),
                r["request_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("webhook.delete", "req-delete"),
            ("webhook.update", "req-update"),
            ("webhook.create", "req-create")
        ]
    );
    for row in rows {
        assert_eq!(row["actor_kind"], "key");
        assert_eq!(row["actor_id"], bootstrap);
        assert_eq!(row["actor_name"], "bootstrap");
        assert_eq!(row["object"], id.as_str());
        let text = row["changes"].to_string();
        for leak in [SECRET, OTHER_SECRET, "tokenone", "tokentwo"] {
            assert!(!text.contains(leak), "{text}");
        }
    }
    assert_eq!(rows[1]["changes"]["name"], json!(["crm", "crm two"]));
    assert_eq!(
        rows[1]["changes"]["secret"],
        json!(["<redacted>", "<changed>"])
    );
    assert_eq!(
        rows[1]["changes"]["url"],
        json!(["<redacted>", "<changed>"])
    );
    assert_eq!(
        rows[0]["changes"]["url_origin"],
        json!(["http://127.0.0.1:9", null])
    );

    // A request without an id gets one, echoed and recorded.
    let answer = app
        .api(Method::POST, "/webhooks")
        .json(&hook("tokenthree"))
        .send()
        .await
        .unwrap();
    let made = answer.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(made.len(), 32, "{made}");
    let newest = audit(&app, "?limit=1").await;
    assert_eq!(newest["rows"][0]["request_id"], made.as_str());

    // Keys from the CLI: their rows name the CLI, the new key's name and role, never the key.
    let key = sidecar_cli(
        &app.database_url,
        &[
            "keys",
            "create",
            "--name",
            "viewer tool",
            "--role",
            "viewer",
        ],
    );
    let key = key.trim();
    let created = audit(&app, "?action=key.create").await;
    let row = &created["rows"][0];
    assert_eq!(row["actor_kind"], "cli");
    assert_eq!(
        row["changes"],
        json!({"name": [null, "viewer tool"], "role": [null, "viewer"]})
    );
    assert!(!created.to_string().contains(key));
    let key_id = row["object"].as_str().unwrap().to_owned();

    // Not for a non-admin key: 403, as for any route it was not given.
    let refused = app
        .client
        .get(app.url("/api/v1/audit"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    sidecar_cli(&app.database_url, &["keys", "revoke", &key_id]);
    let revoked = audit(&app, &format!("?action=key.revoke&object={key_id}")).await;
    assert_eq!(revoked["rows"].as_array().unwrap().len(), 1);

    // Filters and the cursor: by actor; pages of two, each from the last one's `next`.
    let by_key = audit(&app, &format!("?actor=key:{bootstrap}")).await;
    assert_eq!(by_key["rows"].as_array().unwrap().len(), 4);
    let keys = audit(&app, "?action=key.*").await;
    let keys: Vec<_> = keys["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["action"].clone(), r["actor_kind"].clone()))
        .collect();
    assert_eq!(
        keys,
        [
            (json!("key.revoke"), json!("cli")),
            (json!("key.create"), json!("cli")),
            (json!("key.create"), json!("system")),
        ],
        "the bootstrap key's row was written at start-up"
    );
    let (mut ids, mut query) = (Vec::new(), "?limit=2".to_owned());
    loop {
        let page = audit(&app, &query).await;
        ids.extend(
            page["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_i64().unwrap()),
        );
        match page["next"].as_i64() {
            Some(next) => query = format!("?limit=2&after={next}"),
            None => break,
        }
    }
    assert_eq!(ids.len(), 7, "{ids:?}");
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
    let bad = app.api(Method::GET, "/audit?limit=0").send().await.unwrap();
    assert_eq!(bad.status(), 400);
    let everything = audit(&app, "?limit=500").await.to_string();
    assert!(!everything.contains(API_KEY) && !everything.contains(key));

    let (sound, said) = verify_cli(&app.database_url);
    assert!(sound, "{said}");
    assert!(said.contains("7 rows checked"), "{said}");
}

/// An import writes one row per run with its counts and idempotency key, not one per link; a
/// second run of the same file one more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_is_one_row_per_run() {
    let app = spawn_app_with(Backend::Sqlite, &[]).await;
    let dir = testkit::temp_dir();
    let file = dir.path().join("links.csv");
    std::fs::write(
        &file,
        "url,campaign\nhttps://shop.example/a,spring\nhttps://shop.example/b,spring\n\
         https://shop.example/c,spring\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    app.run_cli(&["import", path]).await;
    let rows = audit(&app, "?action=import.run").await;
    let row = &rows["rows"][0];
    assert_eq!(rows["rows"].as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(row["actor_kind"], "cli");
    assert_eq!(row["object"], path);
    assert_eq!(row["batch_size"], 3);
    assert_eq!(row["changes"]["created"], json!([null, 3]));
    assert!(
        row["idempotency_key"]
            .as_str()
            .unwrap()
            .starts_with("import:"),
        "{row}"
    );
    app.run_cli(&["import", path]).await;
    let runs = audit(&app, "?action=import.run").await;
    assert_eq!(runs["rows"].as_array().unwrap().len(), 2);
    let per_link = audit(&app, "?action=link.create").await;
    assert_eq!(per_link["rows"], json!([]), "no row per link");
}
