//! `GET /api/v1/links/{code}/qr`: both renderings read back to the short URL with a QR decoder.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use shortlink_e2e::qr::{decode_png, decode_svg};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qr_codes_read_back_to_the_short_url() {
    let app = spawn_app(Backend::Sqlite).await;
    let link = app
        .create(json!({"url": "https://shop.example/spring"}))
        .await;
    let (code, short_url) = (
        link["code"].as_str().unwrap(),
        link["short_url"].as_str().unwrap(),
    );

    let png = app
        .api(
            Method::GET,
            &format!("/links/{code}/qr?format=png&size=300"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(png.status(), 200);
    assert_eq!(png.headers()["content-type"], "image/png");
    let (width, text) = decode_png(&png.bytes().await.unwrap());
    assert_eq!(text, short_url);
    assert!(
        (200..=300).contains(&width),
        "{width} px: whole pixels a module, at most 300"
    );

    let svg = app
        .api(Method::GET, &format!("/links/{code}/qr"))
        .send()
        .await
        .unwrap();
    assert_eq!(svg.status(), 200);
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    assert_eq!(svg.headers()["x-content-type-options"], "nosniff");
    let etag = svg.headers()["etag"].clone();
    let svg = svg.text().await.unwrap();
    assert!(svg.contains("width=\"256\""), "default size");
    assert_eq!(decode_svg(&svg), short_url);

    // Cacheable: the same rendering answers 304 to its ETag; another rendering has another.
    let again = app
        .api(Method::GET, &format!("/links/{code}/qr"))
        .header("If-None-Match", etag.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    let other = app
        .api(Method::GET, &format!("/links/{code}/qr?margin=0"))
        .send()
        .await
        .unwrap();
    assert_ne!(other.headers()["etag"], etag);
    assert_eq!(decode_svg(&other.text().await.unwrap()), short_url);

    // The short URL is on the request's issuing domain.
    let rotated = app
        .api(Method::GET, &format!("/links/{code}/qr?format=png"))
        .header("X-Shortlink-Public-Base", "https://s2.example")
        .send()
        .await
        .unwrap();
    let (_, text) = decode_png(&rotated.bytes().await.unwrap());
    assert_eq!(text, format!("https://s2.example/{code}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qr_requests_are_checked() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://shop.example/a").await;
    for query in [
        "format=gif",
        "size=63",
        "size=2049",
        "size=1.5",
        "margin=17",
        "margin=-1",
        "colour=red",
    ] {
        let response = app
            .api(Method::GET, &format!("/links/{code}/qr?{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{query}");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"]["message"].is_string(), "{query}: {body}");
    }
    let missing = app
        .api(Method::GET, "/links/nosuchcode/qr")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(app.delete_link(&code).await.status(), 200);
    let revoked = app
        .api(Method::GET, &format!("/links/{code}/qr"))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 410, "no QR code of a dead link");
}
