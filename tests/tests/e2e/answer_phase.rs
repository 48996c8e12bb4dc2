//! `shortlink_answer_phase` (issue 82): the templates' redirect locations answer at the end of
//! their rewrite phase, where `return` does; `content`, the module's default, answers after the
//! access phase and so keeps an access module of the location (ngx-module/README.md).

use serde_json::json;
use shortlink_e2e::{NginxOptions, System};

/// The system with `deny all;` added to the templates' code location (`location /` of
/// redirect.conf.template), which answers in `phase`, and the template copy it reads.
fn denied_code_location(phase: &str) -> (System, tempfile::TempDir) {
    let conf = testkit::temp_dir();
    shortlink_e2e::templates_with(
        conf.path(),
        "# Only this host's workspace's codes answer here",
        "deny all;",
    );
    let template = conf.path().join("redirect.conf.template");
    let text = std::fs::read_to_string(&template).unwrap();
    // The code location is the template's last `shortlink on` location.
    let setting = "shortlink_answer_phase rewrite;";
    let at = text
        .rfind(setting)
        .expect("the templates answer in the rewrite phase");
    let text = format!(
        "{}shortlink_answer_phase {phase};{}",
        &text[..at],
        &text[at + setting.len()..]
    );
    std::fs::write(&template, text).unwrap();
    let system = System::start_with(NginxOptions {
        conf_dir: Some(conf.path().to_owned()),
        ..NginxOptions::default()
    });
    (system, conf)
}

#[test]
fn the_content_phase_keeps_an_access_module_of_the_location() {
    let (system, _conf) = denied_code_location("content");
    let code = system.create(json!({"url": "https://example.com/guarded"}));
    let response = system.nginx.get("s1.test", &format!("/{code}"));
    assert_eq!(response.status(), 403, "deny all ran before the module");
    assert_eq!(system.nginx.counters()["redirects"], 0);
}

#[test]
fn the_rewrite_phase_answers_before_the_access_phase_and_after_the_rewrites() {
    // What the README warns of: an access module of the location is skipped.
    let (system, _conf) = denied_code_location("rewrite");
    let code = system.create(json!({"url": "https://example.com/fast"}));
    let response = system.nginx.get("s1.test", &format!("/{code}"));
    assert_eq!(response.status(), 302);
    assert_eq!(
        response.headers()["location"].to_str().unwrap(),
        "https://example.com/fast"
    );
    // The location's own `if ... rewrite ... last` (the warning page's report button) ran
    // first and moved the request to the report location: the module left it alone.
    let before = system.nginx.counters();
    let report = system.nginx.get("s1.test", &format!("/{code}?report"));
    assert_ne!(report.status(), 302, "the report path is no redirect");
    let after = system.nginx.counters();
    assert_eq!(
        after["requests"], before["requests"],
        "the module was asked"
    );
}
