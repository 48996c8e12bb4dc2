//! The code scheme fingerprint (src/code_scheme.rs) and what protects sent links from a database
//! restored older than Redis (src/issuer.rs high-water mark, `SET NX` creates in src/service.rs).

use crate::helpers::{self, spawn_app, Backend, TestApp, SECRET_HEX};
use crate::on_each_backend;
use redis::AsyncCommands;
use serde_json::{json, Value};
use shortlink_core::projection::marker::ProjectionMarker;
use shortlink_sidecar::Application;
use std::process::Command;

const OTHER_SECRET: &str = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1eff";

on_each_backend!(
    a_wrong_secret_refuses_to_start_and_writes_nothing,
    a_redis_marked_by_another_scheme_is_refused,
    adopting_another_scheme_refuses_while_generated_links_exist,
    an_older_database_under_a_newer_redis_never_repoints_a_link,
    without_the_high_water_mark_creates_still_never_overwrite,
    an_alias_redis_holds_is_taken_and_left_alone,
);

/// What a refused start must leave exactly as it was.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    links: i64,
    api_keys: i64,
    sequence: i64,
    scheme: Option<String>,
    redis: Vec<(String, Option<String>)>,
}

async fn snapshot(app: &TestApp) -> Snapshot {
    let scheme = app
        .db
        .texts("SELECT value FROM settings WHERE name = 'code_scheme'")
        .await
        .pop();
    let mut redis = app.redis().await;
    let mut keys: Vec<String> = redis.keys("*").await.unwrap();
    keys.sort();
    let mut values = Vec::new();
    for key in keys {
        values.push((key.clone(), redis.get(&key).await.unwrap()));
    }
    Snapshot {
        links: app.db.scalar("SELECT COUNT(*) FROM links").await,
        api_keys: app.db.scalar("SELECT COUNT(*) FROM api_keys").await,
        sequence: app
            .db
            .scalar("SELECT next_value FROM sequence_blocks")
            .await,
        scheme,
        redis: values,
    }
}

/// A second sidecar on the test's database and Redis (a restart), with `extra` flags; its
/// secret is `secret`.
async fn restart(app: &TestApp, secret: &str, extra: &[&str]) -> Result<String, String> {
    let mut config = app.config(extra);
    config.code_secret = Some(secret.to_owned());
    let server = Application::build(&config)
        .await
        .map_err(|error| error.to_string())?;
    let address = format!("http://{}", server.local_addr());
    tokio::spawn(async move {
        let _ = server.run_until(std::future::pending()).await;
    });
    Ok(address)
}

async fn a_wrong_secret_refuses_to_start_and_writes_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create_code("https://a.example/1").await;
    let before = snapshot(&app).await;
    let recorded = before
        .scheme
        .clone()
        .expect("fingerprint recorded on first start");
    assert_eq!(recorded, app.scheme.fingerprint());
    assert!(!recorded.contains(&SECRET_HEX[..16]), "{recorded}");

    // The binary, as an operator starts it: the secret from a file, a new bootstrap key.
    let dir = testkit::temp_dir();
    let secret_file = dir.path().join("code-secret");
    std::fs::write(&secret_file, format!("{OTHER_SECRET}\n")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &app.database_url,
        ])
        .args(["--redis-url", &app.redis.url(), "--redis-timeout", "500ms"])
        .arg("--code-secret-file")
        .arg(&secret_file)
        .args(["--bootstrap-api-key", &format!("slk_{}", "n".repeat(40))])
        .env_remove("SHORTLINK_CODE_SECRET")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started: {stderr}");
    for needle in [
        secret_file.to_str().unwrap(),
        recorded.as_str(),
        "code secret",
        "code-scheme adopt",
    ] {
        assert!(stderr.contains(needle), "{needle:?} missing in: {stderr}");
    }
    assert!(
        !stderr.contains(OTHER_SECRET),
        "the secret leaked: {stderr}"
    );
    assert_eq!(
        snapshot(&app).await,
        before,
        "a refused start wrote something"
    );

    // Another code length is refused the same way, naming it.
    let error = restart(&app, SECRET_HEX, &["--code-length", "7"])
        .await
        .unwrap_err();
    assert!(error.contains("code length (L6 / L7)"), "{error}");
    assert_eq!(snapshot(&app).await, before);
    // The original settings start.
    restart(&app, SECRET_HEX, &[]).await.expect("same secret");
}

async fn a_redis_marked_by_another_scheme_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    // As the serving sidecar's keeper sets it after a refill.
    let marker = ProjectionMarker::new(&app.config(&[])).unwrap();
    let token = marker.begin().await.unwrap();
    assert!(marker.finish(token).await.unwrap());
    let value: String = app.redis().await.get("sl:meta:projection").await.unwrap();
    assert!(
        value.ends_with(&format!(" {}", app.scheme.fingerprint())),
        "the marker carries the fingerprint: {value}"
    );
    restart(&app, SECRET_HEX, &[])
        .await
        .expect("our own marker");
    let _: () = app
        .redis()
        .await
        .set("sl:meta:projection", "1 v1-L6-c1-0000000000000000")
        .await
        .unwrap();
    let error = restart(&app, SECRET_HEX, &[]).await.unwrap_err();
    assert!(error.contains("Redis's projection marker"), "{error}");
    assert!(error.contains("v1-L6-c1-0000000000000000"), "{error}");
}

async fn adopting_another_scheme_refuses_while_generated_links_exist(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://a.example/alias", "code": "my-alias"}))
        .await;
    let adopt = |extra: &'static [&'static str]| {
        let mut cli = app.cli(&[]);
        cli.config.code_secret = Some(OTHER_SECRET.to_owned());
        let mut args = vec!["shortlink-sidecar", "code-scheme", "adopt"];
        args.extend_from_slice(extra);
        let parsed: shortlink_sidecar::cli::Cli = clap::Parser::try_parse_from(args).unwrap();
        cli.command = parsed.command;
        shortlink_sidecar::cli::run(cli)
    };
    // Aliases do not depend on the secret: adopting with only aliases is allowed.
    adopt(&[]).await.expect("no generated links yet");
    restart(&app, OTHER_SECRET, &[]).await.expect("adopted");
    adopt(&[]).await.expect("already recorded: nothing to do");

    // Back to the test's secret (still no generated link), then one generated link.
    let mut cli = app.cli(&[]);
    let parsed: shortlink_sidecar::cli::Cli =
        clap::Parser::try_parse_from(["shortlink-sidecar", "code-scheme", "adopt"]).unwrap();
    cli.command = parsed.command;
    shortlink_sidecar::cli::run(cli).await.unwrap();
    let address = restart(&app, SECRET_HEX, &[]).await.unwrap();
    let created: Value = app
        .client
        .post(format!("{address}/api/v1/links"))
        .bearer_auth(helpers::API_KEY)
        .json(&json!({"url": "https://a.example/generated"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(created["code"].is_string(), "{created}");

    let error = adopt(&[]).await.unwrap_err().to_string();
    assert!(error.contains("1 links have codes generated"), "{error}");
    assert!(error.contains("--break-existing-links"), "{error}");
    assert!(restart(&app, OTHER_SECRET, &[]).await.is_err());
    adopt(&["--break-existing-links"])
        .await
        .expect("forced on purpose");
    restart(&app, OTHER_SECRET, &[]).await.expect("adopted");
}

/// Codes and Redis values of links created now, in a batch and one by one. (A batch leases
/// ahead: after a restart it starts where the database's sequence is, which after the restore
/// is where the newer single creates took their numbers.)
async fn create_links(api: &ApiAt<'_>, tag: &str) -> Vec<(String, String)> {
    let mut codes = api.batch(tag, 4).await;
    for i in 0..3 {
        codes.push(
            api.create(&format!("https://{tag}.example/single/{i}"))
                .await,
        );
    }
    let mut links = Vec::new();
    for code in codes {
        let value = api.app.redis_get(&code).await.expect("written through");
        links.push((code, value));
    }
    links
}

/// The API of a (re)started sidecar.
struct ApiAt<'a> {
    app: &'a TestApp,
    address: String,
}

impl ApiAt<'_> {
    async fn create(&self, url: &str) -> String {
        let response = self
            .app
            .client
            .post(format!("{}/api/v1/links", self.address))
            .bearer_auth(helpers::API_KEY)
            .json(&json!({ "url": url }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        let link: Value = response.json().await.unwrap();
        link["code"].as_str().unwrap().to_owned()
    }

    async fn batch(&self, tag: &str, count: usize) -> Vec<String> {
        let items: Vec<Value> = (0..count)
            .map(|i| json!({ "url": format!("https://{tag}.example/batch/{i}") }))
            .collect();
        let body = helpers::batch_answer(
            (self.app.client)
                .post(format!("{}/api/v1/links/batch", self.address))
                .bearer_auth(helpers::API_KEY)
                .json(&items),
        )
        .await;
        let codes: Vec<String> = body["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|result| result["link"]["code"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(codes.len(), count, "batch answer: {body}");
        codes
    }
}

/// Puts the database back to what it held before `newer` were created (as a restore of an
/// older backup would): their rows gone, the sequence back to `sequence`.
async fn restore_older(app: &TestApp, newer: &[(String, String)], sequence: i64) {
    let codes: Vec<String> = newer.iter().map(|(code, _)| format!("'{code}'")).collect();
    app.db
        .execute(&format!(
            "DELETE FROM links WHERE code IN ({})",
            codes.join(", ")
        ))
        .await;
    app.db
        .execute(&format!(
            "UPDATE sequence_blocks SET next_value = {sequence}"
        ))
        .await;
}

async fn older_database_scenario(backend: Backend, keep_mark: bool) {
    let app = spawn_app(backend).await;
    // One number per lease: the restarted sidecar reaches the newer links' numbers at once.
    let first = ApiAt {
        app: &app,
        address: restart(&app, SECRET_HEX, &["--sequence-block", "1"])
            .await
            .unwrap(),
    };
    let older = create_links(&first, "older").await;
    let backup_sequence = snapshot(&app).await.sequence;
    let newer = create_links(&first, "newer").await;

    restore_older(&app, &newer, backup_sequence).await;
    if !keep_mark {
        // Redis without the mark but with the records: only `SET NX` stands in the way.
        let _: () = app.redis().await.del("sl:meta:issued").await.unwrap();
    }
    let after = ApiAt {
        app: &app,
        address: restart(&app, SECRET_HEX, &["--sequence-block", "1"])
            .await
            .unwrap(),
    };
    let fresh = create_links(&after, "fresh").await;

    for (code, value) in older.iter().chain(&newer) {
        assert_eq!(
            app.redis_get(code).await.as_ref(),
            Some(value),
            "{code} was re-pointed"
        );
    }
    for (code, _) in &fresh {
        assert!(
            !older.iter().chain(&newer).any(|(sent, _)| sent == code),
            "{code} was issued twice"
        );
    }
    // `resync` rewrites SQL's links but does not take the newer ones for orphans...
    app.run_cli(&["resync"]).await;
    for (code, value) in older.iter().chain(&newer).chain(&fresh) {
        assert_eq!(app.redis_get(code).await.as_ref(), Some(value), "{code}");
    }
    // ...unless told to (they stop working).
    app.run_cli(&["resync", "--remove-orphans-after-restore"])
        .await;
    for (code, _) in &newer {
        assert_eq!(app.redis_get(code).await, None, "{code}");
    }
    for (code, value) in older.iter().chain(&fresh) {
        assert_eq!(app.redis_get(code).await.as_ref(), Some(value), "{code}");
    }
    // The fresh links are in SQL and answer from there too.
    for (code, value) in &fresh {
        let response = app
            .fallback_at(&after.address, "default", code)
            .await
            .send()
            .await
            .unwrap();
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        assert!(value.ends_with(&location), "{code}: {location} vs {value}");
    }
}

async fn an_older_database_under_a_newer_redis_never_repoints_a_link(backend: Backend) {
    older_database_scenario(backend, true).await;
}

async fn without_the_high_water_mark_creates_still_never_overwrite(backend: Backend) {
    older_database_scenario(backend, false).await;
}

async fn an_alias_redis_holds_is_taken_and_left_alone(backend: Backend) {
    let app = spawn_app(backend).await;
    let sent = "1|L|302|0|0|https://sent.example/";
    let _: () = app
        .redis()
        .await
        .set("sl:c:spring-sale", sent)
        .await
        .unwrap();
    let response = app
        .post_link(&json!({"url": "https://other.example/", "code": "spring-sale"}))
        .await;
    assert_eq!(response.status(), 409);
    let response = app
        .post_batch(&json!([
            {"url": "https://other.example/", "code": "spring-sale"},
            {"url": "https://b.example/"},
        ]))
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["results"][0]["error"]["code"], "code_taken", "{body}");
    assert!(body["results"][1]["link"]["code"].is_string(), "{body}");
    assert_eq!(app.redis_get("spring-sale").await.as_deref(), Some(sent));
    assert_eq!(app.stored().await.links, 1);

    // The same link's record already there (a restore): accepted as it is.
    let same = "1|L|302|0|0|https://same.example/";
    let _: () = app.redis().await.set("sl:c:same-link", same).await.unwrap();
    app.create(json!({"url": "https://same.example/", "code": "same-link"}))
        .await;
    assert_eq!(app.redis_get("same-link").await.as_deref(), Some(same));
}
