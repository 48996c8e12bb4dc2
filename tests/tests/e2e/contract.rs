//! The API contract: schemathesis (pinned, from a private virtualenv, see `scripts/schemathesis`)
//! runs every check it has against the OpenAPI document the sidecar serves: on the sidecar itself,
//! and through nginx's internal API server, which users reach (every phase and check again, with
//! fewer generated cases: nginx passes a request on or refuses it whole, so its own answers, 413
//! and 414, are at the schema's bounds, which the coverage phase tries whatever the count). Every status an operation answers
//! must be documented, every documented parameter validated, every schema-valid request accepted
//! (no status exempted: the rules a schema cannot state are kept by the positive cases, see
//! `tests/contract/hooks.py`), and no answer may be a server error.

use shortlink_e2e::{http_client, paths, NginxOptions, System, API_KEY};
use std::process::Command;

/// Fixed, so that a failure reproduces (`st replay`) and CI does not flip; change it to explore.
const SEED: &str = "20261123";
/// Generated cases per operation on the sidecar: the depth of the contract. Every phase and check
/// runs whatever the count (the coverage phase's boundary cases among them); at 100 the run on the
/// sidecar took about 7 minutes of one core, four fifths of it schemathesis generating.
const EXAMPLES_PER_OPERATION: &str = "50";
/// Through nginx: the proxy's own answers, and that it changes none of the sidecar's. The run
/// through nginx took 7 minutes of the suite's CPU at 100 (the generator's: schemathesis is four
/// fifths of the test's CPU).
const EXAMPLES_THROUGH_NGINX: &str = "25";

fn schemathesis(origin: &str, examples: &str, operations: usize, keep_keys: &str) {
    let workspace = paths::workspace_dir();
    let output = Command::new(workspace.join("scripts/schemathesis"))
        .arg("--config-file")
        .arg(workspace.join("tests/contract/schemathesis.toml"))
        .arg("run")
        .arg(format!("{origin}/api/v1/openapi.json"))
        .args(["--header", &format!("Authorization: Bearer {API_KEY}")])
        .args(["--checks", "all"])
        .args(["--max-examples", examples])
        .args(["--seed", SEED])
        // One worker: with two threads, hypothesis (inside schemathesis) parses lambdas' source
        // concurrently and CPython 3.11's parser can fail the run with "SystemError: AST
        // constructor recursion depth mismatch" (a race in the interpreter, fixed in 3.12).
        .args(["--workers", "1"])
        // The hooks drop positive cases a schema cannot rule out (an expiry in the past among
        // them), so whether too many of an operation's examples are dropped can change with the
        // clock although the seed is fixed: hypothesis's generator check failed the run for
        // `POST /api/v1/links` on 2026-11-26 with nothing in its schema changed. That check
        // measures the generator, not the API.
        .args(["--suppress-health-check", "filter_too_much"])
        // The rules no JSON Schema can state, kept by the positive cases (see the file).
        .env(
            "SCHEMATHESIS_HOOKS",
            workspace.join("tests/contract/hooks.py"),
        )
        // Never revoked by the run: the key it authenticates with, and nginx's.
        .env("SHORTLINK_CONTRACT_KEEP_KEYS", keep_keys)
        .env("NO_COLOR", "1")
        .output()
        .expect("run scripts/schemathesis");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "schemathesis against {origin} failed:\n{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A run that tested nothing must not pass: the summary names the operations it covered.
    assert!(
        report.contains(&format!("Tested: {operations}")),
        "schemathesis did not test all {operations} operations:\n{report}"
    );
}

#[test]
fn the_openapi_document_holds_for_the_sidecar_and_through_nginx() {
    // Subscriptions the run creates are never delivered: no request leaves the machine.
    let system = System::start_on_with(
        testkit::RedisServer::start(),
        NginxOptions::default(),
        &["--webhooks", "false"],
    );
    system.create(serde_json::json!({"url": "https://example.com/contract", "campaign": "c1"}));
    let (status, document) = system.api().get("/openapi.json");
    assert_eq!(status, 200);
    let operations: usize = document["paths"]
        .as_object()
        .expect("paths")
        .values()
        .map(|item| item.as_object().expect("a path item").len())
        .sum();
    assert!(operations >= 15, "{operations} operations documented");
    let (status, keys) = system.api().get("/keys");
    assert_eq!(status, 200, "{keys}");
    let keep_keys: Vec<String> = (keys["keys"].as_array().expect("keys").iter())
        .map(|key| key["id"].to_string())
        .collect();
    assert!(!keep_keys.is_empty(), "{keys}");
    let keep_keys = keep_keys.join(",");
    schemathesis(
        &format!("http://127.0.0.1:{}", system.sidecar.port),
        EXAMPLES_PER_OPERATION,
        operations,
        &keep_keys,
    );
    schemathesis(
        &format!("http://127.0.0.1:{}", system.nginx.api_port),
        EXAMPLES_THROUGH_NGINX,
        operations,
        &keep_keys,
    );
}

#[test]
fn unknown_methods_are_answered_with_allow_on_the_api_server() {
    let system = System::start();
    let client = http_client();
    let api = format!("http://127.0.0.1:{}", system.nginx.api_port);
    // TRACE is refused by nginx itself, PUT by the sidecar behind it: both say what is allowed.
    for (method, path, allowed) in [
        ("TRACE", "/api/v1/links", "GET, HEAD, POST, PATCH, DELETE"),
        ("PUT", "/api/v1/links", "GET,HEAD,POST"),
    ] {
        let response = client
            .request(method.parse().unwrap(), format!("{api}{path}"))
            .bearer_auth(API_KEY)
            .send()
            .unwrap();
        assert_eq!(response.status(), 405, "{method} {path}");
        assert_eq!(
            response
                .headers()
                .get("allow")
                .and_then(|v| v.to_str().ok()),
            Some(allowed),
            "{method} {path}"
        );
        let body: serde_json::Value = response.json().unwrap();
        assert_eq!(
            body["error"]["code"], "method_not_allowed",
            "{method} {path}"
        );
    }
}
