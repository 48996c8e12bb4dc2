//! `GET /metrics`: the Prometheus page after traffic, on the operator's metrics listener only
//! (never the API's), accepted by `promtool check metrics`. The recorder is one per process (tests share it): counts are checked
//! as "at least".

use crate::helpers::*;
use reqwest::Method;
use serde_json::json;
use shortlink_e2e::prometheus::samples;

#[tokio::test]
async fn metrics_cover_requests_creates_errors_and_the_pipeline() {
    let app = spawn_app(Backend::Sqlite).await;
    app.create_code("https://t.example/one").await;
    let response = app
        .post_batch(&json!([{"url": "https://t.example/a"}, {"url": "javascript:x"}]))
        .await;
    assert_eq!(response.status(), 200);
    response.text().await.unwrap();
    let bad = app.post_link(&json!({"url": "ftp://t.example/"})).await;
    assert_eq!(bad.status(), 422);

    let response = reqwest::get(app.metrics_url()).await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    let s = samples(&text);
    let at_least = |key: &str, n: f64| {
        let value = s
            .get(key)
            .copied()
            .unwrap_or_else(|| panic!("no {key} in\n{text}"));
        assert!(value >= n, "{key} = {value}\n{text}");
    };
    at_least("shortlink_links_created_total{via=\"single\"}", 1.0);
    at_least("shortlink_links_created_total{via=\"batch\"}", 1.0);
    at_least(
        "shortlink_api_errors_total{code=\"unsupported_scheme\"}",
        2.0,
    );
    at_least(
        "shortlink_http_requests_total{route=\"/api/v1/links\",method=\"POST\",status=\"201\"}",
        1.0,
    );
    at_least(
        "shortlink_http_request_duration_seconds_count{route=\"/api/v1/links\",method=\"POST\"}",
        2.0,
    );
    at_least("shortlink_write_duration_seconds_count{store=\"sql\"}", 1.0);
    at_least(
        "shortlink_write_duration_seconds_count{store=\"redis\"}",
        1.0,
    );
    at_least("shortlink_projection_complete", 0.0);
    at_least("shortlink_events_stream_length", 0.0);
    at_least("shortlink_redis_up", 1.0);
    at_least(
        "shortlink_db_pool_connections{pool=\"writer\",state=\"open\"}",
        1.0,
    );
    // Route templates, never raw paths: no code shows up as a label.
    assert!(!text.contains("t.example"), "{text}");
    promtool_check(&text).await;

    let response = app.api(Method::GET, "/metrics").send().await.unwrap();
    assert_eq!(response.status(), 404, "the API has no /api/v1/metrics");
    // The API's listener has none either, with any key: the page names every workspace's domains.
    for key in [None, Some(API_KEY)] {
        let mut request = app.client.get(app.url("/metrics"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 404);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found", "{body}");
    }
    // And the metrics listener is nothing but the page.
    let api_there = app.metrics_url().replace("/metrics", "/api/v1/links");
    let response = app.client.get(api_there).bearer_auth(API_KEY).send().await;
    assert_eq!(response.unwrap().status(), 404);
}

/// A visit stored by the consumer records its rollup delay, from the visit's time on the edge.
#[tokio::test]
async fn a_stored_visit_records_its_rollup_delay() {
    let app = spawn_app(Backend::Sqlite).await;
    let code = app.create_code("https://t.example/delay").await;
    // Redirected 3 seconds before the consumer gets to it.
    let t = (chrono::Utc::now().timestamp_millis() - 3_000).to_string();
    let mut xadd = redis::cmd("XADD");
    xadd.arg(shortlink_wire::keys::EVENT_STREAM).arg("*");
    for (k, v) in [
        ("c", code.as_str()),
        ("t", &t),
        ("s", "302"),
        ("ip", "192.0.2.1"),
        ("ua", "curl/8.5.0"),
    ] {
        xadd.arg(k).arg(v);
    }
    let _: String = xadd.query_async(&mut app.redis().await).await.unwrap();
    let config = app.config(&["--consumer-name", "delay"]);
    let store = app.visit_store().await;
    let mut consumer = shortlink_visits::consumer(&config, store).unwrap();
    while consumer.step().await.unwrap() > 0 {}

    let text = app.metrics_page().await;
    let s = samples(&text);
    let count = s.get("shortlink_rollup_delay_seconds_count").copied();
    assert!(count.is_some_and(|n| n >= 1.0), "{text}");
    let sum = s.get("shortlink_rollup_delay_seconds_sum").copied();
    assert!(sum.is_some_and(|n| n >= 3.0), "{text}");
    assert!(
        text.contains("shortlink_rollup_delay_seconds_bucket{le=\"3600\"}"),
        "its own buckets, up to an hour: {text}"
    );
    promtool_check(&text).await;
}

/// `promtool check metrics` (Debian's `prometheus` package, installed by scripts/setup).
async fn promtool_check(text: &str) {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run promtool (scripts/setup installs Debian's prometheus package)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).await.unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
