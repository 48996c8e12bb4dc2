//! Click-time rules and the lifecycle (issue 34): what the API takes and gives back, what it
//! refuses (storing nothing), and the record Redis then holds, read with `wire` as the module
//! reads it.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use shortlink_wire::record::{decode, Link as WireLink, MAX_RECORD_BYTES};
use shortlink_wire::rules::{Action, Condition, MAX_RULES};

crate::on_each_backend!(
    rules_and_lifecycle_round_trip_normalised,
    hostile_rules_are_refused_and_store_nothing,
    a_patch_sets_and_clears_rules,
    a_batch_issues_links_with_rules_and_a_schedule,
);

fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Every condition and both actions, written loosely (case, defaults left out).
fn full_rules() -> Value {
    json!([
        {"if": {"device": ["IOS", "android"], "language": ["PT", "en-GB"], "country": ["pt", "BR"],
                "query": [{"name": "src", "value": "sms"}, {"name": "vip"}],
                "ip": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"],
                "after": "2026-01-01T00:00:00.750Z",
                "weekly": {"days": ["fri", "Mon"], "hours": [10, 9, 9], "zone": "Europe/Lisbon"}},
         "then": {"url": "https://APPS.example/ios"}},
        {"if": {"before": "2030-01-01T00:00:00+01:00"}, "split": {"sticky": true, "variants": [
            {"weight": 3, "url": "https://a.example/", "redirect": 307},
            {"weight": 1, "url": "https://b.example/", "forward_query": true}]}}
    ])
}

fn normalised_rules() -> Value {
    json!([
        {"if": {"device": ["ios", "android"], "language": ["pt", "en-gb"], "country": ["PT", "BR"],
                "query": [{"name": "src", "value": "sms"}, {"name": "vip"}],
                "ip": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7/32"],
                "after": "2026-01-01T00:00:00Z",
                "weekly": {"days": ["mon", "fri"], "hours": [9, 10], "zone": "Europe/Lisbon"}},
         "then": {"url": "https://apps.example/ios", "redirect": 302, "forward_query": false}},
        {"if": {"before": "2029-12-31T23:00:00Z"}, "split": {"sticky": true, "variants": [
            {"weight": 3, "url": "https://a.example/", "redirect": 307, "forward_query": false},
            {"weight": 1, "url": "https://b.example/", "redirect": 302, "forward_query": true}]}}
    ])
}

async fn rules_and_lifecycle_round_trip_normalised(backend: Backend) {
    let app = spawn_app(backend).await;
    let since = now_secs() + 3600;
    let until = now_secs() + 86_400;
    let created = app
        .create(json!({
            "url": "https://t.example/own",
            "valid_since": rfc3339(since),
            "expires_at": rfc3339(until),
            "not_yet_url": "https://T.example/soon",
            "expired_url": "https://t.example/over",
            "rules": full_rules(),
        }))
        .await;
    let code = created["code"].as_str().unwrap();
    let read: Value = app.get_link(code).await.json().await.unwrap();
    for view in [&created, &read] {
        assert_eq!(view["rules"], normalised_rules(), "{view}");
        assert_eq!(view["valid_since"], json!(rfc3339(since)));
        assert_eq!(view["not_yet_url"], json!("https://t.example/soon"));
        assert_eq!(view["expired_url"], json!("https://t.example/over"));
    }
    let listed = crate::workspaces::send_json(app.api(Method::GET, "/links")).await;
    assert_eq!(listed["links"][0]["rules"], normalised_rules());

    // Redis holds version 2, and it decodes to the same lifecycle and rules.
    let record = app.redis_record(code).await.unwrap();
    assert!(record.starts_with(b"2|L|302|"), "{record:?}");
    let WireLink::Live {
        extras: Some(extras),
        ..
    } = decode(&record).unwrap()
    else {
        panic!("not a version 2 live record");
    };
    assert_eq!(extras.valid_since, since as u64);
    assert_eq!(
        extras.not_yet_url.as_deref(),
        Some(&b"https://t.example/soon"[..])
    );
    assert_eq!(
        extras.expired_url.as_deref(),
        Some(&b"https://t.example/over"[..])
    );
    let rules = extras.rules.to_rules();
    assert_eq!(rules.len(), 2);
    let first = &rules[0];
    assert_eq!(first.conditions.len(), 8, "each query entry is a condition");
    assert_eq!(first.conditions[0], Condition::Device(1 | 2));
    assert!(first.conditions.contains(&Condition::After(1_767_225_600)));
    match &rules[1].action {
        Action::Split { variants, sticky } => {
            assert_eq!(*sticky, shortlink_wire::rules::Sticky::Default);
            assert_eq!(variants.len(), 2);
            assert_eq!(variants[0].weight, 3);
            assert_eq!(variants[0].target.status, 307);
            assert!(variants[1].target.forward_query);
        }
        other => panic!("not a split: {other:?}"),
    }

    // The OpenAPI document describes the rules and the preview.
    let doc: Value = app
        .api(Method::GET, "/openapi.json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for schema in [
        "RuleSpec",
        "Conditions",
        "SplitSpec",
        "PreviewRequest",
        "RuleView",
    ] {
        assert!(doc["components"]["schemas"][schema].is_object(), "{schema}");
    }
    assert!(doc["paths"]["/api/v1/links/{code}/preview"]["post"].is_object());

    // A plain link still writes version 1 and reads back without the new fields.
    let plain = app.create(json!({"url": "https://t.example/plain"})).await;
    let plain_code = plain["code"].as_str().unwrap();
    assert!(plain.get("rules").is_none() && plain.get("valid_since").is_none());
    assert_eq!(
        app.redis_get(plain_code).await.unwrap(),
        "1|L|302|0|0|https://t.example/plain"
    );
}

/// A campaign's links come through the batch: its items take rules and a schedule exactly as a
/// create does, and Redis holds each one's version 2 record.
async fn a_batch_issues_links_with_rules_and_a_schedule(backend: Backend) {
    let app = spawn_app(backend).await;
    let since = now_secs() + 3600;
    let items: Vec<Value> = (0..3)
        .map(|i| {
            json!({
                "url": format!("https://t.example/{i}"),
                "valid_since": rfc3339(since),
                "not_yet_url": "https://T.example/soon",
                "rules": full_rules(),
            })
        })
        .chain([json!({"url": "https://t.example/plain"})])
        .collect();
    let body: Value = app.post_batch(&items).await.json().await.unwrap();
    let results = body["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "{body}");
    for (i, result) in results.iter().enumerate().take(3) {
        let link = &result["link"];
        assert_eq!(link["rules"], normalised_rules(), "{body}");
        assert_eq!(link["valid_since"], json!(rfc3339(since)));
        let code = link["code"].as_str().unwrap();
        let read: Value = app.get_link(code).await.json().await.unwrap();
        assert_eq!(read["rules"], normalised_rules());
        assert_eq!(read["url"], json!(format!("https://t.example/{i}")));
        let record = app.redis_record(code).await.unwrap();
        let WireLink::Live {
            extras: Some(extras),
            ..
        } = decode(&record).unwrap()
        else {
            panic!("item {i} is not a version 2 live record: {record:?}");
        };
        assert_eq!(extras.valid_since, since as u64);
        assert_eq!(extras.rules.to_rules().len(), 2);
    }
    // The plain item beside them stays a version 1 record.
    let plain = results[3]["link"]["code"].as_str().unwrap();
    assert_eq!(
        app.redis_get(plain).await.unwrap(),
        "1|L|302|0|0|https://t.example/plain"
    );
}

async fn hostile_rules_are_refused_and_store_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://a.example/", "code": "existing"}))
        .await;
    let before = app.stored().await;

    let target = json!({"url": "https://t.example/"});
    let rule = |when: Value| json!([{"if": when, "then": target}]);
    let many = |n: usize, value: Value| Value::Array(vec![value; n]);
    let long_url = format!("https://t.example/{}", "a".repeat(4000));
    let over_limit = format!("over the limit of {MAX_RECORD_BYTES}");
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            rule(json!({"colour": ["red"]})),
            "invalid_rules",
            "rules[0].if.colour: unknown field `colour`",
        ),
        (
            json!([{"if": {}, "then": target, "else": target}]),
            "invalid_rules",
            "rules[0].else: unknown field `else`",
        ),
        (
            json!([{"if": {}, "then": {"url": "https://t.example/", "status": 301}}]),
            "invalid_rules",
            "rules[0].then.status: unknown field `status`",
        ),
        (
            json!([{"if": {}}]),
            "invalid_rules",
            "rules[0]: give exactly one of then and split",
        ),
        (
            json!([{"if": {}, "then": target, "split": {"variants": [{"weight": 1, "url": "https://t.example/"}]}}]),
            "invalid_rules",
            "exactly one",
        ),
        (json!({"if": {}}), "invalid_rules", "rules: invalid type"),
        (
            json!([target, {"if": {"ip": ["10.0.0.1/8"]}, "then": target}]),
            "invalid_rules",
            "rules[0].url: unknown field `url`",
        ),
        (
            json!([{"if": {}, "then": target}, {"if": {"ip": ["10.0.0.0/8", "10.0.0.1/8"]}, "then": target}]),
            "invalid_rules",
            "rules[1].if.ip[1]: invalid CIDR",
        ),
        (
            rule(json!({"ip": ["not-an-address"]})),
            "invalid_rules",
            "rules[0].if.ip[0]: invalid CIDR",
        ),
        (
            rule(json!({"ip": ["10.0.0.0/33"]})),
            "invalid_rules",
            "rules[0].if.ip[0]: invalid CIDR",
        ),
        (
            rule(json!({"weekly": {"days": ["mon"], "hours": [9], "zone": "Mars/Olympus"}})),
            "invalid_rules",
            "rules[0].if.weekly.zone: unknown time zone",
        ),
        (
            rule(json!({"weekly": {"days": ["someday"], "hours": [9], "zone": "UTC"}})),
            "invalid_rules",
            "rules[0].if.weekly.days[0]",
        ),
        (
            rule(json!({"weekly": {"days": ["mon"], "hours": [24], "zone": "UTC"}})),
            "invalid_rules",
            "rules[0].if.weekly.hours[0]: an hour is 0 to 23",
        ),
        (
            rule(json!({"weekly": {"days": [], "hours": [9], "zone": "UTC"}})),
            "invalid_rules",
            "rules[0].if.weekly.days: must not be empty",
        ),
        (
            rule(json!({"device": []})),
            "invalid_rules",
            "rules[0].if.device: must not be empty",
        ),
        (
            rule(json!({"device": ["toaster"]})),
            "invalid_rules",
            "rules[0].if.device[0]: unknown device",
        ),
        (
            rule(json!({"language": []})),
            "invalid_rules",
            "rules[0].if.language: must not be empty",
        ),
        (
            rule(json!({"language": ["pt br"]})),
            "invalid_rules",
            "rules[0].if.language[0]",
        ),
        (
            rule(json!({"country": ["PRT"]})),
            "invalid_rules",
            "rules[0].if.country[0]",
        ),
        (
            rule(json!({"query": []})),
            "invalid_rules",
            "rules[0].if.query: must not be empty",
        ),
        (
            rule(json!({"query": [{"name": ""}]})),
            "invalid_rules",
            "rules[0].if.query[0].name",
        ),
        (
            rule(json!({"after": "tomorrow"})),
            "invalid_rules",
            "rules[0].if.after",
        ),
        (
            rule(json!({"country": many(33, json!("PT"))})),
            "invalid_rules",
            "at most 32 values",
        ),
        (
            rule(json!({"query": many(9, json!({"name": "a"}))})),
            "invalid_rules",
            "rules[0].if: at most 8 conditions",
        ),
        (
            many(MAX_RULES + 1, json!({"if": {}, "then": target})),
            "invalid_rules",
            "rules: at most 16 rules",
        ),
        (
            json!([{"if": {}, "split": {"variants": []}}]),
            "invalid_rules",
            "rules[0].split.variants: must not be empty",
        ),
        (
            json!([{"if": {}, "split": {"variants": many(9, json!({"weight": 1, "url": "https://t.example/"}))}}]),
            "invalid_rules",
            "at most 8 variants",
        ),
        (
            json!([{"if": {}, "split": {"variants": [{"weight": 0, "url": "https://a.example/"}, {"weight": 0, "url": "https://b.example/"}]}}]),
            "invalid_rules",
            "rules[0].split.variants: the weights must not sum to 0",
        ),
        (
            json!([{"if": {}, "split": {"variants": [{"weight": 70000, "url": "https://a.example/"}]}}]),
            "invalid_rules",
            "rules[0].split.variants[0].weight",
        ),
        (
            json!([{"if": {}, "then": {"url": "javascript:alert(1)"}}]),
            "unsupported_scheme",
            "rules[0].then.url",
        ),
        (
            json!([{"if": {}, "split": {"variants": [{"weight": 1, "url": "https://a.example/\r\nX: y"}]}}]),
            "invalid_url",
            "rules[0].split.variants[0].url",
        ),
        (
            json!([{"if": {}, "then": {"url": "https://t.example/", "redirect": 200}}]),
            "invalid_rules",
            "rules[0].then.redirect",
        ),
        (
            many(16, json!({"if": {}, "then": {"url": long_url}})),
            "record_too_large",
            &over_limit,
        ),
    ];
    for (rules, code, message) in &cases {
        let body = json!({"url": "https://t.example/own", "rules": rules});
        for (label, response) in [
            ("create", app.post_link(&body).await),
            ("batch", app.post_batch(&[&body]).await),
        ] {
            let status = response.status().as_u16();
            let answer: Value = response.json().await.unwrap();
            let error = match label {
                "create" => {
                    assert_eq!(status, 422, "{rules}: {answer}");
                    answer["error"].clone()
                }
                _ => answer["results"][0]["error"].clone(),
            };
            assert_eq!(error["code"], json!(code), "{label} {rules}: {answer}");
            let text = error["message"].as_str().unwrap_or_default();
            assert!(text.contains(message), "{label} {rules}: {text}");
        }
        let patch = app.patch_link("existing", &json!({"rules": rules})).await;
        assert_eq!(patch.status().as_u16(), 422, "patch {rules}");
    }

    for (body, code, message) in [
        (
            json!({"url": "https://t.example/", "not_yet_url": "ftp://t.example/"}),
            "unsupported_scheme",
            "not_yet_url",
        ),
        (
            json!({"url": "https://t.example/", "expired_url": "/relative"}),
            "invalid_url",
            "expired_url",
        ),
        (
            json!({"url": "https://t.example/", "valid_since": "soon"}),
            "invalid_body",
            "",
        ),
        (
            json!({"url": "https://t.example/", "valid_since": rfc3339(now_secs() + 100), "expires_at": rfc3339(now_secs() + 50)}),
            "invalid_valid_since",
            "before expires_at",
        ),
    ] {
        let response = app.post_link(&body).await;
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap();
        assert!(status == 422 || status == 400, "{body}: {answer}");
        if !code.is_empty() && code != "invalid_body" {
            assert_eq!(answer["error"]["code"], json!(code), "{body}: {answer}");
            let text = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(text.contains(message), "{body}: {text}");
        }
    }
    assert_eq!(
        app.stored().await,
        before,
        "nothing stored, in SQL or Redis"
    );
}

async fn a_patch_sets_and_clears_rules(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app.create_code("https://t.example/own").await;
    let response = app
        .patch_link(
            &code,
            &json!({"rules": [{"if": {"device": ["android"]}, "then": {"url": "https://play.example/"}}],
                    "expired_url": "https://t.example/over"}),
        )
        .await;
    assert_eq!(response.status().as_u16(), 200);
    let view: Value = response.json().await.unwrap();
    assert_eq!(
        view["rules"][0]["then"]["url"],
        json!("https://play.example/")
    );
    assert!(app.redis_record(&code).await.unwrap().starts_with(b"2|L|"));

    // An unrelated change keeps them.
    let view: Value = app
        .patch_link(&code, &json!({"campaign": "spring"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(view["rules"][0]["if"]["device"], json!(["android"]));

    // `null` and `[]` remove them; with nothing else left, the record is version 1 again.
    let view: Value = app
        .patch_link(&code, &json!({"rules": [], "expired_url": null}))
        .await
        .json()
        .await
        .unwrap();
    assert!(view.get("rules").is_none() && view.get("expired_url").is_none());
    assert_eq!(
        app.redis_get(&code).await.unwrap(),
        "1|L|302|0|0|https://t.example/own"
    );
}
