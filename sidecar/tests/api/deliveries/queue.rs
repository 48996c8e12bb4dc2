//! The send job's queue in SQL: a sidecar stopped mid-job is taken over and the job finished,
//! every recipient handed off once, the hand-off in flight at the stop recorded `interrupted`
//! and never sent again; two sidecars on one database never send one job twice; a job's
//! callback token ends after its reports window; a compose refused for its key leaves nothing;
//! a suspended workspace's callbacks store nothing and a token's callbacks are rate limited.

use super::gateway::{
    compose_and_send, finished, password_file, put_gateway, put_gateway_back, put_gateway_body,
    recipient, LOOPBACK, PASSWORD_FILE,
};
use super::stand_in::{accepted, request_target, StandIn};
use super::*;
use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::time::Duration;
use testkit::kannel::SEND_PASSWORD;

/// A gateway stand-in on loopback that accepts every message, except that a recipient whose
/// number ends in `hold` gets no answer (a hand-off in flight when its sidecar stops).
fn stand_in_holding(hold: Option<&'static str>) -> StandIn {
    StandIn::start(
        move |target| match hold.is_some_and(|hold| number(target) == hold) {
            true => None,
            false => accepted(target),
        },
    )
}

/// Hand-offs per recipient number (its last four digits).
fn per_number(stand_in: &StandIn) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for target in stand_in.targets() {
        *counts.entry(number(&target)).or_default() += 1;
    }
    counts
}

/// The last four digits of a request's `to`.
fn number(target: &str) -> String {
    let to = target.split("to=").nth(1).unwrap_or_default();
    let to = to.split('&').next().unwrap_or_default();
    to.chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

/// The machines of one test: sidecars on one database (as several hosts share one) that may
/// send through loopback gateways, and the stand-in gateway they send through.
struct Machines {
    backend: Backend,
    secrets: tempfile::TempDir,
    database_url: String,
    stand_in: StandIn,
    _dir: tempfile::TempDir,
}

impl Machines {
    /// On a fresh database of `backend`, the stand-in holding the hand-off to `hold`.
    fn new(backend: Backend, hold: Option<&'static str>) -> Self {
        let dir = testkit::temp_dir();
        Machines {
            backend,
            secrets: testkit::temp_dir(),
            database_url: backend.fresh_database_url(dir.path()),
            stand_in: stand_in_holding(hold),
            _dir: dir,
        }
    }

    /// One more sidecar, with a one-second lease (a stopped sidecar's job is taken over within
    /// it).
    async fn sidecar(&self) -> TestApp {
        let secrets = self.secrets.path();
        password_file(secrets, "default", PASSWORD_FILE, SEND_PASSWORD);
        let dir = secrets.to_str().unwrap();
        let mut flags = vec!["--gateway-secrets-dir", dir, "--gateway-lease", "1s"];
        flags.extend_from_slice(&LOOPBACK);
        let database_url = self.database_url.clone();
        spawn_app_at(self.backend, database_url, testkit::temp_dir(), &flags).await
    }

    /// A sidecar whose gateway is the stand-in, its reports called back on the sidecar itself.
    async fn sending(&self) -> TestApp {
        let app = self.sidecar().await;
        assert_eq!(put_gateway(&app, &self.stand_in.url, 1).await.0, 200);
        app
    }

    /// A sidecar whose gateway is the stand-in, its reports called back on a front that outlives
    /// it ([`callbacks_in_front`]).
    async fn sending_through_a_front(&self) -> TestApp {
        let app = self.sidecar().await;
        let back = callbacks_in_front();
        let put = put_gateway_back(&app, &self.stand_in.url, 1, &back).await;
        assert_eq!(put.0, 200);
        app
    }
}

/// A callback base that outlives the sidecars of a test, as nginx in front of them does: its
/// ping answers 204 (the reports themselves are not these tests' concern).
fn callbacks_in_front() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = request_target(&mut BufReader::new(&stream));
            let _ = write!(
                stream,
                "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
            );
        }
    });
    base
}

/// The job's outcomes, counted.
fn outcomes(job: &Value) -> BTreeMap<String, u64> {
    serde_json::from_value(job["outcomes"].clone()).unwrap()
}

crate::on_each_backend!(
    a_sidecar_stopped_mid_job_is_taken_over_and_sends_no_one_twice,
    two_sidecars_taking_over_one_job_send_it_once
);

async fn a_sidecar_stopped_mid_job_is_taken_over_and_sends_no_one_twice(backend: Backend) {
    let machines = Machines::new(backend, Some("0003"));
    let first = machines.sending_through_a_front().await;
    let recipients: Vec<Value> = (0..8).map(|i| recipient(i, "sale")).collect();
    let (lines, job) = compose_and_send(&first, PUBLIC_BASE, &recipients).await;
    // The answer is out: every message it promised is queued or recorded.
    let queued = (first.db)
        .scalar(
            "SELECT COUNT(*) FROM (SELECT idx FROM gateway_pending \
             UNION SELECT idx FROM gateway_sends) AS promised",
        )
        .await;
    assert_eq!(queued, 8);
    let in_flight = || async { per_number(&machines.stand_in).contains_key("0003") };
    assert!(eventually(Duration::from_secs(20), in_flight).await);
    drop(first);

    let second = machines.sidecar().await;
    let job = finished(&second, &job).await;
    let expected: BTreeMap<String, usize> = (0..8).map(|i| (format!("{i:04}"), 1)).collect();
    assert_eq!(
        per_number(&machines.stand_in),
        expected,
        "one hand-off each"
    );
    assert_eq!(
        outcomes(&job),
        BTreeMap::from([("accepted".into(), 7), ("interrupted".into(), 1)]),
        "{job}"
    );
    let record = &job["recipients"][3];
    assert_eq!(record["outcome"], "interrupted", "{job}");
    assert_eq!(record["code"], lines[3]["code"]);
    // Nothing left queued: no number kept once its message is handed off.
    assert_eq!(rows(&second, "gateway_pending").await, 0);
    let kept = (second.db)
        .scalar("SELECT COUNT(*) FROM gateway_jobs WHERE dlr_base IS NOT NULL")
        .await;
    assert_eq!(kept, 0, "the finished job forgot its token");
}

async fn two_sidecars_taking_over_one_job_send_it_once(backend: Backend) {
    let machines = Machines::new(backend, Some("0002"));
    let first = machines.sending_through_a_front().await;
    let recipients: Vec<Value> = (0..24).map(|i| recipient(i, "sale")).collect();
    let (_, job) = compose_and_send(&first, PUBLIC_BASE, &recipients).await;
    let in_flight = || async { per_number(&machines.stand_in).contains_key("0002") };
    assert!(eventually(Duration::from_secs(20), in_flight).await);
    drop(first);
    // Two sidecars look for the job whose lease runs out: one claim wins.
    let (a, b) = tokio::join!(machines.sidecar(), machines.sidecar(),);
    let job = finished(&a, &job).await;
    let counts = per_number(&machines.stand_in);
    assert_eq!(counts.len(), 24, "{counts:?}");
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    assert_eq!(
        outcomes(&job),
        BTreeMap::from([("accepted".into(), 23), ("interrupted".into(), 1)]),
        "{job}"
    );
    let owners = [&a, &b].map(|app| app.state.messaging.sends.owner.clone());
    let holders = (a.db)
        .texts("SELECT COALESCE(claimed_by, '') FROM gateway_jobs")
        .await;
    assert!(owners.contains(&holders[0]), "{holders:?} {owners:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_token_takes_reports_then_ends_with_its_window() {
    let machines = Machines::new(Backend::Sqlite, None);
    let app = machines.sending().await;
    let (lines, job) = compose_and_send(&app, PUBLIC_BASE, &[recipient(1, "sale")]).await;
    let job = finished(&app, &job).await;
    let token_id = job["callback_token_id"].as_str().unwrap().to_owned();
    // The report comes on the dlr-url the gateway was given.
    let target = machines.stand_in.targets().pop().unwrap();
    let dlr = url::Url::parse(&format!("http://gateway{target}")).unwrap();
    let dlr = (dlr.query_pairs())
        .find(|(name, _)| name == "dlr-url")
        .unwrap()
        .1
        .replace("%d", "1")
        .replace("%A", "id%3A1%20stat%3ADELIVRD")
        .replace("%i", "smsc")
        .replace("%T", "1700000000");
    let report = || async { app.client.get(&dlr).send().await.unwrap().status() };
    assert_eq!(report().await, 201, "{dlr}");
    let live = || async {
        let list = app.get_json("/callback-tokens").await;
        let tokens = list["tokens"].as_array().unwrap().clone();
        let token = tokens.into_iter().find(|t| t["id"] == token_id.as_str());
        token.unwrap()["revoked_at"].is_null()
    };
    assert!(live().await);
    // Its window (72 h by default) over: the next pass revokes it, and its reports are refused.
    let sql = "UPDATE gateway_jobs SET finished_ms = finished_ms - 72 * 3600000 - 1";
    app.db.execute(sql).await;
    let revoked = || async { !live().await };
    assert!(eventually(Duration::from_secs(10), revoked).await);
    assert_eq!(report().await, 404);
    let code = lines[0]["code"].as_str().unwrap();
    let stored = (app.db)
        .scalar(&format!(
            "SELECT COUNT(*) FROM delivery_receipts WHERE code = '{code}' AND state = 'delivered'"
        ))
        .await;
    assert_eq!(stored, 1);
}

/// A job's `dlr-url` with Kannel's escapes filled in as for a delivered report.
fn reported(dlr: &str) -> String {
    dlr.replace("%d", "1")
        .replace("%A", "id%3A1%20stat%3ADELIVRD")
        .replace("%i", "smsc")
        .replace("%T", "1700000000")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_token_takes_its_own_signed_reports_only() {
    let machines = Machines::new(Backend::Sqlite, None);
    let app = machines.sending().await;
    let (lines, job) = compose_and_send(&app, PUBLIC_BASE, &[recipient(1, "sale")]).await;
    finished(&app, &job).await;
    let code = lines[0]["code"].as_str().unwrap();
    let target = machines.stand_in.targets().pop().unwrap();
    let dlr = url::Url::parse(&format!("http://gateway{target}")).unwrap();
    let dlr = (dlr.query_pairs())
        .find(|(name, _)| name == "dlr-url")
        .unwrap()
        .1
        .into_owned();
    let param = |name: &str| {
        let value = dlr.split(&format!("&{name}=")).nth(1).unwrap();
        value.split('&').next().unwrap().to_owned()
    };
    let (mid, sig) = (param("mid"), param("sig"));
    assert!(mid.starts_with(&job) && sig.len() == 22, "{dlr}");
    // The URL leaked: every other report on it is refused, and stores nothing.
    let second = app.create_code("https://shop.example/other").await;
    for forged in [
        dlr.replace(&format!("&sig={sig}"), ""),
        dlr.replace(&format!("&sig={sig}"), "&sig=AAAAAAAAAAAAAAAAAAAAAA"),
        dlr.replace(&format!("&mid={mid}"), "&mid=forged-1"),
        dlr.replace(&format!("/{code}&"), &format!("/{second}&")),
        dlr.replace("://s.example/", "://evil.example/"),
    ] {
        let answer = app.client.get(reported(&forged)).send().await.unwrap();
        assert_eq!(answer.status(), 403, "{forged}");
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_signature");
    }
    let forged = (app.db)
        .scalar("SELECT COUNT(*) FROM delivery_receipts WHERE state = 'delivered'")
        .await;
    assert_eq!(forged, 0);
    // Its own report, as the job signed it: stored on the domain the job sent.
    let answer = app.client.get(reported(&dlr)).send().await.unwrap();
    assert_eq!(answer.status(), 201, "{dlr}");
    let domains = (app.db)
        .texts(&format!(
            "SELECT short_domain FROM delivery_messages WHERE message_id = '{mid}'"
        ))
        .await;
    assert_eq!(domains, ["s.example"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compose_refused_for_its_key_leaves_no_job() {
    let machines = Machines::new(Backend::Sqlite, None);
    let app = machines.sending().await;
    let compose = |body: &'static str| {
        let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
        url.query_pairs_mut().extend_pairs([
            ("template", "Sale: {{link}}"),
            ("url_template", "https://shop.example/"),
            ("send", "true"),
        ]);
        (app.client.post(url).bearer_auth(API_KEY))
            .header("Idempotency-Key", "spring-1")
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
    };
    let first = compose("{\"phone\":\"+447400120001\"}\n").await.unwrap();
    assert_eq!(first.status(), 200);
    let job = first.headers()["shortlink-send-job"]
        .to_str()
        .unwrap()
        .to_owned();
    first.text().await.unwrap();
    finished(&app, &job).await;
    let before = [
        "gateway_jobs",
        "callback_tokens",
        "gateway_sends",
        "gateway_pending",
    ];
    let mut counts = Vec::new();
    for table in before {
        counts.push(rows(&app, table).await);
    }
    assert_eq!(counts, [1, 1, 1, 0]);
    // The key again, with another body: refused before a job, a token or a row is made.
    let again = compose("{\"phone\":\"+447400120002\"}\n").await.unwrap();
    assert_eq!(again.status(), 422);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["error"]["code"], "idempotency_key_reused");
    let mut after = Vec::new();
    for table in before {
        after.push(rows(&app, table).await);
    }
    assert_eq!(after, counts);
    assert_eq!(machines.stand_in.targets().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_stop_with_a_suspended_workspace_and_past_the_tokens_rate() {
    use crate::workspaces::{create_workspace, operator_key, workspace_key};
    let app = spawn_app_with(Backend::Sqlite, &["--callback-rate", "1"]).await;
    let dlr_of = |token: &str, code: &str| {
        let url = format!("/callbacks/{token}/kannel?type=1&mid=m-1&code={code}");
        app.client.get(app.url(&url)).send()
    };
    let dlr = |token: &str| dlr_of(token, "nosuchcode");
    // One a second, two at once: the third at once is refused, with its JSON body.
    let (_, token) = callback_token(&app, API_KEY, "kannel", None).await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(dlr(&token).await.unwrap());
    }
    let codes: Vec<u16> = statuses.iter().map(|a| a.status().as_u16()).collect();
    assert_eq!(codes, [404, 404, 429]);
    let refused = statuses.pop().unwrap();
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");

    // A suspended workspace's token: answered as its keys are, nothing stored.
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let (_, theirs) = callback_token(&app, &admin, "kannel", None).await;
    let link =
        with_key(&app, &admin, Method::POST, "/links").json(&json!({"url": "https://a.example/"}));
    let link = crate::workspaces::send_json(link).await;
    let code = link["code"].as_str().unwrap().to_owned();
    crate::workspaces::suspend(&app, &operator, "brand-a").await;
    let answer = dlr_of(&theirs, &code).await.unwrap();
    assert_eq!(answer.status(), 403);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], "workspace_suspended", "{body}");
    assert_eq!(rows(&app, "delivery_receipts").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_subjects_queued_message_goes_with_its_number() {
    let machines = Machines::new(Backend::Sqlite, None);
    let app = machines.sidecar().await;
    // One message a second: the last is still queued when its recipient is erased.
    let body = json!({
        "url": machines.stand_in.url, "username": testkit::kannel::SEND_USER,
        "password_file": PASSWORD_FILE, "from": "SHOP", "callback_base": app.address,
        "per_second": 1,
    });
    assert_eq!(put_gateway_body(&app, &body).await.0, 200);
    let recipients: Vec<Value> = (0..3).map(|i| recipient(i, "sale")).collect();
    let (lines, job) = compose_and_send(&app, PUBLIC_BASE, &recipients).await;
    let erase = json!({"request_id": "dsr-1", "ref": "r-2"});
    expect_status(app.api(Method::POST, "/subjects/erase").json(&erase), 200).await;
    let phone = (app.db)
        .scalar("SELECT COUNT(*) FROM gateway_pending WHERE phone LIKE '%0002'")
        .await;
    assert_eq!(phone, 0, "the erased subject's number is gone at once");
    let job = finished(&app, &job).await;
    let records = job["recipients"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{job}");
    assert!(
        records.iter().all(|r| r["code"] != lines[2]["code"]),
        "{job}"
    );
    assert!(!per_number(&machines.stand_in).contains_key("0002"));
}
