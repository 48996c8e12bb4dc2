//! On PostgreSQL one NDJSON request's chunks are written several at once, cut by message
//! (`visits-sql/src/deliveries/parallel.rs`): a message whose reports lie hundreds of lines apart,
//! out of order and repeated, still answers each line as one report after the other would, in
//! input order, and ends in the state the rule gives; sent again, every line is a duplicate.

use super::*;

/// Lines far enough apart to fall in different chunks of 500 were the request cut by position.
const LINES: usize = 1_250;

/// A report: (line, message, state, minute, carrier, error code).
type Report = (
    usize,
    &'static str,
    &'static str,
    i64,
    Option<&'static str>,
    Option<&'static str>,
);

/// The reports of the messages split across chunks.
const SPLIT: [Report; 9] = [
    (3, "split-a", "delivered", 5, Some("23410"), None),
    (620, "split-a", "submitted", 1, None, None),
    (1_049, "split-a", "delivered", 5, Some("99999"), None),
    (1_240, "split-a", "failed", 7, None, Some("005")),
    (499, "split-b", "submitted", 1, None, None),
    (500, "split-b", "submitted", 1, None, None),
    (1_001, "split-b", "delivered", 2, None, None),
    (990, "split-c", "expired", 2, None, None),
    (1_000, "split-c", "delivered", 1, None, None),
];
/// A line that is not JSON, among them.
const MALFORMED: usize = 700;

#[tokio::test]
async fn a_message_split_across_chunks_answers_in_order_as_one_report_after_the_other() {
    let app = spawn_app(Backend::Postgres).await;
    let code = app.create_code("https://shop.example/split").await;
    let start = chrono::Utc::now() - chrono::Duration::hours(1);
    let line = |message_id: &str,
                state: &str,
                minute: i64,
                carrier: Option<&str>,
                error_code: Option<&str>| {
        let at = (start + chrono::Duration::minutes(minute)).to_rfc3339();
        let mut body = json!({"code": code, "message_id": message_id, "state": state, "at": at});
        for (field, value) in [("carrier", carrier), ("error_code", error_code)] {
            if let Some(value) = value {
                body[field] = json!(value);
            }
        }
        body.to_string()
    };
    let mut lines: Vec<String> = (0..LINES)
        .map(|n| line(&format!("other-{n}"), "delivered", 3, None, None))
        .collect();
    for (at, message_id, state, minute, carrier, error_code) in SPLIT {
        lines[at] = line(message_id, state, minute, carrier, error_code);
    }
    lines[MALFORMED] = "{\"code\": ".to_owned();

    let (status, answers) = post_lines(&app, API_KEY, &lines).await;
    assert_eq!((status, answers.len()), (200, LINES));
    let split: Vec<(u64, &str, &str)> = (SPLIT.iter())
        .map(|(at, ..)| {
            let answer = &answers[*at];
            assert_eq!(answer["index"], *at, "{answer}");
            let delivery = &answer["delivery"];
            (
                answer["status"].as_u64().unwrap(),
                delivery["current_state"].as_str().unwrap(),
                delivery["carrier"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        split,
        [
            (201, "delivered", "23410"),
            // A late non-final report: the message stays delivered.
            (201, "delivered", "-"),
            // The repeat answers with the stored report, its carrier.
            (200, "delivered", "23410"),
            // A later final report wins.
            (201, "failed", "-"),
            (201, "submitted", "-"),
            (200, "submitted", "-"),
            (201, "delivered", "-"),
            (201, "expired", "-"),
            // An earlier final report loses.
            (201, "expired", "-"),
        ]
    );
    assert_eq!(answers[MALFORMED]["status"], 400);
    for (index, answer) in answers.iter().enumerate() {
        assert_eq!(answer["index"], index, "{answer}");
        if index != MALFORMED && !SPLIT.iter().any(|(at, ..)| *at == index) {
            assert_eq!(answer["status"], 201, "{answer}");
        }
    }

    let others = (LINES - SPLIT.len() - 1) as i64;
    assert_eq!(rows(&app, "delivery_receipts").await, others + 3 + 2 + 2);
    assert_eq!(rows(&app, "delivery_messages").await, others + 3);
    let messages = app
        .db
        .texts(
            "SELECT message_id || ' ' || state || ' ' || COALESCE(carrier, '-') || ' ' || \
             COALESCE(error_code, '-') FROM delivery_messages \
             WHERE message_id LIKE 'split-%' ORDER BY message_id",
        )
        .await;
    assert_eq!(
        messages,
        [
            "split-a failed 23410 005",
            "split-b delivered - -",
            "split-c expired - -"
        ]
    );

    // The sender's retry of the whole request: nothing new, every report a duplicate.
    let (status, again) = post_lines(&app, API_KEY, &lines).await;
    assert_eq!((status, again.len()), (200, LINES));
    for (index, answer) in again.iter().enumerate() {
        let expected = if index == MALFORMED { 400 } else { 200 };
        assert_eq!(answer["status"], expected, "{answer}");
    }
    assert_eq!(rows(&app, "delivery_receipts").await, others + 7);
    assert_eq!(current(&app, "split-a").await, "failed");
}
