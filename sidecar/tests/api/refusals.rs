//! One rule set for every way of making or changing a link: each link the console's create form
//! can express is refused by the form exactly as `POST /api/v1/links` refuses it, each change of
//! its edit form as `PATCH /api/v1/links/{code}` does (the same status and message), and neither
//! stores anything.

use crate::console::{new_key, Browser};
use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{json, Value};

/// One refused change: the form's fields and the same change as the API's body.
struct Refusal {
    form: Vec<(&'static str, String)>,
    api: Value,
    code: &'static str,
}

impl Refusal {
    /// The form as the console posts it, with the session's `csrf` token.
    fn posted<'a>(&'a self, csrf: &'a str) -> Vec<(&'a str, &'a str)> {
        let fields = (self.form.iter()).map(|(name, value)| (*name, value.as_str()));
        std::iter::once(("csrf", csrf)).chain(fields).collect()
    }

    /// A link, or a change, to `url` alone.
    fn url(url: &str, code: &'static str) -> Refusal {
        Refusal {
            form: vec![("url", url.into())],
            api: json!({ "url": url }),
            code,
        }
    }

    /// A create of a link to `https://a.example/` with `field` set: as the form spells it
    /// (`form`) and as the API's body does (`api`).
    fn create_with(field: &'static str, form: &str, api: Value, code: &'static str) -> Refusal {
        let url = "https://a.example/";
        let mut body = json!({ "url": url });
        body[field] = api;
        Refusal {
            form: vec![("url", url.into()), (field, form.into())],
            api: body,
            code,
        }
    }
}

fn edit_refusals() -> Vec<Refusal> {
    let long = format!("https://a.example/{}", "a".repeat(6000));
    vec![
        Refusal::url("ftp://files.example/a", "unsupported_scheme"),
        Refusal::url("not a url", "invalid_url"),
        Refusal::url(&long, "url_too_long"),
        Refusal {
            form: vec![("expires_at", "2020-01-01T10:00".into())],
            api: json!({"expires_at": "2020-01-01T10:00:00Z"}),
            code: "invalid_expiry",
        },
        Refusal {
            form: vec![("url", "".into()), ("expires_at", "".into())],
            api: json!({}),
            code: "empty_patch",
        },
    ]
}

fn create_refusals() -> Vec<Refusal> {
    let campaign = "é".repeat(101);
    vec![
        Refusal::url("javascript:alert(1)", "unsupported_scheme"),
        Refusal::create_with("code", "ab", json!("ab"), "invalid_code"),
        Refusal::create_with("redirect", "303", json!(303), "invalid_redirect"),
        Refusal::create_with("campaign", &campaign, json!(campaign), "invalid_campaign"),
        Refusal::create_with("max_visits", "0", json!(0), "invalid_max_visits"),
        Refusal::create_with("password", "ab", json!("ab"), "invalid_password"),
        Refusal::create_with(
            "expires_at",
            "2020-01-01T10:00",
            json!("2020-01-01T10:00:00Z"),
            "invalid_expiry",
        ),
        // A nested short link: the built-in shorteners' list, which every sidecar has.
        Refusal::url("https://bit.ly/3abc", "unsafe_target"),
    ]
}

/// The API's answer to a refused request: its code checked, its message returned.
async fn api_message(answer: reqwest::Response, refusal: &Refusal) -> String {
    assert_eq!(
        answer.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refusal.api
    );
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], refusal.code, "{body}");
    body["error"]["message"].as_str().unwrap().to_owned()
}

/// The console's answer to the same refusal: 422 and the API's message.
async fn form_says(page: reqwest::Response, refusal: &Refusal, message: &str) {
    assert_eq!(
        page.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refusal.code
    );
    let page = page.text().await.unwrap();
    assert!(
        page.contains(&escaped(message)),
        "the form says the API's {message:?}: {page}"
    );
}

/// A browser signed in to the console with a new admin key, and its session's CSRF token.
async fn signed_in_admin(app: &TestApp) -> (Browser<'_>, String) {
    let admin = new_key(app, "ops", "admin").await;
    let mut browser = Browser::new(app);
    assert_eq!(
        browser.sign_in(&admin).await.status(),
        StatusCode::SEE_OTHER
    );
    let csrf = browser.csrf().await;
    (browser, csrf)
}

/// The text maud writes for `text`.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[tokio::test]
async fn the_edit_form_refuses_what_the_api_refuses() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://a.example/kept").await;
    let (mut browser, csrf) = signed_in_admin(&app).await;
    let before = app.stored().await;

    for refusal in edit_refusals() {
        let message = api_message(app.patch_link(&code, &refusal.api).await, &refusal).await;
        let form = refusal.posted(&csrf);
        let page = browser
            .post(&format!("/console/links/{code}/edit"), &form)
            .await;
        form_says(page, &refusal, &message).await;
    }
    assert_eq!(app.stored().await, before);
    let link: Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["url"], "https://a.example/kept");
}

#[tokio::test]
async fn the_create_form_refuses_what_the_api_refuses() {
    let app = spawn_app(Backend::Sqlite).await;
    let (mut browser, csrf) = signed_in_admin(&app).await;
    let before = app.stored().await;

    for refusal in create_refusals() {
        let message = api_message(app.post_link(&refusal.api).await, &refusal).await;
        let form = refusal.posted(&csrf);
        let page = browser.post("/console/create", &form).await;
        form_says(page, &refusal, &message).await;
    }
    assert_eq!(app.stored().await, before);
}

/// A key's name follows one rule (the keys service's) whichever way the key is made: each name
/// the API refuses, the workspace page's key form refuses with the same message, and neither
/// makes a key; a name with spaces around it is kept without them both ways.
#[tokio::test]
async fn the_key_form_refuses_a_name_as_the_api_does() {
    let app = spawn_app(Backend::Sqlite).await;
    let (mut browser, csrf) = signed_in_admin(&app).await;
    let keys = || async {
        let answer = app.api(reqwest::Method::GET, "/keys").send().await.unwrap();
        let body: Value = answer.json().await.unwrap();
        body["keys"].as_array().unwrap().len()
    };
    let before = keys().await;

    for name in [
        String::new(),
        "   ".into(),
        "a\u{1}b".into(),
        "n".repeat(201),
    ] {
        let refusal = Refusal {
            form: vec![("name", name.clone())],
            api: json!({"name": name, "role": "viewer"}),
            code: "invalid_name",
        };
        let answer = app.api(reqwest::Method::POST, "/keys").json(&refusal.api);
        let message = api_message(answer.send().await.unwrap(), &refusal).await;
        let form = [("csrf", csrf.as_str()), ("name", &name), ("role", "viewer")];
        let page = browser.post("/console/workspace/keys", &form).await;
        form_says(page, &refusal, &message).await;
    }
    assert_eq!(keys().await, before);

    let answer = app.api(reqwest::Method::POST, "/keys");
    let made = answer.json(&json!({"name": "  spaced  ", "role": "viewer"}));
    let made: Value = made.send().await.unwrap().json().await.unwrap();
    assert_eq!(made["name"], "spaced", "{made}");
    let form = [
        ("csrf", csrf.as_str()),
        ("name", "  paged  "),
        ("role", "viewer"),
    ];
    let page = browser.post("/console/workspace/keys", &form).await;
    assert_eq!(page.status(), StatusCode::OK);
    let answer = app.api(reqwest::Method::GET, "/keys").send().await.unwrap();
    let listed: Value = answer.json().await.unwrap();
    let names: Vec<&str> = (listed["keys"].as_array().unwrap().iter())
        .filter_map(|key| key["name"].as_str())
        .collect();
    assert!(
        names.contains(&"paged") && names.contains(&"spaced"),
        "{names:?}"
    );
}
