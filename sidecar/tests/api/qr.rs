//! `GET /api/v1/links/{code}/qr`: both renderings read back to the short URL with a QR decoder.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};

/// Decodes the one QR code in a greyscale image.
fn decode(width: usize, height: usize, dark: impl Fn(usize, usize) -> bool) -> String {
    let mut image = rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| {
        if dark(x, y) {
            0
        } else {
            255
        }
    });
    let grids = image.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code in the image");
    grids[0].decode().expect("a readable QR code").1
}

fn decode_png(bytes: &[u8]) -> (u32, String) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!(info.color_type, png::ColorType::Grayscale);
    let width = info.width as usize;
    let text = decode(width, info.height as usize, |x, y| {
        pixels[y * width + x] < 128
    });
    (info.width, text)
}

/// Reads the modules back from the SVG's geometry (`M{x} {y}h{run}...` runs in a viewBox of
/// modules) and decodes them drawn 4 pixels a module.
fn decode_svg(svg: &str) -> String {
    let view_box = svg.split("viewBox=\"0 0 ").nth(1).unwrap();
    let modules: usize = view_box.split(' ').next().unwrap().parse().unwrap();
    let path = svg
        .split(" d=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let mut dark = vec![false; modules * modules];
    for run in path.split('M').filter(|run| !run.is_empty()) {
        let (x, rest) = run.split_once(' ').unwrap();
        let (y, rest) = rest.split_once('h').unwrap();
        let length = rest.split('v').next().unwrap();
        let (x, y, length): (usize, usize, usize) = (
            x.parse().unwrap(),
            y.parse().unwrap(),
            length.parse().unwrap(),
        );
        for module in x..x + length {
            dark[y * modules + module] = true;
        }
    }
    let scale = 4;
    decode(modules * scale, modules * scale, |x, y| {
        dark[(y / scale) * modules + x / scale]
    })
}

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
