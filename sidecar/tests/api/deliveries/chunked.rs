//! POST /api/v1/deliveries stores a chunk of NDJSON lines in set statements: the answers and the
//! rows are those of the same lines sent one request each (each then stored alone), with
//! repeats, reordered states of one message and unknown links inside the chunk.

use super::*;
use crate::workspaces::{create_workspace, operator_key, workspace_key};

crate::on_each_backend!(
    a_chunk_answers_and_stores_as_its_lines_one_by_one,
    concurrent_chunks_of_the_same_messages_are_redone_not_refused,
);

type Time = chrono::DateTime<chrono::Utc>;

/// nginx's issuing lists: each brand's receipts name its own domain.
const LISTS: &str =
    "https://s.example [chunked] https://chunked.example [single] https://single.example";

/// A workspace with a link by code and a per-recipient link: (key, code, short_url).
async fn brand(app: &TestApp, operator: &str, slug: &str) -> (String, String, String) {
    create_workspace(app, operator, slug).await;
    let key = workspace_key(app, operator, slug, "issuer").await;
    let answer = with_key(app, &key, Method::POST, "/links")
        .header("X-Shortlink-Public-Base", LISTS)
        .json(&json!({"url": "https://shop.example/", "campaign": "spring", "ref": "r-1"}))
        .send()
        .await
        .unwrap();
    let link: Value = answer.json().await.unwrap();
    let code = link["code"].as_str().unwrap().to_owned();
    let short_url = link["short_url"].as_str().unwrap().to_owned();
    assert!(short_url.starts_with(&format!("https://{slug}.example/")));
    (key, code, short_url)
}

/// The lines of the test for a workspace's link: reports already stored, then the chunk.
fn lines(start: Time, code: &str, short_url: &str) -> (Vec<String>, Vec<String>) {
    let line = |message_id: &str, state: &str, minute: i64, extra: Value| {
        let at = (start + chrono::Duration::minutes(minute)).to_rfc3339();
        let mut body = json!({"code": code, "message_id": message_id, "state": state,
                              "at": at});
        for (field, value) in extra.as_object().unwrap() {
            body[field] = value.clone();
        }
        if body.get("campaign").is_some() || body.get("short_url").is_some() {
            body.as_object_mut().unwrap().remove("code");
        }
        body.to_string()
    };
    let before = vec![
        line("m-0", "submitted", 1, json!({})),
        line("m-9", "delivered", 5, json!({"carrier": "23410"})),
    ];
    let chunk = vec![
        // Final, then an earlier non-final of the same message: stays delivered.
        line("m-1", "delivered", 4, json!({"carrier": "23410"})),
        line("m-1", "submitted", 1, json!({})),
        // Non-final, then final.
        line("m-2", "submitted", 1, json!({})),
        line("m-3", "failed", 2, json!({"code": "no-such-code"})),
        line(
            "m-2",
            "failed",
            3,
            json!({"error_code": "005", "carrier": "20801"}),
        ),
        "{\"code\": ".to_owned(),
        // A repeat within the chunk, and one of a report stored before it.
        line("m-1", "delivered", 4, json!({"carrier": "99999"})),
        line("m-0", "submitted", 1, json!({})),
        line(
            "m-0",
            "delivered",
            6,
            json!({"campaign": "spring", "ref": "r-1"}),
        ),
        line(
            "m-5",
            "failed",
            2,
            json!({"campaign": "spring", "ref": "r-2"}),
        ),
        // A late non-final report of a stored final message: only its carrier sticks.
        line("m-9", "buffered", 9, json!({"carrier": "99999"})),
        line("m-2", "failed", 3, json!({"error_code": "005"})),
        // Among finals the later gateway time wins, in either order of arrival.
        line("m-4", "expired", 2, json!({"short_url": short_url})),
        line("m-4", "delivered", 7, json!({})),
        line("m-4", "failed", 1, json!({"error_code": "009"})),
    ];
    (before, chunk)
}

/// The answers without what differs between workspaces (the code, the host) or runs (the
/// arrival time).
fn comparable(answers: &[Value], code: &str, short_url: &str) -> Vec<Value> {
    let host = short_url.split('/').nth(2).unwrap();
    let text = Value::from(answers.to_vec())
        .to_string()
        .replace(code, "CODE")
        .replace(host, "HOST");
    let mut answers: Vec<Value> = serde_json::from_str(&text).unwrap();
    for answer in &mut answers {
        if let Some(delivery) = answer["delivery"].as_object_mut() {
            delivery.remove("received_at");
        }
    }
    answers
}

/// The workspace's messages and receipts, one text per row, with its code and host masked.
async fn stored(app: &TestApp, code: &str, short_url: &str) -> Vec<String> {
    let host = short_url.split('/').nth(2).unwrap();
    let ws = format!("(SELECT workspace_id FROM links WHERE code = '{code}')");
    let mut out = Vec::new();
    for (table, columns) in [
        (
            "delivery_messages",
            ["state", "code", "short_domain", "error_code", "carrier"].as_slice(),
        ),
        (
            "delivery_receipts",
            ["code", "error_code", "carrier", "gateway"].as_slice(),
        ),
    ] {
        for column in columns {
            let values = app
                .db
                .texts(&format!(
                    "SELECT COALESCE({column}, '-') FROM {table} WHERE workspace_id = {ws} \
                     ORDER BY message_id, state"
                ))
                .await;
            out.push(format!("{table}.{column}: {}", values.join(" ")));
        }
        let mut keys = Vec::new();
        for column in ["message_id", "state"] {
            let sql = format!(
                "SELECT {column} FROM {table} WHERE workspace_id = {ws} ORDER BY message_id, state"
            );
            keys.push(app.db.texts(&sql).await);
        }
        let (ids, states) = (&keys[0], &keys[1]);
        for (id, state) in ids.iter().zip(states) {
            let at = app
                .db
                .scalar(&format!(
                    "SELECT at_ms FROM {table} WHERE workspace_id = {ws} \
                     AND message_id = '{id}' AND state = '{state}'"
                ))
                .await;
            out.push(format!("{table} {id} {state} at {at}"));
        }
    }
    out.iter()
        .map(|row| row.replace(code, "CODE").replace(host, "HOST"))
        .collect()
}

async fn a_chunk_answers_and_stores_as_its_lines_one_by_one(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    let (chunked, chunked_code, chunked_url) = brand(&app, &operator, "chunked").await;
    let (single, single_code, single_url) = brand(&app, &operator, "single").await;

    let start = chrono::Utc::now() - chrono::Duration::hours(1);
    let (before, chunk) = lines(start, &chunked_code, &chunked_url);
    for line in &before {
        assert_eq!(
            post_lines(&app, &chunked, std::slice::from_ref(line))
                .await
                .0,
            200
        );
    }
    let (status, answers) = post_lines(&app, &chunked, &chunk).await;
    assert_eq!(status, 200);

    let (before, chunk) = lines(start, &single_code, &single_url);
    for line in &before {
        assert_eq!(
            post_lines(&app, &single, std::slice::from_ref(line))
                .await
                .0,
            200
        );
    }
    let mut one_by_one = Vec::new();
    for (index, line) in chunk.iter().enumerate() {
        let (status, mut answer) = post_lines(&app, &single, std::slice::from_ref(line)).await;
        assert_eq!((status, answer.len()), (200, 1));
        answer[0]["index"] = json!(index);
        one_by_one.push(answer.remove(0));
    }

    let statuses: Vec<u64> = (answers.iter())
        .map(|a| a["status"].as_u64().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [201, 201, 201, 404, 201, 400, 200, 200, 201, 404, 201, 200, 201, 201, 201]
    );
    let current: Vec<&str> = (answers.iter())
        .map(|a| a["delivery"]["current_state"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(
        current,
        [
            "delivered",
            "delivered",
            "submitted",
            "-",
            "failed",
            "-",
            "delivered",
            "submitted",
            "delivered",
            "-",
            "delivered",
            "failed",
            "expired",
            "delivered",
            "delivered"
        ]
    );
    // The repeat answers with the stored report (its carrier), not its own.
    assert_eq!(answers[6]["delivery"]["carrier"], "23410");
    assert_eq!(
        comparable(&answers, &chunked_code, &chunked_url),
        comparable(&one_by_one, &single_code, &single_url)
    );

    let rows = stored(&app, &chunked_code, &chunked_url).await;
    assert_eq!(rows, stored(&app, &single_code, &single_url).await);
    let expected = [
        "delivery_messages.state: delivered delivered failed delivered delivered",
        "delivery_messages.code: CODE CODE CODE CODE CODE",
        "delivery_messages.short_domain: - - - HOST -",
        "delivery_messages.error_code: - - 005 - -",
        "delivery_messages.carrier: - 23410 20801 - 99999",
    ];
    assert_eq!(rows[..5], expected, "{rows:#?}");
    assert_eq!(rows.len(), 5 + 5 + 4 + 11, "{rows:#?}");
}

/// Two chunks naming the same messages in opposite orders, at once, twice each: one loses the
/// race (a key the other took, or a deadlock on the locked rows) and is redone one by one.
async fn concurrent_chunks_of_the_same_messages_are_redone_not_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app.create_code("https://shop.example/a").await;
    let start = chrono::Utc::now() - chrono::Duration::hours(1);
    let line = |id: usize, state: &str, minute: i64| {
        let at = (start + chrono::Duration::minutes(minute)).to_rfc3339();
        json!({"code": code, "message_id": format!("m-{id}"), "state": state, "at": at}).to_string()
    };
    let forward: Vec<String> = (0..50)
        .flat_map(|id| [line(id, "submitted", 1), line(id, "delivered", 2)])
        .collect();
    let backward: Vec<String> = forward.iter().rev().cloned().collect();
    let sends =
        [&forward, &backward, &forward, &backward].map(|lines| post_lines(&app, API_KEY, lines));
    for (status, answers) in futures_util::future::join_all(sends).await {
        assert_eq!((status, answers.len()), (200, 100));
        for answer in answers {
            assert!(
                matches!(answer["status"].as_u64(), Some(200 | 201)),
                "{answer}"
            );
            // A final report leaves its message delivered, whoever came first.
            if answer["delivery"]["state"] == "delivered" {
                assert_eq!(answer["delivery"]["current_state"], "delivered", "{answer}");
            }
        }
    }
    assert_eq!(rows(&app, "delivery_receipts").await, 100);
    assert_eq!(rows(&app, "delivery_messages").await, 50);
    let states = app
        .db
        .texts("SELECT DISTINCT state FROM delivery_messages")
        .await;
    assert_eq!(states, ["delivered"]);
}
