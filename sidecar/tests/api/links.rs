//! Create, read, update, revoke and list, with each state checked in Redis in the documented
//! format (docs/ARCHITECTURE.md, "Link record, version 1").

use crate::helpers::*;
use serde_json::{json, Value};

crate::on_each_backend!(
    lifecycle_is_written_through_to_redis,
    expiring_links_get_expireat_plus_grace,
    custom_aliases,
    idempotent_create_returns_the_live_link,
    idempotent_create_never_hands_out_another_recipients_link,
    list_pages_newest_first,
    short_url_follows_the_public_base_header,
    resync_rebuilds_redis_from_sql,
);

async fn lifecycle_is_written_through_to_redis(backend: Backend) {
    let app = spawn_app(backend).await;

    // Create: a generated code of the scheme's shape, a live record without TTL.
    let link = app
        .create(json!({"url": "https://shop.example/spring?a=1"}))
        .await;
    let code = link["code"].as_str().unwrap().to_owned();
    assert_eq!(
        app.scheme.shape(code.as_bytes()),
        shortcode::Shape::Generated
    );
    assert_eq!(link["url"], "https://shop.example/spring?a=1");
    assert_eq!(link["short_url"], format!("{PUBLIC_BASE}/{code}"));
    assert_eq!(link["redirect"], 302);
    assert_eq!(link["forward_query"], false);
    assert_eq!(link["state"], "live");
    assert_eq!(link["expires_at"], Value::Null);
    assert_eq!(link["revoked_at"], Value::Null);
    assert_eq!(link["visit_count"], 0);
    assert_eq!(link["created_at"], link["updated_at"]);
    assert_eq!(
        app.redis_get(&code).await.as_deref(),
        Some("1|L|302|0|0|https://shop.example/spring?a=1")
    );
    assert_eq!(app.redis_expiretime(&code).await, -1);

    // Read.
    let read = app.get_link(&code).await;
    assert_eq!(read.status(), 200);
    assert_eq!(read.json::<Value>().await.unwrap(), link);

    // Update target, status and query forwarding.
    let response = app
        .patch_link(
            &code,
            &json!({"url": "https://shop.example/summer", "redirect": 308, "forward_query": true}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let updated: Value = response.json().await.unwrap();
    assert_eq!(updated["url"], "https://shop.example/summer");
    assert_eq!(updated["redirect"], 308);
    assert_eq!(updated["forward_query"], true);
    assert_eq!(updated["created_at"], link["created_at"]);
    assert_ne!(updated["updated_at"], link["updated_at"]);
    assert_eq!(
        app.redis_get(&code).await.as_deref(),
        Some("1|L|308|0|1|https://shop.example/summer")
    );

    // Set, then clear, an expiry.
    let expires = now_secs() + 3600;
    let at = chrono::DateTime::from_timestamp(expires, 0)
        .unwrap()
        .to_rfc3339();
    let response = app.patch_link(&code, &json!({"expires_at": at})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        app.redis_get(&code).await.unwrap(),
        format!("1|L|308|{expires}|1|https://shop.example/summer")
    );
    assert_eq!(app.redis_expiretime(&code).await, expires + GRACE_SECS);
    let response = app.patch_link(&code, &json!({"expires_at": null})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap()["expires_at"],
        Value::Null
    );
    assert_eq!(
        app.redis_get(&code).await.as_deref(),
        Some("1|L|308|0|1|https://shop.example/summer")
    );
    assert_eq!(app.redis_expiretime(&code).await, -1, "TTL cleared");

    // Revoke: tombstone without TTL; revoking again changes nothing.
    let response = app.delete_link(&code).await;
    assert_eq!(response.status(), 200);
    let revoked: Value = response.json().await.unwrap();
    assert_eq!(revoked["state"], "revoked");
    assert!(revoked["revoked_at"].is_string());
    assert_eq!(app.redis_get(&code).await.as_deref(), Some("1|R|410|0|0|"));
    assert_eq!(app.redis_expiretime(&code).await, -1);
    let again = app.delete_link(&code).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.json::<Value>().await.unwrap(), revoked);

    // A revoked link cannot change, and still reads as revoked.
    let response = app.patch_link(&code, &json!({"redirect": 301})).await;
    assert_eq!(response.status(), 410);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "link_revoked"
    );
    assert_eq!(
        app.get_link(&code).await.json::<Value>().await.unwrap(),
        revoked
    );
    assert_eq!(app.redis_get(&code).await.as_deref(), Some("1|R|410|0|0|"));

    // Unknown codes.
    assert_eq!(app.get_link("nosuchalias").await.status(), 404);
    assert_eq!(
        app.patch_link("nosuchalias", &json!({"redirect": 301}))
            .await
            .status(),
        404
    );
    assert_eq!(app.delete_link("nosuchalias").await.status(), 404);
    assert_eq!(app.get_link("bad%20code").await.status(), 404);
}

async fn expiring_links_get_expireat_plus_grace(backend: Backend) {
    let app = spawn_app(backend).await;
    let expires = now_secs() + 86_400;
    // Fractions of a second are dropped: the record carries whole seconds.
    let at = format!(
        "{}.750+02:00",
        chrono::DateTime::from_timestamp(expires, 0)
            .unwrap()
            .with_timezone(&chrono::FixedOffset::east_opt(7200).unwrap())
            .format("%Y-%m-%dT%H:%M:%S")
    );
    let link = app
        .create(json!({"url": "https://a.example/", "expires_at": at, "redirect": 301}))
        .await;
    let code = link["code"].as_str().unwrap();
    let expected = chrono::DateTime::from_timestamp(expires, 0).unwrap();
    assert_eq!(
        link["expires_at"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap(),
        expected
    );
    assert_eq!(
        app.redis_get(code).await.unwrap(),
        format!("1|L|301|{expires}|0|https://a.example/")
    );
    assert_eq!(app.redis_expiretime(code).await, expires + GRACE_SECS);
}

async fn custom_aliases(backend: Backend) {
    let app = spawn_app(backend).await;
    let link = app
        .create(json!({"url": "https://a.example/", "code": "Spring_Sale-2026"}))
        .await;
    assert_eq!(link["code"], "Spring_Sale-2026");
    assert_eq!(link["short_url"], format!("{PUBLIC_BASE}/Spring_Sale-2026"));
    assert_eq!(
        app.redis_get("Spring_Sale-2026").await.as_deref(),
        Some("1|L|302|0|0|https://a.example/")
    );
    assert_eq!(app.get_link("Spring_Sale-2026").await.status(), 200);

    // Aliases never take a code of the generated shape (7 letters and digits by default).
    let before = app.stored().await;
    for (alias, code) in [
        ("Abcdefg", "invalid_code"),
        ("ab", "invalid_code"),
        ("a".repeat(65).as_str(), "invalid_code"),
        ("a/b/c", "invalid_code"),
        ("drop';--", "invalid_code"),
        ("ünï", "invalid_code"),
    ] {
        let response = app
            .post_link(&json!({"url": "https://b.example/", "code": alias}))
            .await;
        assert_eq!(response.status(), 422, "alias {alias:?}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "alias {alias:?}: {body}");
    }
    // Taken: 409, whatever the URL, and the existing link is untouched.
    let response = app
        .post_link(&json!({"url": "https://other.example/", "code": "Spring_Sale-2026"}))
        .await;
    assert_eq!(response.status(), 409);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "code_taken"
    );
    assert_eq!(app.stored().await, before, "refused aliases store nothing");

    // A revoked alias is never reissued.
    assert_eq!(app.delete_link("Spring_Sale-2026").await.status(), 200);
    let response = app
        .post_link(&json!({"url": "https://a.example/", "code": "Spring_Sale-2026"}))
        .await;
    assert_eq!(response.status(), 409);
    assert_eq!(
        app.redis_get("Spring_Sale-2026").await.as_deref(),
        Some("1|R|410|0|0|")
    );
}

async fn idempotent_create_returns_the_live_link(backend: Backend) {
    let app = spawn_app(backend).await;
    let first = app
        .create(json!({"url": "HTTPS://Example.COM:443", "idempotent": true}))
        .await;
    assert_eq!(first["url"], "https://example.com/");

    // Same normalised URL: 200 with the same link, nothing new stored.
    let before = app.stored().await;
    let response = app
        .post_link(&json!({"url": "https://example.com/", "idempotent": true}))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), first);
    assert_eq!(app.stored().await, before);

    // Without the flag: a new link for the same URL.
    let second = app.create(json!({"url": "https://example.com/"})).await;
    assert_ne!(second["code"], first["code"]);

    // The newest live one is returned; revoked ones never are.
    let response = app
        .post_link(&json!({"url": "https://example.com/", "idempotent": true}))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap()["code"],
        second["code"]
    );
    for link in [&first, &second] {
        assert_eq!(
            app.delete_link(link["code"].as_str().unwrap())
                .await
                .status(),
            200
        );
    }
    let third = app
        .create(json!({"url": "https://example.com/", "idempotent": true}))
        .await;
    assert_ne!(third["code"], first["code"]);
    assert_ne!(third["code"], second["code"]);

    // With an alias: idempotent only for that alias and URL.
    app.create(json!({"url": "https://x.example/", "code": "promo", "idempotent": true}))
        .await;
    let response = app
        .post_link(&json!({"url": "https://x.example/", "code": "promo", "idempotent": true}))
        .await;
    assert_eq!(response.status(), 200);
    let response = app
        .post_link(&json!({"url": "https://y.example/", "code": "promo", "idempotent": true}))
        .await;
    assert_eq!(response.status(), 409);
}

/// A link with a `ref` is one recipient's: an idempotent create matches the URL *and* the ref.
async fn idempotent_create_never_hands_out_another_recipients_link(backend: Backend) {
    let app = spawn_app(backend).await;
    let url = "https://shop.example/spring";
    let alice = app
        .create(json!({"url": url, "ref": "alice", "idempotent": true}))
        .await;

    // Alice again: her link.
    let response = app
        .post_link(&json!({"url": url, "ref": "alice", "idempotent": true}))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap()["code"],
        alice["code"]
    );

    // Someone else, or nobody in particular: a link of their own, each then found again.
    let bob = app
        .create(json!({"url": url, "ref": "bob", "idempotent": true}))
        .await;
    let anyone = app.create(json!({"url": url, "idempotent": true})).await;
    assert_ne!(bob["code"], alice["code"]);
    assert_ne!(anyone["code"], alice["code"]);
    assert_ne!(anyone["code"], bob["code"]);
    assert_eq!(anyone["ref"], Value::Null);
    for (link, body) in [
        (&bob, json!({"url": url, "ref": "bob", "idempotent": true})),
        (&anyone, json!({"url": url, "idempotent": true})),
    ] {
        let response = app.post_link(&body).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.json::<Value>().await.unwrap()["code"],
            link["code"]
        );
    }

    // Alice's link for another URL is not her link for this one.
    let other = app
        .create(json!({"url": "https://shop.example/other", "ref": "alice", "idempotent": true}))
        .await;
    assert_ne!(other["code"], alice["code"]);
}

async fn list_pages_newest_first(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut codes = Vec::new();
    for i in 0..7 {
        let link = app
            .create(json!({"url": format!("https://a.example/{i}")}))
            .await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    codes.reverse();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/links?limit=3&cursor={cursor}"),
            None => "/links?limit=3".to_owned(),
        };
        let response = app.api(reqwest::Method::GET, &path).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let page: Value = response.json().await.unwrap();
        pages += 1;
        for link in page["links"].as_array().unwrap() {
            seen.push(link["code"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, codes, "newest first, each link once");

    for bad in [
        "/links?cursor=nonsense",
        "/links?limit=0",
        "/links?limit=1001",
        "/links?limit=x",
        "/links?limit=1.5",
        "/links?limit=-1",
    ] {
        let response = app.api(reqwest::Method::GET, bad).send().await.unwrap();
        assert_eq!(response.status(), 400, "{bad}");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"]["code"].is_string());
    }
}

async fn short_url_follows_the_public_base_header(backend: Backend) {
    let app = spawn_app(backend).await;
    let response = app
        .api(reqwest::Method::POST, "/links")
        .header("X-Shortlink-Public-Base", "https://s2.example/")
        .json(&json!({"url": "https://a.example/"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let link: Value = response.json().await.unwrap();
    let code = link["code"].as_str().unwrap();
    assert_eq!(link["short_url"], format!("https://s2.example/{code}"));

    let response = app
        .api(reqwest::Method::GET, &format!("/links/{code}"))
        .header("X-Shortlink-Public-Base", "https://s3.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.json::<Value>().await.unwrap()["short_url"],
        format!("https://s3.example/{code}")
    );
}

async fn resync_rebuilds_redis_from_sql(backend: Backend) {
    let app = spawn_app(backend).await;
    let live = &app.create_code("https://a.example/live").await;
    let expires = now_secs() + 3600;
    let expiring = app
        .create(json!({
            "url": "https://a.example/expiring",
            "expires_at": chrono::DateTime::from_timestamp(expires, 0).unwrap().to_rfc3339(),
        }))
        .await;
    let expiring = expiring["code"].as_str().unwrap();
    let revoked = app
        .create(json!({"url": "https://a.example/revoked"}))
        .await;
    let revoked = revoked["code"].as_str().unwrap();
    app.delete_link(revoked).await;
    let in_grace = app
        .create(json!({"url": "https://a.example/in-grace"}))
        .await;
    let in_grace = in_grace["code"].as_str().unwrap();
    let expired_at = now_secs() - 60;
    app.set_expiry_in_sql(in_grace, expired_at).await;
    let past_grace = app
        .create(json!({"url": "https://a.example/past-grace"}))
        .await;
    let past_grace = past_grace["code"].as_str().unwrap();
    app.set_expiry_in_sql(past_grace, now_secs() - GRACE_SECS - 60)
        .await;

    let mut redis = app.redis().await;
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut redis)
        .await
        .unwrap();
    app.run_cli(&["resync"]).await;

    assert_eq!(
        app.redis_get(live).await.as_deref(),
        Some("1|L|302|0|0|https://a.example/live")
    );
    assert_eq!(app.redis_expiretime(live).await, -1);
    assert_eq!(
        app.redis_get(expiring).await.unwrap(),
        format!("1|L|302|{expires}|0|https://a.example/expiring")
    );
    assert_eq!(app.redis_expiretime(expiring).await, expires + GRACE_SECS);
    assert_eq!(
        app.redis_get(revoked).await.as_deref(),
        Some("1|R|410|0|0|")
    );
    assert_eq!(app.redis_expiretime(revoked).await, -1);
    assert_eq!(
        app.redis_get(in_grace).await.unwrap(),
        format!("1|L|302|{expired_at}|0|https://a.example/in-grace")
    );
    assert_eq!(
        app.redis_expiretime(in_grace).await,
        expired_at + GRACE_SECS
    );
    assert_eq!(app.redis_get(past_grace).await, None);
    assert_eq!(app.stored().await.redis_keys, 4);
}
