//! The gateway boundary (issue 77): a workspace's gateway reads its password from its own
//! directory only, and the answer to another workspace's file name is the answer to a missing
//! one; a gateway URL reaches the networks the operator lists and never the deployment's own
//! listeners; a job's record says what shortlink understood, never the gateway's body; a
//! hand-off without an answer is `unknown`, sent once and never again; and nothing is handed
//! over while the job's callback base does not answer.

use super::gateway::{
    compose_and_send, finished, gateway_app, password_file, put_gateway, put_gateway_body,
    recipient, spring_compose_url, PASSWORD_FILE,
};
use super::stand_in::{accepted, reply, Reply, StandIn};
use super::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::kannel::{SEND_PASSWORD, SEND_USER};

fn silent(_: &str) -> Reply {
    None
}

/// PUT /api/v1/gateway as `key`: status and body, as text.
async fn put_as(app: &TestApp, key: &str, body: &Value) -> (u16, String) {
    let answer = with_key(app, key, Method::PUT, "/gateway")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.text().await.unwrap())
}

fn gateway(url: &str, file: &str, callback_base: &str) -> Value {
    json!({"url": url, "username": SEND_USER, "password_file": file, "from": "SHOP",
        "callback_base": callback_base, "per_second": 200, "attempts": 3, "backoff_ms": 20})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_workspaces_password_file_is_never_reached_nor_told_apart() {
    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    for slug in ["brand-a", "brand-b"] {
        create_workspace(&app, &operator, slug).await;
    }
    password_file(
        secrets.path(),
        "brand-a",
        "brand-a-kannel",
        "A-SECRET-PASSWORD",
    );
    password_file(secrets.path(), "brand-b", "brand-b-kannel", "b-password");
    let b_admin = workspace_key(&app, &operator, "brand-b", "admin").await;
    let stand_in = StandIn::start(accepted);

    // A's file name, and a name no workspace has: one answer, byte for byte.
    let named = |file: &'static str| gateway(&stand_in.url, file, &app.address);
    let theirs = put_as(&app, &b_admin, &named("brand-a-kannel")).await;
    let nobodys = put_as(&app, &b_admin, &named("nobodys-file")).await;
    assert_eq!(theirs.0, 422, "{}", theirs.1);
    assert_eq!(theirs, nobodys);
    assert!(theirs.1.contains("invalid_password_file"), "{}", theirs.1);
    assert!(
        !theirs.1.contains(secrets.path().to_str().unwrap()),
        "{}",
        theirs.1
    );
    // The default workspace's file is another workspace's too.
    assert_eq!(put_as(&app, &b_admin, &named(PASSWORD_FILE)).await, nobodys);

    // B's own file: B's sends carry B's password, never A's.
    let (status, body) = put_as(
        &app,
        &b_admin,
        &gateway(&stand_in.url, "brand-b-kannel", &app.address),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut().extend_pairs([
        ("template", "{{link}}"),
        ("url_template", "https://shop.example/"),
        ("send", "true"),
    ]);
    let answer = (app.client.post(url).bearer_auth(&b_admin))
        .header(
            "X-Shortlink-Public-Base",
            "https://s.example [brand-b] https://s.b.example",
        )
        .header("content-type", "application/x-ndjson")
        .body(format!("{}\n", recipient(1, "x")))
        .send()
        .await
        .unwrap();
    let text = answer.text().await.unwrap();
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let job = summary["send_job"].as_str().expect(&text);
    let path = format!("/gateway/jobs/{job}");
    let done = || async {
        let job = with_key(&app, &b_admin, Method::GET, &path)
            .send()
            .await
            .unwrap();
        !job.json::<Value>().await.unwrap()["finished_at"].is_null()
    };
    assert!(eventually(Duration::from_secs(30), done).await);
    let targets = stand_in.targets();
    assert_eq!(targets.len(), 1, "{targets:?}");
    assert!(targets[0].contains("password=b-password"), "{targets:?}");
    assert!(
        !targets.iter().any(|t| t.contains("A-SECRET")),
        "{targets:?}"
    );
}

#[tokio::test]
async fn gateway_urls_never_reach_the_deployments_listeners() {
    let secrets = testkit::temp_dir();
    password_file(secrets.path(), "default", PASSWORD_FILE, SEND_PASSWORD);
    // A listener of the operator's the sidecar cannot know of: named by --gateway-deny.
    let status_page = TcpListener::bind("127.0.0.1:0").unwrap();
    let status_addr = status_page.local_addr().unwrap().to_string();
    let dir = secrets.path().to_str().unwrap();
    let flags = [
        "--gateway-secrets-dir",
        dir,
        "--gateway-allow-networks",
        "127.0.0.0/8,fd00::/8",
        "--gateway-deny",
        &status_addr,
    ];
    let app = spawn_app_with(Backend::Sqlite, &flags).await;
    let sidecar = app.address.trim_start_matches("http://").to_owned();
    let metrics = app.metrics_address.trim_start_matches("http://").to_owned();
    let redis = app.redis.url().trim_start_matches("redis://").to_owned();
    let redis = redis.split('/').next().unwrap().to_owned();
    let refused = |host: &str| {
        format!(
            "{host} is not an address gateways may reach (the operator's --gateway-allow-networks)"
        )
    };
    for (target, host) in [
        (sidecar.clone(), "127.0.0.1"),
        (metrics, "127.0.0.1"),
        (redis, "127.0.0.1"),
        (status_addr.clone(), "127.0.0.1"),
        // Names are judged by the addresses they stand for.
        (sidecar.replace("127.0.0.1", "localhost"), "localhost"),
        (
            sidecar.replace("127.0.0.1", "[::ffff:127.0.0.1]"),
            "[::ffff:7f00:1]",
        ),
        // A private network the operator did not list.
        ("10.1.2.3:13013".to_owned(), "10.1.2.3"),
        ("192.168.1.1".to_owned(), "192.168.1.1"),
    ] {
        let url = format!("http://{target}/cgi-bin/sendsms");
        let (status, body) = put_gateway_url(&app, &url).await;
        assert_eq!(status, 422, "{url}: {body}");
        assert_eq!(body["error"]["code"], "invalid_url", "{url}");
        assert_eq!(body["error"]["message"], refused(host), "{url}");
    }
    // Listed networks, on another port: allowed.
    for url in [
        "http://127.0.0.1:13013/cgi-bin/sendsms",
        "http://[fd00::5]:13013/",
    ] {
        assert_eq!(put_gateway_url(&app, url).await.0, 200, "{url}");
    }
}

async fn put_gateway_url(app: &TestApp, url: &str) -> (u16, Value) {
    put_gateway_body(app, &gateway(url, PASSWORD_FILE, &app.address)).await
}

/// Per recipient (the number's last digit): 1 accepted with a body that says more, 2 refused
/// with a secret-looking body, 3 queued.
fn talkative(target: &str) -> Reply {
    let to = target.split("to=").nth(1)?.split('&').next()?;
    Some(match to.chars().last()? {
        '2' => ("403 Forbidden", "SECRET-BODY of the operator's status page"),
        '3' => ("202 Accepted", "3: Queued for later delivery SECRET-BODY"),
        _ => ("202 Accepted", "0: Accepted for delivery SECRET-BODY"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_record_never_quotes_the_gateway() {
    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), Backend::Sqlite).await;
    let stand_in = StandIn::start(talkative);
    assert_eq!(put_gateway(&app, &stand_in.url, 3).await.0, 200);
    let recipients: Vec<Value> = (1..=3).map(|i| recipient(i, "sale")).collect();
    let (_, job) = compose_and_send(&app, PUBLIC_BASE, &recipients).await;
    let job = finished(&app, &job).await;
    assert!(!job.to_string().contains("SECRET"), "{job}");
    let seen = |i: usize| {
        let r = &job["recipients"][i - 1];
        (
            r["outcome"].clone(),
            r["http_status"].clone(),
            r["gateway_code"].clone(),
        )
    };
    assert_eq!(seen(1), (json!("accepted"), json!(202), json!(0)), "{job}");
    assert_eq!(
        seen(2),
        (json!("refused"), json!(403), Value::Null),
        "{job}"
    );
    assert_eq!(seen(3), (json!("queued"), json!(202), json!(3)), "{job}");
    let stored = (app.db)
        .texts("SELECT COALESCE(answer, '') FROM gateway_sends")
        .await;
    assert!(!stored.concat().contains("SECRET"), "{stored:?}");
    // Queued is taken: the funnel's submitted message, as accepted.
    let funnel = app.get_json("/campaigns/spring/funnel").await;
    assert_eq!(funnel["total"]["submitted"], 2, "{funnel}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_handoff_is_unknown_sent_once_and_never_again() {
    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), Backend::Sqlite).await;
    let stand_in = StandIn::start(silent);
    let mut body = gateway(&stand_in.url, PASSWORD_FILE, &app.address);
    body["timeout_ms"] = json!(300);
    assert_eq!(put_gateway_body(&app, &body).await.0, 200);
    let recipients = [recipient(1, "sale")];
    let compose = |key: &'static str| {
        let app = &app;
        let recipients = &recipients;
        async move {
            let answer = (app
                .client
                .post(spring_compose_url(app))
                .bearer_auth(API_KEY))
            .header("X-Shortlink-Public-Base", PUBLIC_BASE)
            .header("Idempotency-Key", key)
            .header("content-type", "application/x-ndjson")
            .body(format!("{}\n", recipients[0]))
            .send()
            .await
            .unwrap();
            let text = answer.text().await.unwrap();
            let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
            summary["send_job"].as_str().unwrap().to_owned()
        }
    };
    let job = finished(&app, &compose("unknown-once").await).await;
    let record = &job["recipients"][0];
    assert_eq!(record["outcome"], "unknown", "{job}");
    assert_eq!(record["attempts"], 1, "{job}");
    assert!(record["http_status"].is_null());
    assert_eq!(job["outcomes"], json!({"unknown": 1}));
    assert_eq!(stand_in.targets().len(), 1, "three attempts, one request");
    // Not submitted: the funnel does not count what may not have been taken.
    let funnel = app.get_json("/campaigns/spring/funnel").await;
    assert_eq!(funnel["total"]["submitted"], 0, "{funnel}");
    // The re-send list names it, for the operator to decide.
    let answer = (app.api(Method::GET, "/domains/s.example/unclicked?campaign=spring"))
        .header("X-Shortlink-Public-Base", PUBLIC_BASE)
        .header("X-Shortlink-Pool", "s.example")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let text = answer.text().await.unwrap();
    let listed: Vec<Value> = (text.lines())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{text}");
    assert_eq!(listed[0]["code"], record["code"], "{text}");
    assert_eq!(listed[0]["reason"], "handoff_unknown", "{text}");
    // Nothing is left to resume, and the same compose again skips it.
    assert_eq!(
        app.db.scalar("SELECT COUNT(*) FROM gateway_pending").await,
        0
    );
    let again = finished(&app, &compose("unknown-once").await).await;
    assert_eq!(again["recipients"][0]["outcome"], "skipped", "{again}");
    assert_eq!(stand_in.targets().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_handed_over_before_the_callback_base_answers() {
    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), Backend::Sqlite).await;
    // The callback base: a port nobody listens on yet.
    let reserved = TcpListener::bind("127.0.0.1:0").unwrap();
    let callback_addr = reserved.local_addr().unwrap();
    drop(reserved);
    let up = Arc::new(AtomicBool::new(false));
    let early = Arc::new(AtomicUsize::new(0));
    let stand_in = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/cgi-bin/sendsms", listener.local_addr().unwrap());
        let (up, early) = (Arc::clone(&up), Arc::clone(&early));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                if !up.load(Ordering::SeqCst) {
                    early.fetch_add(1, Ordering::SeqCst);
                }
                reply(stream, &Mutex::new(Vec::new()), &accepted);
            }
        });
        url
    };
    let body = gateway(&stand_in, PASSWORD_FILE, &format!("http://{callback_addr}"));
    assert_eq!(put_gateway_body(&app, &body).await.0, 200);
    let recipients: Vec<Value> = (1..=3).map(|i| recipient(i, "sale")).collect();
    let (_, job) = compose_and_send(&app, PUBLIC_BASE, &recipients).await;
    let path = format!("/gateway/jobs/{job}");
    let waiting = || async { !app.get_json(&path).await["waiting_for_callback_since"].is_null() };
    assert!(eventually(Duration::from_secs(10), waiting).await);
    // The callback base comes up (as nginx does after the sidecar): the job goes on.
    let callbacks = TcpListener::bind(callback_addr).unwrap();
    up.store(true, Ordering::SeqCst);
    std::thread::spawn(move || {
        for stream in callbacks.incoming() {
            let Ok(stream) = stream else { return };
            reply(stream, &Mutex::new(Vec::new()), &|_| {
                Some(("204 No Content", ""))
            });
        }
    });
    let job = finished(&app, &job).await;
    assert_eq!(job["outcomes"], json!({"accepted": 3}), "{job}");
    assert!(job["waiting_for_callback_since"].is_null(), "{job}");
    assert_eq!(
        early.load(Ordering::SeqCst),
        0,
        "handed over before the callback answered"
    );
}
