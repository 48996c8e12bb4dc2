//! POST /api/v1/deliveries: idempotent, final states win in any order, refused with the line
//! and field, another workspace's link answered as a missing one.

use super::*;
use crate::workspaces::{create_workspace, operator_key, workspace_key};

crate::on_each_backend!(
    retried_and_reordered_receipts_keep_the_final_state,
    another_workspaces_link_answers_as_missing_and_stores_nothing,
    ndjson_lines_are_answered_in_order_with_line_and_field,
);

fn at(minutes: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::minutes(60 - minutes)).to_rfc3339()
}

async fn retried_and_reordered_receipts_keep_the_final_state(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app.create_code("https://shop.example/a").await;
    let receipt = |id: &str, state: &str, minute: i64| {
        json!({"code": code, "message_id": id, "state": state, "at": at(minute),
               "carrier": "23410"})
    };
    let (status, body) = post(&app, API_KEY, &receipt("m-1", "submitted", 1)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (&body["current_state"], &body["gateway"]),
        (&json!("submitted"), &json!("api"))
    );
    let (status, body) = post(&app, API_KEY, &receipt("m-1", "delivered", 3)).await;
    assert_eq!(
        (status, &body["current_state"]),
        (201, &json!("delivered")),
        "{body}"
    );
    // The same report again: a duplicate, nothing written.
    let (status, body) = post(&app, API_KEY, &receipt("m-1", "delivered", 3)).await;
    assert_eq!((status, &body["duplicate"]), (200, &json!(true)), "{body}");
    // A late non-final report never replaces a final state, whatever its time.
    let (status, body) = post(&app, API_KEY, &receipt("m-1", "buffered", 9)).await;
    assert_eq!(
        (status, &body["current_state"]),
        (201, &json!("delivered")),
        "{body}"
    );
    // Among finals the later gateway time wins, not the later arrival.
    let (_, body) = post(&app, API_KEY, &receipt("m-1", "failed", 2)).await;
    assert_eq!(body["current_state"], "delivered", "{body}");
    let (_, body) = post(&app, API_KEY, &receipt("m-1", "expired", 5)).await;
    assert_eq!(body["current_state"], "expired", "{body}");
    assert_eq!(current(&app, "m-1").await, "expired");
    assert_eq!(rows(&app, "delivery_receipts").await, 5);

    // Reordered: the final report first, the submission after; and each retried, all at once
    // (on MariaDB two first reports of one message lock each other: redone, not refused).
    let messages = ["m-2", "m-3", "m-4", "m-5"];
    let reordered: Vec<Value> = (messages.iter())
        .flat_map(|id| {
            [
                receipt(id, "delivered", 4),
                receipt(id, "submitted", 1),
                receipt(id, "buffered", 2),
            ]
        })
        .collect();
    let sends = (0..2).flat_map(|_| reordered.iter().map(|r| post(&app, API_KEY, r)));
    for (status, body) in futures_util::future::join_all(sends).await {
        assert!(status == 200 || status == 201, "{status} {body}");
    }
    for id in messages {
        assert_eq!(current(&app, id).await, "delivered", "{id}");
    }
    assert_eq!(rows(&app, "delivery_receipts").await, 5 + 3 * 4);
    assert_eq!(rows(&app, "delivery_messages").await, 5);
}

async fn another_workspaces_link_answers_as_missing_and_stores_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    create_workspace(&app, &operator, "brand-b").await;
    let a = workspace_key(&app, &operator, "brand-a", "issuer").await;
    let b = workspace_key(&app, &operator, "brand-b", "issuer").await;
    let answer = with_key(&app, &a, Method::POST, "/links")
        .json(&json!({"url": "https://a.example/", "campaign": "a-camp", "ref": "r1"}))
        .send()
        .await
        .unwrap();
    let code = answer.json::<Value>().await.unwrap()["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let receipt = |link: Value| {
        let mut body = json!({"message_id": "m-1", "state": "delivered"});
        body.as_object_mut()
            .unwrap()
            .extend(link.as_object().unwrap().clone());
        body
    };
    for (theirs, nobody) in [
        (json!({"code": code}), json!({"code": "no-such-code"})),
        (
            json!({"campaign": "a-camp", "ref": "r1"}),
            json!({"campaign": "no-camp", "ref": "r1"}),
        ),
        (
            json!({"short_url": format!("https://s.example/{code}")}),
            json!({"short_url": "https://s.example/no-such-code"}),
        ),
    ] {
        let (status, body) = post(&app, &b, &receipt(theirs)).await;
        let (status_nobody, body_nobody) = post(&app, &b, &receipt(nobody)).await;
        assert_eq!((status, &body), (status_nobody, &body_nobody));
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &json!("unknown_link"))
        );
    }
    assert_eq!(rows(&app, "delivery_receipts").await, 0);
    assert_eq!(rows(&app, "delivery_messages").await, 0);
    // A's own key stores it; B's viewer may not post at all.
    let (status, _) = post(&app, &a, &receipt(json!({"code": code}))).await;
    assert_eq!(status, 201);
    let viewer = workspace_key(&app, &operator, "brand-b", "viewer").await;
    let (status, _) = post(&app, &viewer, &receipt(json!({"code": code}))).await;
    assert_eq!(status, 403);
}

async fn ndjson_lines_are_answered_in_order_with_line_and_field(backend: Backend) {
    let app = spawn_app(backend).await;
    let link = app
        .create(json!({"url": "https://shop.example/", "campaign": "spring", "ref": "r-1"}))
        .await;
    let code = link["code"].as_str().unwrap();
    let lines = [
        json!({"code": code, "message_id": "m-1", "state": "submitted"}).to_string(),
        "{\"code\": ".to_owned(),
        json!({"code": code, "state": "delivered"}).to_string(),
        json!({"code": code, "message_id": "m-2", "state": "sent"}).to_string(),
        json!({"code": "no-such-code", "message_id": "m-3", "state": "failed"}).to_string(),
        json!({"short_url": link["short_url"], "message_id": "m-4", "state": "failed",
               "error_code": "005", "error_text": "x".repeat(1000)})
        .to_string(),
        json!({"campaign": "spring", "ref": "r-1", "message_id": "m-5", "state": "rejected"})
            .to_string(),
        json!({"code": code, "message_id": "m-1", "state": "submitted"}).to_string(),
        json!({"code": code, "message_id": "m-6", "state": "delivered", "at": 5}).to_string(),
        json!({"code": code, "message_id": "m-7", "state": "delivered", "at": "yesterday"})
            .to_string(),
        json!({"code": code, "short_url": "https://s.example/x", "message_id": "m-8",
               "state": "delivered"})
        .to_string(),
    ];
    let (status, answers) = post_lines(&app, API_KEY, &lines).await;
    assert_eq!(status, 200);
    let statuses: Vec<u64> = answers
        .iter()
        .map(|a| a["status"].as_u64().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [201, 400, 400, 422, 404, 201, 201, 200, 400, 422, 422]
    );
    let indexes: Vec<u64> = answers
        .iter()
        .map(|a| a["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, (0..11).collect::<Vec<u64>>());
    let error = |i: usize| {
        (
            answers[i]["error"]["code"].as_str().unwrap().to_owned(),
            answers[i]["error"]["message"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(error(1).0, "malformed_json");
    assert_eq!(error(2).0, "malformed_json");
    assert!(error(2).1.contains("message_id"), "{:?}", error(2));
    assert_eq!(error(3).0, "invalid_state");
    assert_eq!(error(4).0, "unknown_link");
    assert!(
        error(8).1.contains("`at`"),
        "the field is named: {:?}",
        error(8)
    );
    assert_eq!(error(9).0, "invalid_at");
    assert_eq!(error(10).0, "invalid_link");
    let bounded = answers[5]["delivery"]["error_text"].as_str().unwrap();
    assert_eq!(bounded.chars().count(), 256);
    assert_eq!(answers[6]["delivery"]["code"], code);
    assert_eq!(answers[7]["delivery"]["duplicate"], true);
    // Only the lines that passed are stored; the short URL's host is the message's domain.
    assert_eq!(rows(&app, "delivery_receipts").await, 3);
    let domains = app
        .db
        .texts("SELECT short_domain FROM delivery_messages WHERE message_id = 'm-4'")
        .await;
    assert_eq!(domains, ["s.example"]);
}

#[tokio::test]
async fn the_openapi_document_describes_receipts_tokens_funnel_and_callbacks() {
    let app = spawn_app(Backend::Sqlite).await;
    let doc = app.get_json("/openapi.json").await;
    for (path, methods) in [
        ("/api/v1/deliveries", &["post"][..]),
        ("/api/v1/callback-tokens", &["get", "post"][..]),
        ("/api/v1/callback-tokens/{id}", &["delete"][..]),
        ("/api/v1/campaigns/{campaign}/funnel", &["get"][..]),
        ("/callbacks/{token}/kannel", &["get"][..]),
        ("/callbacks/{token}/twilio", &["post"][..]),
        ("/callbacks/{token}/vonage", &["get", "post"][..]),
    ] {
        for method in methods {
            assert!(doc["paths"][path][method].is_object(), "{method} {path}");
        }
    }
    // The callbacks need no key: their token is in the path.
    assert_eq!(
        doc["paths"]["/callbacks/{token}/kannel"]["get"]["security"],
        json!([{}])
    );
    let schema = &doc["components"]["schemas"]["DeliveryRequest"];
    assert_eq!(
        schema["properties"]["state"]["enum"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
    let required: Vec<&str> = (schema["required"].as_array().unwrap().iter())
        .map(|name| name.as_str().unwrap())
        .collect();
    assert_eq!(required, ["message_id", "state"]);
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for reference in doc.to_string().split("\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap();
        assert!(
            schemas.contains_key(name),
            "{name} is referenced but not defined"
        );
    }
}
