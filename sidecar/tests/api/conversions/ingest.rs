//! POST /api/v1/conversions: stored, repeated, refused, batched.

use super::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use std::collections::HashSet;

crate::on_each_backend!(
    a_conversion_by_click_id_copies_the_click,
    a_conversion_by_code_and_ref_takes_the_latest_human_visit,
    a_repeated_event_id_answers_the_first_also_under_concurrent_retries,
    each_refusal_has_its_code_and_stores_nothing,
    an_ndjson_batch_answers_each_line_in_order,
    concurrent_batches_with_the_same_event_ids_count_each_once,
);

async fn a_conversion_by_click_id_copies_the_click(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = link(&app, "spring", "r-1").await;
    let clicked = now_ms() - 60_000;
    store(
        &app,
        &[visit(
            "1700000000001-0",
            &code,
            clicked,
            "203.0.113.1",
            IPHONE,
            Some("1.1"),
        )],
    )
    .await;
    let (status, body) = post(
        &app,
        &json!({"click_id": "1700000000001-0", "name": "purchase", "value": 19.99,
                "currency": "EUR", "event_id": "order-1"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert!(body["id"].as_str().unwrap().starts_with("cv_"), "{body}");
    assert_eq!(body["click_id"], "1700000000001-0");
    assert_eq!(body["code"], code.as_str());
    assert_eq!(
        (&body["campaign"], &body["ref"]),
        (&json!("spring"), &json!("r-1"))
    );
    assert_eq!(body["rule"], "1.1");
    assert_eq!(body["short_domain"], "s.example");
    assert_eq!(body["device"], "mobile");
    assert_eq!(
        (&body["value"], &body["currency"]),
        (&json!("19.99"), &json!("EUR"))
    );
    assert_eq!(body["duplicate"], false);
    let clicked_at: chrono::DateTime<chrono::Utc> =
        body["clicked_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(clicked_at.timestamp_millis(), clicked);
    // Exact minor units in SQL, never a float.
    assert_eq!(
        app.db.scalar("SELECT value_minor FROM conversions").await,
        1999
    );
    // A value as a string, in a currency without minor units.
    let (status, body) = post(
        &app,
        &json!({"click_id": "1700000000001-0", "name": "lead", "value": "1500",
                "currency": "JPY", "event_id": "lead-1"}),
    )
    .await;
    assert_eq!((status, &body["value"]), (201, &json!("1500")), "{body}");
    assert_eq!(conversion_rows(&app).await, 2);
}

async fn a_conversion_by_code_and_ref_takes_the_latest_human_visit(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = link(&app, "spring", "r-7").await;
    let t = now_ms() - 600_000;
    store(
        &app,
        &[
            visit("1700000000001-0", &code, t, "203.0.113.1", IPHONE, None),
            visit(
                "1700000000002-0",
                &code,
                t + 1000,
                "203.0.113.2",
                IPHONE,
                None,
            ),
            // Later, but a bot's: not the recipient.
            visit(
                "1700000000003-0",
                &code,
                t + 2000,
                "203.0.113.3",
                CURL,
                None,
            ),
        ],
    )
    .await;
    let (status, body) = post(
        &app,
        &json!({"code": code, "ref": "r-7", "name": "lead", "event_id": "e-1"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["click_id"], "1700000000002-0");
    // At or before the conversion's time: the earlier visit for an earlier conversion.
    let at = chrono::DateTime::from_timestamp_millis(t + 500).unwrap();
    let (status, body) = post(
        &app,
        &json!({"code": code, "ref": "r-7", "name": "lead", "event_id": "e-2",
                "converted_at": at.to_rfc3339()}),
    )
    .await;
    assert_eq!(
        (status, &body["click_id"]),
        (201, &json!("1700000000001-0")),
        "{body}"
    );
    // The wrong ref is no click of this link.
    let (status, body) = post(
        &app,
        &json!({"code": code, "ref": "r-8", "name": "lead", "event_id": "e-3"}),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("unknown_click")),
        "{body}"
    );
}

async fn a_repeated_event_id_answers_the_first_also_under_concurrent_retries(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = link(&app, "spring", "r-1").await;
    store(&app, &[first_click(&code)]).await;
    let body = json!({"click_id": "1700000000001-0", "name": "purchase", "value": "5",
                      "currency": "USD", "event_id": "order-9"});
    let answers = futures_util::future::join_all((0..16).map(|_| post(&app, &body))).await;
    let created = answers.iter().filter(|(status, _)| *status == 201).count();
    let repeated = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!((created, repeated), (1, 15), "{answers:?}");
    let ids: HashSet<&str> = answers
        .iter()
        .map(|(_, b)| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "every answer is the first conversion");
    assert!(answers
        .iter()
        .all(|(status, b)| b["duplicate"] == json!(*status == 200)));
    // A later repeat with another body still answers the first.
    let (status, again) = post(
        &app,
        &json!({"click_id": "1700000000001-0", "name": "lead", "event_id": "order-9"}),
    )
    .await;
    assert_eq!(
        (status, &again["name"], &again["value"]),
        (200, &json!("purchase"), &json!("5.00"))
    );
    assert_eq!(conversion_rows(&app).await, 1);
    assert_eq!(
        app.db
            .scalar("SELECT COUNT(*) FROM visit_feed WHERE event_ids LIKE 'cv_%'")
            .await,
        1,
        "one feed row, for the one conversion stored"
    );
}

async fn each_refusal_has_its_code_and_stores_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = link(&app, "spring", "r-1").await;
    store(&app, &[first_click(&code), second_click(&code, 31)]).await;
    // Another workspace's click is no click here.
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let b_key = workspace_key(&app, &operator, "brand-b", "issuer").await;
    let answer = with_key(&app, &b_key, reqwest::Method::POST, "/conversions")
        .json(&json!({"click_id": "1700000000001-0", "name": "lead", "event_id": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
    let b: Value = answer.json().await.unwrap();
    assert_eq!(b["error"]["code"], "unknown_click", "{b}");
    // Also in a batch (read there by id without the link, then the link in the workspace).
    let answer = with_key(&app, &b_key, reqwest::Method::POST, "/conversions")
        .header("content-type", "application/x-ndjson")
        .body(json!({"click_id": "1700000000001-0", "name": "lead", "event_id": "x"}).to_string())
        .send()
        .await
        .unwrap();
    let line: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
    assert_eq!(
        (&line["status"], &line["error"]["code"]),
        (&json!(404), &json!("unknown_click")),
        "{line}"
    );

    let click = "1700000000001-0";
    let before = chrono::DateTime::from_timestamp_millis(now_ms() - 3_600_000).unwrap();
    let future = chrono::Utc::now() + chrono::Duration::hours(1);
    let cases = [
        (
            json!({"click_id": "1700000000009-0", "name": "lead", "event_id": "a"}),
            404,
            "unknown_click",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": "b", "converted_at": before.to_rfc3339()}),
            422,
            "before_click",
        ),
        (
            json!({"click_id": "1700000000002-0", "name": "lead", "event_id": "c"}),
            422,
            "outside_window",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": "d", "value": "1", "currency": "EURO"}),
            422,
            "invalid_currency",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": "e", "value": "1", "currency": "XTS1"}),
            422,
            "invalid_currency",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": "f", "value": "1"}),
            422,
            "invalid_currency",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": "g", "value": "1.999", "currency": "EUR"}),
            422,
            "invalid_value",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": "h", "value": -3, "currency": "EUR"}),
            422,
            "invalid_value",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": "i", "value": true, "currency": "EUR"}),
            422,
            "invalid_value",
        ),
        (
            json!({"click_id": click, "name": "", "event_id": "j"}),
            422,
            "invalid_name",
        ),
        (
            json!({"click_id": click, "name": "x".repeat(65), "event_id": "k"}),
            422,
            "invalid_name",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": ""}),
            422,
            "invalid_event_id",
        ),
        (
            json!({"click_id": click, "name": "lead", "event_id": "l", "converted_at": future.to_rfc3339()}),
            422,
            "invalid_converted_at",
        ),
        (
            json!({"click_id": click, "code": code, "ref": "r-1", "name": "lead", "event_id": "m"}),
            422,
            "invalid_click",
        ),
        (
            json!({"click_id": click, "name": "lead"}),
            400,
            "malformed_json",
        ),
    ];
    for (body, status, code) in cases {
        let (got, answer) = post(&app, &body).await;
        assert_eq!(
            (got, answer["error"]["code"].as_str().unwrap_or("")),
            (status, code),
            "{body}: {answer}"
        );
    }
    assert_eq!(conversion_rows(&app).await, 0);
    assert_eq!(
        app.db
            .scalar("SELECT COUNT(*) FROM visit_feed WHERE event_ids LIKE 'cv_%'")
            .await,
        0
    );
    // A refused event id is free: the fixed request is stored.
    let (status, body) = post(
        &app,
        &json!({"click_id": click, "name": "lead", "event_id": "g",
        "value": "1.99", "currency": "EUR"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

async fn an_ndjson_batch_answers_each_line_in_order(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = link(&app, "spring", "r-1").await;
    // The second older than the attribution window (30 days) before the conversions below.
    store(&app, &[first_click(&code), second_click(&code, 40)]).await;
    let an_hour_ago = chrono::DateTime::from_timestamp_millis(now_ms() - 3_600_000)
        .unwrap()
        .to_rfc3339();
    let lines = [
        json!({"click_id": "1700000000001-0", "name": "lead", "event_id": "n-1"}).to_string(),
        "{not json".to_owned(),
        json!({"click_id": "1700000000009-0", "name": "lead", "event_id": "n-2"}).to_string(),
        String::new(),
        json!({"click_id": "1700000000001-0", "name": "lead", "event_id": "n-1"}).to_string(),
        json!({"click_id": "1700000000001-0", "name": "purchase", "event_id": "n-3",
               "value": "10", "currency": "GBP"})
        .to_string(),
        // Refused in a batch as alone, also where the batch reads its clicks within the window
        // before its conversions (PostgreSQL's days of visits): the click is read apart.
        json!({"click_id": "1700000000001-0", "name": "lead", "event_id": "n-4",
               "converted_at": an_hour_ago})
        .to_string(),
        json!({"click_id": "1700000000002-0", "name": "lead", "event_id": "n-5"}).to_string(),
    ];
    let answer = app
        .api(reqwest::Method::POST, "/conversions")
        .header("content-type", "application/x-ndjson")
        .body(lines.join("\n"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], "application/x-ndjson");
    let text = answer.text().await.unwrap();
    let results: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary: Vec<(i64, i64, &str)> = results
        .iter()
        .map(|r| {
            (
                r["index"].as_i64().unwrap(),
                r["status"].as_i64().unwrap(),
                r["error"]["code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (0, 201, ""),
            (1, 400, "malformed_json"),
            (2, 404, "unknown_click"),
            (3, 200, ""),
            (4, 201, ""),
            (5, 422, "before_click"),
            (6, 422, "outside_window")
        ],
        "{text}"
    );
    assert_eq!(
        results[3]["conversion"]["id"],
        results[0]["conversion"]["id"]
    );
    assert_eq!(conversion_rows(&app).await, 2);
}

/// Two NDJSON batches of the same 2,100 conversions at once (a sender's retry racing its first
/// try; more than two of the store's 1,000-line transactions, which PostgreSQL stores two at
/// a time): every event id stored once, answered 201 by one batch and 200 by the other.
async fn concurrent_batches_with_the_same_event_ids_count_each_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = link(&app, "spring", "r-1").await;
    let visits: Vec<_> = (0..2100)
        .map(|i| {
            let ip = format!("198.51.{}.{}", i / 200, i % 200 + 1);
            visit(
                &format!("17000000{i:05}-0"),
                &code,
                now_ms() - 5000,
                &ip,
                IPHONE,
                None,
            )
        })
        .collect();
    store(&app, &visits).await;
    let body: String = (0..2100)
        .map(|i| {
            json!({"click_id": format!("17000000{i:05}-0"), "name": "lead", "event_id": format!("b-{i}")})
                .to_string()
                + "\n"
        })
        .collect();
    let send = || {
        app.api(reqwest::Method::POST, "/conversions")
            .header("content-type", "application/x-ndjson")
            .body(body.clone())
            .send()
    };
    let (a, b) = tokio::join!(send(), send());
    let lines = |text: String| -> Vec<Value> {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (a, b) = (
        lines(a.unwrap().text().await.unwrap()),
        lines(b.unwrap().text().await.unwrap()),
    );
    assert_eq!((a.len(), b.len()), (2100, 2100));
    for (x, y) in a.iter().zip(&b) {
        let mut statuses = [x["status"].as_i64().unwrap(), y["status"].as_i64().unwrap()];
        statuses.sort();
        assert_eq!(statuses, [200, 201], "{x} {y}");
        assert_eq!(x["conversion"]["id"], y["conversion"]["id"]);
    }
    assert_eq!(conversion_rows(&app).await, 2100);
    // Each copied its click's visitor (what unique converting visitors count).
    let same_visitor = "SELECT COUNT(*) FROM conversions c JOIN visits v \
         ON v.event_id = c.visit_id AND v.visitor = c.visitor";
    assert_eq!(app.db.scalar(same_visitor).await, 2100);
    // The rollups count each once too: what the A/B result says is what the rows say.
    let result = app.get_json(&format!("/links/{code}/ab")).await;
    let arm = &result["arms"][0];
    assert_eq!(arm["conversions"], 2100, "{result}");
    let converting = (app.db)
        .scalar("SELECT COUNT(DISTINCT visitor) FROM conversions")
        .await;
    assert_eq!(arm["converting_visitors"], converting, "{result}");
}
