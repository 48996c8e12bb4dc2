//! Gateways' delivery reports as they arrive in a deployment: through nginx's internal API server
//! (`location /callbacks/`), with the callback token in the path as their only credential, not
//! to the sidecar's own port as the API suite sends them. Forged reports through that path drain
//! nothing (issue 77), and a receipts body of 100,000 lines passes nginx whole. The token reaches
//! no log, an address walking unknown tokens is stopped, and every refusal nginx makes there is
//! JSON.

use serde_json::{json, Value};
use shortlink_e2e::{http_client, NginxOptions, System};
use std::time::Duration;
use testkit::wait_until;

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

#[test]
fn a_hundred_thousand_receipts_pass_nginx_and_are_all_stored() {
    let system = System::start();
    let api = system.api();
    let (status, link) = api.post(
        "/links",
        &json!({"url": "https://shop.example/bulk", "campaign": "bulk"}),
    );
    assert_eq!(status, 201, "{link}");
    let code = link["code"].as_str().unwrap();
    let body: String = (0..100_000)
        .map(|i| {
            format!(
                "{}\n",
                json!({"code": code, "message_id": format!("m-{i}"), "state": "delivered"})
            )
        })
        .collect();
    assert!(body.len() > 64 << 10, "more than nginx's usual 64k");
    let (status, answers) = api.post_ndjson("/deliveries", body);
    assert_eq!((status, answers.len()), (200, 100_000));
    assert!(answers.iter().all(|answer| answer["status"] == 201));
    let (_, funnel) = api.get("/campaigns/bulk/funnel");
    assert_eq!(funnel["total"]["delivered"], 100_000, "{funnel}");
}

/// Kannel reports through nginx on a workspace's callback token, each naming a `short_url` and
/// a `mid` of the caller's choosing: status and answer.
fn kannel_report(system: &System, path: &str, short_url: &str, mid: &str, kind: u8) -> u16 {
    let origin = format!("http://127.0.0.1:{}", system.nginx.api_port);
    let mut url =
        reqwest::Url::parse(&format!("{origin}{path}?type={kind}&smsc=carrierX")).unwrap();
    (url.query_pairs_mut())
        .append_pair("short_url", short_url)
        .append_pair("mid", mid);
    let answer = http_client()
        .get(url)
        .send()
        .expect("reach nginx's API server");
    answer.status().as_u16()
}

#[test]
fn forged_kannel_reports_through_nginx_drain_no_domain() {
    const LIST: &str = "http://s1.test http://s2.test";
    let mut system = System::start_with(NginxOptions {
        pool: Some(vec!["s1.test".into(), "s2.test".into()]),
        public_base: Some(LIST.to_owned()),
        ..NginxOptions::default()
    });
    system.restart_sidecar_watching_domains(&[]);
    let api = system.api();
    let items: String = (0..120)
        .map(|i| {
            format!(
                "{}\n",
                json!({"url": format!("https://shop.example/{i}"), "campaign": "spring"})
            )
        })
        .collect();
    let (status, results) = api.post_ndjson("/links/batch", items);
    assert_eq!(status, 200);
    let urls: Vec<String> = (results.iter())
        .map(|result| result["link"]["short_url"].as_str().unwrap().to_owned())
        .collect();
    let on = |host: &str| -> Vec<String> {
        urls.iter()
            .filter(|url| url.contains(&format!("//{host}/")))
            .cloned()
            .collect()
    };
    let (s1, s2) = (on("s1.test"), on("s2.test"));
    assert!(s1.len() > 30 && s2.len() > 40, "{urls:?}");
    let (status, made) = api.post(
        "/callback-tokens",
        &json!({"name": "kannel-forged", "gateway": "kannel"}),
    );
    assert_eq!(status, 201, "{made}");
    let path = made["callback_path"].as_str().unwrap().to_owned();

    // 30 rejections of ONE link (an s2 link's code under s1) under made-up message ids, 30
    // deliveries of distinct links on s2: as a real block would look, but of one recipient.
    let one_link = s2[0].replace("s2.test", "s1.test");
    for i in 0..30 {
        let report = |url: &str, mid: String, kind| kannel_report(&system, &path, url, &mid, kind);
        assert_eq!(report(&one_link, format!("fake-{i}"), 16), 201);
        assert_eq!(report(&s2[i + 1], format!("ok-{i}"), 1), 201);
    }
    // A host outside the workspace: refused, nothing stored.
    let code = one_link.rsplit('/').next().unwrap();
    let evil = format!("http://evil.example/{code}");
    assert_eq!(kannel_report(&system, &path, &evil, "evil", 16), 422);

    // A dead route on another carrier, sent after: once noted, the judgement has counted every
    // forged report before it, and no domain is drained.
    let dead: String = (s1[1..].iter().chain(&s2[31..]))
        .map(|url| format!("{}\n", json!({"short_url": url, "message_id": format!("z-{url}"), "state": "rejected", "carrier": "Z"})))
        .collect();
    let (status, answers) = api.post_ndjson("/deliveries", dead);
    assert_eq!(status, 200);
    assert!(
        answers.iter().all(|answer| answer["status"] == 201),
        "{answers:?}"
    );
    let noted = || {
        let (_, s1) = api.get("/domains/s1.test");
        s1["receipt_notes"]
            .as_array()
            .is_some_and(|notes| !notes.is_empty())
    };
    assert!(
        wait_until(Duration::from_secs(30), noted),
        "{}",
        system.sidecar.process.log_text()
    );
    for domain in ["s1.test", "s2.test"] {
        let (_, status) = api.get(&format!("/domains/{domain}"));
        assert_eq!(status["drain"]["mode"], "active", "{status}");
    }
    // The funnel names the workspace's domains only.
    let (_, funnel) = api.get("/campaigns/spring/funnel");
    let by_domain = funnel["by_domain"].as_array().unwrap();
    assert!(
        (by_domain.iter()).all(|part| (part["short_domain"].as_str())
            .is_none_or(|domain| ["s1.test", "s2.test"].contains(&domain))),
        "{funnel}"
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
