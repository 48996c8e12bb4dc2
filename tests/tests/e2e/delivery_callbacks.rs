//! Gateways' delivery reports as they arrive in a deployment: through nginx's internal API server
//! (`location /callbacks/`), with the callback token in the path as their only credential, not
//! to the sidecar's own port as the API suite sends them. The token reaches no log (issue 77),
//! an address walking unknown tokens is stopped, and every refusal nginx makes there is JSON.

use serde_json::{json, Value};
use shortlink_e2e::{http_client, System};

/// Kannel's `dlr-url` escapes as Kannel 1.4.5 fills them (the API suite's observed fixtures):
/// the SMSC's acceptance, then the handset's delivery.
const ACCEPTED: &str = "type=8&smsc=dbl&answer=ACK%2F&ts=1795804018";
const DELIVERED: &str = "type=1&smsc=dbl&answer=id%3AF000001+sub%3A001+dlvrd%3A001+stat%3ADELIVRD+err%3A000&ts=1795804019";
const REJECTED: &str = "type=16&smsc=dbl&answer=NACK%2F0x00000058%2FThrottling+error&ts=1795804020";

#[test]
fn kannel_reports_reach_the_funnel_through_nginx_and_a_wrong_token_stores_nothing() {
    let system = System::start();
    let api = system.api();
    let mut short_urls = Vec::new();
    for recipient in ["r-1", "r-2"] {
        let (status, link) = api.post(
            "/links",
            &json!({"url": "https://shop.example/sale", "campaign": "spring", "ref": recipient}),
        );
        assert_eq!(status, 201, "{link}");
        short_urls.push(link["short_url"].as_str().unwrap().to_owned());
    }
    let (status, made) = api.post(
        "/callback-tokens",
        &json!({"name": "kannel-e2e", "gateway": "kannel"}),
    );
    assert_eq!(status, 201, "{made}");
    let path = made["callback_path"].as_str().unwrap().to_owned();

    let client = http_client();
    let origin = format!("http://127.0.0.1:{}", system.nginx.api_port);
    let report = |path: &str, short_url: &str, mid: &str, escapes: &str| -> (u16, Value) {
        let mut url = reqwest::Url::parse(&format!("{origin}{path}?{escapes}")).unwrap();
        (url.query_pairs_mut())
            .append_pair("short_url", short_url)
            .append_pair("mid", mid);
        let answer = client
            .get(url)
            .header("user-agent", "Kannel/1.4.5")
            .send()
            .expect("reach nginx's API server");
        let status = answer.status().as_u16();
        (status, answer.json().expect("a JSON answer"))
    };

    assert_eq!(report(&path, &short_urls[0], "m-1", ACCEPTED).0, 201);
    assert_eq!(report(&path, &short_urls[0], "m-1", DELIVERED).0, 201);
    // Kannel retries a report it got no answer to: a duplicate, counted once.
    let (status, again) = report(&path, &short_urls[0], "m-1", DELIVERED);
    assert_eq!(status, 200, "{again}");
    assert_eq!(report(&path, &short_urls[1], "m-2", REJECTED).0, 201);

    // A token nobody made: 404 with a JSON body, and nothing stored.
    let forged = path.replacen("/callbacks/slc_", "/callbacks/slc_0", 1);
    let (status, refused) = report(&forged, &short_urls[1], "m-3", DELIVERED);
    assert_eq!(status, 404, "{refused}");
    assert!(refused["error"]["code"].is_string(), "{refused}");

    let (status, funnel) = api.get("/campaigns/spring/funnel");
    assert_eq!(status, 200, "{funnel}");
    let total = &funnel["total"];
    let counts: Vec<i64> = ["messages", "delivered", "rejected", "no_receipt"]
        .iter()
        .map(|key| total[key].as_i64().unwrap_or(-1))
        .collect();
    assert_eq!(counts, [2, 1, 1, 0], "{funnel}");
    let host = short_urls[0].split('/').nth(2).unwrap();
    let by_domain = funnel["by_domain"].as_array().unwrap();
    assert!(
        by_domain.iter().any(|part| part["short_domain"] == host),
        "the short URL's host names the domain: {funnel}"
    );
}

/// A Kannel callback token of the default workspace: its path (`/callbacks/slc_…/kannel`).
fn kannel_path(system: &System) -> String {
    let (status, made) = system.api().post(
        "/callback-tokens",
        &json!({"name": "kannel-e2e", "gateway": "kannel"}),
    );
    assert_eq!(status, 201, "{made}");
    made["callback_path"].as_str().unwrap().to_owned()
}

/// Status and JSON body of a GET of `path` on nginx's API server.
fn get_json(system: &System, path: &str) -> (u16, Value) {
    let url = format!("http://127.0.0.1:{}{path}", system.nginx.api_port);
    let answer = http_client().get(url).send().expect("reach nginx");
    let status = answer.status().as_u16();
    let body = answer.text().unwrap();
    let json = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{status}: not JSON: {body}"));
    (status, json)
}

#[test]
fn a_callback_while_the_sidecar_is_down_leaves_its_token_in_no_log() {
    let mut system = System::start();
    let path = kannel_path(&system);
    let token = path.split('/').nth(2).unwrap().to_owned();
    assert!(token.starts_with("slc_"), "{path}");
    system.sidecar.process.stop();

    let url = format!(
        "http://127.0.0.1:{}{path}?{DELIVERED}&mid=m-1",
        system.nginx.api_port
    );
    let answer = http_client().get(url).send().expect("reach nginx");
    let status = answer.status().as_u16();
    let body = answer.text().unwrap();

    let error_log = system.nginx.error_log();
    assert!(!error_log.contains(&token), "the error log: {error_log}");
    assert_eq!(status, 502, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    let access = std::fs::read_to_string(system.nginx.prefix.join("callbacks.log")).unwrap();
    assert!(!access.contains(&token), "the access log: {access}");
    assert!(!access.contains("DELIVRD"), "no query either: {access}");
    assert!(
        access.contains("\"GET /callbacks/-/kannel\" 502"),
        "the operator still sees the 502: {access}"
    );
}

#[test]
fn an_address_presenting_unknown_tokens_is_refused_before_any_lookup() {
    let system = System::start();
    let path = kannel_path(&system);
    let report = format!("?{DELIVERED}&mid=m-1&short_url=http://x/abc");
    for n in 0..10 {
        let forged = format!("/callbacks/slc_{n:0>64}/kannel{report}");
        let (status, body) = get_json(&system, &forged);
        assert_eq!(status, 404, "unknown token {n}: {body}");
    }
    let (status, body) = get_json(
        &system,
        &format!("/callbacks/slc_{:0>64}/kannel{report}", 10),
    );
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    // Spent for every token from that address, a real one included, until it refills.
    let (status, body) = get_json(&system, &format!("{path}{report}"));
    assert_eq!(status, 429, "{body}");
}

#[test]
fn callbacks_past_nginxs_size_limits_answer_json() {
    let system = System::start();
    let path = kannel_path(&system);
    let origin = format!("http://127.0.0.1:{}", system.nginx.api_port);
    let client = http_client();
    let json_of = |answer: reqwest::blocking::Response| -> (u16, Value) {
        let status = answer.status().as_u16();
        let body = answer.text().unwrap();
        let json = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{status}: {body}"));
        (status, json)
    };

    let long = format!("{origin}{path}?answer={}", "x".repeat(16 * 1024));
    let (status, body) = json_of(client.get(long).send().unwrap());
    assert_eq!(
        (status, &body["error"]["code"]),
        (414, &json!("uri_too_long")),
        "{body}"
    );

    let twilio = path.replace("/kannel", "/twilio");
    let big = client
        .post(format!("{origin}{twilio}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "MessageStatus=delivered&x={}",
            "y".repeat(100 * 1024)
        ))
        .send()
        .unwrap();
    let (status, body) = json_of(big);
    assert_eq!(
        (status, &body["error"]["code"]),
        (413, &json!("payload_too_large")),
        "{body}"
    );

    let headers = client
        .get(format!("{origin}{path}?{DELIVERED}"))
        .header("x-padding", "z".repeat(16 * 1024))
        .send()
        .unwrap();
    let (status, body) = json_of(headers);
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("bad_request")),
        "{body}"
    );
}
