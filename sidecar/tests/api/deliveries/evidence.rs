//! A receipt is evidence only about what it proves (issue 77): a host outside the workspace is
//! refused and stores nothing (one line of a batch alone), a callback naming its link twice is
//! told so, a time no report can have is taken as the time received on every gateway, a message
//! keeps the domain first reported, and a receipts body past its limit is refused as it arrives,
//! never held.

use super::*;
use crate::workspaces::{create_workspace, operator_key, workspace_key};

/// nginx's issuing lists: the default workspace's domain and brand-b's.
const LISTS: &str = "https://s.example [brand-b] https://b1.example";

/// The funnel's domains of campaign `spring`.
async fn funnel_domains(app: &TestApp, key: &str) -> Vec<Value> {
    let funnel: Value = with_key(app, key, Method::GET, "/campaigns/spring/funnel")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let domains = funnel["by_domain"].as_array().unwrap().iter();
    domains.map(|part| part["short_domain"].clone()).collect()
}

#[tokio::test]
async fn a_host_outside_the_workspace_is_refused_and_stores_nothing() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let b_issuer = workspace_key(&app, &operator, "brand-b", "issuer").await;
    // A link of the default workspace, made as nginx sends it (its lists name both domains).
    let link: Value = app
        .api(Method::POST, "/links")
        .header("X-Shortlink-Public-Base", LISTS)
        .json(&json!({"url": "https://shop.example/", "campaign": "spring"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let code = link["code"].as_str().unwrap();
    let on = |host: &str, id: &str| {
        json!({"short_url": format!("https://{host}/{code}"), "message_id": id,
               "state": "rejected", "carrier": "x"})
    };
    for host in ["evil.example", "b1.example"] {
        let (status, body) = post(&app, API_KEY, &on(host, &format!("m-{host}"))).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (422, &json!("foreign_domain"))
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(host) && message.contains("not a domain of this workspace"));
    }
    // In a batch, only that line.
    let lines = [
        on("s.example", "m-1").to_string(),
        on("evil.example", "m-2").to_string(),
    ];
    let (status, answers) = post_lines(&app, API_KEY, &lines).await;
    assert_eq!(status, 200);
    assert_eq!(
        (answers[0]["status"].as_u64(), answers[1]["status"].as_u64()),
        (Some(201), Some(422))
    );
    assert_eq!(answers[1]["error"]["code"], "foreign_domain");
    // Another workspace's link, on its own domain: as a missing link.
    let (status, _) = post(&app, &b_issuer, &on("b1.example", "m-3")).await;
    assert_eq!(status, 404);
    assert_eq!(rows(&app, "delivery_receipts").await, 1);
    assert_eq!(funnel_domains(&app, API_KEY).await, [json!("s.example")]);

    // A Kannel callback on a token its workspace made: the same refusal.
    let (_, token) = callback_token(&app, API_KEY, "kannel", None).await;
    let dlr = |query: String| {
        let url = app.url(&format!("/callbacks/{token}/kannel?type=16&{query}"));
        let client = app.client.clone();
        async move {
            let answer = client.get(url).send().await.unwrap();
            (
                answer.status().as_u16(),
                answer.json::<Value>().await.unwrap(),
            )
        }
    };
    let (status, body) = dlr(format!("mid=k1&short_url=https://evil.example/{code}")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("foreign_domain"))
    );
    // Both a code and a short URL: told so, not "no link has this code".
    let (status, body) = dlr(format!(
        "mid=k2&code={code}&short_url=https://s.example/{code}"
    ))
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_link")),
        "{body}"
    );
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("exactly one"));
    assert_eq!(rows(&app, "delivery_receipts").await, 1);
    assert_eq!(funnel_domains(&app, API_KEY).await, [json!("s.example")]);
}

#[tokio::test]
async fn a_message_keeps_the_domain_first_reported() {
    let app = spawn_app_with(Backend::Sqlite, &["--short-domains", "s2.example"]).await;
    let code = app.create_code("https://shop.example/a").await;
    let on = |host: &str, state: &str| json!({"short_url": format!("https://{host}/{code}"), "message_id": "m-1", "state": state});
    assert_eq!(
        post(&app, API_KEY, &on("s.example", "submitted")).await.0,
        201
    );
    assert_eq!(
        post(&app, API_KEY, &on("s2.example", "rejected")).await.0,
        201
    );
    let domains = (app.db)
        .texts("SELECT short_domain FROM delivery_messages WHERE message_id = 'm-1'")
        .await;
    assert_eq!(domains, ["s.example"]);
}

#[tokio::test]
async fn a_time_no_report_can_have_is_the_time_received_on_every_gateway() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://shop.example/t").await;
    let recent = |body: &Value| {
        let at: chrono::DateTime<chrono::Utc> = body["at"].as_str().unwrap().parse().unwrap();
        (chrono::Utc::now() - at).num_seconds().abs() < 60
    };
    // The API: year 2100, and 40 days ago.
    let old = (chrono::Utc::now() - chrono::Duration::days(40)).to_rfc3339();
    for (i, at) in ["2100-01-01T00:00:00Z", old.as_str()]
        .into_iter()
        .enumerate()
    {
        let body =
            json!({"code": code, "message_id": format!("api-{i}"), "state": "delivered", "at": at});
        let (status, body) = post(&app, API_KEY, &body).await;
        assert!(status == 201 && recent(&body), "{at}: {body}");
    }
    // Kannel's `ts` of year 0 and of 2100.
    let (_, kannel) = callback_token(&app, API_KEY, "kannel", None).await;
    for (i, ts) in ["-62167219200", "4102444800"].into_iter().enumerate() {
        let path = format!("/callbacks/{kannel}/kannel?type=1&code={code}&mid=k-{i}&ts={ts}");
        let answer = app.client.get(app.url(&path)).send().await.unwrap();
        let status = answer.status();
        let body: Value = answer.json().await.unwrap();
        assert!(status == 201 && recent(&body), "ts={ts}: {body}");
    }
    // Vonage's `message-timestamp` in 2100.
    let (_, vonage) = callback_token(&app, API_KEY, "vonage", None).await;
    let query = "messageId=v-1&status=delivered&message-timestamp=2100-01-01+00%3A00%3A00";
    let path = format!("/callbacks/{vonage}/vonage?{query}&code={code}");
    let answer = app.client.get(app.url(&path)).send().await.unwrap();
    let status = answer.status();
    let body: Value = answer.json().await.unwrap();
    assert!(status == 201 && recent(&body), "{body}");
    // Twilio's status callback carries no time: always the time received (callbacks.rs).
    let stored = (app.db)
        .scalar("SELECT COUNT(*) FROM delivery_receipts WHERE at_ms > 4000000000000 OR at_ms < 0")
        .await;
    assert_eq!(stored, 0);
}

/// The test process's peak resident memory, in KiB (the app runs in it).
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_receipts_body_past_its_limit_is_refused_as_it_arrives() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://shop.example/big").await;
    // 400 MB of receipts, made as they are sent (the client holds one chunk); long lines, so
    // that the bytes run out before the 100,000 lines.
    let line = json!({"code": code, "message_id": "m", "state": "delivered",
                      "error_text": "x".repeat(3000)})
    .to_string()
        + "\n";
    let chunk = line.repeat((1 << 20) / line.len()).into_bytes();
    let chunks = 400 * (1 << 20) / chunk.len();
    let body = futures_util::stream::iter(
        (0..chunks).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
    );
    let before = peak_kib();
    let answer = with_key(&app, API_KEY, Method::POST, "/deliveries")
        .header("content-type", "application/x-ndjson")
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 413);
    let error: Value = answer.json().await.unwrap();
    assert_eq!(error["error"]["code"], "payload_too_large");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("67108864 bytes"));
    let grown_mib = (peak_kib() - before) / 1024;
    assert!(grown_mib < 200, "the peak grew by {grown_mib} MiB");
    assert_eq!(rows(&app, "delivery_receipts").await, 0);
}
