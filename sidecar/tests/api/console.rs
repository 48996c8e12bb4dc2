//! The operator console (`/console/`) over HTTP: sign-in with good and bad keys, the session
//! cookie's attributes, CSRF tokens, roles, a revoked key ending its sessions, the CSP header,
//! and every page rendering for a signed-in admin.

use crate::helpers::*;
use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

crate::on_each_backend!(
    every_page_renders_for_an_admin,
    a_revoked_key_ends_its_sessions,
    campaigns_are_listed_by_name_a_page_at_a_time,
    campaign_totals_are_counted_in_the_background,
    the_rule_editor_saves_refuses_and_previews,
    the_card_page_saves_refuses_and_draws_the_card,
    the_create_form_takes_a_cap_and_a_password,
);

/// The composer: the counter for the typed template, a sample of messages from pasted
/// recipients (the API's dry run), a refused template shown again; nothing issued.
#[tokio::test]
async fn the_composer_counts_and_samples_without_issuing() {
    let app = spawn_app(Backend::Sqlite).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page("/console/compose").await;
    assert!(page.contains("id=\"compose-counter\""), "{page}");
    let csrf = browser.csrf().await;
    let template = "Hi {{name}}, \u{20ac}5 off: {{link}}";
    let recipients =
        "phone,name,url\n0612345678,Ann,https://shop.example/\n06,Bo,https://shop.example/";
    let form = [
        ("csrf", csrf.as_str()),
        ("template", template),
        ("recipients", recipients),
        ("country", "FR"),
        ("budget", "1"),
    ];
    let count = browser.post("/console/compose/count", &form).await;
    let count: serde_json::Value = count.json().await.unwrap();
    // "Hi Ann, €5 off: " (16) and the link (https://s.example/ and 7 characters: 25).
    assert_eq!(
        count["text"],
        "41 characters · GSM-7 · 42 units · 1 segment"
    );
    let sample = browser.post("/console/compose", &form).await;
    assert_eq!(sample.status(), StatusCode::OK);
    let sample = sample.text().await.unwrap();
    assert!(
        sample.contains("Hi Ann, \u{20ac}5 off: https://s.example/xxxxxxx"),
        "{sample}"
    );
    assert!(sample.contains("+33612345678"));
    assert!(sample.contains("invalid phone number"));
    assert!(sample.contains("1 segments for 1 messages"), "{sample}");
    let bad = [
        ("csrf", csrf.as_str()),
        ("template", "Hi {{name}"),
        ("recipients", recipients),
    ];
    let refused = browser.post("/console/compose", &bad).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.text().await.unwrap().contains("is not closed"));
    let count: serde_json::Value = browser
        .post("/console/compose/count", &bad)
        .await
        .json()
        .await
        .unwrap();
    assert!(count["text"].as_str().unwrap().contains("is not closed"));
    assert_eq!(app.stored().await.links, 0);
}

/// The create form's cap and password: stored as the API stores them; a refused form never
/// shows the password again.
async fn the_create_form_takes_a_cap_and_a_password(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let csrf = browser.csrf().await;
    let form = |cap: &'static str| {
        vec![
            ("url", "https://t.example/private"),
            ("code", "private-one"),
            ("max_visits", cap),
            ("password", "hush hush"),
        ]
    };
    let mut bad = form("0");
    bad.push(("csrf", &csrf));
    let refused = browser.post("/console/create", &bad).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let text = refused.text().await.unwrap();
    assert!(text.contains("max_visits must be 1 to"), "{text}");
    assert!(
        !text.contains("hush hush"),
        "the password is not shown again"
    );

    let mut good = form("3");
    good.push(("csrf", &csrf));
    let created = browser.post("/console/create", &good).await;
    assert!(created.status().is_success() || created.status().is_redirection());
    let link: serde_json::Value = app.get_link("private-one").await.json().await.unwrap();
    assert_eq!(link["max_visits"], 3);
    assert_eq!(link["password_protected"], true);
    let page = browser.page("/console/links/private-one").await;
    assert!(
        page.contains("Visit cap") && page.contains("protected"),
        "{page}"
    );
}

/// The preview card of a link (issue 35): the form refuses what the API refuses (storing
/// nothing), draws the unsaved card escaped, saves it and removes it; only this page may load
/// the card's image from elsewhere.
async fn the_card_page_saves_refuses_and_draws_the_card(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app.create_code("https://t.example/own").await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let csrf = browser.csrf().await;
    let page = browser.page(&format!("/console/links/{code}")).await;
    assert!(page.contains(&format!("/console/links/{code}/card")));
    let path = format!("/console/links/{code}/card");
    let response = browser.get(&path).await;
    let policy = response.headers()[CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("img-src 'self' https:"), "{policy}");
    let overview = browser.get("/console/").await;
    assert!(!overview.headers()[CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .contains("img-src"));

    let before = app.stored().await;
    let form = |image: &'static str| {
        vec![
            ("title", "Spring <sale>"),
            ("description", "20% & more"),
            ("image", image),
            ("site_name", "Shop"),
        ]
    };
    let mut bad = form("http://cdn.example/a.png");
    bad.push(("csrf", &csrf));
    let refused = browser.post(&path, &bad).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let text = refused.text().await.unwrap();
    assert!(
        text.contains("preview.image must be an https URL"),
        "{text}"
    );
    assert_eq!(app.stored().await, before);

    let mut good = form("https://cdn.example/a.png");
    good.push(("csrf", &csrf));
    let previewed = browser.post(&format!("{path}/preview"), &good).await;
    assert_eq!(previewed.status(), StatusCode::OK);
    let text = previewed.text().await.unwrap();
    assert!(
        text.contains("Spring &lt;sale&gt;") && !text.contains("<sale>"),
        "{text}"
    );
    assert!(text.contains("src=\"https://cdn.example/a.png\""), "{text}");
    assert_eq!(app.stored().await, before, "a preview stores nothing");

    let saved = browser.post(&path, &good).await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let link: serde_json::Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["preview"]["title"], "Spring <sale>");
    assert!(browser
        .page(&format!("{path}?saved=1"))
        .await
        .contains("Saved."));

    let removed = browser
        .post(&path, &[("csrf", &csrf), ("remove", "1")])
        .await;
    assert_eq!(removed.status(), StatusCode::SEE_OTHER);
    let link: serde_json::Value = app.get_link(&code).await.json().await.unwrap();
    assert!(link.get("preview").is_none(), "{link}");
}

/// The rule editor of a link (issue 34): saves rules written in the API's form, shows the API's
/// error for bad ones (storing nothing), and answers "what would this phone get" for the text
/// in the editor before it is saved.
async fn the_rule_editor_saves_refuses_and_previews(backend: Backend) {
    let app = spawn_app(backend).await;
    let code = app.create_code("https://t.example/own").await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let csrf = browser.csrf().await;
    let page = browser.page(&format!("/console/links/{code}")).await;
    assert!(page.contains(&format!("/console/links/{code}/rules")));
    browser.page(&format!("/console/links/{code}/rules")).await;

    let bad = r#"[{"if": {"ip": ["10.0.0.1/8"]}, "then": {"url": "https://t.example/x"}}]"#;
    let before = app.stored().await;
    let refused = browser
        .post(
            &format!("/console/links/{code}/rules"),
            &[("csrf", &csrf), ("rules", bad)],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let text = refused.text().await.unwrap();
    assert!(text.contains("rules[0].if.ip[0]: invalid CIDR"), "{text}");
    assert!(text.contains("10.0.0.1/8"), "the editor keeps the text");
    assert_eq!(app.stored().await, before);

    // Previewed before saving: the editor's rules answer, the stored link has none.
    let rules = r#"[{"if": {"language": ["pt"]}, "then": {"url": "https://t.example/pt"}}]"#;
    let previewed = browser
        .post(
            &format!("/console/links/{code}/rules/preview"),
            &[("csrf", &csrf), ("rules", rules), ("language", "pt-PT")],
        )
        .await;
    assert_eq!(previewed.status(), StatusCode::OK);
    let text = previewed.text().await.unwrap();
    assert!(text.contains("https://t.example/pt"), "{text}");
    assert_eq!(app.stored().await, before);

    // Every field of the phone is read: its User-Agent, country, address, query and time.
    let phone_rules = r#"[
        {"if": {"device": ["ios"]}, "then": {"url": "https://t.example/ios"}},
        {"if": {"country": ["AU"]}, "then": {"url": "https://t.example/au"}},
        {"if": {"ip": ["192.0.2.0/24"]}, "then": {"url": "https://t.example/net"}},
        {"if": {"query": [{"name": "src", "value": "sms"}]}, "then": {"url": "https://t.example/sms"}},
        {"if": {"weekly": {"days": ["sat"], "hours": [9], "zone": "Asia/Tokyo"}},
         "then": {"url": "https://t.example/saturday"}}
    ]"#;
    let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    let phones: [(&str, &str, &str); 7] = [
        ("user_agent", iphone, "https://t.example/ios"),
        ("country", "au", "https://t.example/au"),
        ("ip", "192.0.2.8", "https://t.example/net"),
        ("query", "src=sms", "https://t.example/sms"),
        // Saturday 09:30 in Tokyo is Saturday 00:30 UTC; Friday 09:30 UTC is not.
        ("time", "2026-11-28T00:30", "https://t.example/saturday"),
        ("time", "2026-11-27T09:30", "https://t.example/own"),
        ("ip", "198.51.100.7", "https://t.example/own"),
    ];
    // A phone without a time of its own taps on a Friday: "now" would be a Saturday 09:00 in
    // Tokyo one hour a week, and the weekly rule would answer.
    let friday = "2026-11-27T09:30";
    for (field, value, expected) in phones {
        let mut form = vec![
            ("csrf", csrf.as_str()),
            ("rules", phone_rules),
            (field, value),
        ];
        if field != "time" {
            form.push(("time", friday));
        }
        let previewed = browser
            .post(&format!("/console/links/{code}/rules/preview"), &form)
            .await;
        assert_eq!(previewed.status(), StatusCode::OK, "{field}={value}");
        let text = previewed.text().await.unwrap();
        assert!(
            text.contains(&format!("<dt>Location</dt><dd>{expected}</dd>")),
            "{field}={value}: {text}"
        );
    }

    let saved = browser
        .post(
            &format!("/console/links/{code}/rules"),
            &[("csrf", &csrf), ("rules", rules)],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let link: serde_json::Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["rules"][0]["then"]["url"], "https://t.example/pt");
    let page = browser
        .page(&format!("/console/links/{code}/rules?saved=1"))
        .await;
    assert!(page.contains("Saved."));
}

/// A browser's share of the work: cookies kept by name, redirects not followed.
pub(crate) struct Browser<'a> {
    app: &'a TestApp,
    pub(crate) cookies: BTreeMap<String, String>,
}

impl<'a> Browser<'a> {
    pub(crate) fn new(app: &'a TestApp) -> Self {
        Browser {
            app,
            cookies: BTreeMap::new(),
        }
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.app.client.request(method, self.app.url(path));
        if !self.cookies.is_empty() {
            let header: Vec<String> = self
                .cookies
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            request = request.header(COOKIE, header.join("; "));
        }
        request
    }

    pub(crate) async fn send(&mut self, request: reqwest::RequestBuilder) -> reqwest::Response {
        let response = request.send().await.unwrap();
        for value in response.headers().get_all(SET_COOKIE) {
            let value = value.to_str().unwrap();
            let (pair, _) = value.split_once(';').unwrap_or((value, ""));
            let (name, cookie) = pair.split_once('=').unwrap();
            if cookie.is_empty() {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), cookie.to_owned());
            }
        }
        response
    }

    pub(crate) async fn get(&mut self, path: &str) -> reqwest::Response {
        let request = self.request(Method::GET, path);
        self.send(request).await
    }

    /// GET that must answer 200; returns the page.
    pub(crate) async fn page(&mut self, path: &str) -> String {
        let response = self.get(path).await;
        assert_eq!(response.status(), StatusCode::OK, "GET {path}");
        response.text().await.unwrap()
    }

    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        let request = self.request(Method::POST, path).form(form);
        self.send(request).await
    }

    /// Signs in with `key`; returns the sign-in answer.
    pub(crate) async fn sign_in(&mut self, key: &str) -> reqwest::Response {
        let page = self.page("/console/sign-in").await;
        let csrf = csrf_of(&page);
        self.post("/console/sign-in", &[("key", key), ("csrf", &csrf)])
            .await
    }

    /// Uploads `csv` as the bulk upload form does, with the session's `csrf`; the answer.
    pub(crate) async fn upload_bulk(&mut self, csrf: &str, csv: &str) -> reqwest::Response {
        let form = reqwest::multipart::Form::new()
            .text("csrf", csrf.to_owned())
            .part(
                "file",
                reqwest::multipart::Part::bytes(csv.as_bytes().to_vec()).file_name("links.csv"),
            );
        let request = self.request(Method::POST, "/console/bulk").multipart(form);
        self.send(request).await
    }

    /// Runs a console import of `csv` (a CSV source on `s.old.example`) in this session; the
    /// finished job's page and its JSON report.
    pub(crate) async fn import_csv(
        &mut self,
        csrf: &str,
        csv: &str,
        dry_run: bool,
    ) -> (String, Value) {
        let mut form = reqwest::multipart::Form::new()
            .text("csrf", csrf.to_owned())
            .text("from", "csv")
            .text("source_domain", "s.old.example")
            .part(
                "file",
                reqwest::multipart::Part::bytes(csv.as_bytes().to_vec()).file_name("old.csv"),
            );
        if dry_run {
            form = form.text("dry_run", "1");
        }
        let request = self
            .request(Method::POST, "/console/import")
            .multipart(form);
        let started = self.send(request).await;
        assert_eq!(started.status(), StatusCode::SEE_OTHER);
        let job = location(&started).to_owned();
        let mut page = String::new();
        for _ in 0..200 {
            page = self.page(&job).await;
            if page.contains("Finished.") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(page.contains("Finished."), "{page}");
        let report = self.page(&format!("{job}/report.json")).await;
        (page, serde_json::from_str(&report).unwrap())
    }

    /// The CSRF token of the signed-in session, from the overview's sign-out form.
    pub(crate) async fn csrf(&mut self) -> String {
        csrf_of(&self.page("/console/").await)
    }
}

pub(crate) fn csrf_of(page: &str) -> String {
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .expect("a CSRF field")
        .split('"')
        .next()
        .unwrap()
        .to_owned()
}

pub(crate) fn location(response: &reqwest::Response) -> &str {
    response.headers()[LOCATION].to_str().unwrap()
}

/// Creates a key with the CLI beside the running app. Awaited, never a blocking wait: the app
/// runs on the test's runtime, and a test on a current-thread runtime blocked in the command
/// would stop it mid-transaction, holding SQLite's write lock while the command waits for it
/// ("database is locked" after the whole --db-timeout; issue 82).
pub(crate) async fn new_key(app: &TestApp, name: &str, role: &str) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .args(["keys", "create", "--name", name, "--role", role])
        .args(["--database-url", &app.database_url])
        // The app under test shares the SQLite file and its jobs write beside the command: an
        // operator's command may wait longer than a request.
        .args(["--db-timeout", "30s"])
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("run shortlink-sidecar");
    assert!(
        output.status.success(),
        "keys create: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn revoke_key(app: &TestApp, name: &str) {
    let list = Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .args(["keys", "list", "--database-url", &app.database_url])
        .output()
        .unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    let id = list
        .lines()
        .find(|line| line.contains(name))
        .and_then(|line| line.split_whitespace().next())
        .expect("the key is listed")
        .to_owned();
    let output = Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .args(["keys", "revoke", &id, "--database-url", &app.database_url])
        .output()
        .unwrap();
    assert!(output.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_takes_a_valid_key_and_refuses_others() {
    let app = spawn_app(Backend::Sqlite).await;
    let mut browser = Browser::new(&app);

    let anonymous = browser.get("/console/").await;
    assert_eq!(anonymous.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&anonymous), "/console/sign-in");

    for wrong in ["slk_wrong", "", &format!("{API_KEY}x")] {
        let refused = browser.sign_in(wrong).await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{wrong:?}");
        assert!(refused
            .text()
            .await
            .unwrap()
            .contains("not a valid API key"));
        assert!(!browser.cookies.contains_key("shortlink_console"));
    }
    let resolve = new_key(&app, "fallback", "resolve").await;
    let refused = browser.sign_in(&resolve).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);

    let signed_in = browser.sign_in(API_KEY).await;
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&signed_in), "/console/");
    let cookie = signed_in
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|v| v.starts_with("shortlink_console="))
        .unwrap()
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console/", "Max-Age="] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let overview = browser.page("/console/").await;
    assert!(overview.contains("Overview"));

    // Behind TLS (nginx says so), the cookie is Secure too.
    let mut tls = Browser::new(&app);
    let page = tls
        .send(
            tls.request(Method::GET, "/console/sign-in")
                .header("X-Forwarded-Proto", "https"),
        )
        .await
        .text()
        .await
        .unwrap();
    let request = tls
        .request(Method::POST, "/console/sign-in")
        .header("X-Forwarded-Proto", "https")
        .form(&[("key", API_KEY), ("csrf", &csrf_of(&page))]);
    let response = tls.send(request).await;
    let secure = response.headers().get_all(SET_COOKIE).iter().any(|v| {
        v.to_str().unwrap().starts_with("shortlink_console=")
            && v.to_str().unwrap().contains("; Secure")
    });
    assert!(secure);

    // Signing out ends the session.
    let csrf = browser.csrf().await;
    let out = browser.post("/console/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        browser.get("/console/").await.status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_without_their_csrf_token_are_refused() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://a.example/").await;
    let mut browser = Browser::new(&app);

    // The sign-in form has a token of its own.
    browser.page("/console/sign-in").await;
    let no_token = browser.post("/console/sign-in", &[("key", API_KEY)]).await;
    assert_eq!(no_token.status(), StatusCode::FORBIDDEN);
    assert!(!browser.cookies.contains_key("shortlink_console"));

    assert_eq!(
        browser.sign_in(API_KEY).await.status(),
        StatusCode::SEE_OTHER
    );
    let before = app.stored().await;
    for token in [None, Some("wrong"), Some("")] {
        let mut create = vec![("url", "https://b.example/")];
        let mut revoke = vec![];
        if let Some(token) = token {
            create.push(("csrf", token));
            revoke.push(("csrf", token));
        }
        let response = browser.post("/console/create", &create).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{token:?}");
        assert!(response.text().await.unwrap().contains("security token"));
        let response = browser
            .post(&format!("/console/links/{code}/revoke"), &revoke)
            .await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let response = browser
            .post(&format!("/console/links/{code}/edit"), &revoke)
            .await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let response = browser.post("/console/sign-out", &revoke).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
    }
    assert_eq!(app.stored().await, before, "nothing changed");
    let link: serde_json::Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["state"], "live");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_see_no_create_or_revoke_and_cannot_post_them() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://a.example/").await;
    let viewer = new_key(&app, "support desk", "viewer").await;
    let mut browser = Browser::new(&app);
    assert_eq!(
        browser.sign_in(&viewer).await.status(),
        StatusCode::SEE_OTHER
    );

    let overview = browser.page("/console/").await;
    assert!(!overview.contains("/console/create"));
    assert!(!overview.contains("/console/bulk"));
    assert!(!overview.contains("/console/compose"));
    let detail = browser.page(&format!("/console/links/{code}")).await;
    assert!(!detail.contains("/revoke"));
    assert!(!detail.contains("/edit"));
    let list = browser.page("/console/links").await;
    assert!(list.contains(&code));
    assert!(!list.contains("Revoke"));

    let csrf = browser.csrf().await;
    let before = app.stored().await;
    for path in ["/console/create", "/console/bulk", "/console/compose"] {
        assert_eq!(
            browser.get(path).await.status(),
            StatusCode::FORBIDDEN,
            "{path}"
        );
    }
    let create = browser
        .post(
            "/console/create",
            &[("csrf", &csrf), ("url", "https://b.example/")],
        )
        .await;
    assert_eq!(create.status(), StatusCode::FORBIDDEN);
    let revoke_page = browser.get(&format!("/console/links/{code}/revoke")).await;
    assert_eq!(revoke_page.status(), StatusCode::FORBIDDEN);
    let revoke = browser
        .post(&format!("/console/links/{code}/revoke"), &[("csrf", &csrf)])
        .await;
    assert_eq!(revoke.status(), StatusCode::FORBIDDEN);
    let edit = browser
        .post(
            &format!("/console/links/{code}/edit"),
            &[("csrf", &csrf), ("url", "https://c.example/")],
        )
        .await;
    assert_eq!(edit.status(), StatusCode::FORBIDDEN);
    // The composer's counter is the composer's too.
    let count = browser
        .post(
            "/console/compose/count",
            &[("csrf", &csrf), ("template", "{{link}}")],
        )
        .await;
    assert_eq!(count.status(), StatusCode::FORBIDDEN);
    assert_eq!(app.stored().await, before);
}

async fn a_revoked_key_ends_its_sessions(backend: Backend) {
    let app = spawn_app(backend).await;
    let key = new_key(&app, "ops laptop", "issuer").await;
    let mut browser = Browser::new(&app);
    assert_eq!(browser.sign_in(&key).await.status(), StatusCode::SEE_OTHER);
    browser.page("/console/").await;
    revoke_key(&app, "ops laptop");
    let after = browser.get("/console/").await;
    assert_eq!(after.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&after), "/console/sign-in");
    let again = browser.sign_in(&key).await;
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED);
    assert!(again.text().await.unwrap().contains("revoked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_answer_has_a_strict_csp() {
    let app = spawn_app(Backend::Sqlite).await;
    let mut browser = Browser::new(&app);
    for path in [
        "/console/sign-in",
        "/console/",
        "/console/assets/console.css",
    ] {
        let response = browser.get(path).await;
        let csp = response.headers()[CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.starts_with("default-src 'self'"), "{path}: {csp}");
    }
    browser.sign_in(API_KEY).await;
    for path in ["/console/", "/console/links/nosuchcode"] {
        let response = browser.get(path).await;
        assert!(
            response.headers().contains_key(CONTENT_SECURITY_POLICY),
            "{path}"
        );
    }
    // No inline script or style anywhere: the CSP would block them.
    let page = browser.page("/console/").await;
    assert!(!page.contains("<script>") && !page.contains("style="));
    // The API is untouched: still JSON behind a bearer key, and the console is not in its document.
    let openapi = crate::workspaces::send_json(app.api(Method::GET, "/openapi.json")).await;
    assert!(!openapi["paths"]
        .as_object()
        .unwrap()
        .keys()
        .any(|path| path.contains("console")));
}

async fn every_page_renders_for_an_admin(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut browser = Browser::new(&app);
    assert_eq!(
        browser.sign_in(API_KEY).await.status(),
        StatusCode::SEE_OTHER
    );
    let csrf = browser.csrf().await;

    // Create: then the link's page with its short URL, copy button and QR code.
    browser.page("/console/create").await;
    let created = browser
        .post(
            "/console/create",
            &[
                ("csrf", &csrf),
                ("url", "https://shop.example/spring"),
                ("code", "spring-sale"),
                ("redirect", "301"),
                ("campaign", "spring 2026"),
                ("tags", "sms, de"),
                ("expires_at", "2099-01-01T10:00"),
            ],
        )
        .await;
    assert_eq!(created.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&created), "/console/links/spring-sale?created=1");
    let detail = browser.page("/console/links/spring-sale?created=1").await;
    assert!(detail.contains(&format!("{PUBLIC_BASE}/spring-sale")));
    assert!(detail.contains("data-copy=\"short-url\""));
    assert!(detail.contains("<svg") && detail.contains("QR code"));
    let link: serde_json::Value = app.get_link("spring-sale").await.json().await.unwrap();
    assert_eq!(link["redirect"], 301);
    assert_eq!(link["campaign"], "spring 2026");
    assert_eq!(link["tags"], json!(["sms", "de"]));
    assert_eq!(link["expires_at"], "2099-01-01T10:00:00Z");

    // A refused create shows the problem on the form.
    let refused = browser
        .post(
            "/console/create",
            &[("csrf", &csrf), ("url", "ftp://x.example/")],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.text().await.unwrap().contains("role=\"alert\""));

    for path in [
        "/console/",
        "/console/links",
        "/console/links?q=spring-sale",
        "/console/links?q=https%3A%2F%2Fshop.example%2Fspring",
        "/console/links?campaign=spring+2026&state=live",
        "/console/links?tag=sms",
        "/console/links/spring-sale?interval=hour",
        "/console/links/spring-sale/revoke",
        "/console/links/spring-sale/card",
        "/console/campaigns",
        "/console/campaigns?name=spring+2026",
        "/console/campaigns/totals?name=spring+2026",
        "/console/domains",
        "/console/bulk",
        "/console/compose",
    ] {
        let page = browser.page(path).await;
        assert!(page.starts_with("<!DOCTYPE html>"), "{path}");
        if path.contains("spring") && !path.contains("interval") && !path.contains("totals") {
            assert!(page.contains("spring-sale"), "{path}");
        }
    }
    let png = browser
        .get("/console/links/spring-sale/qr?format=png")
        .await;
    assert_eq!(png.status(), StatusCode::OK);
    assert_eq!(png.headers()["content-type"], "image/png");
    let csv = browser
        .page("/console/campaigns/recipients.csv?name=spring+2026")
        .await;
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(csv.contains("spring-sale,no,0"));

    // Edit the target, then revoke after the confirmation page.
    let edited = browser
        .post(
            "/console/links/spring-sale/edit",
            &[("csrf", &csrf), ("url", "https://shop.example/summer")],
        )
        .await;
    assert_eq!(edited.status(), StatusCode::SEE_OTHER);
    let link: serde_json::Value = app.get_link("spring-sale").await.json().await.unwrap();
    assert_eq!(link["url"], "https://shop.example/summer");
    let revoked = browser
        .post("/console/links/spring-sale/revoke", &[("csrf", &csrf)])
        .await;
    assert_eq!(revoked.status(), StatusCode::SEE_OTHER);
    let link: serde_json::Value = app.get_link("spring-sale").await.json().await.unwrap();
    assert_eq!(link["state"], "revoked");

    // Bulk: three rows, one refused; the results name each line.
    let csv = "url,code,campaign,tags\nhttps://a.example/1,,bulk,x;y\nnot a url,,bulk,\nhttps://a.example/3,bulk-three,bulk,\n";
    let uploaded = browser.upload_bulk(&csrf, csv).await;
    assert_eq!(uploaded.status(), StatusCode::SEE_OTHER);
    let job = location(&uploaded).to_owned();
    let mut finished = None;
    for _ in 0..100 {
        let page = browser.page(&job).await;
        if page.contains("Finished") {
            finished = Some(page);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let finished = finished.expect("the upload finished");
    // The refused row on the page itself, with its line and why (issue 80).
    let refused = finished
        .split("<table class=\"refused\">")
        .nth(1)
        .expect(&finished);
    assert!(
        refused.contains("<td class=\"num\">2</td><td class=\"num\">422</td>"),
        "{refused}"
    );
    let results = browser.page(&format!("{job}/results.csv")).await;
    let lines: Vec<&str> = results.lines().collect();
    assert_eq!(lines.len(), 4, "{results}");
    assert!(lines[1].starts_with("1,201,"), "{results}");
    assert!(lines[2].starts_with("2,422,,,"), "{results}");
    assert!(lines[3].starts_with(&format!("3,201,bulk-three,{PUBLIC_BASE}/bulk-three")));
    let link: serde_json::Value = app.get_link("bulk-three").await.json().await.unwrap();
    assert_eq!(link["campaign"], "bulk");
}

async fn campaigns_are_listed_by_name_a_page_at_a_time(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut items: Vec<serde_json::Value> = (0..55)
        .map(|i| json!({"url": format!("https://a.example/{i}"), "campaign": format!("c{i:02}")}))
        .collect();
    items.push(json!({"url": "https://a.example/again", "campaign": "c00"}));
    items.push(json!({"url": "https://a.example/none"}));
    let batch = app.post_batch(&items).await;
    assert_eq!(batch.status(), StatusCode::OK);
    let results = batch.text().await.unwrap();
    assert_eq!(results.matches("\"status\":201").count(), 57, "{results}");
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;

    let first = browser.page("/console/campaigns").await;
    let listed = |page: &str| -> Vec<String> {
        page.split("/console/campaigns?name=")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap().to_owned())
            .collect()
    };
    let expected: Vec<String> = (0..50).map(|i| format!("c{i:02}")).collect();
    assert_eq!(listed(&first), expected, "{first}");
    assert!(first.contains("/console/campaigns?after=c49"));
    let second = browser.page("/console/campaigns?after=c49").await;
    let expected: Vec<String> = (50..55).map(|i| format!("c{i:02}")).collect();
    assert_eq!(listed(&second), expected);
    assert!(!second.contains("Next page"));
}

/// Polls a totals page until its count is in (the first view only starts it).
async fn counted_totals(browser: &mut Browser<'_>, path: &str) -> reqwest::Response {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let response = browser.get(path).await;
        if !response.headers().contains_key("refresh") {
            return response;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} never counted"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn campaign_totals_are_counted_in_the_background(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut codes = Vec::new();
    for i in 0..3 {
        let link = app
            .create(json!({"url": format!("https://a.example/{i}"), "campaign": "autumn"}))
            .await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    assert_eq!(app.delete_link(&codes[0]).await.status(), StatusCode::OK);
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;

    // The first view never waits for the count: it says so and reloads itself.
    let first = browser.get("/console/campaigns/totals?name=autumn").await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["refresh"], "1");
    assert!(first.text().await.unwrap().contains("Counting"));

    let counted = counted_totals(&mut browser, "/console/campaigns/totals?name=autumn").await;
    assert_eq!(counted.status(), StatusCode::OK);
    let page = counted.text().await.unwrap();
    for card in [
        "Links<b>3</b>",
        "Live<b>2</b>",
        "Revoked<b>1</b>",
        "Visits<b>0</b>",
    ] {
        assert!(page.contains(card), "{card} in {page}");
    }
    assert!(page.contains("Counted "), "{page}");

    // A campaign nobody used is a 404 once counted, like every unknown console page.
    let unknown = counted_totals(&mut browser, "/console/campaigns/totals?name=nope").await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}

/// Click webhooks (issue 36): the page refuses what the API refuses (a private address, storing
/// nothing), adds a subscription and shows its secret only by its end, replays and removes it.
#[tokio::test]
async fn the_webhooks_page_adds_refuses_replays_and_removes() {
    let app = spawn_app(Backend::Sqlite).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let csrf = browser.csrf().await;
    assert!(browser
        .page("/console/")
        .await
        .contains("/console/webhooks"));
    let secret = "console-webhook-secret-1234";
    let form = |url: &'static str| {
        vec![
            ("url", url),
            ("secret", secret),
            ("campaigns", "spring, autumn"),
            ("batch_size", "50"),
        ]
    };
    let mut private = form("http://127.0.0.1:9/hook");
    private.push(("csrf", &csrf));
    let refused = browser.post("/console/webhooks", &private).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let text = refused.text().await.unwrap();
    assert!(text.contains("not a public address"), "{text}");
    assert!(text.contains("No webhook yet."), "nothing stored");

    let mut public = form("https://hooks.example/in");
    public.push(("csrf", &csrf));
    let added = browser.post("/console/webhooks", &public).await;
    assert_eq!(added.status(), StatusCode::SEE_OTHER);
    let detail = location(&added).to_owned();
    let page = browser.page(&detail).await;
    assert!(page.contains("…1234") && !page.contains(secret), "{page}");
    assert!(page.contains("campaigns spring, autumn"), "{page}");
    let listed = browser.page("/console/webhooks").await;
    assert!(listed.contains("https://hooks.example/in"), "{listed}");

    let replay = format!("{detail}/replay");
    let bad = browser
        .post(&replay, &[("csrf", &csrf), ("from", "yesterday")])
        .await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let good = browser
        .post(
            &replay,
            &[("csrf", &csrf), ("from", "2026-01-01T00:00:00Z")],
        )
        .await;
    assert_eq!(good.status(), StatusCode::SEE_OTHER);
    let removed = browser
        .post(&format!("{detail}/delete"), &[("csrf", &csrf)])
        .await;
    assert_eq!(removed.status(), StatusCode::SEE_OTHER);
    assert!(browser
        .page("/console/webhooks")
        .await
        .contains("No webhook yet."));
}

/// Import from another shortener (issue 40): admins only; a CSV export uploaded, imported by the
/// command's code in a task, the report on the page (a collision with one of ours named) and as
/// JSON; codes kept as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_import_another_shorteners_links() {
    let app = spawn_app(Backend::Sqlite).await;
    app.create(json!({"url": "https://ours.example/", "code": "taken-one"}))
        .await;
    let issuer = new_key(&app, "issuer", "issuer").await;
    let mut browser = Browser::new(&app);
    browser.sign_in(&issuer).await;
    assert_eq!(
        browser.get("/console/import").await.status(),
        StatusCode::FORBIDDEN
    );

    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let form = browser.page("/console/import").await;
    assert!(form.contains("Import from another shortener"));
    let csrf = browser.csrf().await;
    let csv = "code,url,domain,visits\nq.1,https://old.example/q,s.old.example,4\ntaken-one,https://old.example/t,s.old.example,0\n";
    let (page, report) = browser.import_csv(&csrf, csv, false).await;
    assert!(page.contains("1 imported"), "{page}");
    assert!(
        page.contains("taken-one") && page.contains("collision"),
        "{page}"
    );
    assert_eq!(report["imported"], 1);
    assert_eq!(report["skipped"]["collision"], 1);
    let link: serde_json::Value = app.get_link("q.1").await.json().await.unwrap();
    assert_eq!(link["url"], "https://old.example/q");
    assert_eq!(link["visit_count"], 4);
    let ours: serde_json::Value = app.get_link("taken-one").await.json().await.unwrap();
    assert_eq!(ours["url"], "https://ours.example/");
}

/// A service inside the deployment's network: counts its requests and the API keys it was sent,
/// answers a page that must never reach the browser.
struct Internal {
    url: String,
    hits: Arc<AtomicUsize>,
    keys: Arc<AtomicUsize>,
    _server: tokio::task::JoinHandle<()>,
}

const INTERNAL_PAGE: &str = "<h1>internal admin: secret-token-51</h1>";

impl Internal {
    /// `redirect_to`: answer every request with a 302 there instead.
    async fn start(redirect_to: Option<String>) -> Self {
        let hits = Arc::new(AtomicUsize::new(0));
        let keys = Arc::new(AtomicUsize::new(0));
        let (h, k) = (Arc::clone(&hits), Arc::clone(&keys));
        let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
            h.fetch_add(1, Ordering::SeqCst);
            if headers.contains_key("x-api-key") {
                k.fetch_add(1, Ordering::SeqCst);
            }
            let redirect_to = redirect_to.clone();
            async move {
                match redirect_to {
                    Some(to) => (StatusCode::FOUND, [(LOCATION, to)], String::new()),
                    None => (
                        StatusCode::OK,
                        [(reqwest::header::CONTENT_TYPE, "text/html".to_owned())],
                        INTERNAL_PAGE.to_owned(),
                    ),
                }
            }
        });
        let (address, server) = serve_router(app).await;
        Internal {
            url: format!("http://{address}"),
            hits,
            keys,
            _server: server,
        }
    }
}

/// Starts a Kutt import of `source_url` from the console; returns the form's status and the
/// page the browser ends on (the error, or the progress page once the job stopped).
async fn console_import(browser: &mut Browser<'_>, source_url: &str) -> (StatusCode, String) {
    let csrf = browser.csrf().await;
    let form = reqwest::multipart::Form::new()
        .text("csrf", csrf)
        .text("from", "kutt")
        .text("source_url", source_url.to_owned())
        .text("source_key", "kutt-key");
    let request = browser
        .request(Method::POST, "/console/import")
        .multipart(form);
    let started = browser.send(request).await;
    if started.status() != StatusCode::SEE_OTHER {
        return (started.status(), started.text().await.unwrap());
    }
    let job = location(&started).to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let page = browser.page(&job).await;
        if page.contains("Stopped:") || page.contains("Finished.") {
            return (StatusCode::SEE_OTHER, page);
        }
        assert!(std::time::Instant::now() < deadline, "{page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SSRF through the console's import (issue 51): a source URL on loopback, or named
/// `localhost`, is refused and never fetched; with `--import-allow-private`, a source that
/// redirects elsewhere is not followed (its key never sent on) and an answer's body is never
/// shown on the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_import_reaches_no_internal_service() {
    let internal = Internal::start(None).await;
    let redirector = Internal::start(Some(format!("{}/api/v2/links", internal.url))).await;
    let port = internal.url.rsplit(':').next().unwrap().to_owned();
    let app = spawn_app(Backend::Sqlite).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    for url in [
        internal.url.clone(),
        format!("http://localhost:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        redirector.url.clone(),
    ] {
        let (status, page) = console_import(&mut browser, &url).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {page}");
        assert!(page.contains("not a public address"), "{url}: {page}");
    }
    assert_eq!(internal.hits.load(Ordering::SeqCst), 0);
    assert_eq!(redirector.hits.load(Ordering::SeqCst), 0);

    let open = spawn_app_with(Backend::Sqlite, &["--import-allow-private"]).await;
    let mut browser = Browser::new(&open);
    browser.sign_in(API_KEY).await;
    let (_, page) = console_import(&mut browser, &redirector.url).await;
    assert!(page.contains("redirects are not followed"), "{page}");
    assert_eq!(
        redirector.keys.load(Ordering::SeqCst),
        1,
        "the source was asked"
    );
    assert_eq!(internal.hits.load(Ordering::SeqCst), 0, "not followed");
    let (_, page) = console_import(&mut browser, &internal.url).await;
    assert!(page.contains("Stopped:"), "{page}");
    assert_eq!(internal.hits.load(Ordering::SeqCst), 1, "allowed: asked");
    assert!(
        !page.contains("secret-token-51"),
        "the answer quoted: {page}"
    );
}
