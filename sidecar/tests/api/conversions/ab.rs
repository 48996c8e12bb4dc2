//! The A/B results: per-variant counts equal to what the raw rows say, and the test's figures
//! those counts give; campaigns sum their links; another workspace's link or campaign is 404.

use super::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use shortlink_visits::conversions::significance::{compare, Arm};

crate::on_each_backend!(per_variant_results_equal_the_raw_rows,);

/// Counts straight from the rows, per rule: human clicks, distinct human visitors, conversions
/// and their distinct visitors.
async fn raw_counts(app: &TestApp, code: &str) -> Vec<(String, i64, i64, i64, i64)> {
    let mut out = Vec::new();
    for rule in ["1.0", "1.1"] {
        let clicks = app
            .db
            .scalar(&format!(
                "SELECT COUNT(*) FROM visits WHERE code = '{code}' AND rule = '{rule}' AND audience = 'human'"
            ))
            .await;
        let visitors = app
            .db
            .scalar(&format!(
                "SELECT COUNT(DISTINCT visitor) FROM visits WHERE code = '{code}' AND rule = '{rule}' AND audience = 'human'"
            ))
            .await;
        let conversions = app
            .db
            .scalar(&format!(
                "SELECT COUNT(*) FROM conversions WHERE code = '{code}' AND rule = '{rule}'"
            ))
            .await;
        let converting = app
            .db
            .scalar(&format!(
                "SELECT COUNT(DISTINCT visitor) FROM conversions WHERE code = '{code}' AND rule = '{rule}'"
            ))
            .await;
        out.push((rule.to_owned(), clicks, visitors, conversions, converting));
    }
    out
}

async fn per_variant_results_equal_the_raw_rows(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = link(&app, "spring", "r-1").await;
    let other = link(&app, "spring", "r-2").await;
    let t = now_ms() - 3_600_000;
    // 60 people on variant 0 and 60 on variant 1 of rule 1; some come back; bots too.
    let mut visits = Vec::new();
    for person in 0..120u32 {
        let rule = if person % 2 == 0 { "1.0" } else { "1.1" };
        let ip = format!("198.51.{}.{}", person / 200, person % 200 + 1);
        let times = 1 + usize::from(person % 5 == 0);
        for again in 0..times {
            let id = format!("17000000{person:05}-{again}");
            let on = if person % 3 == 0 { &other } else { &code };
            visits.push(visit(
                &id,
                on,
                t + i64::from(person) * 10,
                &ip,
                IPHONE,
                Some(rule),
            ));
        }
    }
    visits.push(visit(
        "1700000099999-0",
        &code,
        t,
        "203.0.113.99",
        CURL,
        Some("1.0"),
    ));
    visits.push(visit(
        "1700000099998-0",
        &code,
        t,
        "203.0.113.98",
        IPHONE,
        None,
    ));
    store(&app, &visits).await;
    // Conversions: variant 1 converts more; one person converts twice; values in two currencies.
    let mut sent = 0;
    for (i, v) in visits.iter().enumerate() {
        let person = i as u32;
        let converts = match v.rule.as_deref() {
            Some("1.0") => person % 7 == 0,
            Some("1.1") => person % 3 == 0,
            _ => false,
        };
        if !converts || v.event_id.ends_with("-1") {
            continue;
        }
        let currency = if person % 2 == 0 { "EUR" } else { "USD" };
        let (status, body) = post(
            &app,
            &json!({"click_id": v.event_id, "name": "purchase", "value": "2.50",
                    "currency": currency, "event_id": format!("o-{i}")}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        sent += 1;
        if person % 9 == 0 {
            let (status, _) = post(
                &app,
                &json!({"click_id": v.event_id, "name": "lead", "event_id": format!("l-{i}")}),
            )
            .await;
            assert_eq!(status, 201);
            sent += 1;
        }
    }
    assert_eq!(conversion_rows(&app).await, sent);

    let result = app.get_json(&format!("/links/{code}/ab")).await;
    let arms = result["arms"].as_array().unwrap();
    let raw = raw_counts(&app, &code).await;
    for (rule, clicks, visitors, conversions, converting) in &raw {
        let arm = arms.iter().find(|a| a["rule"] == json!(rule)).unwrap();
        assert_eq!(
            (
                arm["clicks"].as_i64().unwrap(),
                arm["unique_visitors"].as_i64().unwrap(),
                arm["conversions"].as_i64().unwrap(),
                arm["converting_visitors"].as_i64().unwrap()
            ),
            (*clicks, *visitors, *conversions, *converting),
            "{rule}: {result}"
        );
    }
    assert_eq!(
        arms[0]["rule"],
        Value::Null,
        "the own target first: {result}"
    );
    // The test's figures are those of the raw counts.
    let arm = |i: usize| Arm {
        successes: raw[i].4,
        trials: raw[i].2,
    };
    let expected = compare(arm(0), arm(1), 0.05);
    let variant = &result["splits"][0]["variants"][0];
    assert_eq!(result["splits"][0]["control"], 0);
    assert_eq!(variant["variant"], 1);
    let close = |a: &Value, b: f64| (a.as_f64().unwrap() - b).abs() < 1e-12;
    assert!(
        close(&variant["p_value"], expected.p_value.unwrap()),
        "{variant}"
    );
    assert!(
        close(&variant["difference_interval"][0], expected.interval.0),
        "{variant}"
    );
    assert!(
        variant["verdict"].as_str().unwrap().contains("variant 1")
            || variant["verdict"].as_str().unwrap().contains("Variant 1")
    );
    // Values summed exactly per currency.
    // Every purchase here is worth 2.50.
    let eur_cents = 250 * app
        .db
        .scalar(&format!("SELECT COUNT(*) FROM conversions WHERE code = '{code}' AND rule = '1.1' AND currency = 'EUR'"))
        .await;
    let variant_1 = arms.iter().find(|a| a["rule"] == "1.1").unwrap();
    let eur = variant_1["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["currency"] == "EUR");
    match eur_cents {
        0 => assert!(eur.is_none()),
        cents => assert_eq!(
            eur.unwrap()["total"],
            format!("{}.{:02}", cents / 100, cents % 100)
        ),
    }
    // Only purchases.
    let purchases = app
        .get_json(&format!("/links/{code}/ab?name=purchase"))
        .await;
    let purchases_total: i64 = purchases["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["conversions"].as_i64().unwrap())
        .sum();
    let raw_purchases = app
        .db
        .scalar(&format!(
            "SELECT COUNT(*) FROM conversions WHERE code = '{code}' AND name = 'purchase'"
        ))
        .await;
    assert_eq!(purchases_total, raw_purchases);

    // The campaign sums both links.
    let campaign = app.get_json("/campaigns/spring/ab").await;
    let clicks: i64 = campaign["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["clicks"].as_i64().unwrap())
        .sum();
    let raw_clicks = app
        .db
        .scalar("SELECT COUNT(*) FROM visits WHERE audience = 'human'")
        .await;
    assert_eq!(clicks, raw_clicks, "{campaign}");
    let conversions: i64 = campaign["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["conversions"].as_i64().unwrap())
        .sum();
    assert_eq!(conversions, sent);

    // Another workspace learns nothing of them.
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-b").await;
    let b_key = workspace_key(&app, &operator, "brand-b", "viewer").await;
    for path in [
        format!("/links/{code}/ab"),
        "/campaigns/spring/ab".to_owned(),
    ] {
        let answer = with_key(&app, &b_key, reqwest::Method::GET, &path)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 404, "{path}");
    }
}
