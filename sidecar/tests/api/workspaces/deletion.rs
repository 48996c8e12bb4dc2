//! A workspace deleted with its data takes everything of it, the tables later issues added
//! included: conversions (whose rows name the workspace, and whose key to it would otherwise
//! refuse the delete), retention policies and subject requests (which hold codes of erased links).
//! Its clicks still on their way when it goes are dropped and counted, never `default`'s; its
//! audit chain stays (issue 66).

use super::*;
use crate::conversions::{store, visit, IPHONE};
use reqwest::Method;
use shortlink_visits::consumer::{Consumer, ConsumerCounters};

crate::on_each_backend!(
    a_deleted_workspace_takes_its_conversions_policies_and_requests,
    a_deleted_workspaces_late_clicks_are_dropped_and_counted,
);

async fn a_deleted_workspace_takes_its_conversions_policies_and_requests(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let send = |method: Method, path: &'static str, body: Value| {
        let request = with_key(&app, &admin, method, path).json(&body);
        async move {
            let answer = request.send().await.unwrap();
            let status = answer.status().as_u16();
            (status, answer.text().await.unwrap())
        }
    };
    let (status, link) = send(
        Method::POST,
        "/links",
        json!({"url": "https://a.example/", "campaign": "spring", "ref": "alice"}),
    )
    .await;
    assert_eq!(status, 201, "{link}");
    let link: Value = serde_json::from_str(&link).unwrap();
    let code = link["code"].as_str().unwrap();
    let click = "1700000000001-0";
    let clicked = chrono::Utc::now().timestamp_millis() - 60_000;
    store(
        &app,
        &[visit(click, code, clicked, "203.0.113.9", IPHONE, None)],
    )
    .await;
    let (status, body) = send(
        Method::POST,
        "/conversions",
        json!({"click_id": click, "name": "lead", "event_id": "order-1"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(
        Method::PUT,
        "/retention",
        json!({"visits_days": 30, "campaigns": [{"campaign": "spring", "visits_days": 7}]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(
        Method::POST,
        "/subjects/erase",
        json!({"request_id": "dsr-1", "ref": "alice"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // The erase took the conversion: make another for the delete to meet.
    store(
        &app,
        &[visit(
            "1700000000002-0",
            code,
            clicked,
            "203.0.113.9",
            IPHONE,
            None,
        )],
    )
    .await;
    let (status, body) = send(
        Method::POST,
        "/conversions",
        json!({"click_id": "1700000000002-0", "name": "lead", "event_id": "order-2"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let rows = |table: &str| format!("SELECT COUNT(*) FROM {table} WHERE workspace_id <> 1");
    for table in ["conversions", "retention_policies", "subject_requests"] {
        assert!(app.db.scalar(&rows(table)).await > 0, "{table} before");
    }

    let answer = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
    for table in ["conversions", "retention_policies", "subject_requests"] {
        assert_eq!(app.db.scalar(&rows(table)).await, 0, "{table} after");
    }
    assert_eq!(app.resolve_on("brand-a", code).await.status(), 404);
}

/// Clicks of `codes` as the module writes them: one stream entry, the visits packed in its
/// batch field (`shortlink_wire::event`).
async fn clicks(app: &TestApp, codes: &[&str]) {
    let mut batch = shortlink_wire::event::Batch::default();
    let now = chrono::Utc::now().timestamp_millis() as u64;
    for code in codes {
        batch.push(&shortlink_wire::event::Visit {
            code: code.as_bytes(),
            time_ms: now,
            status: 302,
            ip: b"203.0.113.9",
            ua: IPHONE.as_bytes(),
            host: b"a1.brand-a.example",
            ..Default::default()
        });
    }
    queue_batch(app, &batch).await;
}

async fn consumer(app: &TestApp) -> Consumer {
    stream_consumer(app, "late").await
}

/// What `default` has of visits: raw rows, its all-links rollup, its feed (NDJSON).
async fn defaults_visits(app: &TestApp) -> (i64, i64, String) {
    let rows = app.db.scalar("SELECT COUNT(*) FROM visits").await;
    let rollup = (app.db)
        .scalar(
            "SELECT COALESCE(MAX(humans + bots + previews), 0) FROM visit_buckets \
             WHERE code = '*'",
        )
        .await;
    let feed = app.api(Method::GET, "/visits").send().await.unwrap();
    assert_eq!(feed.status(), 200);
    (rows, rollup, feed.text().await.unwrap())
}

async fn a_deleted_workspaces_late_clicks_are_dropped_and_counted(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let link: Value = send_json(
        with_key(&app, &admin, Method::POST, "/links").json(&json!({"url": "https://a.example/"})),
    )
    .await;
    let theirs = link["code"].as_str().unwrap().to_owned();
    let ours = app.create_code("https://default.example/").await;
    // `default`'s own click counts, as before.
    clicks(&app, &[&ours]).await;
    let mut consumer = consumer(&app).await;
    let counters = consumer.counters();
    consumer.drain().await.unwrap();
    let before = defaults_visits(&app).await;
    assert_eq!(before.0, 1, "default's own click");
    assert_eq!(before.2.lines().count(), 1, "in its feed: {}", before.2);

    let answer = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // Late: clicked before the delete, still in a worker's spool or the stream after it.
    clicks(&app, &[&theirs, &theirs, &theirs]).await;
    consumer.drain().await.unwrap();
    assert_eq!(
        ConsumerCounters::get(&counters.unowned),
        3,
        "dropped, counted"
    );
    assert_eq!(
        defaults_visits(&app).await,
        before,
        "default's visits moved"
    );
    let stored = (app.db)
        .scalar(&format!(
            "SELECT COUNT(*) FROM visits WHERE code = '{theirs}'"
        ))
        .await;
    assert_eq!(stored, 0, "stored, for a feed or a webhook to find");
}

#[tokio::test]
async fn a_deleted_workspaces_audit_chain_stays_and_verifies() {
    let (app, operator) = app_with_workspaces(&["brand-a"]).await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let answer = with_key(&app, &admin, Method::POST, "/links")
        .json(&json!({"url": "https://a.example/"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    let id = (app.db)
        .scalar("SELECT id FROM workspaces WHERE slug = 'brand-a'")
        .await;
    let chain = format!("SELECT COUNT(*) FROM audit_log WHERE workspace_id = {id}");
    let rows = app.db.scalar(&chain).await;
    assert!(rows >= 2, "the key's and the link's rows");

    let answer = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // docs/SECURITY.md: the chain outlives the workspace, rows and head, and still verifies.
    assert_eq!(app.db.scalar(&chain).await, rows);
    let head = format!("SELECT COUNT(*) FROM audit_heads WHERE workspace_id = {id}");
    assert_eq!(app.db.scalar(&head).await, 1);
    app.run_cli(&["audit", "verify", "--workspace", &id.to_string()])
        .await;
    // The operator still reads it.
    let log: Value = send_json(with_key(&app, &operator, Method::GET, "/audit")).await;
    assert!(
        log.to_string().contains("\"link.create\""),
        "the deleted workspace's rows: {log}"
    );
}
