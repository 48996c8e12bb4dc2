//! The A/B results come from rollups kept as visits and conversions are stored (migration
//! 20261126000053), not from the raw rows: a visitor counts in the arm of their first human
//! click on the link, a campaign sums its links, retention of the raw rows leaves the counts,
//! and an erase of a link takes its rollups (docs/CONVERSIONS.md, "Results").

use super::*;
use reqwest::Method;
use shortlink_visits::cleanup::delete_old_visits;

crate::on_each_backend!(results_are_kept_through_retention_and_go_with_an_erase,);

/// (clicks, unique visitors, conversions, converting visitors, values as "currency total") of
/// each arm, by rule (`-` for the own target).
fn arms(result: &Value) -> Vec<(String, i64, i64, i64, i64, Vec<String>)> {
    let int = |arm: &Value, field: &str| arm[field].as_i64().unwrap();
    (result["arms"].as_array().unwrap().iter())
        .map(|arm| {
            let values = (arm["values"].as_array().unwrap().iter())
                .map(|v| {
                    format!(
                        "{} {}",
                        v["currency"].as_str().unwrap(),
                        v["total"].as_str().unwrap()
                    )
                })
                .collect();
            (
                arm["rule"].as_str().unwrap_or("-").to_owned(),
                int(arm, "clicks"),
                int(arm, "unique_visitors"),
                int(arm, "conversions"),
                int(arm, "converting_visitors"),
                values,
            )
        })
        .collect()
}

fn arm(rule: &str, counts: [i64; 4], values: &[&str]) -> (String, i64, i64, i64, i64, Vec<String>) {
    let [clicks, visitors, conversions, converting] = counts;
    let values = values.iter().map(|v| v.to_string()).collect();
    (
        rule.to_owned(),
        clicks,
        visitors,
        conversions,
        converting,
        values,
    )
}

async fn results_are_kept_through_retention_and_go_with_an_erase(backend: Backend) {
    let app = spawn_app(backend).await;
    let a = link(&app, "autumn", "r-1").await;
    let b = link(&app, "autumn", "r-2").await;
    // Ten days ago, so that a 7-day retention policy takes every raw row below.
    let t = now_ms() - 10 * 86_400_000;
    let (one, two, three) = ("198.51.100.1", "198.51.100.2", "198.51.100.3");
    let visits = [
        // Person one first lands on variant 0, later on variant 1: a visitor of variant 0 only.
        visit("1700000000001-0", &a, t, one, IPHONE, Some("1.0")),
        visit("1700000000002-0", &a, t + 10, one, IPHONE, Some("1.1")),
        // Person two clicks variant 1 twice.
        visit("1700000000003-0", &a, t + 20, two, IPHONE, Some("1.1")),
        visit("1700000000004-0", &a, t + 30, two, IPHONE, Some("1.1")),
        // A bot counts nowhere; person three gets the link's own target.
        visit(
            "1700000000005-0",
            &a,
            t + 40,
            "203.0.113.9",
            CURL,
            Some("1.0"),
        ),
        visit("1700000000006-0", &a, t + 50, three, IPHONE, None),
        // Person one on the other link of the campaign: a visitor there too.
        visit("1700000000007-0", &b, t + 60, one, IPHONE, Some("1.0")),
    ];
    // Stored in two batches: the visitor set, not the batch, says who is new.
    store(&app, &visits[..2]).await;
    store(&app, &visits[2..]).await;
    let converted = chrono::DateTime::from_timestamp_millis(t + 3_600_000)
        .unwrap()
        .to_rfc3339();
    for (click, name, value, event) in [
        ("1700000000003-0", "purchase", Some(("2.50", "EUR")), "o-1"),
        ("1700000000004-0", "lead", None, "l-1"),
        ("1700000000001-0", "purchase", Some(("1.00", "USD")), "o-2"),
    ] {
        let mut body = json!({"click_id": click, "name": name, "event_id": event,
                              "converted_at": converted});
        if let Some((amount, currency)) = value {
            body["value"] = json!(amount);
            body["currency"] = json!(currency);
        }
        let (status, answer) = post(&app, &body).await;
        assert_eq!(status, 201, "{answer}");
    }
    let link_a = vec![
        arm("-", [1, 1, 0, 0], &[]),
        arm("1.0", [1, 1, 1, 1], &["USD 1.00"]),
        // Two conversions of one visitor; person one's click here does not make a visitor.
        arm("1.1", [3, 1, 2, 1], &["EUR 2.50"]),
    ];
    let campaign = vec![
        arm("-", [1, 1, 0, 0], &[]),
        // Person one counts on each link of the campaign.
        arm("1.0", [2, 2, 1, 1], &["USD 1.00"]),
        arm("1.1", [3, 1, 2, 1], &["EUR 2.50"]),
    ];
    let purchases_a = vec![
        arm("-", [1, 1, 0, 0], &[]),
        arm("1.0", [1, 1, 1, 1], &["USD 1.00"]),
        arm("1.1", [3, 1, 1, 1], &["EUR 2.50"]),
    ];
    let results = || async {
        (
            arms(&app.get_json(&format!("/links/{a}/ab")).await),
            arms(&app.get_json("/campaigns/autumn/ab").await),
            arms(&app.get_json(&format!("/links/{a}/ab?name=purchase")).await),
        )
    };
    let expected = (link_a, campaign, purchases_a);
    assert_eq!(results().await, expected);

    // Retention takes every raw visit and conversion; the results stay.
    let policy =
        json!({"campaigns": [{"campaign": "autumn", "visits_days": 7, "conversions_days": 7}]});
    expect_status(app.api(Method::PUT, "/retention").json(&policy), 200).await;
    let store_ = app.visit_store().await;
    let deleted = delete_old_visits(store_.as_ref(), None).await.unwrap();
    assert_eq!((deleted.visits, deleted.conversions), (7, 3));
    assert_eq!(app.db.scalar("SELECT COUNT(*) FROM visits").await, 0);
    assert_eq!(conversion_rows(&app).await, 0);
    assert_eq!(results().await, expected, "after retention");

    // An erase of link a takes its rollups, the visitor set included; b's stay.
    let erase = json!({"request_id": "dsr-ab", "code": a});
    let answer = app
        .api(Method::POST, "/subjects/erase")
        .json(&erase)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    for table in ["ab_arms", "ab_conversions", "ab_values", "ab_converters"] {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE code = '{a}'");
        assert_eq!(app.db.scalar(&sql).await, 0, "{table} after the erase");
    }
    assert_eq!(
        arms(&app.get_json("/campaigns/autumn/ab").await),
        vec![arm("1.0", [1, 1, 0, 0], &[])],
        "the campaign is link b alone"
    );
}
