//! Retention per workspace and per campaign (issue 56): a campaign's policy removes exactly its
//! links' expired visits and conversions (not another campaign's, not the same campaign name in
//! another workspace); a workspace's policy overrides the installation's flag both ways.

use crate::conversions::{store, visit, IPHONE};
use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use reqwest::Method;
use serde_json::{json, Value};
use shortlink_visits::cleanup::delete_old_visits;
use std::collections::BTreeSet;
use std::time::Duration;

crate::on_each_backend!(
    retention_per_campaign_removes_exactly_the_expired_rows,
    a_workspace_truncates_its_visitors_addresses,
);

const DAY_MS: i64 = 86_400_000;

async fn send(app: &TestApp, key: &str, method: Method, path: &str, body: &Value) -> (u16, Value) {
    let answer = with_key(app, key, method, path)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

async fn link(app: &TestApp, key: &str, campaign: Option<&str>) -> String {
    let (status, link) = send(
        app,
        key,
        Method::POST,
        "/links",
        &json!({"url": "https://shop.example/", "campaign": campaign}),
    )
    .await;
    assert_eq!(status, 201, "{link}");
    link["code"].as_str().unwrap().to_owned()
}

async fn visit_ids(app: &TestApp) -> BTreeSet<String> {
    app.db
        .texts("SELECT event_id FROM visits")
        .await
        .into_iter()
        .collect()
}

async fn retention_per_campaign_removes_exactly_the_expired_rows(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let other = workspace_key(&app, &operator, "brand-b", "admin").await;
    let spring = link(&app, API_KEY, Some("spring")).await;
    let autumn = link(&app, API_KEY, Some("autumn")).await;
    let plain = link(&app, API_KEY, None).await;
    let b_spring = link(&app, &other, Some("spring")).await;
    // Each link: a visit 10 days old and one 3 days old, ids named by link and age.
    let now = chrono::Utc::now().timestamp_millis();
    let mut visits = Vec::new();
    for (n, code) in [&spring, &autumn, &plain, &b_spring]
        .into_iter()
        .enumerate()
    {
        for (age, days) in [(0, 10), (1, 3)] {
            let id = format!("17000000{n}{age}000-0");
            visits.push(visit(
                &id,
                code,
                now - days * DAY_MS,
                "203.0.113.9",
                IPHONE,
                None,
            ));
        }
    }
    store(&app, &visits).await;
    let id = |n: usize, age: usize| format!("17000000{n}{age}000-0");
    // A conversion of each old click of the default workspace, made a minute after it.
    for n in 0..3 {
        let (status, body) = send(
            &app,
            API_KEY,
            Method::POST,
            "/conversions",
            &json!({"click_id": id(n, 0), "name": "lead", "event_id": format!("e-{n}"),
                    "converted_at": chrono::DateTime::from_timestamp_millis(now - 10 * DAY_MS + 60_000)}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let all = visit_ids(&app).await;
    assert_eq!(all.len(), 8);

    // Spring keeps 7 days in the default workspace; brand-b has no policy.
    let policy =
        json!({"campaigns": [{"campaign": "spring", "visits_days": 7, "conversions_days": 7}]});
    let (status, body) = send(&app, API_KEY, Method::PUT, "/retention", &policy).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["campaigns"][0]["visits_days"], 7);
    let (_, read) = send(&app, &other, Method::GET, "/retention", &Value::Null).await;
    assert_eq!(
        read["campaigns"],
        json!([]),
        "another workspace's policy is its own"
    );
    // Each value out of its range is refused, naming its field, and nothing changes.
    let long_campaign = "é".repeat(101);
    for (policy, field) in [
        (json!({"visits_days": 0}), "visits_days"),
        (json!({"visits_days": -862}), "visits_days"),
        (
            json!({"webhook_failures_days": 1_000_000}),
            "webhook_failures_days",
        ),
        (
            json!({"campaigns": [{"campaign": long_campaign}]}),
            "campaign",
        ),
    ] {
        let (status, body) = send(&app, API_KEY, Method::PUT, "/retention", &policy).await;
        assert_eq!(status, 422, "{policy}");
        assert_eq!(body["error"]["code"], "invalid_retention");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{message} names {field}");
    }
    let (_, kept) = send(&app, API_KEY, Method::GET, "/retention", &Value::Null).await;
    assert_eq!(kept["campaigns"][0]["visits_days"], 7, "{kept}");

    let store_ = app.visit_store().await;
    let deleted = delete_old_visits(store_.as_ref(), None).await.unwrap();
    assert_eq!((deleted.visits, deleted.conversions), (1, 1));
    let mut expected = all.clone();
    expected.remove(&id(0, 0));
    assert_eq!(
        visit_ids(&app).await,
        expected,
        "exactly spring's expired visit"
    );
    let conversions = app
        .db
        .texts("SELECT visit_id FROM conversions ORDER BY visit_id")
        .await;
    assert_eq!(
        conversions,
        [id(1, 0), id(2, 0)],
        "exactly spring's expired conversion"
    );

    // The flag (5 days) covers what no policy rules; brand-b keeps 30 days by its own policy.
    let (status, body) = send(
        &app,
        &other,
        Method::PUT,
        "/retention",
        &json!({"visits_days": 30}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let deleted = delete_old_visits(store_.as_ref(), Some(Duration::from_secs(5 * 86_400)))
        .await
        .unwrap();
    assert_eq!(
        deleted.visits, 2,
        "autumn's and the plain link's old visits"
    );
    for gone in [id(1, 0), id(2, 0)] {
        expected.remove(&gone);
    }
    assert_eq!(visit_ids(&app).await, expected);
    assert!(
        expected.contains(&id(3, 0)),
        "brand-b's 10-day-old visit stays (30 days)"
    );
    // A workspace policy shorter than the flag: brand-b at 2 days removes its 3-day-old visit
    // too, the default workspace's 3-day-old visits stay under the 5-day flag.
    send(
        &app,
        &other,
        Method::PUT,
        "/retention",
        &json!({"visits_days": 2}),
    )
    .await;
    let deleted = delete_old_visits(store_.as_ref(), Some(Duration::from_secs(5 * 86_400)))
        .await
        .unwrap();
    assert_eq!(deleted.visits, 2);
    for gone in [id(3, 0), id(3, 1)] {
        expected.remove(&gone);
    }
    assert_eq!(visit_ids(&app).await, expected);
    let audit = app
        .db
        .scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'retention.set'")
        .await;
    assert_eq!(audit, 3);

    // Webhook failures: brand-b keeps 5 days; the default workspace's stay (no policy).
    let mut hooks = Vec::new();
    for key in [API_KEY, other.as_str()] {
        let (status, hook) = send(
            &app,
            key,
            Method::POST,
            "/webhooks",
            &json!({"name": "crm", "url": "https://hooks.example/in",
                    "secret": "a-webhook-secret-of-some-length"}),
        )
        .await;
        assert_eq!(status, 201, "{hook}");
        hooks.push(hook["id"].as_str().unwrap().to_owned());
    }
    for (hook, age, error) in [
        (&hooks[0], 10, "a-old"),
        (&hooks[1], 10, "b-old"),
        (&hooks[1], 1, "b-new"),
    ] {
        app.db
            .execute(&format!(
                "INSERT INTO webhook_failures (subscription_id, from_seq, from_index, to_seq, \
                 to_index, events, failed_ms, error) VALUES ('{hook}', 1, 0, 1, 1, 1, {}, '{error}')",
                now - age * DAY_MS
            ))
            .await;
    }
    let policy = json!({"visits_days": 2, "webhook_failures_days": 5});
    let (status, body) = send(&app, &other, Method::PUT, "/retention", &policy).await;
    assert_eq!(status, 200, "{body}");
    let deleted = delete_old_visits(store_.as_ref(), None).await.unwrap();
    assert_eq!(deleted.webhook_failures, 1);
    let left = app
        .db
        .texts("SELECT error FROM webhook_failures ORDER BY error")
        .await;
    assert_eq!(left, ["a-old", "b-new"]);
}

async fn a_workspace_truncates_its_visitors_addresses(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let other = workspace_key(&app, &operator, "brand-b", "admin").await;
    let mine = link(&app, API_KEY, None).await;
    let theirs = link(&app, &other, None).await;
    let (status, body) = send(
        &app,
        &other,
        Method::PUT,
        "/retention",
        &json!({"anonymize_ip": true}),
    )
    .await;
    assert_eq!(
        (status, &body["anonymize_ip"]),
        (200, &json!(true)),
        "{body}"
    );
    let now = chrono::Utc::now().timestamp_millis();
    store(
        &app,
        &[
            visit("1700000000001-0", &mine, now, "203.0.113.77", IPHONE, None),
            visit(
                "1700000000002-0",
                &theirs,
                now,
                "203.0.113.77",
                IPHONE,
                None,
            ),
            visit(
                "1700000000003-0",
                &theirs,
                now,
                "2001:db8:1:2:3::9",
                IPHONE,
                None,
            ),
        ],
    )
    .await;
    let ips = app
        .db
        .texts("SELECT ip FROM visits ORDER BY event_id")
        .await;
    assert_eq!(ips, ["203.0.113.77", "203.0.113.0", "2001:db8:1::"]);
}
