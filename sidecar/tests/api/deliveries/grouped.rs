//! Callbacks arriving together are written together (a group commit per workspace): each is
//! still answered as if it had come alone (status and body), repeats and reordered states
//! inside one group included, each workspace's receipts in its own; a suspended workspace's
//! token refused at once; a group the database fails answers each of its callbacks 5xx and
//! stores none of them.

use super::*;
use crate::workspaces::{create_workspace, operator_key, workspace_key};
use std::collections::HashMap;

crate::on_each_backend!(concurrent_callbacks_are_answered_each_as_alone);

/// A Kannel report on `token`: (status, body).
async fn report(app: &TestApp, token: &str, query: &str) -> (u16, Value) {
    let answer = (app.client)
        .get(app.url(&format!("/callbacks/{token}/kannel?{query}")))
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

/// Every report of `sent` at once: the answers in the same order.
async fn all_at_once(app: &TestApp, sent: &[(String, String)]) -> Vec<(u16, Value)> {
    let calls = (sent.iter()).map(|(token, query)| report(app, token, query));
    futures_util::future::join_all(calls).await
}

/// `body` without `duplicate`: what a repeat answers the same as the first.
fn stored(body: &Value) -> Value {
    let mut body = body.clone();
    body.as_object_mut().unwrap().remove("duplicate");
    body
}

async fn concurrent_callbacks_are_answered_each_as_alone(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let b_admin = workspace_key(&app, &operator, "brand-b", "admin").await;
    let code_a = app.create_code("https://shop.example/a").await;
    let answer = with_key(&app, &b_admin, Method::POST, "/links")
        .json(&json!({"url": "https://shop.example/b"}))
        .send()
        .await
        .unwrap();
    let code_b = answer.json::<Value>().await.unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, token_a) = callback_token(&app, API_KEY, "kannel", None).await;
    let (_, token_b) = callback_token(&app, &b_admin, "kannel", None).await;

    let mut sent = Vec::new();
    let mut add = |token: &str, query: String| sent.push((token.to_owned(), query));
    for i in 0..30 {
        // The final report before the SMSC's acceptance in half of them, and sent twice.
        let (first, second) = if i % 2 == 0 { (8, 1) } else { (1, 8) };
        for kind in [first, second, 1] {
            add(
                &token_a,
                format!("code={code_a}&mid=a-{i}&type={kind}&smsc=net-a"),
            );
        }
    }
    for i in 0..15 {
        let answer = "id%3A1+stat%3AUNDELIV+err%3A005";
        add(
            &token_b,
            format!("code={code_b}&mid=b-{i}&type=2&answer={answer}"),
        );
    }
    // One message id in both workspaces: a message of each.
    add(&token_a, format!("code={code_a}&mid=both&type=1"));
    add(&token_b, format!("code={code_b}&mid=both&type=1"));
    // Links nobody has here: B's token naming A's link, an unknown code.
    add(&token_b, format!("code={code_a}&mid=x-1&type=1"));
    add(&token_a, "code=no-such-code&mid=x-2&type=1".into());

    let answers = all_at_once(&app, &sent).await;
    let mut firsts: HashMap<&(String, String), Vec<&(u16, Value)>> = HashMap::new();
    for (request, answer) in sent.iter().zip(&answers) {
        firsts.entry(request).or_default().push(answer);
    }
    for (request, answers) in &firsts {
        let (_, query) = request;
        if query.contains("x-") {
            // Refused as alone: the same answer as the same report sent now on its own.
            let alone = report(&app, &request.0, query).await;
            assert_eq!(answers, &[&alone], "{query}");
            assert_eq!(alone.0, 404, "{query}");
            assert_eq!(alone.1["error"]["code"], "unknown_link");
            continue;
        }
        // Once stored, then duplicates of it, each answering the stored receipt.
        let created = (answers.iter())
            .filter(|(status, _)| *status == 201)
            .count();
        assert_eq!(created, 1, "{query}: {answers:?}");
        let first = answers.iter().find(|(status, _)| *status == 201).unwrap();
        for (status, body) in answers {
            assert_eq!(body["duplicate"], *status == 200, "{query}: {body}");
            assert_eq!(stored(body), stored(&first.1), "{query}");
        }
        let body = &first.1;
        let token = &request.0;
        let workspace_code = if *token == token_a { &code_a } else { &code_b };
        assert_eq!(
            (&body["code"], &body["gateway"]),
            (&json!(workspace_code), &json!("kannel"))
        );
        // A final state is the message's, whichever report of it came first.
        if body["state"] != "submitted" {
            assert_eq!(body["current_state"], body["state"], "{query}: {body}");
        }
        if query.contains("mid=b-") {
            assert_eq!(
                (&body["state"], &body["error_code"]),
                (&json!("failed"), &json!("005"))
            );
        }
        // Sent again alone now: a duplicate answering the same receipt.
        let (status, again) = report(&app, token, query).await;
        assert_eq!(status, 200, "{query}: {again}");
        let mut expected = stored(body);
        expected["current_state"] = again["current_state"].clone();
        assert_eq!(stored(&again), expected, "{query}");
    }

    let db = &app.db;
    let count = |sql: String| async move {
        let sql = format!("SELECT COUNT(*) FROM {sql}");
        db.scalar(&sql).await
    };
    let ws_b = app
        .db
        .scalar("SELECT id FROM workspaces WHERE slug = 'brand-b'")
        .await;
    assert_eq!(rows(&app, "delivery_receipts").await, 30 * 2 + 15 + 2);
    let b_receipts = count(format!("delivery_receipts WHERE workspace_id = {ws_b}")).await;
    assert_eq!(b_receipts, 16);
    let delivered = count(format!(
        "delivery_messages WHERE workspace_id <> {ws_b} AND state = 'delivered'"
    ))
    .await;
    assert_eq!(
        delivered, 31,
        "every message of A delivered, whatever the order"
    );
    let failed = count(format!(
        "delivery_messages WHERE workspace_id = {ws_b} AND state = 'failed'"
    ))
    .await;
    assert_eq!(failed, 15);

    // The token's workspace read with it: suspended, refused at once; resumed, taken again.
    let suspend = |suspended: bool| {
        with_key(&app, &operator, Method::PATCH, "/workspaces/brand-b")
            .json(&json!({ "suspended": suspended }))
            .send()
    };
    let again = format!("code={code_b}&mid=b-0&type=2");
    assert_eq!(suspend(true).await.unwrap().status(), 200);
    let (status, body) = report(&app, &token_b, &again).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("workspace_suspended"))
    );
    assert_eq!(report(&app, &token_a, "code=x&mid=y&type=1").await.0, 404);
    assert_eq!(suspend(false).await.unwrap().status(), 200);
    assert_eq!(report(&app, &token_b, &again).await.0, 200);
}

/// A group the database refuses (its messages' table gone for a moment): every callback of it
/// answered 5xx, not one receipt stored; the same reports once it is back: each stored.
#[tokio::test]
async fn a_failed_group_answers_each_5xx_and_stores_nothing() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://shop.example/f").await;
    let (_, token) = callback_token(&app, API_KEY, "kannel", None).await;
    let sent: Vec<(String, String)> = (0..40)
        .map(|i| (token.clone(), format!("code={code}&mid=f-{i}&type=1")))
        .collect();
    app.db
        .execute("ALTER TABLE delivery_messages RENAME TO delivery_messages_away")
        .await;
    for (status, body) in all_at_once(&app, &sent).await {
        assert!((500..600).contains(&status), "{status}: {body}");
        assert!(body["error"]["code"].is_string(), "{body}");
    }
    assert_eq!(
        rows(&app, "delivery_receipts").await,
        0,
        "nothing half-written"
    );
    app.db
        .execute("ALTER TABLE delivery_messages_away RENAME TO delivery_messages")
        .await;
    for (status, body) in all_at_once(&app, &sent).await {
        assert_eq!(status, 201, "{body}");
    }
    assert_eq!(rows(&app, "delivery_receipts").await, 40);
    assert_eq!(rows(&app, "delivery_messages").await, 40);
}
