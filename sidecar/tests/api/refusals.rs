//! One rule set for every way of changing a link: each change the console's edit form can
//! express is refused by the form exactly as `PATCH /api/v1/links/{code}` refuses it (the same
//! status and message), and neither stores anything.

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

fn refusals() -> Vec<Refusal> {
    let long = format!("https://a.example/{}", "a".repeat(6000));
    vec![
        Refusal {
            form: vec![("url", "ftp://files.example/a".into())],
            api: json!({"url": "ftp://files.example/a"}),
            code: "unsupported_scheme",
        },
        Refusal {
            form: vec![("url", "not a url".into())],
            api: json!({"url": "not a url"}),
            code: "invalid_url",
        },
        Refusal {
            form: vec![("url", long.clone())],
            api: json!({ "url": long }),
            code: "url_too_long",
        },
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
    let admin = new_key(&app, "ops", "admin");
    let mut browser = Browser::new(&app);
    assert_eq!(
        browser.sign_in(&admin).await.status(),
        StatusCode::SEE_OTHER
    );
    let csrf = browser.csrf().await;
    let before = app.stored().await;

    for refusal in refusals() {
        let answer = app.patch_link(&code, &refusal.api).await;
        assert_eq!(
            answer.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            refusal.api
        );
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"], refusal.code, "{body}");
        let message = body["error"]["message"].as_str().unwrap();

        let mut form = vec![("csrf", csrf.as_str())];
        form.extend(
            refusal
                .form
                .iter()
                .map(|(name, value)| (*name, value.as_str())),
        );
        let page = browser
            .post(&format!("/console/links/{code}/edit"), &form)
            .await;
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
    assert_eq!(app.stored().await, before);
    let link: Value = app.get_link(&code).await.json().await.unwrap();
    assert_eq!(link["url"], "https://a.example/kept");
}
