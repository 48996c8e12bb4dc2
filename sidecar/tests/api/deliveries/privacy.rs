//! Receipts hold no number, but they say what happened to the messages a recipient was sent:
//! a subject's export lists them and an erase deletes them; they are kept as long as the raw
//! visits of their links (retention) and go with their workspace.

use super::*;
use crate::workspaces::{create_workspace, operator_key, workspace_key};
use shortlink_visits::cleanup::delete_old_visits;

crate::on_each_backend!(receipts_follow_the_subject_the_retention_and_the_workspace);

async fn send(app: &TestApp, key: &str, method: Method, path: &str, body: &Value) -> (u16, String) {
    let answer = with_key(app, key, method, path)
        .json(body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

async fn receipts_follow_the_subject_the_retention_and_the_workspace(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let mut codes = Vec::new();
    for recipient in ["alice", "bob", "carol"] {
        let (status, text) = send(
            &app,
            &admin,
            Method::POST,
            "/links",
            &json!({"url": "https://a.example/", "campaign": "spring", "ref": recipient}),
        )
        .await;
        assert_eq!(status, 201, "{text}");
        let link: Value = serde_json::from_str(&text).unwrap();
        codes.push(link["code"].as_str().unwrap().to_owned());
        let receipt = json!({"code": codes.last(), "message_id": format!("m-{recipient}"),
                             "state": "delivered"});
        assert_eq!(post(&app, &admin, &receipt).await.0, 201);
    }

    let (status, text) = send(
        &app,
        &admin,
        Method::POST,
        "/subjects/export",
        &json!({"ref": "alice"}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let deliveries: Vec<Value> = (text.lines())
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|line| line["type"] == "delivery")
        .collect();
    assert_eq!(deliveries.len(), 1, "{text}");
    assert_eq!(
        (&deliveries[0]["message_id"], &deliveries[0]["state"]),
        (&json!("m-alice"), &json!("delivered"))
    );

    let erase = json!({"request_id": "dsr-1", "ref": "alice"});
    let (status, text) = send(&app, &admin, Method::POST, "/subjects/erase", &erase).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(rows(&app, "delivery_receipts").await, 2);
    assert_eq!(rows(&app, "delivery_messages").await, 2);

    // Retention: the workspace keeps raw visits a day; bob's receipt is two days old.
    let (status, text) = send(
        &app,
        &admin,
        Method::PUT,
        "/retention",
        &json!({"visits_days": 1}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let two_days = 2 * 86_400_000;
    for table in ["delivery_receipts", "delivery_messages"] {
        app.db
            .execute(&format!(
                "UPDATE {table} SET received_ms = received_ms - {two_days} \
                 WHERE message_id = 'm-bob'"
            ))
            .await;
    }
    let store = app.visit_store().await;
    let deleted = delete_old_visits(store.as_ref(), None).await.unwrap();
    assert_eq!(deleted.receipts, 1);
    let left = app
        .db
        .texts("SELECT message_id FROM delivery_receipts")
        .await;
    assert_eq!(left, ["m-carol"]);
    assert_eq!(rows(&app, "delivery_messages").await, 1);

    // The workspace's deletion takes its receipts, message states and tokens.
    callback_token(&app, &admin, "kannel", None).await;
    let answer = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    for table in ["delivery_receipts", "delivery_messages", "callback_tokens"] {
        assert_eq!(rows(&app, table).await, 0, "{table}");
    }
}
