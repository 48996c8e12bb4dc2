//! The console's audit page renders a rules change as a person reads it: field, before and after,
//! the rules as a diff per key rather than JSON escaped inside JSON; the password and the
//! recipient's ref stay redacted as stored.

use crate::console::Browser;
use crate::helpers::{spawn_app, Backend, API_KEY};
use serde_json::json;

const PASSWORD: &str = "correct horse battery";

#[tokio::test]
async fn a_rules_change_reads_as_field_before_and_after() {
    let app = spawn_app(Backend::Sqlite).await;
    let created = app
        .create(
            json!({"url": "https://shop.example/spring", "ref": "customer-4711",
            "rules": [{"if": {"country": ["PT"]}, "then": {"url": "https://pt.example/"}}]}),
        )
        .await;
    let code = created["code"].as_str().unwrap();
    let patched = app
        .patch_link(
            code,
            &json!({"url": "https://shop.example/summer", "password": PASSWORD, "rules": [
                {"if": {"country": ["PT", "BR"]}, "then": {"url": "https://pt.example/"}},
                {"if": {}, "split": {"variants": [
                    {"weight": 1, "url": "https://a.example/"},
                    {"weight": 1, "url": "https://b.example/"}]}}]}),
        )
        .await;
    assert!(patched.status().is_success(), "{}", patched.status());

    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page("/console/audit?action=link.update").await;
    // The row as stored holds the rules as JSON text inside JSON: the page must not.
    let stored = app
        .db
        .texts("SELECT changes FROM audit_log WHERE action = 'link.update'")
        .await
        .join("\n");
    assert!(
        stored.contains("\\\""),
        "the stored rules are escaped JSON: {stored}"
    );
    assert!(
        !page.contains("\\&quot;") && !page.contains("\\\""),
        "{page}"
    );

    let row = |field: &str, before: &str, after: &str| {
        format!(
            "<tr><th scope=\"row\">{field}</th><td><span class=\"value\">{before}</span></td>\
             <td><span class=\"value\">{after}</span></td></tr>"
        )
    };
    assert!(
        page.contains(&row(
            "target",
            "https://shop.example/spring",
            "https://shop.example/summer"
        )),
        "{page}"
    );
    // The rules: the condition that gained a country and the split that was added, by path.
    assert!(
        page.contains("<code>rules[0].if.country[1]</code> added: <span class=\"value\">BR</span>"),
        "{page}"
    );
    assert!(
        page.contains("<code>rules[1]</code> added: <pre class=\"value\">"),
        "{page}"
    );
    assert!(
        page.contains("&quot;url&quot;: &quot;https://b.example/&quot;"),
        "{page}"
    );
    // Redacted as stored: the password only as changed, never its text.
    assert!(
        page.contains(
            "<tr><th scope=\"row\">password</th><td><span class=\"hint\">none</span></td>\
             <td><span class=\"value\">&lt;changed&gt;</span></td></tr>"
        ),
        "{page}"
    );
    assert!(!page.contains(PASSWORD) && !page.contains("4711"), "{page}");
}
