//! Work in flight stops with its authority (issue 66): a batch whose workspace is deleted while
//! it runs leaves nothing in Redis and nothing in `default`; a batch whose key is revoked issues
//! nothing once the revoke has answered; a compose whose workspace is suspended stops. Each job
//! answers every line: what it finished, then why the rest was not issued.

use super::*;
use crate::streamed::{send_in_parts, Answer};
use reqwest::Method;
use std::collections::BTreeSet;
use std::time::Duration;

crate::on_each_backend!(
    a_key_revoked_mid_batch_issues_nothing_after_the_revoke,
    a_suspended_workspace_stops_its_running_compose,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_running_while_its_workspace_is_deleted_leaves_nothing_postgres() {
    a_batch_running_while_its_workspace_is_deleted_leaves_nothing(Backend::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_running_while_its_workspace_is_deleted_leaves_nothing_sqlite() {
    a_batch_running_while_its_workspace_is_deleted_leaves_nothing(Backend::Sqlite).await
}

/// The app, patient: on SQLite a revoke, suspend or delete waits for the one write connection,
/// which a group of the job holds for its transaction, and a chunk's records go to Redis in one
/// `MULTI`: each takes seconds in a debug build on a busy machine, longer than the tests'
/// timeouts (a job failing on them is not what these tests are about).
async fn spawn(backend: Backend) -> TestApp {
    let patient = ["--db-timeout", "60s", "--redis-timeout", "10s"];
    spawn_app_with(backend, &patient).await
}

/// Lines the server has before the test acts: whole chunks (the server cuts a body into chunks of
/// 1,000 lines and acts on a chunk once it is whole), all written before the test acts.
const BEFORE: usize = 4_000;
/// Lines sent while the test acts (a group of chunks, 8,000 lines): groups in flight as the act
/// lands, each written before it or stopped.
const DURING: usize = 8_000;
/// Lines sent once the act has answered: more than one group, every one of them seen to stop.
const AFTER: usize = 10_000;

/// Lines of a batch as a campaign tool streams them: one link each, numbered from `first`.
fn batch_lines(lines: std::ops::Range<usize>) -> Vec<u8> {
    lines
        .map(|i| format!("{{\"url\":\"https://a.example/p/{i}\"}}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Sends `request` the first `BEFORE` of the lines `lines` makes and waits until the server has
/// written them all, then runs `act` while `DURING` lines more go, then sends `AFTER` lines; the
/// answer's lines. The job is mid-way when `act` runs, on any machine.
async fn around<Act: std::future::Future<Output = ()>>(
    app: &TestApp,
    request: reqwest::RequestBuilder,
    lines: fn(std::ops::Range<usize>) -> Vec<u8>,
    act: Act,
) -> Vec<Value> {
    let request = request.header("content-type", "application/x-ndjson");
    let (parts, response) = send_in_parts(request);
    let written_before = links_elsewhere(app).await;
    parts.send(lines(0..BEFORE)).await;
    let all_written = || async { links_elsewhere(app).await - written_before == BEFORE as i64 };
    assert!(
        eventually(Duration::from_secs(120), all_written).await,
        "the first lines written"
    );
    let during = BEFORE..BEFORE + DURING;
    tokio::join!(act, parts.send(lines(during.clone())));
    parts.send(lines(during.end..during.end + AFTER)).await;
    drop(parts);
    Answer::new(response.await.unwrap())
        .await
        .read_to_end()
        .await
}

/// Every link record in Redis (`wire`'s link keys).
async fn link_keys(app: &TestApp) -> BTreeSet<String> {
    let mut redis = app.redis().await;
    let pattern = format!("{}*", shortlink_wire::keys::LINK_PREFIX);
    let mut keys = BTreeSet::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, found): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut redis)
            .await
            .unwrap();
        keys.extend(found);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

/// Links in workspaces other than `default`.
async fn links_elsewhere(app: &TestApp) -> i64 {
    (app.db)
        .scalar("SELECT COUNT(*) FROM links WHERE workspace_id <> 1")
        .await
}

/// Checks that `results` answer each line in order: the lines sent before the act with 201, then
/// maybe some sent during it, then every other one refused with one of `codes`, those sent after
/// it answered included. Returns the created ones.
fn created_then_stopped<'a>(results: &'a [Value], codes: &[&str]) -> &'a [Value] {
    assert_eq!(
        results.len(),
        BEFORE + DURING + AFTER,
        "one result per line"
    );
    let created = results.iter().take_while(|result| result["status"] == 201);
    let created = created.count();
    assert!(created >= BEFORE, "the lines sent before the act");
    assert!(created <= BEFORE + DURING, "lines sent after the act");
    for (index, result) in results.iter().enumerate() {
        assert_eq!(result["index"], index as i64, "{result}");
        if index >= created {
            let code = result["error"]["code"].as_str().unwrap_or_default();
            assert!(codes.contains(&code), "{result}");
        }
    }
    &results[..created]
}

async fn a_batch_running_while_its_workspace_is_deleted_leaves_nothing(backend: Backend) {
    let app = spawn(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let default_code = app.create_code("https://default.example/").await;
    let before = link_keys(&app).await;
    assert_eq!(before.len(), 1, "{before:?}");

    let delete = async {
        let deleted = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status(), 200, "{:?}", deleted.text().await);
        // The moment the delete answered: not one record of the workspace is left.
        assert_eq!(link_keys(&app).await, before, "records left by the delete");
    };
    let batch = with_key(&app, &admin, Method::POST, "/links/batch");
    let results = around(&app, batch, batch_lines, delete).await;
    let stopped = ["workspace_suspended", "workspace_deleted"];
    let created = created_then_stopped(&results, &stopped);
    // Nor after: the batch wrote nothing once the delete had begun.
    assert_eq!(
        link_keys(&app).await,
        before,
        "records written after the delete"
    );
    assert_eq!(links_elsewhere(&app).await, 0);
    // Nothing landed in `default`: its one link, and none of the batch's codes.
    let in_default = app.db.texts("SELECT code FROM links").await;
    assert_eq!(in_default, vec![default_code.clone()]);
    for line in created.iter().step_by(397) {
        let code = line["link"]["code"].as_str().unwrap();
        assert_eq!(app.get_link(code).await.status(), 404, "{code}");
        assert!(app.redis_record(code).await.is_none(), "{code}");
    }
}

/// A key of `role` made by `admin`: the key and its id.
async fn key_of(app: &TestApp, admin: &str, role: &str) -> (String, i64) {
    let made: Value = send_json(
        with_key(app, admin, Method::POST, "/keys").json(&json!({"name": role, "role": role})),
    )
    .await;
    (
        made["key"].as_str().unwrap().to_owned(),
        made["id"].as_i64().unwrap(),
    )
}

async fn a_key_revoked_mid_batch_issues_nothing_after_the_revoke(backend: Backend) {
    let app = spawn(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let (issuer, id) = key_of(&app, &admin, "issuer").await;

    let revoke = async {
        let revoked = with_key(&app, &admin, Method::DELETE, &format!("/keys/{id}"))
            .send()
            .await
            .unwrap();
        assert_eq!(revoked.status(), 200);
    };
    let batch = with_key(&app, &issuer, Method::POST, "/links/batch");
    let results = around(&app, batch, batch_lines, revoke).await;
    let created = created_then_stopped(&results, &["revoked_api_key"]);
    // Holding the key's row from its last read to its commit, a group either committed before
    // the revoke answered or was taken back.
    assert_eq!(
        links_elsewhere(&app).await,
        created.len() as i64,
        "every link issued is answered, none after the revoke"
    );
    let last = results.last().unwrap();
    assert_eq!(last["status"], 401, "{last}");
}

/// Recipients of a compose, one per line, numbered as `lines`.
fn recipient_lines(lines: std::ops::Range<usize>) -> Vec<u8> {
    lines
        .map(|i| {
            let recipient = json!({
                "phone": format!("+4474{:08}", i),
                "url": format!("https://shop.example/{i}"),
            });
            format!("{recipient}\n")
        })
        .collect::<String>()
        .into_bytes()
}

async fn a_suspended_workspace_stops_its_running_compose(backend: Backend) {
    let app = spawn(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;

    let suspending = suspend(&app, &operator, "brand-a");
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut()
        .append_pair("template", "Sale today: {{link}}");
    let compose = (app.client.post(url).bearer_auth(&admin)).header(
        "X-Shortlink-Public-Base",
        "https://s1.example [brand-a] https://a1.brand-a.example",
    );
    let mut lines = around(&app, compose, recipient_lines, suspending).await;
    let summary = lines.pop().unwrap();
    assert!(
        summary.get("index").is_none(),
        "the summary ends it: {summary}"
    );
    let created = created_then_stopped(&lines, &["workspace_suspended"]);
    assert_eq!(
        links_elsewhere(&app).await,
        created.len() as i64,
        "every link issued is answered, none after the suspend"
    );
}
