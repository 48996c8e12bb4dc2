//! The operator console in a real browser (Debian's `chromium`, driven through `chromedriver` over
//! WebDriver) through the real nginx: the console on the internal API server, the short URLs on
//! the public redirect server. Screenshots of every page go to `target/console-screenshots/`.
//!
//! Also, without a browser: the console answers only on the internal API server.

use fantoccini::{Client, Locator};
use serde_json::Value;
use shortlink_e2e::browser::{self, sign_in, submit};
use shortlink_e2e::{paths, System, API_KEY};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A phone's user agent: the analytics count it as a human (HeadlessChrome is a bot).
const PHONE_UA: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like \
                        Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";

#[test]
fn the_console_answers_on_the_internal_server_only() {
    let system = System::start();
    shortlink_e2e::install_tls_provider();
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let internal = format!("http://127.0.0.1:{}", system.nginx.api_port);
    let sign_in = client
        .get(format!("{internal}/console/sign-in"))
        .send()
        .unwrap();
    assert_eq!(sign_in.status(), 200);
    assert!(sign_in.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .starts_with("default-src 'self'"));
    let overview = client.get(format!("{internal}/console/")).send().unwrap();
    assert_eq!(overview.status(), 303, "not signed in: to the sign-in page");
    for path in [
        "/console/",
        "/console/sign-in",
        "/console/assets/console.css",
    ] {
        let public = system.nginx.get("s1.test", path);
        assert_eq!(public.status(), 404, "{path} on a public server");
        assert!(!public.text().unwrap().contains("shortlink console"));
    }
}

/// Answers every request with a small page: the target the short links point at.
fn target_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut buffer = [0u8; 4096];
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = stream.read(&mut buffer);
            let body = "<!doctype html><title>Landed</title><h1>Landed on the target</h1>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn screenshots_dir() -> PathBuf {
    let dir = paths::profile_dir()
        .parent()
        .expect("target/")
        .join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshots_dir().join(format!("{name}.png")), png).unwrap();
}

async fn source(client: &Client) -> String {
    client.source().await.unwrap()
}

/// Reloads `url` until its page contains `needle`.
async fn eventually_contains(client: &Client, url: &str, needle: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        client.goto(url).await.unwrap();
        if source(client).await.contains(needle) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn fill(client: &Client, selector: &str, text: &str) {
    let field = client.find(Locator::Css(selector)).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

/// The key of an admin of the new workspace `slug`, made by an operator through nginx's API server.
async fn brand_admin(system: &System, slug: &str) -> String {
    let operator = system.sidecar_cli(&["keys", "create", "--name", "ops", "--role", "operator"]);
    assert!(operator.status.success(), "{operator:?}");
    let operator = String::from_utf8(operator.stdout)
        .unwrap()
        .trim()
        .to_owned();
    let api = format!("http://127.0.0.1:{}/api/v1", system.nginx.api_port);
    shortlink_e2e::install_tls_provider();
    let client = reqwest::Client::new();
    let made = (client
        .post(format!("{api}/workspaces"))
        .bearer_auth(&operator))
    .json(&serde_json::json!({"slug": slug, "name": format!("Brand {}", slug.to_uppercase())}))
    .send()
    .await
    .unwrap();
    assert_eq!(made.status(), 201);
    let key: Value = (client.post(format!("{api}/workspaces/{slug}/keys")))
        .bearer_auth(&operator)
        .json(&serde_json::json!({"name": format!("{slug} admin"), "role": "admin"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    key["key"].as_str().expect("the new key").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_in_a_real_browser() {
    let system = tokio::task::spawn_blocking(System::start).await.unwrap();
    let console = format!("http://127.0.0.1:{}/console", system.nginx.api_port);
    let short_port = system.nginx.redirect_port;
    let target_port = target_server();
    let chrome =
        browser::chrome(PHONE_UA, "MAP s1.test 127.0.0.1, MAP target.test 127.0.0.1").await;
    let c = &chrome.client;

    // A wrong key is refused with a message.
    sign_in(c, &console, "slk_not_a_key").await;
    assert!(source(c).await.contains("not a valid API key"));
    screenshot(c, "01-sign-in-refused").await;

    // Sign in; the overview.
    sign_in(c, &console, API_KEY).await;
    assert!(source(c).await.contains("<h1>Overview</h1>"));
    screenshot(c, "02-overview").await;

    // Create a link; its page shows the short URL, the copy button and the QR code.
    c.goto(&format!("{console}/create")).await.unwrap();
    let target = format!("http://target.test:{target_port}/landing");
    fill(c, "#url", &target).await;
    fill(c, "#campaign", "browser-spring").await;
    fill(c, "#tags", "e2e, sms").await;
    screenshot(c, "03-create").await;
    submit(c, "form.stack button[type=submit]").await;
    let page = source(c).await;
    assert!(page.contains("Created."), "{page}");
    assert!(page.contains("QR code") && page.contains("<svg"));
    let short_url = c
        .find(Locator::Css("#short-url"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let code = short_url.rsplit('/').next().unwrap().to_owned();
    assert!(short_url.starts_with("http://s1.test/"), "{short_url}");
    let copy = c.find(Locator::Css("button[data-copy]")).await.unwrap();
    assert!(
        copy.is_displayed().await.unwrap(),
        "the script showed the copy button"
    );
    screenshot(c, "04-link-created").await;

    // The short URL through nginx lands on the target, and the visit reaches the chart.
    c.goto(&format!("http://s1.test:{short_port}/{code}"))
        .await
        .unwrap();
    assert!(source(c).await.contains("Landed on the target"));
    let detail_url = format!("{console}/links/{code}");
    assert!(
        eventually_contains(
            c,
            &detail_url,
            "aria-label=\"1 human clicks",
            Duration::from_secs(20)
        )
        .await,
        "the visit did not reach the chart"
    );
    screenshot(c, "05-link-detail-with-visit").await;

    // The campaign shows the recipient's first click; its CSV export too.
    c.goto(&format!("{console}/campaigns?name=browser-spring"))
        .await
        .unwrap();
    screenshot(c, "06-campaign-with-click").await;
    let export = c
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             fetch(arguments[0]).then(r => r.text()).then(done);",
            vec![Value::String(format!(
                "{console}/campaigns/recipients.csv?name=browser-spring"
            ))],
        )
        .await
        .unwrap();
    let row: Vec<&str> = export
        .as_str()
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(&row[1..4], [code.as_str(), "yes", "1"], "{export}");
    assert!(
        !row[4].is_empty() && !row[5].is_empty(),
        "first and last click: {export}"
    );

    // Links list and search.
    c.goto(&format!("{console}/links?campaign=browser-spring"))
        .await
        .unwrap();
    assert!(source(c).await.contains(&code));
    screenshot(c, "06-links").await;

    // Bulk upload of 1,000 rows, with progress, then the results.
    let mut csv = String::from("url,campaign,ref\n");
    for i in 0..1000 {
        csv.push_str(&format!(
            "https://shop.example/item/{i},bulk-browser,r{i}\n"
        ));
    }
    let upload = chrome.profile.path().join("links.csv");
    std::fs::write(&upload, csv).unwrap();
    c.goto(&format!("{console}/bulk")).await.unwrap();
    c.find(Locator::Css("#file"))
        .await
        .unwrap()
        .send_keys(&upload.display().to_string())
        .await
        .unwrap();
    screenshot(c, "07-bulk").await;
    submit(c, "form.stack button[type=submit]").await;
    // The upload's answer may come after the click returns.
    let deadline = Instant::now() + Duration::from_secs(20);
    let job = loop {
        let url = c.current_url().await.unwrap().to_string();
        if url.contains("/console/bulk/") {
            break url;
        }
        assert!(
            Instant::now() < deadline,
            "still on {url}: {}",
            source(c).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let page = source(c).await;
    assert!(page.contains("<progress"), "{page}");
    assert!(eventually_contains(c, &job, "Finished: 1000 created", Duration::from_secs(60)).await);
    screenshot(c, "08-bulk-finished").await;
    let results = c
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             fetch(arguments[0]).then(r => r.text()).then(done);",
            vec![Value::String(format!("{job}/results.csv"))],
        )
        .await
        .unwrap();
    let results = results.as_str().unwrap();
    assert_eq!(results.lines().count(), 1001);
    assert!(results.lines().skip(1).all(|line| line.contains(",201,")));

    // Campaigns and domains.
    c.goto(&format!("{console}/campaigns?name=bulk-browser"))
        .await
        .unwrap();
    assert!(source(c).await.contains("Next page"));
    screenshot(c, "09-campaign").await;
    c.goto(&format!("{console}/campaigns")).await.unwrap();
    screenshot(c, "10-campaigns").await;
    c.goto(&format!("{console}/domains")).await.unwrap();
    screenshot(c, "11-domains").await;

    // A form without its CSRF token is refused.
    c.goto(&format!("{console}/create")).await.unwrap();
    // Only the create form's token: the header's sign-out form has one too.
    c.execute(
        "document.querySelector('form.stack input[name=csrf]').remove();",
        vec![],
    )
    .await
    .unwrap();
    fill(c, "#url", "https://shop.example/no-token").await;
    submit(c, "form.stack button[type=submit]").await;
    assert!(source(c).await.contains("Error 403"));
    screenshot(c, "12-csrf-refused").await;

    // Revoke with confirmation; the short URL then answers the 410 page.
    c.goto(&format!("{console}/links/{code}/revoke"))
        .await
        .unwrap();
    screenshot(c, "13-revoke-confirm").await;
    submit(c, "button.danger").await;
    assert!(source(c).await.contains("Revoked"));
    let gone = format!("http://s1.test:{short_port}/{code}");
    assert!(
        eventually_contains(
            c,
            &gone,
            "Link no longer available",
            Duration::from_secs(10)
        )
        .await
    );
    screenshot(c, "14-revoked-410").await;

    // The overview once the campaign has been clicked (the README's picture).
    c.goto(&format!("{console}/")).await.unwrap();
    assert!(source(c).await.contains("Top campaigns"));
    screenshot(c, "15-overview-with-clicks").await;

    // At phone width.
    c.set_window_size(390, 844).await.unwrap();
    c.goto(&format!("{console}/")).await.unwrap();
    screenshot(c, "16-overview-phone").await;
    c.set_window_size(1280, 1000).await.unwrap();

    // A viewer sees no create or revoke.
    submit(c, "header form button").await;
    let viewer = system.sidecar_cli(&["keys", "create", "--name", "support", "--role", "viewer"]);
    assert!(viewer.status.success());
    let viewer = String::from_utf8(viewer.stdout).unwrap().trim().to_owned();
    sign_in(c, &console, &viewer).await;
    let overview = source(c).await;
    assert!(overview.contains("support (viewer, default)"));
    assert!(!overview.contains("/console/create"));
    c.goto(&format!("{console}/links/{code}")).await.unwrap();
    let page = source(c).await;
    assert!(!page.contains("/revoke") && !page.contains("/edit"));
    screenshot(c, "17-viewer-link").await;

    // A second workspace's key joins the session ("Add a workspace"); the switcher goes back.
    let other = brand_admin(&system, "brand-b").await;
    sign_in(c, &console, &other).await;
    let overview = source(c).await;
    assert!(
        overview.contains("brand-b admin (admin, Brand BRAND-B)"),
        "the header names the workspace as its page does: {overview}"
    );
    assert!(
        overview.contains(">Brand BRAND-B (brand-b)<"),
        "the switcher names it too, with the slug: {overview}"
    );
    screenshot(c, "18-switcher").await;
    c.goto(&format!("{console}/links")).await.unwrap();
    let links = source(c).await;
    assert!(
        !links.contains(&format!("/links/{code}")),
        "nothing of the default workspace"
    );
    c.execute(
        "document.querySelector('#switch-to').value = 'default';",
        vec![],
    )
    .await
    .unwrap();
    submit(c, "form.switcher button").await;
    assert!(source(c).await.contains("support (viewer, default)"));

    chrome.client.clone().close().await.unwrap();
    drop(chrome);
    tokio::task::spawn_blocking(move || drop(system))
        .await
        .unwrap();
}
