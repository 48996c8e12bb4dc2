//! GET /api/v1/campaigns/{campaign}/funnel: messages by current state, per campaign, short
//! domain and carrier, then clicked and converted, on every backend.

use super::*;
use crate::conversions::{store, visit, IPHONE};
use crate::workspaces::{create_workspace, operator_key, workspace_key};

crate::on_each_backend!(a_campaigns_funnel_counts_each_message_once_by_its_current_state);

async fn a_campaigns_funnel_counts_each_message_once_by_its_current_state(backend: Backend) {
    // Both hosts the receipts name are the default workspace's domains.
    let app = spawn_app_with(backend, &["--short-domains", "s2.example"]).await;
    let mut codes = Vec::new();
    for i in 1..=5 {
        let link = app
            .create(json!({"url": "https://shop.example/", "campaign": "spring", "ref": format!("r{i}")}))
            .await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    let other = app
        .create(json!({"url": "https://shop.example/", "campaign": "autumn"}))
        .await;
    let by_code = |i: usize| json!({"code": codes[i]});
    let by_url =
        |i: usize, host: &str| json!({"short_url": format!("https://{host}/{}", codes[i])});
    let receipt = |link: Value, id: &str, state: &str, extra: Value| {
        let mut body = json!({"message_id": id, "state": state});
        let object = body.as_object_mut().unwrap();
        object.extend(link.as_object().unwrap().clone());
        object.extend(extra.as_object().unwrap().clone());
        body.to_string()
    };
    let lines = [
        receipt(by_url(0, "s.example"), "m1", "submitted", json!({})),
        receipt(by_code(0), "m1", "delivered", json!({"carrier": "23410"})),
        receipt(
            by_url(1, "s2.example"),
            "m2",
            "submitted",
            json!({"carrier": "23410"}),
        ),
        receipt(by_code(1), "m2", "failed", json!({"error_code": "005"})),
        // Retried and out of order: still failed.
        receipt(by_code(1), "m2", "submitted", json!({})),
        receipt(
            by_code(2),
            "m3",
            "rejected",
            json!({"error_code": "88", "carrier": "20801"}),
        ),
        receipt(by_code(3), "m4", "submitted", json!({})),
        receipt(json!({"code": other["code"]}), "m9", "delivered", json!({})),
    ];
    let (status, answers) = post_lines(&app, API_KEY, &lines).await;
    assert_eq!(status, 200);
    assert!(
        answers
            .iter()
            .all(|a| a["status"] == 201 || a["status"] == 200),
        "{answers:?}"
    );
    // Link 1 is clicked (a human) and converts.
    let clicked = chrono::Utc::now().timestamp_millis() - 60_000;
    store(
        &app,
        &[visit(
            "1700000000001-0",
            &codes[0],
            clicked,
            "203.0.113.1",
            IPHONE,
            None,
        )],
    )
    .await;
    let (status, body) = crate::conversions::post(
        &app,
        &json!({"click_id": "1700000000001-0", "name": "purchase", "event_id": "o-1"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let funnel = app.get_json("/campaigns/spring/funnel").await;
    assert_eq!(
        (&funnel["links"], &funnel["clicked"], &funnel["converted"]),
        (&json!(5), &json!(1), &json!(1)),
        "{funnel}"
    );
    let total = &funnel["total"];
    let counts = |c: &Value| {
        [
            "messages",
            "submitted",
            "delivered",
            "failed",
            "rejected",
            "expired",
            "no_receipt",
            "clicked",
            "converted",
        ]
        .map(|k| c[k].as_i64().unwrap())
    };
    assert_eq!(counts(total), [5, 1, 1, 1, 1, 0, 1, 1, 1], "{total}");
    // The one click is on the delivered message's link: a step of the funnel.
    assert_eq!(
        (&total["clicked_delivered"], &total["converted_delivered"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(total["failed_by_error_code"], json!({"005": 1}));
    assert_eq!(total["rejected_by_error_code"], json!({"88": 1}));
    let part = |list: &str, key: &str, value: Value| {
        let parts = funnel[list].as_array().unwrap();
        (parts.iter())
            .find(|p| p[key] == value)
            .unwrap_or_else(|| panic!("{list} {value}: {funnel}"))["counts"]
            .clone()
    };
    let by_carrier = [
        (json!("23410"), [2, 0, 1, 1, 0, 0, 0, 1, 1]),
        (json!("20801"), [1, 0, 0, 0, 1, 0, 0, 0, 0]),
        (Value::Null, [2, 1, 0, 0, 0, 0, 1, 0, 0]),
    ];
    let by_domain = [
        (json!("s.example"), [1, 0, 1, 0, 0, 0, 0, 1, 1]),
        (json!("s2.example"), [1, 0, 0, 1, 0, 0, 0, 0, 0]),
        (Value::Null, [3, 1, 0, 0, 1, 0, 1, 0, 0]),
    ];
    for (list, key, rows) in [
        ("by_carrier", "carrier", by_carrier),
        ("by_domain", "short_domain", by_domain),
    ] {
        for (value, expected) in rows {
            let found = counts(&part(list, key, value.clone()));
            assert_eq!(found, expected, "{list} {value}");
        }
    }

    // A campaign nobody has, and this one asked by another workspace: 404 alike.
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let viewer = workspace_key(&app, &operator, "brand-b", "viewer").await;
    for (key, campaign) in [
        (API_KEY.to_owned(), "no-such"),
        (viewer.clone(), "spring"),
        (viewer, "no-such"),
    ] {
        let answer = with_key(
            &app,
            &key,
            Method::GET,
            &format!("/campaigns/{campaign}/funnel"),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(answer.status(), 404);
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["message"], "no link has this campaign");
    }
}
