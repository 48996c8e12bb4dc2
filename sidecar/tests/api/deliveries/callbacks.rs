//! The native callbacks, fed the gateways' own requests (`fixtures/gateways/`): Kannel's
//! observed `dlr-url` calls, Twilio's status forms with a right and a wrong signature, Vonage's
//! JSON and GET receipts. A token of another workspace, revoked, unknown or of another gateway
//! gets 404 and touches nothing; no recipient number is stored.

use super::*;
use crate::workspaces::{create_workspace, operator_key, send_text, workspace_key};
use shortlink_messaging::receipts::twilio::signature as twilio_signature;

/// The query string of an observed request line (`GET /dlr?<query> HTTP/1.1`), its `ts`
/// moved by [`observed_shift`].
fn observed_query(name: &str) -> String {
    let text = fixture(&format!("kannel-observed/{name}"));
    let target = text.lines().next().unwrap().split(' ').nth(1).unwrap();
    let query = target.split_once('?').unwrap().1;
    (query.split('&'))
        .map(|pair| match pair.strip_prefix("ts=") {
            Some(ts) => format!("ts={}", ts.parse::<i64>().unwrap() + observed_shift()),
            None => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Seconds added to the observed reports' times (Kannel's `ts`, recorded on 2026-11-27): whole
/// days, so that they fall within the last day, in their order. A report older than the
/// receipts' window is taken at its arrival instead, and the fixtures must not age into that.
fn observed_shift() -> i64 {
    static SHIFT: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    const RECORDED: i64 = 1_795_804_000;
    const DAY: i64 = 86_400;
    *SHIFT.get_or_init(|| (chrono::Utc::now().timestamp() - RECORDED) / DAY * DAY)
}

/// Nothing any receipt table holds names the recipient (`+1555…`, `4477…`).
async fn no_number_stored(app: &TestApp) {
    let columns = ["message_id", "code", "carrier", "error_code"];
    for (table, text) in [
        ("delivery_receipts", "error_text"),
        ("delivery_messages", "short_domain"),
    ] {
        for column in columns.into_iter().chain([text]) {
            let found = app
                .db
                .scalar(&format!(
                    "SELECT COUNT(*) FROM {table} WHERE {column} LIKE '%1555%' \
                     OR {column} LIKE '%447700%'"
                ))
                .await;
            assert_eq!(found, 0, "{table}.{column} holds a number");
        }
    }
}

#[tokio::test]
async fn kannel_reports_as_observed_are_read() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://shop.example/k").await;
    let (_, token) = callback_token(&app, API_KEY, "kannel", None).await;
    let send = |file: &str| {
        let query = observed_query(file);
        let mid = query.rsplit_once("ref=").unwrap().1.to_owned();
        let url = app.url(&format!(
            "/callbacks/{token}/kannel?{query}&code={code}&mid={mid}"
        ));
        let client = app.client.clone();
        async move {
            let answer = client.get(url).send().await.unwrap();
            (
                answer.status().as_u16(),
                answer.json::<Value>().await.unwrap(),
            )
        }
    };
    let expect = [
        ("dlr-08-smsc-ack-OK1.http", 201, "submitted", "submitted"),
        ("dlr-01-delivered-OK1.http", 201, "delivered", "delivered"),
        // Kannel retries a report it got no answer to: the same report is a duplicate.
        ("dlr-01-delivered-OK1.http", 200, "delivered", "delivered"),
        // Reordered: the failure before the SMSC's acceptance.
        ("dlr-02-failed-FAIL1.http", 201, "failed", "failed"),
        ("dlr-08-smsc-ack-FAIL1.http", 201, "submitted", "failed"),
        ("dlr-04-buffered-BUF.http", 201, "buffered", "buffered"),
        (
            "dlr-08-mask8-no-foreign-id.http",
            201,
            "submitted",
            "submitted",
        ),
        ("dlr-16-smsc-reject-REJ1.http", 201, "rejected", "rejected"),
        (
            "dlr-16-no-regex-match-GARB.http",
            201,
            "rejected",
            "rejected",
        ),
        (
            "dlr-16-retries-exceeded-TMP1.http",
            201,
            "rejected",
            "rejected",
        ),
    ];
    for (file, status, state, current) in expect {
        let (got, body) = send(file).await;
        assert_eq!(got, status, "{file}: {body}");
        assert_eq!(
            (body["state"].as_str(), body["current_state"].as_str()),
            (Some(state), Some(current)),
            "{file}: {body}"
        );
        assert_eq!(body["gateway"], "kannel");
    }
    let (_, failed) = send("dlr-02-failed-FAIL1.http").await;
    assert_eq!(
        (
            &failed["error_code"],
            &failed["error_text"],
            &failed["carrier"]
        ),
        (&json!("005"), &json!("stat:UNDELIV"), &json!("dbl"))
    );
    let observed = chrono::DateTime::from_timestamp(1_795_804_019 + observed_shift(), 0).unwrap();
    assert_eq!(
        failed["at"],
        observed.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let (_, rejected) = send("dlr-16-smsc-reject-REJ1.http").await;
    assert_eq!(rejected["error_text"], "ERR 88 destination blocked");
    let (_, tempfail) = send("dlr-16-retries-exceeded-TMP1.http").await;
    assert_eq!(
        (&tempfail["error_text"], &tempfail["carrier"]),
        (&json!("Retries Exceeded"), &Value::Null)
    );
    assert_eq!(rows(&app, "delivery_receipts").await, 9);
    no_number_stored(&app).await;

    // No type: 400 naming what is missing; an unknown code: 404.
    let get = |query: String| {
        app.client
            .get(app.url(&format!("/callbacks/{token}/kannel?{query}")))
    };
    let answer = get(format!("code={code}&mid=x")).send().await.unwrap();
    assert_eq!(answer.status(), 400);
    assert_eq!(
        answer.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_state"
    );
    // No code: a report about no link of this workspace.
    let answer = get("type=1&mid=x".into()).send().await.unwrap();
    assert_eq!(answer.status(), 404);
    let answer = get("type=1&mid=x&code=no-such-code".into())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
    assert_eq!(rows(&app, "delivery_receipts").await, 9);
}

#[tokio::test]
async fn twilio_forms_are_read_and_their_signature_checked() {
    let app = spawn_app(Backend::Sqlite).await;
    // The fixtures' own vectors: the signature is Twilio's.
    let vectors: Value = serde_json::from_str(&fixture("twilio-signature-vectors.json")).unwrap();
    for vector in vectors["vectors"].as_array().unwrap() {
        let params: Vec<(String, String)> = match vector["form_file"].as_str() {
            Some(file) => url::form_urlencoded::parse(fixture(file).as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            None => (vector["params"].as_object().unwrap().iter())
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect(),
        };
        let signed = twilio_signature(
            vector["auth_token"].as_str().unwrap(),
            vector["url"].as_str().unwrap(),
            &params,
        );
        assert_eq!(
            signed,
            vector["expected_signature"].as_str().unwrap(),
            "{}",
            vector["name"]
        );
    }

    let code = app.create_code("https://shop.example/t").await;
    let secret = "test_auth_token_0123456789abcdef";
    let (_, token) = callback_token(&app, API_KEY, "twilio", Some(secret)).await;
    let url = app.url(&format!("/callbacks/{token}/twilio?code={code}"));
    let send = |file: &str, signature: Option<String>| {
        let form = fixture(file);
        let params: Vec<(String, String)> = url::form_urlencoded::parse(form.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let signature = signature.unwrap_or_else(|| twilio_signature(secret, &url, &params));
        let request = app
            .client
            .post(&url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-twilio-signature", signature)
            .body(form);
        async move {
            let answer = request.send().await.unwrap();
            (
                answer.status().as_u16(),
                answer.json::<Value>().await.unwrap(),
            )
        }
    };
    // A wrong signature (the lab's, made for another URL): 403, nothing stored.
    let (status, body) = send(
        "twilio-status-delivered.form",
        Some("SK3JfTVC/y5rQjTMUNx24tfQvj4=".into()),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("invalid_signature"))
    );
    assert_eq!(rows(&app, "delivery_receipts").await, 0);
    for (file, state, error) in [
        ("twilio-status-sent.form", "submitted", Value::Null),
        (
            "twilio-status-undelivered-30003.form",
            "failed",
            json!("30003"),
        ),
        ("twilio-status-delivered.form", "delivered", Value::Null),
    ] {
        let (status, body) = send(file, None).await;
        assert_eq!(status, 201, "{file}: {body}");
        assert_eq!(
            (&body["state"], &body["error_code"]),
            (&json!(state), &error),
            "{file}"
        );
        assert_eq!(body["message_id"], "SM00000000000000000000000000000001");
    }
    // Twilio's `failed`: it could not send the message. Its callbacks carry no time of their
    // own, so the later report is the later final state.
    let (_, body) = send("twilio-status-failed-30008.form", None).await;
    assert_eq!(
        (&body["state"], &body["current_state"]),
        (&json!("rejected"), &json!("rejected"))
    );
    assert_eq!(rows(&app, "delivery_receipts").await, 4);
    no_number_stored(&app).await;

    // Without an auth token the signature is not asked for.
    let (_, open) = callback_token(&app, API_KEY, "twilio", None).await;
    let answer = app
        .client
        .post(app.url(&format!("/callbacks/{open}/twilio?code={code}")))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(fixture("twilio-status-undelivered-30006.form"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        200,
        "a duplicate of the 30003 report's state"
    );
}

#[tokio::test]
async fn vonage_receipts_are_read_from_json_and_query() {
    let app = spawn_app(Backend::Sqlite).await;
    // The fixtures' `client-ref` is the link's code.
    app.create(json!({"url": "https://shop.example/v", "code": "camp42-msg7"}))
        .await;
    let code = app.create_code("https://shop.example/w").await;
    let (_, token) = callback_token(&app, API_KEY, "vonage", None).await;
    let path = format!("/callbacks/{token}/vonage");
    for (file, state, error, current) in [
        (
            "vonage-dlr-accepted.json",
            "submitted",
            Value::Null,
            "submitted",
        ),
        (
            "vonage-dlr-delivered.json",
            "delivered",
            Value::Null,
            "delivered",
        ),
        ("vonage-dlr-expired.json", "expired", json!("1"), ""),
        (
            "vonage-dlr-failed-absent-subscriber.json",
            "failed",
            json!("2"),
            "",
        ),
        (
            "vonage-dlr-rejected-anti-spam.json",
            "rejected",
            json!("6"),
            "",
        ),
    ] {
        let answer = app
            .client
            .post(app.url(&path))
            .header("content-type", "application/json")
            .body(fixture(file))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201, "{file}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(
            (&body["state"], &body["error_code"]),
            (&json!(state), &error),
            "{file}: {body}"
        );
        assert_eq!(
            (&body["code"], &body["carrier"]),
            (&json!("camp42-msg7"), &json!("23410"))
        );
        if !current.is_empty() {
            assert_eq!(body["current_state"], current, "{file}");
        }
    }
    // The same receipt as a GET query: a duplicate.
    let query = fixture("vonage-dlr-delivered.query");
    let answer = app
        .client
        .get(app.url(&format!("{path}?{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // A third party's documented GET, with the code in the callback URL: its time (2017) is
    // older than any report can be, so the receipt is taken at the time received.
    let query = fixture("vonage-dlr-courier-example.query");
    let answer = app
        .client
        .get(app.url(&format!("{path}?{query}&code={code}")))
        .send()
        .await
        .unwrap();
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["code"], json!(code));
    let at: chrono::DateTime<chrono::Utc> = body["at"].as_str().unwrap().parse().unwrap();
    assert!(
        chrono::Utc::now() - at < chrono::Duration::minutes(1),
        "{body}"
    );
    no_number_stored(&app).await;
}

#[tokio::test]
async fn a_token_of_another_workspace_revoked_or_unknown_touches_nothing() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let b_admin = workspace_key(&app, &operator, "brand-b", "admin").await;
    let code = app.create_code("https://shop.example/a").await;
    let (id, mine) = callback_token(&app, API_KEY, "kannel", None).await;
    let (_, theirs) = callback_token(&app, &b_admin, "kannel", None).await;
    let (_, twilio) = callback_token(&app, API_KEY, "twilio", None).await;
    let dlr = |token: &str, code: &str| {
        app.client.get(app.url(&format!(
            "/callbacks/{token}/kannel?type=1&mid=m-1&code={code}"
        )))
    };
    // B's token naming the default workspace's link: as a link nobody has.
    let answer = dlr(&theirs, &code).send().await.unwrap();
    let nobody = dlr(&theirs, "no-such-code").send().await.unwrap();
    assert_eq!(
        (answer.status(), nobody.status()),
        (
            reqwest::StatusCode::NOT_FOUND,
            reqwest::StatusCode::NOT_FOUND
        )
    );
    let (a, b): (Value, Value) = (answer.json().await.unwrap(), nobody.json().await.unwrap());
    assert_eq!(a, b);
    // A token that is no token, and one made for another gateway.
    for token in ["slc_0000", twilio.as_str()] {
        let answer = dlr(token, &code).send().await.unwrap();
        assert_eq!(answer.status(), 404, "{token}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found");
    }
    // Revoked (by its admin; B's admin cannot): then 404 as unknown.
    let revoke = |key: &str| with_key(&app, key, Method::DELETE, &format!("/callback-tokens/{id}"));
    assert_eq!(revoke(&b_admin).send().await.unwrap().status(), 404);
    assert_eq!(dlr(&mine, &code).send().await.unwrap().status(), 201);
    let revoked: Value = revoke(API_KEY).send().await.unwrap().json().await.unwrap();
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    let answer = dlr(&mine, &code).send().await.unwrap();
    assert_eq!(answer.status(), 404);
    assert_eq!(rows(&app, "delivery_receipts").await, 1);

    // The list shows no secret; making and revoking are audited.
    let list = send_text(with_key(&app, API_KEY, Method::GET, "/callback-tokens")).await;
    assert!(!list.contains(&mine) && !list.contains("slc_"), "{list}");
    assert!(!list.contains("brand-b"), "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list["tokens"].as_array().unwrap().len(), 2);
    let audit: Value = with_key(&app, API_KEY, Method::GET, "/audit?action=callback_token.*")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = audit.to_string();
    assert!(
        text.contains("callback_token.create") && text.contains("callback_token.revoke"),
        "{text}"
    );
    assert!(!text.contains(&mine), "the audit log holds no token");
    // Only admins make tokens.
    let issuer = workspace_key(&app, &operator, "brand-b", "issuer").await;
    let answer = with_key(&app, &issuer, Method::POST, "/callback-tokens")
        .json(&json!({"name": "x", "gateway": "kannel"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403);
    let answer = with_key(&app, API_KEY, Method::POST, "/callback-tokens")
        .json(&json!({"name": "x", "gateway": "kannel", "twilio_auth_token": "t"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 422);
}
