//! `import`, `export` and `resync` on the command line (the real binary, for its output and exit
//! status): line numbers for bad rows, export → import round trips, Redis rebuilt after FLUSHALL.

use crate::helpers::*;
use crate::on_each_backend;
use reqwest::Method;
use serde_json::{json, Value};
use std::process::{Command, Output};

on_each_backend!(
    export_then_import_reproduces_the_links,
    resync_removes_orphan_keys
);

/// Runs the sidecar binary with the app's database and Redis.
fn sidecar(app: &TestApp, args: &[&str]) -> Output {
    let redis_url = app.redis.url();
    Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .args(args)
        .args([
            "--database-url",
            &app.database_url,
            "--redis-url",
            &redis_url,
        ])
        .args(["--code-secret", SECRET_HEX])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run shortlink-sidecar")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_reports_bad_rows_by_line_and_is_resumable() {
    let app = spawn_app(Backend::Sqlite).await;
    let dir = testkit::temp_dir();
    let file = dir.path().join("recipients.csv");
    std::fs::write(
        &file,
        "url,alias,expires_at,campaign,ref,tags,redirect\n\
         https://shop.example/a,,,spring,r1,sms;fr,\n\
         javascript:alert(1),,,spring,r2,,\n\
         https://shop.example/b,promo-b,2999-01-01T00:00:00Z,spring,r3,,301\n\
         https://shop.example/c,,yesterday,spring,r4,,\n\
         https://shop.example/d,,,spring,r5,,303\n\
         \"https://shop.example/e,with,commas\",,,spring,r6,,\n\
         https://shop.example/f,promo-b,,spring,r7,,\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let output = sidecar(&app, &["import", path]);
    let stderr = text(&output.stderr);
    assert!(
        !output.status.success(),
        "failed rows make the exit status non-zero"
    );
    assert!(
        stderr.contains(&format!("{path}:3: unsupported_scheme")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{path}:5: invalid_expiry")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{path}:6: invalid_redirect")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{path}:8: code_taken")),
        "{stderr}"
    );
    assert!(
        text(&output.stdout).contains("7 rows: 3 created"),
        "{}",
        text(&output.stdout)
    );
    let stored = app.stored().await;
    assert_eq!(stored.links, 3);
    assert_eq!(stored.redis_keys, 3);
    let page: Value = app
        .api(Method::GET, "/links?ref=r1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["links"][0]["tags"], json!(["sms", "fr"]));
    assert_eq!(page["links"][0]["campaign"], "spring");

    // The same file again: the same rows fail, nothing is created twice.
    let again = sidecar(&app, &["import", path]);
    assert!(!again.status.success());
    assert_eq!(app.stored().await, stored);

    // A file with an unknown column is refused before anything is read.
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "url,colour\nhttps://a.example/,red\n").unwrap();
    let output = sidecar(&app, &["import", bad.to_str().unwrap()]);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("line 1: unknown column"),
        "{}",
        text(&output.stderr)
    );
}

async fn export_then_import_reproduces_the_links(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut items = Vec::new();
    for i in 0..2_100 {
        items.push(json!({
            "url": format!("https://t.example/{i}?q=a,b"),
            "campaign": if i % 2 == 0 { "even" } else { "odd" },
            "ref": format!("r{i}"),
            "tags": if i % 3 == 0 { json!(["x", "y;z"]) } else { json!([]) },
            "redirect": if i % 5 == 0 { 301 } else { 302 },
            "forward_query": i % 7 == 0,
            "expires_at": if i % 11 == 0 { json!("2999-01-01T00:00:00Z") } else { Value::Null },
        }));
    }
    items.push(json!({"url": "https://t.example/alias", "code": "my-alias"}));
    // Lifecycle, rules, caps, passwords (issue 34) and cards (issue 35) travel too, and give the
    // same version 2 records and card keys: the password as its digest, so the restored link
    // opens with the same password.
    items.push(json!({
        "url": "https://t.example/rules",
        // Issue 54: the click id parameter and a per-recipient split (the record's `i` and `f`).
        "click_id_param": "sl_click",
        "ref": "r-rules",
        "max_visits": 9,
        "password": "open sesame",
        "preview": {"title": "A \"card\", with; commas", "description": "Text, over two lines?",
                    "image": "https://i.example/a.png", "site_name": "Shop"},
        "valid_since": "2990-01-01T00:00:00Z",
        "expires_at": "2999-01-01T00:00:00Z",
        "not_yet_url": "https://t.example/soon",
        "expired_url": "https://t.example/over",
        "rules": [
            {"if": {"device": ["ios"], "ip": ["10.0.0.0/8"], "query": [{"name": "a,b", "value": "\"x\""}]},
             "then": {"url": "https://t.example/ios"}},
            {"split": {"sticky": "cookie", "variants": [
                {"weight": 1, "url": "https://t.example/a"}, {"weight": 2, "url": "https://t.example/b"}]}}
        ]
    }));
    let body: Value = app.post_batch(&items).await.json().await.unwrap();
    let codes: Vec<&str> = body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["link"]["code"].as_str().unwrap())
        .collect();
    assert_eq!(app.delete_link(codes[1]).await.status(), 200);
    assert_eq!(app.delete_link(codes[2]).await.status(), 200);
    app.set_expiry_in_sql(codes[11], now_secs() - 3600).await;
    // Redis as SQL now says (the expiry was moved behind the API's back).
    app.run_cli(&["resync"]).await;

    let dir = testkit::temp_dir();
    for (format, name) in [("csv", "links.csv"), ("ndjson", "links.ndjson")] {
        let exported = dir.path().join(name);
        let out = sidecar(&app, &["export", "--output", exported.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));

        // A fresh database and Redis.
        let fresh = spawn_app(backend).await;
        let out = sidecar(
            &fresh,
            &["import", "--format", format, exported.to_str().unwrap()],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let again = dir.path().join(format!("again-{name}"));
        let out = sidecar(&fresh, &["export", "--output", again.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(
            std::fs::read_to_string(&exported).unwrap(),
            std::fs::read_to_string(&again).unwrap(),
            "{format}: same codes, targets, states, times and metadata"
        );
        let (old, new) = (app.stored().await, fresh.stored().await);
        assert_eq!(old.links, new.links);
        let differ = old
            .redis_values
            .iter()
            .zip(&new.redis_values)
            .find(|(a, b)| a != b);
        assert_eq!(old.redis_keys, new.redis_keys);
        assert!(differ.is_none(), "the same Redis records: {differ:?}");

        // New links on the fresh database never reuse an imported code.
        let created = fresh.create(json!({"url": "https://t.example/new"})).await;
        assert!(!codes.contains(&created["code"].as_str().unwrap()));
    }

    // Filters: one campaign, one state.
    let filtered = dir.path().join("odd.ndjson");
    let out = sidecar(
        &app,
        &[
            "export",
            "--campaign",
            "odd",
            "--state",
            "revoked",
            "-o",
            filtered.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let lines: Vec<Value> = std::fs::read_to_string(&filtered)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["code"], codes[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_after_flushall_restores_every_link() {
    let app = spawn_app(Backend::Sqlite).await;
    app.create_many(2_500).await;
    let before = app.stored().await;
    assert_eq!(before.redis_keys, 2_500);
    app.redis.cli(&["FLUSHALL"]);
    assert_eq!(app.stored().await.redis_keys, 0);
    app.run_cli(&["resync"]).await;
    assert_eq!(app.stored().await, before);

    // Resumable: from a code on, only the later codes are written.
    app.redis.cli(&["FLUSHALL"]);
    let mut codes: Vec<String> = before
        .redis_values
        .iter()
        .map(|(key, _)| key.trim_start_matches("sl:c:").to_owned())
        .collect();
    codes.sort();
    app.run_cli(&["resync", "--from-code", &codes[999]]).await;
    assert_eq!(app.stored().await.redis_keys, 1_500);
}

/// Keys SQL has no link for (a crash between the Redis write and the commit) are removed by
/// `resync`; every link's key stays, whatever its state.
async fn resync_removes_orphan_keys(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_many(1_200).await;
    let revoked = app
        .create(json!({"url": "https://t.example/r", "code": "gone-soon"}))
        .await;
    assert_eq!(
        app.delete_link(revoked["code"].as_str().unwrap())
            .await
            .status(),
        200
    );
    let before = app.stored().await;

    // Half-written links: a generated code never committed, an alias, a bad value.
    let never = app.scheme.encode(5_000_000).unwrap();
    let orphans = [
        format!("sl:c:{never}"),
        "sl:c:ghost-alias".into(),
        "sl:c:x".into(),
    ];
    for key in &orphans {
        app.redis
            .cli(&["SET", key, "1|L|302|0|0|https://evil.example/"]);
    }
    app.redis.cli(&["SET", "sl:other", "kept"]);
    assert_eq!(app.stored().await.redis_keys, before.redis_keys + 4);

    app.run_cli(&["resync"]).await;
    let mut after = app.stored().await;
    after.redis_keys -= 1;
    after.redis_values.retain(|(key, _)| key != "sl:other");
    assert_eq!(
        after, before,
        "orphans gone, links and their records unchanged"
    );
    assert_eq!(app.redis.cli_raw(&["GET", "sl:other"]).trim(), "kept");
}

/// A code whose transaction is open (Redis written, commit pending) is not an orphan: the scan
/// waits for the transaction instead of deleting its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_removal_waits_for_writes_in_flight() {
    use shortlink_core::projection::{Projection, RecordWorkspace, RecordWrite};
    use shortlink_model::{Link, WorkspaceId};
    use shortlink_sidecar::cli::orphans::remove_orphans;
    use shortlink_store::{self, ConnectOptions};
    use shortlink_wire::keys::link_key;
    use std::sync::Arc;
    use std::time::Duration;

    let app = spawn_app(Backend::Postgres).await;
    let options = ConnectOptions {
        url: app.database_url.clone(),
        max_connections: 4,
        acquire_timeout: Duration::from_secs(10),
        sqlite_cache: Default::default(),
    };
    let storage = shortlink_store::connect(&options).await.unwrap();
    let projection = Arc::new(Projection::new(&app.redis.url(), Duration::from_secs(2)).unwrap());
    let now = shortlink_store::now();
    let link = Link::new(
        app.scheme.encode(7_000_000).unwrap(),
        WorkspaceId::DEFAULT,
        "https://t.example/in-flight".into(),
        "0".repeat(64),
        now,
    );
    // The write path's steps 1 and 2: SQL insert in a transaction, then the Redis record.
    let mut tx = storage.begin().await.unwrap();
    tx.insert_link(&link, None).await.unwrap();
    let write = RecordWrite::for_link(
        &link,
        RecordWorkspace::DEFAULT,
        now,
        Duration::from_secs(60),
    );
    projection.apply(&[write]).await.unwrap();

    let scan = {
        let storage = Arc::clone(&storage);
        let projection = Arc::clone(&projection);
        tokio::spawn(async move { remove_orphans(storage.as_ref(), &projection, 0, |_| {}).await })
    };
    // The scan is waiting for the lock (PostgreSQL shows it) ...
    let TestDb::Postgres(pool) = &app.db else {
        unreachable!()
    };
    let waiting = eventually(Duration::from_secs(10), || async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_locks WHERE NOT granted AND mode = 'ShareLock'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        waiting > 0
    })
    .await;
    assert!(waiting, "the orphan check waits for the open transaction");
    assert!(!scan.is_finished());
    // ... and once the link commits, it is no orphan.
    tx.commit().await.unwrap();
    let counts = scan.await.unwrap().unwrap();
    assert_eq!(counts.removed, 0);
    assert!(
        app.redis_get(&link.code).await.is_some(),
        "{}",
        link_key(&link.code)
    );
}
