//! `max_visits` and `password` (issue 34's last part): what the API takes, what it gives back
//! (never the password), what it refuses (storing nothing), what SQL keeps (only the digest) and
//! the record and counter Redis then holds, read with `wire` as the module reads them.

use crate::helpers::*;
use serde_json::{json, Value};
use shortlink_wire::keys::visit_count_key;
use shortlink_wire::record::password::MAX_PASSWORD_BYTES;
use shortlink_wire::record::{decode, Extras, Link as WireLink};

crate::on_each_backend!(
    caps_and_passwords_round_trip,
    bad_caps_and_passwords_are_refused_and_store_nothing,
);

const PASSWORD: &str = "correct horse";

/// The extras of `code`'s record in Redis.
async fn extras(app: &TestApp, code: &str) -> Option<Extras> {
    let record = app.redis_record(code).await.expect("a record");
    match decode(&record).expect("a record wire decodes") {
        WireLink::Live { extras, .. } => extras.map(|extras| (*extras).clone()),
        other => panic!("not a live record: {other:?}"),
    }
}

async fn counter(app: &TestApp, code: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(visit_count_key(code))
        .query_async(&mut app.redis().await)
        .await
        .unwrap()
}

async fn count_click(app: &TestApp, code: &str) {
    let _: u64 = redis::cmd("INCR")
        .arg(visit_count_key(code))
        .query_async(&mut app.redis().await)
        .await
        .unwrap();
}

/// The link's row as SQL holds it, every column as text.
async fn password_column(app: &TestApp, code: &str) -> Vec<String> {
    app.db
        .texts(&format!(
            "SELECT password_digest FROM links WHERE code = '{code}' AND password_digest IS NOT NULL"
        ))
        .await
}

async fn caps_and_passwords_round_trip(backend: Backend) {
    let app = spawn_app(backend).await;
    let created = app
        .create(json!({"url": "https://t.example/own", "max_visits": 3, "password": PASSWORD}))
        .await;
    let code = created["code"].as_str().unwrap().to_owned();
    assert_eq!(created["max_visits"], json!(3));
    assert_eq!(created["password_protected"], json!(true));
    assert!(
        !created.to_string().contains(PASSWORD) && created.get("password").is_none(),
        "{created}"
    );

    // SQL keeps only the salted digest; the record carries the same.
    let digest = password_column(&app, &code).await;
    assert_eq!(digest.len(), 1);
    assert_eq!(digest[0].len(), 96, "hex salt and digest: {}", digest[0]);
    assert!(!digest[0].contains(PASSWORD));
    let sql_digest = shortlink_wire::record::password::Password::from_hex(&digest[0]).unwrap();
    let wire = extras(&app, &code).await.expect("version 2");
    assert_eq!(wire.max_visits, 3);
    let password = wire.password.expect("a password in the record");
    assert_eq!(password, sql_digest);
    assert!(password.matches(PASSWORD.as_bytes()));
    assert!(!password.matches(b"wrong"));

    // The read shows the clicks counted so far (the module's `INCR`s).
    count_click(&app, &code).await;
    count_click(&app, &code).await;
    let read: Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(read["visits_counted"], json!(2));
    assert_eq!(read["password_protected"], json!(true));
    assert!(!read.to_string().contains(PASSWORD));

    // A new cap keeps the count (the cap is on clicks ever redirected); a new password
    // replaces the old one, under a new salt.
    let view: Value = app
        .patch_link(&code, &json!({"max_visits": 5, "password": "another one"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(view["max_visits"], json!(5));
    assert_eq!(counter(&app, &code).await, Some(2));
    let wire = extras(&app, &code).await.unwrap();
    assert_eq!(wire.max_visits, 5);
    let password = wire.password.unwrap();
    assert!(password.matches(b"another one") && !password.matches(PASSWORD.as_bytes()));
    assert_ne!(password.salt, sql_digest.salt);

    // An unrelated change keeps both.
    app.patch_link(&code, &json!({"campaign": "spring"})).await;
    let wire = extras(&app, &code).await.unwrap();
    assert!(wire.max_visits == 5 && wire.password.is_some());

    // `null` removes them: a plain link again, version 1.
    let view: Value = app
        .patch_link(&code, &json!({"max_visits": null, "password": null}))
        .await
        .json()
        .await
        .unwrap();
    assert!(view.get("max_visits").is_none(), "{view}");
    assert_eq!(view["password_protected"], json!(false));
    assert!(password_column(&app, &code).await.is_empty());
    assert_eq!(
        app.redis_get(&code).await.unwrap(),
        "1|L|302|0|0|https://t.example/own"
    );

    // Revoking (DELETE) takes the counter with the link.
    app.patch_link(&code, &json!({"max_visits": 1})).await;
    count_click(&app, &code).await;
    assert_eq!(app.delete_link(&code).await.status(), 200);
    assert_eq!(counter(&app, &code).await, None);

    // Batch items take them too.
    let body: Value = app
        .post_batch(&[
            json!({"url": "https://t.example/b", "max_visits": 7, "password": "x-batch-secret"}),
        ])
        .await
        .json()
        .await
        .unwrap();
    let link = &body["results"][0]["link"];
    assert_eq!(link["max_visits"], json!(7), "{body}");
    assert_eq!(link["password_protected"], json!(true));
    let wire = extras(&app, link["code"].as_str().unwrap()).await.unwrap();
    assert!(wire.max_visits == 7 && wire.password.unwrap().matches(b"x-batch-secret"));

    // An idempotent create never hands out a protected link, nor reuses one for a password,
    // nor a link with other options.
    let open = app
        .create(json!({"url": "https://t.example/i", "idempotent": true}))
        .await;
    for body in [
        json!({"url": "https://t.example/i", "idempotent": true, "password": "p-idempotent"}),
        json!({"url": "https://t.example/i", "idempotent": true, "max_visits": 2}),
    ] {
        let other = app.post_link(&body).await;
        assert_eq!(other.status(), 201, "{body}");
        let other: Value = other.json().await.unwrap();
        assert_ne!(other["code"], open["code"], "{body}");
    }
    // The newest live link (the capped one) with the same options is the answer.
    let capped = app
        .post_link(&json!({"url": "https://t.example/i", "idempotent": true, "max_visits": 2}))
        .await;
    assert_eq!(capped.status(), 200, "the same options: the same link");
    let again = app
        .post_link(
            &json!({"url": "https://t.example/i", "idempotent": true, "password": "p-idempotent"}),
        )
        .await;
    assert_eq!(
        again.status(),
        201,
        "a password always gets a link of its own"
    );

    // JSON may write an integer as `4.0` (the schema's `integer` allows it).
    let whole = app
        .create(json!({"url": "https://t.example/w", "max_visits": 4.0}))
        .await;
    assert_eq!(whole["max_visits"], json!(4));

    // The OpenAPI document describes both.
    let doc: Value = app.get_json("/openapi.json").await;
    let create = &doc["components"]["schemas"]["CreateLinkRequest"]["properties"];
    assert_eq!(create["max_visits"]["minimum"], json!(1));
    assert_eq!(create["password"]["maxLength"], json!(MAX_PASSWORD_BYTES));
    assert_eq!(create["password"]["minLength"], json!(8));
    assert!(
        doc["components"]["schemas"]["LinkView"]["properties"]["password_protected"].is_object()
    );
}

async fn bad_caps_and_passwords_are_refused_and_store_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://a.example/", "code": "existing", "max_visits": 2}))
        .await;
    let before = app.stored().await;
    let too_long = "é".repeat(MAX_PASSWORD_BYTES / 2 + 1);
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"max_visits": 0}),
            "invalid_max_visits",
            "max_visits must be 1 to",
        ),
        (
            json!({"max_visits": -5}),
            "invalid_max_visits",
            "max_visits",
        ),
        (
            json!({"max_visits": 1_i64 << 53}),
            "invalid_max_visits",
            "max_visits",
        ),
        (json!({"max_visits": "ten"}), "invalid_body", ""),
        (json!({"max_visits": 1.5}), "invalid_body", ""),
        (
            json!({"password": ""}),
            "invalid_password",
            "password must be at least 8 characters",
        ),
        // Seven characters (eight bytes): characters count, not bytes.
        (
            json!({"password": "sésame7"}),
            "invalid_password",
            "password must be at least 8 characters",
        ),
        (json!({"password": too_long}), "invalid_password", "bytes"),
        (json!({"password": 1234}), "invalid_body", ""),
    ];
    for (fields, code, message) in &cases {
        let mut body = json!({"url": "https://t.example/own"});
        body.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        for (label, answer) in app.refused_everywhere(&body, fields, code, message).await {
            assert!(!answer.to_string().contains("horse"), "{label}: {answer}");
        }
    }
    assert_eq!(
        app.stored().await,
        before,
        "nothing stored, in SQL or Redis"
    );
}
