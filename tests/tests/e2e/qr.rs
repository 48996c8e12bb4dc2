//! QR codes as campaign tools fetch them: through nginx's internal API server, where the short URL
//! they encode comes from nginx's issuing list (`$shortlink_public_base`), not the sidecar's own
//! `--public-base-url`.

use shortlink_e2e::qr::{decode_png, decode_svg};
use shortlink_e2e::{http_client, NginxOptions, System, API_KEY};

#[test]
fn qr_codes_through_nginx_encode_the_issuing_domains_short_url() {
    let system = System::start_with(NginxOptions {
        public_base: Some("https://s2.test".into()),
        ..NginxOptions::default()
    });
    let (status, link) = system.api().post(
        "/links",
        &serde_json::json!({"url": "https://shop.example/qr"}),
    );
    assert_eq!(status, 201, "{link}");
    let short_url = link["short_url"].as_str().unwrap().to_owned();
    assert!(short_url.starts_with("https://s2.test/"), "{short_url}");
    let code = link["code"].as_str().unwrap();

    let client = http_client();
    let qr = format!(
        "http://127.0.0.1:{}/api/v1/links/{code}/qr",
        system.nginx.api_port
    );
    let png = client
        .get(format!("{qr}?format=png&size=300"))
        .bearer_auth(API_KEY)
        .send()
        .unwrap();
    assert_eq!(png.status(), 200);
    assert_eq!(png.headers()["content-type"], "image/png");
    let etag = png.headers()["etag"].clone();
    assert_eq!(decode_png(&png.bytes().unwrap()).1, short_url);

    let svg = client
        .get(format!("{qr}?format=svg"))
        .bearer_auth(API_KEY)
        .send()
        .unwrap();
    assert_eq!(svg.status(), 200);
    assert_eq!(decode_svg(&svg.text().unwrap()), short_url);

    // Cacheable through nginx too: the same rendering again is a 304.
    let again = client
        .get(format!("{qr}?format=png&size=300"))
        .bearer_auth(API_KEY)
        .header("if-none-match", etag)
        .send()
        .unwrap();
    assert_eq!(again.status(), 304);
}
