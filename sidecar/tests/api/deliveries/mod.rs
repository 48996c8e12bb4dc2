//! Delivery receipts (issue 68): taken by the API (one object or NDJSON) and by each gateway's
//! native callback from its own samples (`fixtures/gateways/`), idempotent per message and
//! state under retried and reordered reports, refused with the line and field, kept inside
//! their workspace, counted in a campaign's funnel (API and console page), and gone with the subject, the retention
//! and the workspace.

mod boundary;
mod callbacks;
mod chunked;
mod console;
mod evidence;
mod funnel;
mod gateway;
mod grouped;
mod hindsight;
mod in_flight;
mod ingest;
mod kannel;
mod privacy;
mod queue;
mod redelivered;
mod resend;
mod sealed;
mod stand_in;
mod statistics;

use crate::helpers::*;
use crate::workspaces::with_key;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Kannel, SmscDouble, Verdict};

/// A real Kannel in front of an SMSC double that settles each message as `verdict` says for its
/// text, the SMSC's reports routed back through Kannel. Both stop when dropped.
pub fn kannel_on_smsc(
    verdict: impl Fn(&str) -> Verdict + Send + Sync + 'static,
) -> (SmscDouble, Kannel) {
    let smsc = SmscDouble::start(verdict);
    let kannel = Kannel::start(smsc.port());
    smsc.report_to(kannel.smsc_report_url());
    (smsc, kannel)
}

/// The carrier of the Kannel tests: a message on `s2.example` rejected at submission (a carrier
/// filtering it), one whose text says `absent` failed (absent subscriber, `err:005`), any other
/// delivered.
pub fn by_domain_and_word(text: &str) -> Verdict {
    if text.contains("s2.example") {
        Verdict::Reject("88 destination blocked")
    } else if text.contains("absent") {
        Verdict::Fail("005")
    } else {
        Verdict::Deliver
    }
}

/// One message sent as a campaign tool sends it through Kannel's `sendsms`: to `to`, reports
/// (`dlr_mask`) called back on the workspace's Kannel callback `token` with the `dlr-url`
/// docs/DELIVERIES.md gives (the short URL, the message id `mid`, Kannel's `%d %A %i %T`).
/// Asserts Kannel accepted it.
pub async fn send_through_kannel(
    app: &TestApp,
    kannel: &testkit::Kannel,
    token: &str,
    (to, mid): (&str, &str),
    (short_url, text): (&str, &str),
    dlr_mask: &str,
) {
    let dlr_url = app.url(&format!(
        "/callbacks/{token}/kannel?short_url={short_url}&mid={mid}&type=%d&answer=%A&smsc=%i&ts=%T"
    ));
    let mut sendsms = url::Url::parse(&kannel.sendsms_url()).unwrap();
    sendsms.query_pairs_mut().extend_pairs([
        ("username", testkit::kannel::SEND_USER),
        ("password", testkit::kannel::SEND_PASSWORD),
        ("from", "SHOP"),
        ("to", to),
        ("text", text),
        ("dlr-mask", dlr_mask),
        ("dlr-url", &dlr_url),
    ]);
    let answer = app.client.get(sendsms).send().await.unwrap();
    let answer = answer.text().await.unwrap();
    assert!(
        answer.starts_with("0: Accepted"),
        "{answer}\n{}",
        kannel.logs()
    );
}

/// A fixture's text (`sidecar/tests/api/fixtures/gateways/<name>`).
pub fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/api/fixtures/gateways/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// POST /api/v1/deliveries with `key`: status and JSON answer.
pub async fn post(app: &TestApp, key: &str, body: &Value) -> (u16, Value) {
    status_and_json(with_key(app, key, Method::POST, "/deliveries").json(body)).await
}

/// POST /api/v1/deliveries as NDJSON: status and one JSON value per answer line.
pub async fn post_lines(app: &TestApp, key: &str, lines: &[String]) -> (u16, Vec<Value>) {
    let answer = with_key(app, key, Method::POST, "/deliveries")
        .header("content-type", "application/x-ndjson")
        .body(lines.join("\n"))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let text = answer.text().await.unwrap();
    let lines = (text.lines())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("{line}")))
        .collect();
    (status, lines)
}

/// A callback token of `key`'s workspace: (id, token).
pub async fn callback_token(
    app: &TestApp,
    key: &str,
    gateway: &str,
    twilio_auth_token: Option<&str>,
) -> (String, String) {
    let mut body = json!({"name": format!("{gateway} in the lab"), "gateway": gateway});
    if let Some(secret) = twilio_auth_token {
        body["twilio_auth_token"] = json!(secret);
    }
    let answer = with_key(app, key, Method::POST, "/callback-tokens")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    let made: Value = answer.json().await.unwrap();
    let token = made["token"].as_str().unwrap().to_owned();
    assert_eq!(
        made["callback_path"],
        format!("/callbacks/{token}/{gateway}")
    );
    (made["id"].as_str().unwrap().to_owned(), token)
}

/// Rows of a table.
pub async fn rows(app: &TestApp, table: &str) -> i64 {
    app.db
        .scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .await
}

/// The current state of a message, as the funnel reads it.
pub async fn current(app: &TestApp, message_id: &str) -> String {
    let states = app
        .db
        .texts(&format!(
            "SELECT state FROM delivery_messages WHERE message_id = '{message_id}'"
        ))
        .await;
    assert_eq!(states.len(), 1, "{message_id}: {states:?}");
    states[0].clone()
}
