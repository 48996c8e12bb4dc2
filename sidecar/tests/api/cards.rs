//! Preview cards (issue 35): what the API takes and gives back, what it refuses (storing
//! nothing), and the card key Redis holds beside the record — written, replaced, removed and
//! rebuilt with it — read with `wire` as the module reads it.

use crate::helpers::*;
use serde_json::{json, Value};
use shortlink_wire::keys::preview_key;
use shortlink_wire::preview::{self, MAX_DESCRIPTION, MAX_TITLE};
use shortlink_wire::record::{decode, Link as WireLink};

crate::on_each_backend!(
    cards_are_written_replaced_and_removed_with_the_record,
    bad_cards_are_refused_and_store_nothing,
    resync_rebuilds_and_removes_cards,
);

fn card() -> Value {
    json!({
        "title": "Spring sale: 20% off <today>",
        "description": "\"Everything\" & more",
        "image": "https://CDN.example/spring.jpg",
        "site_name": "Example Shop",
    })
}

/// The card key's value, if any.
async fn card_value(app: &TestApp, code: &str) -> Option<Vec<u8>> {
    redis::cmd("GET")
        .arg(preview_key(code))
        .query_async(&mut app.redis().await)
        .await
        .unwrap()
}

async fn card_expiretime(app: &TestApp, code: &str) -> i64 {
    redis::cmd("EXPIRETIME")
        .arg(preview_key(code))
        .query_async(&mut app.redis().await)
        .await
        .unwrap()
}

/// Whether the record says the link has a card.
async fn has_card(app: &TestApp, code: &str) -> bool {
    let record = app.redis_record(code).await.expect("a record");
    match decode(&record).expect("a record wire decodes") {
        WireLink::Live { extras, .. } => extras.is_some_and(|extras| extras.has_card),
        _ => false,
    }
}

async fn cards_are_written_replaced_and_removed_with_the_record(backend: Backend) {
    let app = spawn_app(backend).await;
    let until = now_secs() + 86_400;
    let expires_at = chrono::DateTime::from_timestamp(until, 0).unwrap();
    let created = app
        .create(
            json!({"url": "https://t.example/own", "preview": card(), "expires_at": expires_at}),
        )
        .await;
    let code = created["code"].as_str().unwrap().to_owned();
    let mut normalised = card();
    normalised["image"] = json!("https://cdn.example/spring.jpg");
    let read: Value = app.get_link(&code).await.json().await.unwrap();
    for view in [&created, &read] {
        assert_eq!(view["preview"], normalised, "{view}");
    }

    // The card key holds the card, with the record's expiry, and the record says so.
    let value = card_value(&app, &code).await.expect("a card key");
    let stored = preview::decode(&value).expect("a card wire decodes");
    assert_eq!(stored.title, "Spring sale: 20% off <today>");
    assert_eq!(stored.image, "https://cdn.example/spring.jpg");
    assert_eq!(stored.site_name, "Example Shop");
    assert!(has_card(&app, &code).await);
    assert_eq!(
        card_expiretime(&app, &code).await,
        app.redis_expiretime(&code).await
    );

    // A new card replaces the old one whole; an unrelated change keeps it.
    let view: Value = app
        .patch_link(
            &code,
            &json!({"preview": {"title": "New", "description": "Text", "image": "https://i.example/n.png"}}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert!(view["preview"].get("site_name").is_none(), "{view}");
    app.patch_link(&code, &json!({"campaign": "spring"})).await;
    let value = card_value(&app, &code).await.unwrap();
    let stored = preview::decode(&value).unwrap();
    assert_eq!((stored.title, stored.site_name), ("New", ""));

    // `null` removes it, from SQL, the record and Redis.
    let view: Value = app
        .patch_link(&code, &json!({"preview": null}))
        .await
        .json()
        .await
        .unwrap();
    assert!(view.get("preview").is_none(), "{view}");
    assert_eq!(card_value(&app, &code).await, None);
    assert!(!has_card(&app, &code).await);

    // Revoking takes it with the link.
    app.patch_link(&code, &json!({"preview": card()})).await;
    assert!(card_value(&app, &code).await.is_some());
    assert_eq!(app.delete_link(&code).await.status(), 200);
    assert_eq!(card_value(&app, &code).await, None);

    // Batch items take cards too.
    let body: Value = app
        .post_batch(&[
            json!({"url": "https://t.example/b", "preview": card()}),
            json!({"url": "https://t.example/plain"}),
        ])
        .await
        .json()
        .await
        .unwrap();
    let with = body["results"][0]["link"]["code"].as_str().unwrap();
    let plain = body["results"][1]["link"]["code"].as_str().unwrap();
    assert!(card_value(&app, with).await.is_some() && has_card(&app, with).await);
    assert_eq!(card_value(&app, plain).await, None);

    let doc: Value = app.get_json("/openapi.json").await;
    let spec = &doc["components"]["schemas"]["CardSpec"]["properties"];
    assert_eq!(spec["title"]["maxLength"], json!(MAX_TITLE));
}

async fn bad_cards_are_refused_and_store_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://a.example/", "code": "existing", "preview": card()}))
        .await;
    let before = app.stored().await;
    let with = |field: &str, value: Value| {
        let mut card = card();
        card[field] = value;
        card
    };
    let long_title = "é".repeat(MAX_TITLE / 2 + 1);
    let long_text = "a".repeat(MAX_DESCRIPTION + 1);
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            with("title", json!("")),
            "invalid_preview",
            "preview.title must be 1 to",
        ),
        (
            with("title", json!(long_title)),
            "invalid_preview",
            "preview.title",
        ),
        (
            with("title", json!("a\u{7}b")),
            "invalid_preview",
            "control",
        ),
        (
            with("description", json!(long_text)),
            "invalid_preview",
            "preview.description must be 1 to",
        ),
        (
            with("site_name", json!("")),
            "invalid_preview",
            "preview.site_name",
        ),
        (
            with("image", json!("http://cdn.example/a.png")),
            "invalid_preview",
            "preview.image must be an https URL",
        ),
        (
            with("image", json!("javascript:alert(1)")),
            "unsupported_scheme",
            "preview.image",
        ),
        (
            with("image", json!("/relative.png")),
            "invalid_url",
            "preview.image",
        ),
        (
            json!({"description": "d", "image": "https://i.example/"}),
            "invalid_body",
            "",
        ),
        (with("colour", json!("red")), "invalid_body", ""),
    ];
    for (preview, code, message) in &cases {
        let body = json!({"url": "https://t.example/own", "preview": preview});
        let patch = json!({"preview": preview});
        app.refused_everywhere(&body, &patch, code, message).await;
    }
    assert_eq!(
        app.stored().await,
        before,
        "nothing stored, in SQL or Redis"
    );
}

async fn resync_rebuilds_and_removes_cards(backend: Backend) {
    let app = spawn_app(backend).await;
    let with = app
        .create(json!({"url": "https://t.example/card", "preview": card()}))
        .await["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let plain = app.create_code("https://t.example/plain").await;
    let card = card_value(&app, &with).await.unwrap();
    // Redis loses the card; a stale card appears beside a link that has none.
    let _: () = redis::cmd("DEL")
        .arg(preview_key(&with))
        .query_async(&mut app.redis().await)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(preview_key(&plain))
        .arg(&card)
        .query_async(&mut app.redis().await)
        .await
        .unwrap();
    app.run_cli(&["resync"]).await;
    assert_eq!(card_value(&app, &with).await, Some(card));
    assert_eq!(card_value(&app, &plain).await, None);
}
