//! Compose hands its messages to a real Kannel (Debian's 1.4.5, `testkit::Kannel`) through the
//! workspace's gateway (`PUT /api/v1/gateway`, `send=true`): Kannel → the SMSC double, which
//! delivers, fails or rejects by the message's text → Kannel's reports on the `dlr-url` compose
//! set → the campaign's funnel, per short domain, exactly as the rule says; and the job's records
//! say per recipient what Kannel answered. A gateway failing transiently (a 503 from a stub, a
//! closed port) is tried again, then recorded.

use super::stand_in::request_target;
use super::*;
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;
use testkit::kannel::{SEND_PASSWORD, SEND_USER};

/// The password file's name in the default workspace's secrets directory.
pub(super) const PASSWORD_FILE: &str = "kannel-lab";

/// The flags that let gateways (and their callback bases) on loopback be reached.
pub(super) const LOOPBACK: [&str; 2] = ["--gateway-allow-networks", "127.0.0.0/8"];

/// Writes `password` as `file` in the directory of workspace `slug` under `secrets`.
pub(super) fn password_file(secrets: &Path, slug: &str, file: &str, password: &str) {
    std::fs::create_dir_all(secrets.join(slug)).unwrap();
    std::fs::write(secrets.join(slug).join(file), format!("{password}\n")).unwrap();
}

/// An app whose workspaces may send through gateways on loopback, the default workspace's
/// password in its directory of `secrets`.
pub(super) async fn gateway_app(secrets: &Path, backend: Backend) -> TestApp {
    password_file(secrets, "default", PASSWORD_FILE, SEND_PASSWORD);
    let dir = secrets.to_str().unwrap();
    spawn_app_with(
        backend,
        &[&["--gateway-secrets-dir", dir][..], &LOOPBACK].concat(),
    )
    .await
}

/// PUT /api/v1/gateway with `url` (the callbacks come back to the app itself).
pub(super) async fn put_gateway(app: &TestApp, url: &str, attempts: u32) -> (u16, Value) {
    put_gateway_back(app, url, attempts, &app.address).await
}

/// [`put_gateway`] with the callbacks coming back to `callback_base`.
pub(super) async fn put_gateway_back(
    app: &TestApp,
    url: &str,
    attempts: u32,
    callback_base: &str,
) -> (u16, Value) {
    let body = json!({
        "url": url, "username": SEND_USER, "password_file": PASSWORD_FILE, "from": "SHOP",
        "callback_base": callback_base, "per_second": 200, "attempts": attempts, "backoff_ms": 20,
    });
    put_gateway_body(app, &body).await
}

/// PUT /api/v1/gateway with `body` as it stands: status and JSON answer.
pub(super) async fn put_gateway_body(app: &TestApp, body: &Value) -> (u16, Value) {
    status_and_json(app.api(Method::PUT, "/gateway").json(body)).await
}

/// The compose that sends the spring campaign: `Spring {{word}}: {{link}}` to each recipient.
pub(super) fn spring_compose_url(app: &TestApp) -> url::Url {
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut().extend_pairs([
        ("template", "Spring {{word}}: {{link}}"),
        ("campaign", "spring"),
        ("url_template", "https://shop.example/spring"),
        ("send", "true"),
    ]);
    url
}

/// Composes and sends `recipients` on `base` (the issuing list nginx would send): the answer's
/// lines, and the send job's id.
pub(super) async fn compose_and_send(
    app: &TestApp,
    base: &str,
    recipients: &[Value],
) -> (Vec<Value>, String) {
    let url = spring_compose_url(app);
    let body: String = recipients.iter().map(|r| format!("{r}\n")).collect();
    let request = app.client.post(url).bearer_auth(API_KEY);
    let answer = send_ndjson(request.header("X-Shortlink-Public-Base", base), body).await;
    let header = answer.headers()["shortlink-send-job"]
        .to_str()
        .unwrap()
        .to_owned();
    let lines = ndjson_lines(answer).await;
    let job = lines.last().unwrap()["send_job"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(header, job, "the header names the summary's job");
    (lines, job)
}

/// GET `path` under /api/v1: status and JSON answer.
async fn get(app: &TestApp, path: &str) -> (u16, Value) {
    status_and_json(app.api(Method::GET, path)).await
}

/// The send job once it has recorded every recipient.
pub(super) async fn finished(app: &TestApp, job: &str) -> Value {
    let path = format!("/gateway/jobs/{job}");
    let done = || async { !app.get_json(&path).await["finished_at"].is_null() };
    assert!(
        eventually(Duration::from_secs(30), done).await,
        "{job} ends"
    );
    app.get_json(&path).await
}

pub(super) fn recipient(i: usize, word: &str) -> Value {
    json!({"phone": format!("+44 7400 12{i:04}"), "ref": format!("r-{i}"), "variables": {"word": word}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compose_sends_through_kannel_and_the_funnel_counts_its_reports() {
    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), Backend::Sqlite).await;
    let (smsc, kannel) = kannel_on_smsc(by_domain_and_word);
    let (status, gateway) = put_gateway(&app, &kannel.sendsms_url(), 3).await;
    assert_eq!(status, 200, "{gateway}");
    assert!(!gateway.to_string().contains(SEND_PASSWORD), "{gateway}");

    // On s1.example, 12 messages, every third to an absent subscriber; on s2.example, 6, all
    // rejected by the carrier.
    let on_s1: Vec<Value> = (0..12)
        .map(|i| recipient(i, if i % 3 == 2 { "absent" } else { "sale" }))
        .collect();
    let on_s2: Vec<Value> = (12..18).map(|i| recipient(i, "sale")).collect();
    let mut jobs = Vec::new();
    for (base, recipients) in [
        ("https://s1.example", &on_s1),
        ("https://s2.example", &on_s2),
    ] {
        let (lines, job) = compose_and_send(&app, base, recipients).await;
        assert!(lines[..recipients.len()]
            .iter()
            .all(|line| line["status"] == 201));
        jobs.push((job, lines));
    }
    for (job, lines) in &jobs {
        let job = finished(&app, job).await;
        let records = job["recipients"].as_array().unwrap();
        assert_eq!(records.len(), lines.len() - 1, "{job}");
        for (record, line) in records.iter().zip(lines) {
            assert_eq!(record["code"], line["code"]);
            assert_eq!(record["outcome"], "accepted", "{record}");
            assert_eq!(record["http_status"], 202);
            assert_eq!(record["gateway_code"], 0);
            assert_eq!(record["detail"], "the gateway accepted it for delivery");
            assert_eq!(record["attempts"], 1);
        }
    }
    // Kannel got each recipient's number and text, as composed.
    let finals = || async {
        (app.db)
            .scalar("SELECT COUNT(*) FROM delivery_messages WHERE state IN ('delivered', 'failed', 'rejected')")
            .await
            == 18
    };
    assert!(
        eventually(Duration::from_secs(60), finals).await,
        "the reports came back\n{}",
        kannel.logs()
    );
    let submitted = smsc.submitted();
    assert_eq!(submitted.len(), 18);
    for (_, lines) in &jobs {
        for line in &lines[..lines.len() - 1] {
            let to = line["phone"].as_str().unwrap();
            let message = (submitted.iter())
                .find(|m| m.to == to)
                .expect("sent to the number");
            assert_eq!(message.text, line["text"].as_str().unwrap());
            assert_eq!(message.from, "SHOP");
        }
    }

    let funnel = app.get_json("/campaigns/spring/funnel").await;
    let domain = |host: &str| {
        (funnel["by_domain"].as_array().unwrap().iter())
            .find(|part| part["short_domain"] == host)
            .unwrap_or_else(|| panic!("{host}: {funnel}"))["counts"]
            .clone()
    };
    let (s1, s2) = (domain("s1.example"), domain("s2.example"));
    let counts = |c: &Value| {
        [
            c["messages"].clone(),
            c["delivered"].clone(),
            c["failed"].clone(),
            c["rejected"].clone(),
        ]
    };
    assert_eq!(
        counts(&s1),
        [json!(12), json!(8), json!(4), json!(0)],
        "{funnel}"
    );
    assert_eq!(
        counts(&s2),
        [json!(6), json!(0), json!(0), json!(6)],
        "{funnel}"
    );
    assert_eq!(s1["failed_by_error_code"], json!({"005": 4}));
    assert_eq!(funnel["total"]["no_receipt"], 0, "{funnel}");
    // No phone number in what shortlink stored of the sends and their reports.
    for (table, columns) in [
        (
            "gateway_sends",
            "code || message_id || COALESCE(answer, '')",
        ),
        (
            "delivery_receipts",
            "code || message_id || COALESCE(error_text, '') || COALESCE(carrier, '')",
        ),
    ] {
        let dump = (app.db)
            .texts(&format!("SELECT {columns} FROM {table}"))
            .await
            .join(" ");
        assert!(
            !dump.is_empty() && !dump.contains("7400"),
            "{table}: {dump}"
        );
    }
}

/// A gateway stub on loopback: per recipient (the `to` parameter's last digit), 1 always 503,
/// 2 a 403, 3 a 503 and then accepted, any other accepted. Answers until the test ends.
fn stub_gateway() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/cgi-bin/sendsms", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut tries_of_3 = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some(target) = request_target(&mut BufReader::new(&stream)) else {
                continue;
            };
            let to = target
                .split("to=")
                .nth(1)
                .and_then(|rest| rest.split('&').next());
            let (status, body) = match to.and_then(|to| to.chars().last()) {
                Some('1') => (
                    "503 Service Unavailable",
                    "Temporal failure, try again later.",
                ),
                Some('2') => ("403 Forbidden", "Authorization failed for sendsms"),
                Some('3') if tries_of_3 == 0 => {
                    tries_of_3 += 1;
                    (
                        "503 Service Unavailable",
                        "Temporal failure, try again later.",
                    )
                }
                _ => ("202 Accepted", "0: Accepted for delivery"),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

crate::on_each_backend!(transient_gateway_failures_are_retried_then_recorded);

async fn transient_gateway_failures_are_retried_then_recorded(backend: Backend) {
    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), backend).await;
    let (status, _) = put_gateway(&app, &stub_gateway(), 3).await;
    assert_eq!(status, 200);
    let recipients: Vec<Value> = (1..=3).map(|i| recipient(i, "sale")).collect();
    let (_, job) = compose_and_send(&app, PUBLIC_BASE, &recipients).await;
    let job = finished(&app, &job).await;
    let record = |i: usize| job["recipients"][i - 1].clone();
    let seen = |i: usize| {
        let r = record(i);
        (
            r["outcome"].clone(),
            r["http_status"].clone(),
            r["attempts"].clone(),
        )
    };
    assert_eq!(seen(1), (json!("failed"), json!(503), json!(3)), "{job}");
    assert_eq!(seen(2), (json!("refused"), json!(403), json!(1)), "{job}");
    assert_eq!(seen(3), (json!("accepted"), json!(202), json!(2)), "{job}");
    // What Kannel said is not kept: its status only (its body starts with no code).
    assert!(record(2)["gateway_code"].is_null());
    assert!(!job.to_string().contains("Authorization"), "{job}");
    assert_eq!(
        job["outcomes"],
        json!({"accepted": 1, "failed": 1, "refused": 1})
    );
    // The accepted one is the funnel's submitted message; the others were never sent.
    let funnel = app.get_json("/campaigns/spring/funnel").await;
    assert_eq!(funnel["total"]["submitted"], 1, "{funnel}");
    assert_eq!(funnel["total"]["no_receipt"], 2, "{funnel}");

    // A gateway nobody listens on: every try fails to connect, then the failure is recorded.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/cgi-bin/sendsms", closed.local_addr().unwrap());
    drop(closed);
    let (status, _) = put_gateway(&app, &url, 2).await;
    assert_eq!(status, 200);
    let (_, job) = compose_and_send(&app, PUBLIC_BASE, &recipients[..1]).await;
    let job = finished(&app, &job).await;
    let record = &job["recipients"][0];
    assert_eq!(record["outcome"], "failed", "{job}");
    assert_eq!(record["attempts"], 2);
    assert!(record["http_status"].is_null());
    assert_eq!(
        record["detail"],
        "no connection to the gateway on any try: not sent"
    );
}

#[tokio::test]
async fn a_gateway_is_checked_and_never_shows_its_password() {
    // Without a secrets directory, no workspace sends.
    let app = spawn_app(Backend::Sqlite).await;
    let (status, answer) = put_gateway(&app, "http://127.0.0.1:13013/cgi-bin/sendsms", 3).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (403, &json!("gateways_disabled"))
    );
    drop(app);

    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), Backend::Sqlite).await;
    let put = |body: Value| {
        let app = &app;
        async move {
            let (status, body) = put_gateway_body(app, &body).await;
            (
                status,
                body["error"]["code"].as_str().unwrap_or("").to_owned(),
            )
        }
    };
    let good = json!({"url": "http://127.0.0.1:13013/cgi-bin/sendsms", "username": SEND_USER,
        "password_file": PASSWORD_FILE, "from": "SHOP", "callback_base": "https://api.example"});
    let with = |field: &str, value: Value| {
        let mut body = good.clone();
        body[field] = value;
        body
    };
    for (body, code) in [
        (
            with("password_file", json!("../kannel-lab")),
            "invalid_password_file",
        ),
        (
            with("password_file", json!("/etc/passwd")),
            "invalid_password_file",
        ),
        (
            with("password_file", json!("missing")),
            "invalid_password_file",
        ),
        (with("url", json!("ftp://kannel/")), "invalid_url"),
        (
            with("callback_base", json!("https://api.example/?x=1")),
            "invalid_callback_base",
        ),
        (with("per_second", json!(0)), "invalid_per_second"),
        (with("attempts", json!(11)), "invalid_attempts"),
        (with("from", json!("")), "invalid_from"),
    ] {
        assert_eq!(put(body.clone()).await, (422, code.to_owned()), "{body}");
    }
    assert_eq!(get(&app, "/gateway").await.0, 404);
    assert_eq!(put(good).await.0, 200);
    let (status, shown) = get(&app, "/gateway").await;
    assert_eq!(status, 200);
    assert_eq!(shown["password_file"], PASSWORD_FILE);
    assert!(!shown.to_string().contains(SEND_PASSWORD), "{shown}");
    // A dry run sends nothing: asking both is refused before anything is issued.
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut().extend_pairs([
        ("template", "{{link}}"),
        ("send", "true"),
        ("dry_run", "true"),
    ]);
    let answer = (app.client.post(url).bearer_auth(API_KEY))
        .header("content-type", "application/x-ndjson")
        .body("{\"phone\":\"+447400123456\",\"url\":\"https://shop.example/\"}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 422);
    let deleted = app.api(Method::DELETE, "/gateway").send().await.unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(get(&app, "/gateway").await.0, 404);
    let audit = (app.db)
        .texts("SELECT action FROM audit_log WHERE action LIKE 'gateway.%' ORDER BY action DESC")
        .await;
    assert_eq!(audit, ["gateway.set", "gateway.delete"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_workspace_stops_its_send_job() {
    use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
    let secrets = testkit::temp_dir();
    let app = gateway_app(secrets.path(), Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    password_file(secrets.path(), "brand-a", PASSWORD_FILE, SEND_PASSWORD);
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    // Two messages a second: the job is still sending when the workspace is suspended.
    let body = json!({
        "url": stub_gateway(), "username": SEND_USER, "password_file": PASSWORD_FILE,
        "from": "SHOP", "callback_base": app.address, "per_second": 2,
    });
    let answer = with_key(&app, &admin, Method::PUT, "/gateway")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut().extend_pairs([
        ("template", "{{link}}"),
        ("url_template", "https://shop.example/"),
        ("send", "true"),
    ]);
    let recipients: String = (4..10)
        .map(|i| format!("{}\n", recipient(i, "x")))
        .collect();
    let compose = (app.client.post(url).bearer_auth(&admin)).header(
        "X-Shortlink-Public-Base",
        "https://s.example [brand-a] https://s.a.example",
    );
    let summary = compose_summary(compose, recipients).await;
    let job = summary["send_job"].as_str().unwrap().to_owned();
    // Suspended once the job has sent its first message.
    let sent = format!("SELECT COUNT(*) FROM gateway_sends WHERE job_id = '{job}'");
    let under_way = || async { app.db.scalar(&sent).await >= 1 };
    assert!(eventually(Duration::from_secs(10), under_way).await);
    crate::workspaces::suspend(&app, &operator, "brand-a").await;
    // The job's records are read as the operator would: from the database (the workspace's
    // keys answer 403 while it is suspended).
    let path =
        format!("SELECT COUNT(*) FROM gateway_jobs WHERE id = '{job}' AND finished_ms IS NOT NULL");
    let done = || async { app.db.scalar(&path).await == 1 };
    assert!(eventually(Duration::from_secs(30), done).await);
    let outcomes = (app.db)
        .texts(&format!(
            "SELECT outcome FROM gateway_sends WHERE job_id = '{job}' ORDER BY idx"
        ))
        .await;
    assert_eq!(outcomes.len(), 6, "{outcomes:?}");
    let accepted = outcomes.iter().take_while(|o| *o == "accepted").count();
    assert!((1..=3).contains(&accepted), "{outcomes:?}");
    assert!(
        outcomes[accepted..].iter().all(|o| o == "stopped"),
        "{outcomes:?}"
    );
    let why = (app.db)
        .texts(&format!(
            "SELECT stopped FROM gateway_jobs WHERE id = '{job}'"
        ))
        .await;
    assert_eq!(why, ["the job's workspace was suspended"]);
}
