//! The re-send list of a drained domain says why each recipient has no click, from what the
//! gateways reported of its message: `not_delivered` (with its state and error code),
//! `delivered_not_clicked`, or `no_receipt`.

use super::*;
use crate::domain_failover::{by_code, create, operator, unclicked_spring_on_s2};

crate::on_each_backend!(the_resend_list_says_why_each_recipient_has_no_click);

async fn the_resend_list_says_why_each_recipient_has_no_click(backend: Backend) {
    // Checks off: this sidecar's snapshot changes only by its own requests, at once.
    let app = spawn_app_with(backend, &["--domain-health-every", "0"]).await;
    let items: Vec<Value> = (0..60)
        .map(|i| json!({"url": format!("https://t.example/{i}"), "campaign": "spring", "ref": format!("r{i}")}))
        .collect();
    let on_s2: Vec<(String, String)> = (create(&app, &items).await.into_iter())
        .filter(|(_, url)| url.starts_with("https://s2.example/"))
        .collect();
    assert!(on_s2.len() >= 12, "{}", on_s2.len());
    // Per link on s2, by its place: what its gateway reported (the last ones: nothing).
    let reported = |i: usize| match i % 6 {
        0 => vec![("submitted", None), ("failed", Some("005"))],
        1 => vec![("rejected", Some("88"))],
        2 => vec![("submitted", None), ("delivered", None)],
        3 => vec![("submitted", None)],
        _ => vec![],
    };
    let mut lines = Vec::new();
    for (i, (code, short_url)) in on_s2.iter().enumerate() {
        for (state, error) in reported(i) {
            let mut receipt =
                json!({"short_url": short_url, "message_id": format!("m-{code}"), "state": state});
            if let Some(error) = error {
                receipt["error_code"] = json!(error);
            }
            lines.push(receipt.to_string());
        }
    }
    let (status, answers) = post_lines(&app, API_KEY, &lines).await;
    assert_eq!(status, 200);
    assert!(answers.iter().all(|a| a["status"] == 201), "{answers:?}");
    operator(&app, "s2.example", "drain", None).await;

    let text = unclicked_spring_on_s2(&app).await.text().await.unwrap();
    let listed = by_code(&text);
    assert_eq!(listed.len(), on_s2.len(), "{text}");
    for (i, (code, _)) in on_s2.iter().enumerate() {
        let line = &listed[code];
        let why = (&line["reason"], &line["receipt_state"], &line["error_code"]);
        let expected = match i % 6 {
            0 => (json!("not_delivered"), json!("failed"), json!("005")),
            1 => (json!("not_delivered"), json!("rejected"), json!("88")),
            2 => (json!("delivered_not_clicked"), Value::Null, Value::Null),
            3 => (json!("not_delivered"), json!("submitted"), Value::Null),
            _ => (json!("no_receipt"), Value::Null, Value::Null),
        };
        assert_eq!(why, (&expected.0, &expected.1, &expected.2), "{line}");
    }
}
