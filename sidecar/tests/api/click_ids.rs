//! `click_id_param` and sticky split modes (issue 54): what the API takes and refuses (storing
//! nothing), what SQL keeps and the record Redis then holds (read with `wire` as the module reads
//! it), on create, update and batch.

use crate::helpers::*;
use serde_json::{json, Value};
use shortlink_wire::record::{decode, Extras, Link as WireLink};

crate::on_each_backend!(
    the_click_id_parameter_round_trips,
    bad_click_id_parameters_are_refused_and_store_nothing,
    sticky_modes_round_trip_and_reach_the_record,
);

/// The parameter in `code`'s record in Redis.
async fn param_in_record(app: &TestApp, code: &str) -> Option<String> {
    let record = app.redis_record(code).await.expect("a record");
    let extras: Option<Extras> = match decode(&record).expect("a record wire decodes") {
        WireLink::Live { extras, .. } => extras.map(|extras| (*extras).clone()),
        other => panic!("not a live record: {other:?}"),
    };
    extras
        .and_then(|extras| extras.click_id_param)
        .map(|param| param.as_str().to_owned())
}

async fn the_click_id_parameter_round_trips(backend: Backend) {
    let app = spawn_app(backend).await;
    let created = app
        .create(json!({"url": "https://t.example/own", "click_id_param": "sl_click"}))
        .await;
    let code = created["code"].as_str().unwrap().to_owned();
    assert_eq!(created["click_id_param"], json!("sl_click"));
    assert_eq!(
        param_in_record(&app, &code).await.as_deref(),
        Some("sl_click")
    );
    let read: Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(read["click_id_param"], json!("sl_click"));
    let column = app
        .db
        .texts(&format!(
            "SELECT click_id_param FROM links WHERE code = '{code}'"
        ))
        .await;
    assert_eq!(column, ["sl_click"]);

    // A new name replaces it; an unrelated change keeps it; null removes it: version 1 again.
    app.patch_link(&code, &json!({"click_id_param": "cid.v-2"}))
        .await;
    assert_eq!(
        param_in_record(&app, &code).await.as_deref(),
        Some("cid.v-2")
    );
    app.patch_link(&code, &json!({"campaign": "spring"})).await;
    assert_eq!(
        param_in_record(&app, &code).await.as_deref(),
        Some("cid.v-2")
    );
    let view: Value = app
        .patch_link(&code, &json!({"click_id_param": null}))
        .await
        .json()
        .await
        .unwrap();
    assert!(view.get("click_id_param").is_none(), "{view}");
    assert_eq!(
        app.redis_get(&code).await.unwrap(),
        "1|L|302|0|0|https://t.example/own"
    );

    // Batch items take it.
    let body: Value = app
        .post_batch(&[
            json!({"url": "https://t.example/b", "click_id_param": "b_id"}),
            json!({"url": "https://t.example/c"}),
        ])
        .await
        .json()
        .await
        .unwrap();
    let with = &body["results"][0]["link"];
    assert_eq!(with["click_id_param"], json!("b_id"), "{body}");
    assert_eq!(
        param_in_record(&app, with["code"].as_str().unwrap())
            .await
            .as_deref(),
        Some("b_id")
    );
    let without = body["results"][1]["link"]["code"].as_str().unwrap();
    assert!(app.redis_get(without).await.unwrap().starts_with("1|"));

    // The OpenAPI document describes it.
    let doc: Value = app.get_json("/openapi.json").await;
    let create = &doc["components"]["schemas"]["CreateLinkRequest"]["properties"];
    assert_eq!(create["click_id_param"]["maxLength"], json!(32));
    assert_eq!(
        create["click_id_param"]["pattern"],
        json!("^[A-Za-z0-9_.-]{1,32}$")
    );
}

async fn bad_click_id_parameters_are_refused_and_store_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://a.example/", "code": "existing"}))
        .await;
    let before = app.stored().await;
    for bad in ["", "a b", "a=b", "a&b", "é", "x%20", &"a".repeat(33)] {
        let fields = json!({"click_id_param": bad});
        let body = json!({"url": "https://t.example/own", "click_id_param": bad});
        app.refused_everywhere(
            &body,
            &fields,
            "invalid_click_id_param",
            "click_id_param must be 1 to 32",
        )
        .await;
    }
    app.refused_everywhere(
        &json!({"url": "https://t.example/own", "click_id_param": 7}),
        &json!({"click_id_param": 7}),
        "invalid_body",
        "",
    )
    .await;
    assert_eq!(
        app.stored().await,
        before,
        "nothing stored, in SQL or Redis"
    );
}

async fn sticky_modes_round_trip_and_reach_the_record(backend: Backend) {
    use shortlink_wire::rules::{Action, Sticky};
    let app = spawn_app(backend).await;
    for (sticky, expected) in [
        (json!(false), Sticky::No),
        (json!(true), Sticky::Default),
        (json!("ref"), Sticky::Ref),
        (json!("cookie"), Sticky::Cookie),
        (json!("visitor"), Sticky::Visitor),
    ] {
        let rules = json!([{"if": {}, "split": {"sticky": sticky, "variants": [
            {"weight": 1, "url": "https://a.example/"}, {"weight": 1, "url": "https://b.example/"}]}}]);
        let created = app
            .create(json!({"url": "https://t.example/", "ref": "r-9", "rules": rules}))
            .await;
        assert_eq!(created["rules"][0]["split"]["sticky"], sticky, "{created}");
        let code = created["code"].as_str().unwrap();
        let record = app.redis_record(code).await.unwrap();
        let WireLink::Live {
            extras: Some(extras),
            ..
        } = decode(&record).unwrap()
        else {
            panic!("no version 2 record");
        };
        let rules = extras.rules.to_rules();
        assert!(
            matches!(&rules[0].action, Action::Split { sticky, .. } if *sticky == expected),
            "{rules:?}"
        );
        let recipient = shortlink_wire::rules::recipient(code.as_bytes(), b"r-9");
        assert_eq!(extras.recipient, Some(recipient));
    }
    let bad = json!([{"if": {}, "split": {"sticky": "always", "variants": [
        {"weight": 1, "url": "https://a.example/"}]}}]);
    let response = app
        .post_link(&json!({"url": "https://t.example/", "rules": bad}))
        .await;
    assert!(
        matches!(response.status().as_u16(), 400 | 422),
        "{}",
        response.status()
    );
}

/// `POST /compose?click_id_param=…`: every link of the campaign gets it, unless a recipient's
/// `link` sets its own.
#[tokio::test]
async fn a_compose_gives_every_link_its_click_id_parameter() {
    let app = spawn_app(Backend::Sqlite).await;
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut().extend_pairs([
        ("template", "Hi {{name}}: {{link}}"),
        ("country", "FR"),
        ("campaign", "spring"),
        ("click_id_param", "sl_click"),
    ]);
    let recipients = [
        json!({"phone": "0612345678", "ref": "c-1", "variables": {"name": "Ann"},
               "url": "https://shop.example/sale"}),
        json!({"phone": "0612345679", "ref": "c-2", "variables": {"name": "Bo"},
               "url": "https://shop.example/sale", "link": {"click_id_param": "own"}}),
    ];
    let body: String = recipients.iter().map(|r| format!("{r}\n")).collect();
    let response = send_ndjson(app.client.post(url).bearer_auth(API_KEY), body).await;
    let lines = ndjson_lines(response).await;
    let mut params = Vec::new();
    for line in &lines[..2] {
        assert_eq!(line["status"], 201, "{line}");
        params.push(param_in_record(&app, line["code"].as_str().unwrap()).await);
    }
    assert_eq!(
        params,
        [Some("sl_click".to_owned()), Some("own".to_owned())]
    );
}
