//! The audit log through nginx's API server (issue 53): a change's row carries the request id
//! nginx gave the request (`$request_id`, echoed to the client) and the client's address
//! (`X-Real-IP`, believed because nginx sends the proxy secret); a client's own `X-Request-Id`
//! is replaced by nginx's, so a row always names what nginx's access log can show.

use serde_json::{json, Value};
use shortlink_e2e::{http_client, NginxOptions, System, API_KEY};
use testkit::RedisServer;

#[test]
fn rows_name_nginx_request_id_and_the_client_address() {
    let system = System::start_on_with(
        RedisServer::start(),
        NginxOptions::default(),
        &["--webhook-allow-private", "--webhooks", "false"],
    );
    let api = format!("http://127.0.0.1:{}/api/v1", system.nginx.api_port);
    let client = http_client();
    let response = client
        .post(format!("{api}/webhooks"))
        .bearer_auth(API_KEY)
        .header("x-request-id", "chosen-by-the-client")
        .json(
            &json!({"url": "http://127.0.0.1:9/hook", "secret": "a-webhook-secret-of-some-length"}),
        )
        .send()
        .unwrap();
    assert_eq!(response.status(), 201);
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(request_id.len(), 32, "nginx's $request_id: {request_id}");
    assert!(
        request_id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{request_id}"
    );

    let page: Value = client
        .get(format!("{api}/audit?action=webhook.create"))
        .bearer_auth(API_KEY)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let row = &page["rows"][0];
    assert_eq!(row["request_id"], request_id.as_str(), "{page}");
    assert_eq!(row["client_addr"], "127.0.0.1", "{page}");
    assert_eq!(row["actor_kind"], "key");
}
