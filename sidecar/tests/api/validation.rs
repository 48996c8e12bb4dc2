//! Bad input gets a clear 4xx with a JSON error, and leaves SQL and Redis exactly as they were.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};

crate::on_each_backend!(
    bad_link_bodies_are_refused_and_store_nothing,
    bad_requests_are_refused_and_store_nothing,
    host_lists_and_configured_short_domains,
);

async fn bad_link_bodies_are_refused_and_store_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    // Something stored already, so "unchanged" is not trivially "empty".
    app.create(json!({"url": "https://a.example/", "code": "existing"}))
        .await;
    let before = app.stored().await;

    let past = chrono::DateTime::from_timestamp(now_secs() - 10, 0)
        .unwrap()
        .to_rfc3339();
    let cases: Vec<(Value, u16, &str)> = vec![
        (
            json!({"url": "javascript:alert(1)"}),
            422,
            "unsupported_scheme",
        ),
        (
            json!({"url": "JavaScript:alert(1)//https://a.example/"}),
            422,
            "unsupported_scheme",
        ),
        (
            json!({"url": "data:text/html;base64,PHNjcmlwdD4="}),
            422,
            "unsupported_scheme",
        ),
        (
            json!({"url": "file:///etc/passwd"}),
            422,
            "unsupported_scheme",
        ),
        (
            json!({"url": "ftp://a.example/"}),
            422,
            "unsupported_scheme",
        ),
        (json!({"url": "//evil.example/"}), 422, "invalid_url"),
        (json!({"url": "/relative/path"}), 422, "invalid_url"),
        (json!({"url": "a.example/no-scheme"}), 422, "invalid_url"),
        (json!({"url": "https:\\\\evil.example"}), 422, "invalid_url"),
        (
            json!({"url": "https://a.example/\r\nSet-Cookie: x=1"}),
            422,
            "invalid_url",
        ),
        (json!({"url": "https://a.example/\nx"}), 422, "invalid_url"),
        (json!({"url": "https://a.example/\tx"}), 422, "invalid_url"),
        (json!({"url": "https://a.example/ x"}), 422, "invalid_url"),
        (json!({"url": " https://a.example/"}), 422, "invalid_url"),
        (
            json!({"url": "https://a.example/\u{0}"}),
            422,
            "invalid_url",
        ),
        (
            json!({"url": "https://a.example/\u{7f}"}),
            422,
            "invalid_url",
        ),
        (
            json!({"url": "https://a.example/\u{2028}"}),
            422,
            "invalid_url",
        ),
        (
            json!({"url": "https://user:pass@a.example/"}),
            422,
            "invalid_url",
        ),
        (json!({"url": "https://"}), 422, "invalid_url"),
        (json!({"url": "https://[::1/"}), 422, "invalid_url"),
        (json!({"url": ""}), 422, "invalid_url"),
        (
            json!({"url": format!("https://a.example/{}", "x".repeat(5000))}),
            422,
            "url_too_long",
        ),
        (
            json!({"url": "https://a.example/", "redirect": 303}),
            422,
            "invalid_redirect",
        ),
        (
            json!({"url": "https://a.example/", "redirect": 200}),
            422,
            "invalid_redirect",
        ),
        (
            json!({"url": "https://a.example/", "redirect": "302"}),
            422,
            "invalid_body",
        ),
        (
            json!({"url": "https://a.example/", "expires_at": past}),
            422,
            "invalid_expiry",
        ),
        (
            json!({"url": "https://a.example/", "expires_at": "tomorrow"}),
            422,
            "invalid_body",
        ),
        (
            json!({"url": "https://a.example/", "code": "existing"}),
            409,
            "code_taken",
        ),
        (
            json!({"url": "https://a.example/", "code": "Abcdefg"}),
            422,
            "invalid_code",
        ),
        (
            json!({"url": "https://a.example/", "unknown": 1}),
            422,
            "invalid_body",
        ),
        (json!({"code": "nourl"}), 422, "invalid_body"),
        (json!({"url": 42}), 422, "invalid_body"),
        (json!(["https://a.example/"]), 422, "invalid_body"),
    ];
    for (body, status, code) in &cases {
        let response = app.post_link(body).await;
        assert_eq!(response.status().as_u16(), *status, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], *code, "{body}: {error}");
        assert!(error["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }

    // Own short domain (from nginx's pool header), as a loop.
    let response = app
        .api(Method::POST, "/links")
        .header("X-Shortlink-Pool", "s1.example  S2.Example")
        .json(&json!({"url": "https://s2.example/abcdefg"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "own_domain"
    );

    // Patch validates the same way.
    for (body, code) in [
        (json!({"url": "javascript:alert(1)"}), "unsupported_scheme"),
        (json!({"expires_at": past}), "invalid_expiry"),
        (json!({"redirect": 304}), "invalid_redirect"),
        (json!({}), "empty_patch"),
        (json!({"target": "https://b.example/"}), "invalid_body"),
    ] {
        let response = app.patch_link("existing", &body).await;
        assert_eq!(response.status(), 422, "{body}");
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["code"],
            code,
            "{body}"
        );
    }

    assert_eq!(
        app.stored().await,
        before,
        "nothing stored by refused requests"
    );
}

async fn bad_requests_are_refused_and_store_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let before = app.stored().await;
    let post = |body: &'static str, content_type: Option<&'static str>| {
        let mut request = app.api(Method::POST, "/links").body(body);
        if let Some(content_type) = content_type {
            request = request.header("Content-Type", content_type);
        }
        request.send()
    };
    let cases = [
        (
            post(r#"{"url": "https://a.example/""#, Some("application/json"))
                .await
                .unwrap(),
            400,
            "malformed_json",
        ),
        (
            post("", Some("application/json")).await.unwrap(),
            400,
            "malformed_json",
        ),
        // serde would read a struct from an array: the target as its first field.
        (
            post(r#"["https://a.example/"]"#, Some("application/json"))
                .await
                .unwrap(),
            422,
            "invalid_body",
        ),
        (
            post(r#""https://a.example/""#, Some("application/json"))
                .await
                .unwrap(),
            422,
            "invalid_body",
        ),
        (
            post(r#"{"url": "https://a.example/"}"#, None)
                .await
                .unwrap(),
            415,
            "unsupported_media_type",
        ),
        (
            post(r#"{"url": "https://a.example/"}"#, Some("text/plain"))
                .await
                .unwrap(),
            415,
            "unsupported_media_type",
        ),
        (
            post(
                "url=https://a.example/",
                Some("application/x-www-form-urlencoded"),
            )
            .await
            .unwrap(),
            415,
            "unsupported_media_type",
        ),
    ];
    for (response, status, code) in cases {
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["code"],
            code
        );
    }

    // Oversized and deeply nested bodies.
    let huge = format!(r#"{{"url": "https://a.example/{}"}}"#, "x".repeat(100_000));
    let response = app
        .api(Method::POST, "/links")
        .header("Content-Type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "payload_too_large"
    );
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let response = app
        .api(Method::POST, "/links")
        .header("Content-Type", "application/json")
        .body(nested)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_client_error());
    assert!(response.json::<Value>().await.unwrap()["error"]["code"].is_string());

    // A bad public base header.
    let response = app
        .api(Method::POST, "/links")
        .header("X-Shortlink-Public-Base", "javascript:alert(1)")
        .json(&json!({"url": "https://a.example/"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_header"
    );

    // Unknown routes and methods answer JSON too.
    let response = app.api(Method::PUT, "/links").send().await.unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "method_not_allowed"
    );
    let response = app.api(Method::GET, "/nothing/here").send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "not_found"
    );

    assert_eq!(app.stored().await, before);
}

async fn host_lists_and_configured_short_domains(backend: Backend) {
    let app = spawn_app_with(
        backend,
        &[
            "--short-domains",
            "s1.example,S2.example",
            "--allow-hosts",
            "shop.example,partner.example",
            "--block-hosts",
            "bad.shop.example",
            "--max-url-length",
            "100",
        ],
    )
    .await;
    let before = app.stored().await;
    for (url, code) in [
        ("https://s1.example/x", "own_domain"),
        ("https://S2.EXAMPLE./x", "own_domain"),
        ("https://other.example/", "host_not_allowed"),
        ("https://notshop.example/", "host_not_allowed"),
        ("https://bad.shop.example/", "host_not_allowed"),
        ("https://x.bad.shop.example/", "host_not_allowed"),
        (
            &format!("https://shop.example/{}", "x".repeat(100)),
            "url_too_long",
        ),
    ] {
        let response = app.post_link(&json!({"url": url})).await;
        assert_eq!(response.status(), 422, "{url}");
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["code"],
            code,
            "{url}"
        );
    }
    assert_eq!(app.stored().await, before);
    app.create(json!({"url": "https://shop.example/"})).await;
    app.create(json!({"url": "https://www.partner.example/"}))
        .await;
}
