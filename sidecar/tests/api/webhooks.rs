//! Click webhooks and the visit feed (issue 36): visits stored through the visit store, as the
//! consumer stores them, delivered to a real HTTP receiver on loopback that checks every
//! signature and counts what it gets; the feed read back page by page.

use crate::helpers::*;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};
use shortlink_visit_enrich::{Enricher, GeoDb, Visit, VisitEvent};
use shortlink_visits::store::VisitStore;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::Lifeline;

pub(crate) const HOOK_SECRET: &str = "a-webhook-secret-of-some-length";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

/// The flags every app here runs with: receivers are on loopback, and deliveries look for new
/// visits often.
pub(crate) const FLAGS: &[&str] = &["--webhook-allow-private", "--webhook-poll", "50ms"];

/// A webhook receiver on 127.0.0.1:0: checks each POST's signature, keeps every event id it
/// acknowledged (repeats included), and can be told to fail or to answer slowly.
pub(crate) struct Receiver {
    addr: SocketAddr,
    pub(crate) state: Arc<ReceiverState>,
    server: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
pub(crate) struct ReceiverState {
    ids: Mutex<Vec<String>>,
    pub(crate) events: Mutex<Vec<Value>>,
    posts: AtomicUsize,
    pub(crate) bad_signatures: AtomicUsize,
    failing: AtomicBool,
    /// When each refused POST came.
    refused_at: Mutex<Vec<Instant>>,
    delay_ms: AtomicU64,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    state.posts.fetch_add(1, Ordering::SeqCst);
    let delay = state.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        // A slow receiver, as the test wants it (not a wait for a condition).
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    if state.failing.load(Ordering::SeqCst) {
        state.refused_at.lock().unwrap().push(Instant::now());
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let header = headers
        .get(shortlink_core::signing::HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(signed_at) = shortlink_core::signing::verify(HOOK_SECRET.as_bytes(), header, &body)
    else {
        state.bad_signatures.fetch_add(1, Ordering::SeqCst);
        return StatusCode::UNAUTHORIZED;
    };
    assert!(
        (chrono::Utc::now().timestamp() - signed_at).abs() < 60,
        "signed now"
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    let events = body["events"].as_array().unwrap().clone();
    let mut ids = state.ids.lock().unwrap();
    ids.extend(events.iter().map(|e| e["id"].as_str().unwrap().to_owned()));
    state.events.lock().unwrap().extend(events);
    StatusCode::NO_CONTENT
}

impl Receiver {
    pub(crate) async fn start() -> Self {
        let state = Arc::new(ReceiverState::default());
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(Arc::clone(&state));
        let (addr, server) = serve_router(app).await;
        Receiver {
            addr,
            state,
            server,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn ids(&self) -> Vec<String> {
        self.state.ids.lock().unwrap().clone()
    }

    fn unique(&self) -> HashSet<String> {
        self.ids().into_iter().collect()
    }
}

/// Polls `done` every 20 ms until it holds, failing the test after `limit`.
async fn eventually(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A visit as the consumer makes it of one event.
fn visit(id: String, code: &str, ua: &str) -> Visit {
    // One time for every visit of the process: storing an id again is then a redelivery, which
    // carries the time its stream entry was written with (PostgreSQL keys a visit by id and
    // time, its partition key: migration 54).
    static AT: std::sync::LazyLock<i64> =
        std::sync::LazyLock::new(|| chrono::Utc::now().timestamp_millis());
    let t = AT.to_string();
    let fields = [
        ("c", code),
        ("t", t.as_str()),
        ("ip", "203.0.113.9"),
        ("ua", ua),
        ("host", "s.example"),
    ]
    .map(|(k, v)| (k, v.to_owned()));
    let event = VisitEvent::from_fields(id, fields).unwrap();
    Enricher::new(GeoDb::disabled(), false).enrich(&event)
}

/// Stores `n` human visits of `code` in transactions of `per_batch`, as the consumer would;
/// returns their ids. `tag` keeps the ids of separate calls apart.
async fn store_visits(
    store: &dyn VisitStore,
    code: &str,
    tag: &str,
    n: usize,
    per_batch: usize,
) -> Vec<String> {
    let visits: Vec<Visit> = (0..n)
        .map(|i| visit(format!("{tag}-{i}"), code, IPHONE))
        .collect();
    for chunk in visits.chunks(per_batch) {
        store.store_batch(chunk, false).await.unwrap();
    }
    visits.into_iter().map(|v| v.event_id).collect()
}

async fn link(app: &TestApp, campaign: &str, recipient: &str) -> String {
    let link = app
        .create(json!({"url": "https://shop.example/spring", "campaign": campaign, "ref": recipient, "tags": ["sms"]}))
        .await;
    link["code"].as_str().unwrap().to_owned()
}

/// POSTs `body` as a subscription, which must be refused (422): the error's code.
async fn refusal_code(app: &TestApp, body: &Value) -> Value {
    let request = app.api(reqwest::Method::POST, "/webhooks").json(body);
    let (status, error) = status_and_json(request).await;
    assert_eq!(status, 422, "{body}");
    error["error"]["code"].clone()
}

async fn subscribe(app: &TestApp, body: Value) -> Value {
    answered(app.api(reqwest::Method::POST, "/webhooks").json(&body), 201).await
}

fn hook(receiver: &Receiver, batch_size: u32) -> Value {
    json!({"url": receiver.url(), "secret": HOOK_SECRET, "batch_size": batch_size, "batch_ms": 20})
}

async fn webhook(app: &TestApp, id: &str) -> Value {
    app.get_json(&format!("/webhooks/{id}")).await
}

/// A subscription (`batch_size`) to a receiver that refuses everything, and `visits` visits
/// stored in transactions of `per_batch`: the receiver, the subscription's id and the visits' ids.
async fn refused_visits(
    app: &TestApp,
    batch_size: u32,
    visits: usize,
    per_batch: usize,
) -> (Receiver, String, HashSet<String>) {
    let receiver = Receiver::start().await;
    receiver.state.failing.store(true, Ordering::SeqCst);
    let code = link(app, "spring", "r-1").await;
    let subscription = subscribe(app, hook(&receiver, batch_size)).await;
    let id = subscription["id"].as_str().unwrap().to_owned();
    let store = app.visit_store().await;
    let stored = store_visits(store.as_ref(), &code, "v", visits, per_batch).await;
    (receiver, id, stored.into_iter().collect())
}

#[tokio::test]
async fn every_click_is_delivered_signed_and_exactly_once_after_de_duplication() {
    let app = spawn_app_with(Backend::Sqlite, FLAGS).await;
    let receiver = Receiver::start().await;
    let one_by_one = Receiver::start().await;
    let code = link(&app, "spring", "r-1").await;
    let subscription = subscribe(&app, hook(&receiver, 100)).await;
    assert_eq!(subscription["secret_hint"], "…ngth");
    assert!(
        !subscription.to_string().contains(HOOK_SECRET),
        "the secret is never shown"
    );
    subscribe(&app, hook(&one_by_one, 1)).await;
    let store = app.visit_store().await;
    let stored = store_visits(store.as_ref(), &code, "v", 3000, 500).await;
    // A batch delivered again by the stream changes nothing: no new feed row, no new event.
    store_visits(store.as_ref(), &code, "v", 500, 500).await;

    eventually(Duration::from_secs(60), "3000 events each", || {
        receiver.unique().len() == 3000 && one_by_one.unique().len() == 3000
    })
    .await;
    let expected: HashSet<String> = stored.into_iter().collect();
    assert_eq!(receiver.unique(), expected);
    assert_eq!(one_by_one.unique(), expected);
    // In the order they were stored, and (nothing went wrong) each once.
    assert_eq!(receiver.ids().len(), 3000);
    assert_eq!(receiver.ids()[..3], ["v-0", "v-1", "v-2"]);
    assert_eq!(receiver.state.bad_signatures.load(Ordering::SeqCst), 0);
    assert_eq!(one_by_one.state.posts.load(Ordering::SeqCst), 3000);

    let event = receiver.state.events.lock().unwrap()[0].clone();
    assert_eq!(event["code"], code.as_str());
    assert_eq!(event["campaign"], "spring");
    assert_eq!(event["ref"], "r-1");
    assert_eq!(event["tags"], json!(["sms"]));
    assert_eq!(event["target"], "https://shop.example/spring");
    assert_eq!(event["audience"], "human");
    assert_eq!(event["device"], "mobile");
    assert_eq!(event["short_domain"], "s.example");
    assert!(
        event.get("ip").is_none(),
        "no address unless the deployment says so"
    );
    let id = subscription["id"].as_str().unwrap();
    let mut saved = webhook(&app, id).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while saved["delivered"] != 3000 {
        assert!(Instant::now() < deadline, "delivered saved: {saved}");
        tokio::time::sleep(Duration::from_millis(20)).await;
        saved = webhook(&app, id).await;
    }
}

/// The feed on one backend: every visit once, in commit order, resumable from any event's
/// cursor, filtered by campaign and ref.
async fn feed_pages_in_order(backend: Backend) {
    let app = spawn_app_with(backend, FLAGS).await;
    let spring = link(&app, "spring", "r-1").await;
    let autumn = link(&app, "autumn", "r-2").await;
    let store = app.visit_store().await;
    let mut expected = store_visits(store.as_ref(), &spring, "a", 250, 100).await;
    expected.extend(store_visits(store.as_ref(), &autumn, "b", 120, 60).await);
    store_visits(store.as_ref(), &spring, "a", 100, 100).await;

    let page = |after: Option<String>, query: &'static str| {
        let app = &app;
        async move {
            let after = after.map(|a| format!("&after={a}")).unwrap_or_default();
            let answer = app
                .api(
                    reqwest::Method::GET,
                    &format!("/visits?limit=70{query}{after}"),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 200);
            assert_eq!(answer.headers()["content-type"], "application/x-ndjson");
            let next = answer.headers()["x-shortlink-cursor"]
                .to_str()
                .unwrap()
                .to_owned();
            let text = answer.text().await.unwrap();
            let events: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            (events, next)
        }
    };
    let mut read = Vec::new();
    let mut after = None;
    loop {
        let (events, next) = page(after.clone(), "").await;
        if events.is_empty() {
            break;
        }
        read.extend(events);
        after = Some(next);
    }
    let ids: Vec<&str> = read.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, expected);
    // Resuming after any event gives what followed it.
    let (rest, _) = page(Some(read[99]["cursor"].as_str().unwrap().to_owned()), "").await;
    assert_eq!(rest[0]["id"], read[100]["id"]);
    let (autumn_only, _) = page(None, "&campaign=autumn").await;
    assert_eq!(autumn_only.len(), 70);
    assert!(autumn_only.iter().all(|e| e["code"] == autumn.as_str()));
    let (by_ref, _) = page(None, "&ref=r-2").await;
    assert_eq!(by_ref[0]["id"], "b-0");

    for bad in [
        "after=12",
        "after=-1-0",
        "after=x-1",
        "limit=0",
        "limit=10001",
    ] {
        let answer = app
            .api(reqwest::Method::GET, &format!("/visits?{bad}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{bad}");
        let body: Value = answer.json().await.unwrap();
        assert!(
            ["invalid_cursor", "invalid_query"].contains(&body["error"]["code"].as_str().unwrap())
        );
    }
}

#[tokio::test]
async fn a_receiver_down_for_a_while_gets_everything_on_the_retry_schedule() {
    let app = spawn_app_with(Backend::Sqlite, FLAGS).await;
    let (receiver, id, stored) = refused_visits(&app, 50, 400, 100).await;

    eventually(Duration::from_secs(30), "three refused POSTs", || {
        receiver.state.refused_at.lock().unwrap().len() >= 3
    })
    .await;
    let failing = webhook(&app, &id).await;
    assert!(failing["failing_since"].is_string(), "{failing}");
    assert!(failing["attempts"].as_i64().unwrap() >= 2, "{failing}");
    assert_eq!(failing["last_error"], "answered 503");
    // Exponential backoff: 1 s, then 2 s.
    let at = receiver.state.refused_at.lock().unwrap().clone();
    let first = at[1] - at[0];
    let second = at[2] - at[1];
    assert!(first >= Duration::from_millis(900), "{first:?}");
    assert!(
        second >= first + Duration::from_millis(800),
        "{first:?} then {second:?}"
    );

    receiver.state.failing.store(false, Ordering::SeqCst);
    eventually(
        Duration::from_secs(30),
        "everything after the outage",
        || receiver.unique() == stored,
    )
    .await;
    let mut recovered = webhook(&app, &id).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !recovered["failing_since"].is_null() {
        assert!(Instant::now() < deadline, "{recovered}");
        tokio::time::sleep(Duration::from_millis(20)).await;
        recovered = webhook(&app, &id).await;
    }
    let metrics = app
        .client
        .get(app.metrics_url())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let retried = format!("shortlink_webhook_retries_total{{subscription=\"{id}\"}}");
    assert!(metrics.contains(&retried), "{metrics}");
}

#[tokio::test]
async fn a_slow_receiver_does_not_hold_back_another_subscription() {
    let app = spawn_app_with(Backend::Sqlite, FLAGS).await;
    let slow = Receiver::start().await;
    slow.state.delay_ms.store(4000, Ordering::SeqCst);
    let fast = Receiver::start().await;
    let code = link(&app, "spring", "r-1").await;
    subscribe(&app, hook(&slow, 10)).await;
    subscribe(&app, hook(&fast, 10)).await;
    let store = app.visit_store().await;
    store_visits(store.as_ref(), &code, "v", 300, 100).await;

    eventually(Duration::from_secs(20), "the fast receiver's 300", || {
        fast.unique().len() == 300
    })
    .await;
    // Meanwhile the slow one is still on its first POST.
    assert!(slow.state.posts.load(Ordering::SeqCst) <= 1);
    assert!(slow.unique().is_empty());
}

#[tokio::test]
async fn a_sidecar_killed_mid_delivery_loses_nothing_and_another_takes_over() {
    // The database outlives the first sidecar (its directory is the test's, not the app's).
    let dir = testkit::temp_dir();
    let database_url = Backend::Sqlite.fresh_database_url(dir.path());
    let flags = [FLAGS, &["--webhook-lease", "2s", "--webhook-timeout", "1s"]].concat();
    let first = spawn_app_at(
        Backend::Sqlite,
        database_url.clone(),
        testkit::temp_dir(),
        &flags,
    )
    .await;
    let receiver = Receiver::start().await;
    receiver.state.delay_ms.store(5, Ordering::SeqCst);
    let code = link(&first, "spring", "r-1").await;
    subscribe(&first, hook(&receiver, 10)).await;
    let store = first.visit_store().await;
    let stored: HashSet<String> = store_visits(store.as_ref(), &code, "v", 2000, 500)
        .await
        .into_iter()
        .collect();
    eventually(Duration::from_secs(30), "deliveries under way", || {
        receiver.unique().len() >= 300
    })
    .await;
    drop(first);
    let at_kill = receiver.unique().len();
    assert!(at_kill < 2000, "killed mid-delivery ({at_kill} delivered)");

    let second = spawn_app_at(Backend::Sqlite, database_url, testkit::temp_dir(), &flags).await;
    eventually(
        Duration::from_secs(60),
        "the rest, from the second sidecar",
        || receiver.unique() == stored,
    )
    .await;
    drop(second);
}

#[tokio::test]
async fn two_sidecars_share_the_subscriptions_without_sending_twice() {
    let dir = testkit::temp_dir();
    let database_url = Backend::Postgres.fresh_database_url(dir.path());
    let a = spawn_app_at(
        Backend::Postgres,
        database_url.clone(),
        testkit::temp_dir(),
        FLAGS,
    )
    .await;
    let b = spawn_app_at(Backend::Postgres, database_url, testkit::temp_dir(), FLAGS).await;
    let code = link(&a, "spring", "r-1").await;
    let receivers = [
        Receiver::start().await,
        Receiver::start().await,
        Receiver::start().await,
    ];
    for receiver in &receivers {
        subscribe(&a, hook(receiver, 25)).await;
    }
    let store = a.visit_store().await;
    let stored: HashSet<String> = store_visits(store.as_ref(), &code, "v", 1000, 250)
        .await
        .into_iter()
        .collect();
    for receiver in &receivers {
        eventually(Duration::from_secs(30), "every receiver's 1000", || {
            receiver.unique() == stored
        })
        .await;
        assert_eq!(receiver.ids().len(), 1000, "each event once");
    }
    drop(b);
}

#[tokio::test]
async fn subscriptions_refuse_private_targets_and_bad_settings() {
    let app = spawn_app(Backend::Sqlite).await;
    let private = [
        "http://127.0.0.1:9/hook",
        "http://10.1.2.3/hook",
        "https://[::1]/hook",
        "https://localhost/hook",
        "http://169.254.169.254/latest",
    ];
    let private = private.map(|url| {
        (
            json!({"url": url, "secret": HOOK_SECRET}),
            "private_address",
        )
    });
    let others = [
        (
            json!({"url": "ftp://hooks.example/", "secret": HOOK_SECRET}),
            "unsupported_scheme",
        ),
        (json!({"url": "https://hooks.example/"}), "invalid_body"),
        (
            json!({"url": "https://hooks.example/", "secret": "short"}),
            "invalid_secret",
        ),
        (
            json!({"url": "https://hooks.example/", "secret": HOOK_SECRET, "batch_size": 0}),
            "invalid_batch",
        ),
        (
            json!({"url": "https://hooks.example/", "secret": HOOK_SECRET, "batch_ms": 60001}),
            "invalid_batch",
        ),
        (
            json!({"url": "https://hooks.example/", "secret": HOOK_SECRET, "campaigns": vec!["c"; 101]}),
            "invalid_filter",
        ),
    ];
    for (body, code) in private.into_iter().chain(others) {
        assert_eq!(refusal_code(&app, &body).await, code, "{body}");
    }
    let list = app.get_json("/webhooks").await;
    assert_eq!(list["webhooks"], json!([]), "nothing stored");
    let created = subscribe(
        &app,
        json!({"url": "https://hooks.example/in", "secret": HOOK_SECRET, "campaigns": ["spring"], "batch_size": 50.0}),
    )
    .await;
    let id = created["id"].as_str().unwrap();
    assert_eq!(created["batch_size"], 50, "an integer as JSON may write it");
    let moved = app
        .api(reqwest::Method::PUT, &format!("/webhooks/{id}"))
        .json(&json!({"url": "http://192.168.0.10/in", "secret": HOOK_SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), 422);
    assert_eq!(webhook(&app, id).await["url"], "https://hooks.example/in");
    let gone = app
        .api(reqwest::Method::DELETE, &format!("/webhooks/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 204);
    let again = app
        .api(reqwest::Method::GET, &format!("/webhooks/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
}

/// The ranges the review found missing (issue 51): IPv6 addresses that carry a non-public IPv4
/// address (NAT64, IPv4-compatible, 6to4), local-use NAT64, Teredo, site-local, and the IETF's
/// 192.0.0.0/24, each refused when the subscription is saved.
#[tokio::test]
async fn subscriptions_refuse_tunnelled_and_reserved_addresses() {
    let app = spawn_app(Backend::Sqlite).await;
    for host in [
        "[64:ff9b::7f00:1]",
        "[64:ff9b::a9fe:a9fe]",
        "[64:ff9b:1::a00:5]",
        "[::127.0.0.1]",
        "[::10.0.0.5]",
        "[2002:7f00:1::1]",
        "[2002:c0a8:101::1]",
        "[2001:0:808:808::f7f7:f7f7]",
        "[fec0::1]",
        "192.0.0.8",
    ] {
        let body = json!({"url": format!("http://{host}/hook"), "secret": HOOK_SECRET});
        assert_eq!(refusal_code(&app, &body).await, "private_address", "{body}");
    }
    assert_eq!(app.get_json("/webhooks").await["webhooks"], json!([]));
}

#[tokio::test]
async fn events_given_up_after_the_window_are_kept_and_replayed() {
    let flags = [FLAGS, &["--webhook-retry-window", "2s"]].concat();
    let app = spawn_app_with(Backend::Sqlite, &flags).await;
    let (receiver, id, stored) = refused_visits(&app, 100, 150, 150).await;
    let since = chrono::Utc::now() - chrono::Duration::minutes(1);

    let failures_path = format!("/webhooks/{id}/failures");
    let deadline = Instant::now() + Duration::from_secs(30);
    let failures = loop {
        let failures = app.get_json(&failures_path).await;
        let given_up: i64 = failures["failures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["events"].as_i64().unwrap())
            .sum();
        if given_up == 150 {
            break failures;
        }
        assert!(Instant::now() < deadline, "{failures}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(failures["failures"][0]["error"], "answered 503");
    assert!(receiver.unique().is_empty());

    receiver.state.failing.store(false, Ordering::SeqCst);
    let oldest = failures["failures"].as_array().unwrap().last().unwrap()["id"].clone();
    let replay = |body: Value| {
        let app = &app;
        let path = format!("/webhooks/{id}/replay");
        async move {
            app.api(reqwest::Method::POST, &path)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(replay(json!({"failure": oldest})).await.status(), 200);
    eventually(Duration::from_secs(20), "the replayed failures", || {
        receiver.unique() == stored
    })
    .await;

    // From a time: the same visits once more.
    assert_eq!(replay(json!({"from": since})).await.status(), 200);
    eventually(Duration::from_secs(20), "the replay from a time", || {
        receiver.ids().len() >= 300
    })
    .await;
    for (body, code) in [
        (json!({}), "invalid_replay"),
        (json!({"failure": 999_999}), "unknown_failure"),
    ] {
        let answer = replay(body).await;
        assert_eq!(answer.status(), 422);
        assert_eq!(answer.json::<Value>().await.unwrap()["error"]["code"], code);
    }
}

/// A proxy on loopback that only counts the connections it gets.
async fn counting_proxy() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (url, count)
}

const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// The environment's proxy variables are ignored (issue 51): through a proxy, the proxy would
/// resolve names and the address checks would not apply. A sidecar process started with every
/// proxy variable pointing at a listener delivers to its receiver directly, and its `import`
/// asks its source directly; the listener gets no connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_variables_in_the_environment_are_ignored() {
    let (proxy, proxied) = counting_proxy().await;
    // This process's API and visit store; deliveries by the child process below.
    let app = spawn_app_with(Backend::Sqlite, &[FLAGS, &["--webhooks", "false"]].concat()).await;
    let receiver = Receiver::start().await;
    let code = link(&app, "spring", "r-1").await;
    subscribe(&app, hook(&receiver, 10)).await;
    let dir = testkit::temp_dir();
    let binary = env!("CARGO_BIN_EXE_shortlink-sidecar");
    let common = [
        "--database-url",
        &app.database_url,
        "--redis-url",
        &app.redis.url(),
        "--code-secret",
        SECRET_HEX,
    ];
    let with_proxy = |builder: testkit::process::Builder| {
        PROXY_VARIABLES
            .iter()
            .fold(builder, |b, name| b.env(name, &proxy))
            .env("NO_PROXY", "")
            .env("no_proxy", "")
            .env("RUST_LOG", "warn")
    };
    let sidecar = with_proxy(Lifeline::builder(binary, dir.path().join("sidecar.log")))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(common)
        .args(FLAGS)
        .capture_stdout()
        .spawn();
    sidecar.wait_for_line(Duration::from_secs(60), |line| {
        line.starts_with("shortlink-sidecar listening on ")
    });
    let store = app.visit_store().await;
    let stored: HashSet<String> = store_visits(store.as_ref(), &code, "v", 20, 10)
        .await
        .into_iter()
        .collect();
    eventually(Duration::from_secs(30), "delivered directly", || {
        receiver.unique() == stored
    })
    .await;
    drop(sidecar);

    // An import source that answers an empty page of Kutt's links.
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&asked);
    let source = axum::Router::new().fallback(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        async { axum::Json(json!({"total": 0, "data": []})) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let source_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, source).await.unwrap() });
    let import = with_proxy(Lifeline::builder(binary, dir.path().join("import.log")))
        .args(common)
        .args(["import", "--from", "kutt", "--source-url", &source_url])
        .args(["--source-key", "k", "--dry-run", "--import-allow-private"])
        .spawn();
    eventually(Duration::from_secs(30), "the import's source asked", || {
        asked.load(Ordering::SeqCst) > 0 || !import.is_alive()
    })
    .await;
    drop(import);
    assert!(
        asked.load(Ordering::SeqCst) > 0,
        "the source was asked directly"
    );
    assert_eq!(
        proxied.load(Ordering::SeqCst),
        0,
        "nothing through the proxy"
    );
}

crate::on_each_backend!(feed_pages_in_order);
