//! Work in flight stops with its authority (issue 66): a batch whose workspace is deleted while
//! it runs leaves nothing in Redis and nothing in `default`; a batch whose key is revoked issues
//! nothing once the revoke has answered; a compose whose workspace is suspended stops. Each job
//! answers every line: what it finished, then why the rest was not issued.

use super::*;
use crate::streamed::Answer;
use reqwest::Method;
use std::collections::BTreeSet;

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

/// Lines enough that a batch whose answer goes unread stops before its end: the server writes
/// ahead of its reader only `HELD_FRAMES` chunks (16,000 lines), two groups in flight and two
/// being rendered (16,000 each), and what the loopback socket buffers hold (10 MB at most, some
/// 25,000 answers of ~400 bytes): about 80,000 lines past the last one read. A test that reads
/// a few thousand, then revokes or deletes, lands mid-batch on the fastest machine, where
/// reading on would let the batch finish first (CI, SQLite: all 40,000 lines of a smaller one).
const HELD_BACK_BELOW: usize = 120_000;

/// Lines of a batch as a campaign tool streams them: one link each.
fn batch_lines(count: usize) -> Vec<u8> {
    (0..count)
        .map(|i| format!("{{\"url\":\"https://a.example/p/{i}\"}}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Sends `body` as an NDJSON batch with `key`; its answer, streaming.
async fn start_batch(app: &TestApp, key: &str, body: Vec<u8>) -> Answer {
    let response = with_key(app, key, Method::POST, "/links/batch")
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .unwrap();
    Answer::new(response).await
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

/// Checks that `results` answer each of `count` items in order, the created ones first answered
/// 201 and every other one refused with one of `codes`; returns the codes created.
fn created_then_stopped(results: &[Value], count: usize, codes: &[&str]) -> Vec<String> {
    assert_eq!(results.len(), count, "one result per line");
    let mut created = Vec::new();
    for (index, result) in results.iter().enumerate() {
        assert_eq!(result["index"], index as i64, "{result}");
        match result["status"].as_u64() {
            Some(201) => created.push(result["link"]["code"].as_str().unwrap().to_owned()),
            _ => {
                let code = result["error"]["code"].as_str().unwrap_or_default();
                assert!(codes.contains(&code), "{result}");
            }
        }
    }
    created
}

async fn a_batch_running_while_its_workspace_is_deleted_leaves_nothing(backend: Backend) {
    const LINES: usize = HELD_BACK_BELOW;
    let app = spawn(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let default_code = app.create_code("https://default.example/").await;
    let before = link_keys(&app).await;
    assert_eq!(before.len(), 1, "{before:?}");

    let mut answer = start_batch(&app, &admin, batch_lines(LINES)).await;
    // Under way: a few groups written, more in flight. Not read meanwhile, the answer holds the
    // batch back (see `LINES`), so the delete lands mid-batch however fast the machine.
    answer.read_until(10_000).await;
    let deleted = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200, "{:?}", deleted.text().await);
    // The moment the delete answered: not one record of the workspace is left.
    assert_eq!(link_keys(&app).await, before, "records left by the delete");

    let results = answer.read_to_end().await;
    let stopped = ["workspace_suspended", "workspace_deleted"];
    let created = created_then_stopped(&results, LINES, &stopped);
    assert!(created.len() >= 10_000, "the batch was under way");
    assert!(created.len() < LINES, "the batch was stopped");
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
    for code in created.iter().step_by(997) {
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
    const LINES: usize = HELD_BACK_BELOW;
    let app = spawn(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let (issuer, id) = key_of(&app, &admin, "issuer").await;

    let mut answer = start_batch(&app, &issuer, batch_lines(LINES)).await;
    answer.read_until(8_000).await;
    let revoked = with_key(&app, &admin, Method::DELETE, &format!("/keys/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
    let at_revoke = links_elsewhere(&app).await;

    let results = answer.read_to_end().await;
    let created = created_then_stopped(&results, LINES, &["revoked_api_key"]);
    let at_end = links_elsewhere(&app).await;
    // The bound is 1,000 lines or a second; holding the key's row from its last read to its
    // commit, a group either committed before the revoke answered or was taken back.
    assert_eq!(
        at_end - at_revoke,
        0,
        "links issued after the revoke answered"
    );
    assert_eq!(
        created.len() as i64,
        at_end,
        "every link issued is answered"
    );
    assert!(created.len() < LINES, "the batch was stopped");
    let last = results.last().unwrap();
    assert_eq!(last["status"], 401, "{last}");
}

async fn a_suspended_workspace_stops_its_running_compose(backend: Backend) {
    const RECIPIENTS: usize = HELD_BACK_BELOW;
    let app = spawn(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let body: Vec<u8> = (0..RECIPIENTS)
        .map(|i| {
            let recipient = json!({
                "phone": format!("+4474{:08}", i),
                "url": format!("https://shop.example/{i}"),
            });
            format!("{recipient}\n")
        })
        .collect::<String>()
        .into_bytes();
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut()
        .append_pair("template", "Sale today: {{link}}");
    let response = (app.client.post(url).bearer_auth(&admin))
        .header(
            "X-Shortlink-Public-Base",
            "https://s1.example [brand-a] https://a1.brand-a.example",
        )
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .unwrap();
    let mut answer = Answer::new(response).await;
    answer.read_until(8_000).await;
    let suspended = with_key(&app, &operator, Method::PATCH, "/workspaces/brand-a")
        .json(&json!({"suspended": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(suspended.status(), 200, "{:?}", suspended.text().await);
    let at_suspend = links_elsewhere(&app).await;

    let mut lines = answer.read_to_end().await;
    let summary = lines.pop().unwrap();
    assert!(
        summary.get("index").is_none(),
        "the summary ends it: {summary}"
    );
    assert_eq!(lines.len(), RECIPIENTS, "one line per recipient");
    let mut created = 0;
    for (index, line) in lines.iter().enumerate() {
        assert_eq!(line["index"], index as i64, "{line}");
        match line["status"].as_u64() {
            Some(201) => created += 1,
            _ => assert_eq!(line["error"]["code"], "workspace_suspended", "{line}"),
        }
    }
    assert_eq!(links_elsewhere(&app).await, at_suspend, "issued after");
    assert_eq!(created, at_suspend, "every link issued is answered");
    assert!((created as usize) < RECIPIENTS, "the compose was stopped");
}
