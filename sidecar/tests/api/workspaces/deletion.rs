//! A workspace deleted with its data takes everything of it, the tables later issues added
//! included: conversions (whose rows name the workspace, and whose key to it would otherwise
//! refuse the delete), retention policies and subject requests (which hold codes of erased links).

use super::*;
use crate::conversions::{store, visit, IPHONE};
use reqwest::Method;

crate::on_each_backend!(a_deleted_workspace_takes_its_conversions_policies_and_requests);

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
