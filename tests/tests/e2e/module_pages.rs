//! The pages the module writes itself (the password form and its answers, the "not yet" page, a
//! preview card, the app-link files), and the same pages from the fallback, carry headers that
//! keep them out of frames, out of type sniffing and out of `Referer`, and let them load nothing.

use reqwest::blocking::Response;
use serde_json::json;
use shortlink_e2e::{http_client, System};
use std::time::Duration;
use testkit::wait_until;

/// What every module page sends: none of them loads a script, a style or an image, and the
/// password form posts to its own URL (no `form-action`: browsers apply it to the 303 after).
const CSP: &str = "default-src 'none'; frame-ancestors 'none'";

const TARGET: &str = "https://shop.example/spring";
/// Slack's link expander: a preview fetcher (wire::agent).
const FETCHER: &str = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)";

fn assert_page_headers(what: &str, response: &Response, status: u16) {
    assert_eq!(response.status().as_u16(), status, "{what}");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    assert_eq!(
        header("content-security-policy").as_deref(),
        Some(CSP),
        "{what}"
    );
    assert_eq!(
        header("x-content-type-options").as_deref(),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        header("referrer-policy").as_deref(),
        Some("no-referrer"),
        "{what}"
    );
    // The pages' own caching rule is still there.
    assert!(header("cache-control").is_some(), "{what}");
}

fn post(system: &System, code: &str, password: &str, client: &str) -> Response {
    http_client()
        .post(format!(
            "http://127.0.0.1:{}/{code}",
            system.nginx.redirect_port
        ))
        .header("Host", "s1.test")
        .header("X-Forwarded-For", client)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("password={password}"))
        .send()
        .expect("POST the form")
}

#[test]
fn every_module_page_has_the_security_headers() {
    let system = System::start();

    let protected = system.create(json!({"url": TARGET, "password": "open sesame 1"}));
    let prompt = system.nginx.get("s1.test", &format!("/{protected}"));
    assert_page_headers("the password page", &prompt, 401);
    let wrong = post(&system, &protected, "wrong+guess", "192.0.2.60");
    assert_page_headers("a wrong password", &wrong, 401);
    // The client's attempts run out, whatever the limit is set to.
    let limited = (0..100)
        .map(|_| post(&system, &protected, "wrong+guess", "192.0.2.60"))
        .find(|response| response.status() == 429)
        .expect("the attempts run out");
    assert_page_headers("too many attempts", &limited, 429);

    let later = system.create(json!({"url": TARGET, "valid_since": "2099-01-01T00:00:00Z"}));
    let not_yet = system.nginx.get("s1.test", &format!("/{later}"));
    assert_page_headers("the \"not yet\" page", &not_yet, 403);

    let carded = system.create(json!({
        "url": TARGET,
        "preview": {"title": "Spring", "description": "Sale", "image": "https://cdn.example/s.jpg"}
    }));
    let card = system
        .nginx
        .get_with("s1.test", &format!("/{carded}"), &[("User-Agent", FETCHER)]);
    assert_page_headers("a preview card", &card, 200);

    // Redirects are not pages: they keep their own headers only.
    let plain = system.create(json!({"url": TARGET}));
    let redirect = system.nginx.get("s1.test", &format!("/{plain}"));
    assert_eq!(redirect.status().as_u16(), 302);
    assert!(redirect.headers().get("content-security-policy").is_none());

    // With Redis away the sidecar's fallback draws the same pages, with the same headers.
    let mut system = system;
    system.redis.stop();
    let fallbacks = system.nginx.counters()["fallbacks"];
    let prompt = system.nginx.get("s1.test", &format!("/{protected}"));
    assert_page_headers("the fallback's password page", &prompt, 401);
    let not_yet = system.nginx.get("s1.test", &format!("/{later}"));
    assert_page_headers("the fallback's \"not yet\" page", &not_yet, 403);
    let card = system
        .nginx
        .get_with("s1.test", &format!("/{carded}"), &[("User-Agent", FETCHER)]);
    assert_page_headers("the fallback's preview card", &card, 200);
    assert_eq!(system.nginx.counters()["fallbacks"], fallbacks + 3);
}

#[test]
fn the_app_link_files_have_the_security_headers() {
    let system = System::start();
    std::fs::write(
        system.nginx.prefix.join("apps.conf"),
        "shortlink_apple_app ABCDE12345.com.example.shop;\n",
    )
    .unwrap();
    system.nginx.reload_and_retire_old_workers();
    let path = "/.well-known/apple-app-site-association";
    // The first 200 is the one judged: until the old workers have gone, another request may
    // still reach one that has no file (404).
    let mut served = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            let response = system.nginx.get("s1.test", path);
            let found = response.status() == 200;
            served = found.then_some(response);
            found
        }),
        "the reload did not bring the file; log:\n{}",
        system.nginx.error_log()
    );
    assert_page_headers("an app-link file", &served.expect("a 200"), 200);
}
