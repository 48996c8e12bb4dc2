//! The domain health job on loopback: a DNS server, an edge answering the canary and a webhook
//! receiver, all in the test. Links issued on two domains, clicks on one only → the other is
//! suspected blocked (webhook once), a domain resolving elsewhere is unreachable, a canary
//! answering the wrong target is degraded; clicks coming back, the DNS record put back and the
//! canary fixed make each healthy again.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

pub(crate) const SECRET: &str = "webhook-secret-0123456789";
const CANARY_TARGET: &str = "https://canary.example/ok";

/// Answers A queries: `s3.example` → 10.9.9.9 (not the edge) while `moved`, any other name (and
/// s3 once put back) → 127.0.0.1.
async fn dns_server(moved: Arc<AtomicBool>) -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                return;
            };
            let query = &buf[..n];
            let name_end = 12 + query[12..].iter().position(|&b| b == 0).unwrap();
            let ip = if moved.load(Ordering::Relaxed)
                && query[12..name_end].windows(2).any(|w| w == b"s3")
            {
                [10, 9, 9, 9]
            } else {
                [127, 0, 0, 1]
            };
            let mut answer = query[..name_end + 5].to_vec();
            answer[2] |= 0x80;
            answer[7] = 1;
            answer.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
            answer.extend_from_slice(&ip);
            let _ = socket.send_to(&answer, from).await;
        }
    });
    addr
}

/// Reads one HTTP request: (head, body).
async fn read_request(stream: &mut tokio::net::TcpStream) -> (String, Vec<u8>) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).into_owned();
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return (head, data[end + 4..end + 4 + length].to_vec());
            }
        }
    }
    (String::from_utf8_lossy(&data).into_owned(), Vec::new())
}

/// The edge: the canary redirects to its target, except on `s4.example` while `wrong`.
async fn edge(wrong: Arc<AtomicBool>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (head, _) = read_request(&mut stream).await;
            let target = if wrong.load(Ordering::Relaxed) && head.contains("Host: s4.example") {
                "https://wrong.example/"
            } else {
                CANARY_TARGET
            };
            let answer =
                format!("HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n");
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    addr
}

pub(crate) type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// Keeps (signature, body) of every POST.
pub(crate) async fn webhook_receiver() -> (SocketAddr, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received: Received = Arc::default();
    let kept = Arc::clone(&received);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (head, body) = read_request(&mut stream).await;
            let signed = head
                .lines()
                .find_map(|l| l.strip_prefix("X-Shortlink-Signature: "))
                .unwrap_or_default()
                .to_owned();
            assert!(shortlink_core::signing::verify(SECRET.as_bytes(), &signed, &body).is_some());
            kept.lock()
                .unwrap()
                .push((signed, serde_json::from_slice(&body).unwrap()));
            let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await;
        }
    });
    (addr, received)
}

const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 \
                     (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";

/// `count` human clicks on `domain`, stored as the visit consumer stores them (raw visits and the
/// per-minute counts the health check reads).
pub(crate) async fn add_clicks(app: &TestApp, domain: &str, count: usize) {
    use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
    let now = chrono::Utc::now().timestamp_millis().to_string();
    // Clicks of a link: a code no link holds is dropped once the installation has workspaces.
    let code = (app.db.texts("SELECT code FROM links ORDER BY code").await)
        .into_iter()
        .next()
        .unwrap_or_else(|| "x".to_owned());
    let visits: Vec<_> = (0..count)
        .map(|i| {
            let fields = [
                ("c", code.as_str()),
                ("t", &now),
                ("ua", PHONE),
                ("host", domain),
            ]
            .map(|(k, v)| (k, v.to_owned()));
            let event = VisitEvent::from_fields(format!("{now}-{domain}-{i}"), fields).unwrap();
            Enricher::new(GeoDb::disabled(), false).enrich(&event)
        })
        .collect();
    let store = app.visit_store().await;
    assert_eq!(
        store.store_batch(&visits, false).await.unwrap().inserted,
        count as u64
    );
}

/// An app whose domain health job runs quickly, resolving the short domains through `dns` and
/// expecting them on the edge 127.0.0.1, with `extra` flags.
async fn app_resolving_through(dns: &str, extra: &[&str]) -> TestApp {
    let resolving = [
        "--domain-health-resolver",
        dns,
        "--edge-addresses",
        "127.0.0.1",
    ];
    spawn_app_with(
        Backend::Sqlite,
        &[&QUICK_DOMAIN_HEALTH[..], &resolving, extra].concat(),
    )
    .await
}

/// The flags of a canary (code `canary1`) checked through `edge`, its health changes sent to
/// `hook` signed with [`SECRET`].
fn canary_alerting<'a>(edge: &'a str, hook: &'a str) -> [&'a str; 10] {
    [
        "--canary-edge",
        edge,
        "--canary-code",
        "canary1",
        "--canary-target",
        CANARY_TARGET,
        "--domain-webhook-url",
        hook,
        "--domain-webhook-secret",
        SECRET,
    ]
}

async fn state_of(app: &TestApp, domain: &str) -> Value {
    let response = app
        .api(Method::GET, &format!("/domains/{domain}"))
        .send()
        .await
        .unwrap();
    response.json().await.unwrap()
}

pub(crate) fn changes(received: &Received, domain: &str) -> Vec<Value> {
    received
        .lock()
        .unwrap()
        .iter()
        // State changes only, not the drains they cause (issue 55, domain_failover.rs).
        .filter(|(_, body)| body["domain"] == domain && body["event"] == "state")
        .map(|(_, body)| body.clone())
        .collect()
}

#[tokio::test]
async fn domains_go_suspected_blocked_unreachable_degraded_and_recover() {
    let (moved, wrong) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(true)),
    );
    let (dns, edge, (hook, received)) = (
        dns_server(Arc::clone(&moved)).await,
        edge(Arc::clone(&wrong)).await,
        webhook_receiver().await,
    );
    let (dns, edge, hook) = (
        dns.to_string(),
        edge.to_string(),
        format!("http://{hook}/hook"),
    );
    let app = app_resolving_through(&dns, &canary_alerting(&edge, &hook)).await;
    let items: Vec<Value> = (0..200)
        .map(|i| json!({"url": format!("https://t.example/{i}")}))
        .collect();
    let response = app
        .api(Method::POST, "/links/batch")
        .header(
            "X-Shortlink-Public-Base",
            "https://s1.example https://s2.example",
        )
        .header(
            "X-Shortlink-Pool",
            "s1.example s2.example s3.example s4.example",
        )
        .json(&items)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap();
    add_clicks(&app, "s1.example", 60).await;

    let settled = eventually(Duration::from_secs(10), || async {
        state_of(&app, "s2.example").await["state"] == "suspected-blocked"
            && state_of(&app, "s3.example").await["state"] == "unreachable"
            && state_of(&app, "s4.example").await["state"] == "degraded"
    })
    .await;
    assert!(
        settled,
        "{}",
        app.api(Method::GET, "/domains")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    );
    let s1 = state_of(&app, "s1.example").await;
    assert_eq!(s1["state"], "healthy", "{s1}");
    assert!(s1["issued"].as_u64().unwrap() > 100, "{s1}");
    let s3 = state_of(&app, "s3.example").await;
    assert!(
        s3["reasons"][0].as_str().unwrap().contains("10.9.9.9"),
        "{s3}"
    );
    let s4 = state_of(&app, "s4.example").await;
    assert!(
        s4["reasons"][0].as_str().unwrap().contains("wrong.example"),
        "{s4}"
    );

    assert!(
        eventually(Duration::from_secs(5), || async {
            changes(&received, "s2.example").len() == 1
        })
        .await
    );
    let change = &changes(&received, "s2.example")[0];
    assert_eq!(change["state"], "suspected-blocked");
    // Healthy while nobody clicked anywhere (nothing to compare with), or not yet checked.
    assert!(
        change["previous"] == "healthy" || change["previous"].is_null(),
        "{change}"
    );
    assert!(
        changes(&received, "s1.example").is_empty(),
        "healthy from the start: no change"
    );

    // Clicks come back on s2: healthy again, reported once more.
    add_clicks(&app, "s2.example", 60).await;
    assert!(
        eventually(Duration::from_secs(10), || async {
            state_of(&app, "s2.example").await["state"] == "healthy"
        })
        .await
    );
    assert!(
        eventually(Duration::from_secs(5), || async {
            changes(&received, "s2.example").len() == 2
        })
        .await
    );
    let first_probe = state_of(&app, "s2.example").await["last_probe"].clone();
    assert!(
        eventually(Duration::from_secs(5), || async {
            state_of(&app, "s2.example").await["last_probe"] != first_probe
        })
        .await
    );
    let s2 = changes(&received, "s2.example");
    assert_eq!(s2.len(), 2, "one webhook per change: {s2:?}");
    assert_eq!(
        (s2[1]["state"].clone(), s2[1]["previous"].clone()),
        (json!("healthy"), json!("suspected-blocked"))
    );

    // The DNS record put back and the canary fixed: both healthy again, each reported.
    moved.store(false, Ordering::Relaxed);
    wrong.store(false, Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(10), || async {
            state_of(&app, "s3.example").await["state"] == "healthy"
                && state_of(&app, "s4.example").await["state"] == "healthy"
        })
        .await
    );
    for domain in ["s3.example", "s4.example"] {
        assert!(
            eventually(Duration::from_secs(5), || async {
                changes(&received, domain)
                    .last()
                    .is_some_and(|c| c["state"] == "healthy")
            })
            .await,
            "{domain}: {:?}",
            changes(&received, domain)
        );
    }

    let response = app
        .api(Method::GET, "/domains/nope.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_domain");
}

#[tokio::test]
async fn a_webhook_url_that_is_not_http_is_refused_at_start() {
    for (url, needle) in [
        ("ftp://hooks.example/x", "not an http:// or https:// URL"),
        ("hooks", "not an http:// or https:// URL"),
    ] {
        let redis = testkit::RedisServer::start();
        let dir = testkit::temp_dir();
        let flags = [
            "--domain-webhook-url",
            url,
            "--domain-webhook-secret",
            SECRET,
        ];
        let error = (start_error(dir.path(), &redis, &flags).await)
            .unwrap_or_else(|| panic!("{url} accepted"));
        assert!(error.contains(needle), "{url}: {error}");
    }
}

/// The pool headers count only from nginx (issue 51): sent straight to the sidecar, without the
/// proxy secret or with a wrong one, they shape that request's answer but add no name to the
/// domains the job checks; with the secret (nginx's requests), they do.
#[tokio::test]
async fn pool_names_sent_around_nginx_are_never_checked() {
    let app = spawn_app_with(Backend::Sqlite, &["--short-domains", "s1.example"]).await;
    let direct = reqwest::Client::new();
    for secret in [None, Some("wrong-secret-0123456789")] {
        let mut request = direct
            .post(app.url("/api/v1/links"))
            .bearer_auth(API_KEY)
            .header("X-Shortlink-Pool", "junk1.example s1.example")
            .header("X-Shortlink-Public-Base", "https://junk2.example")
            .json(&json!({"url": "https://t.example/x"}));
        if let Some(secret) = secret {
            request = request.header("X-Shortlink-Proxy-Secret", secret);
        }
        let created = request.send().await.unwrap();
        assert_eq!(created.status(), 201);
        let link: Value = created.json().await.unwrap();
        assert!(
            link["short_url"]
                .as_str()
                .unwrap()
                .starts_with("https://junk2.example/"),
            "the request's own answer follows its header: {link}"
        );
        // Its pool still refuses targets on those names (the request's own rule).
        let own = direct
            .post(app.url("/api/v1/links"))
            .bearer_auth(API_KEY)
            .header("X-Shortlink-Pool", "junk1.example")
            .json(&json!({"url": "https://junk1.example/loop"}))
            .send()
            .await
            .unwrap();
        assert_eq!(own.status(), 422);
    }
    let listed = |domains: &Value, name: &str| {
        domains["domains"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["domain"] == name)
    };
    let domains = app.get_json("/domains").await;
    assert!(listed(&domains, "s1.example"), "{domains}");
    for junk in ["junk1.example", "junk2.example"] {
        assert!(!listed(&domains, junk), "{junk} is checked: {domains}");
    }
    // The same headers with nginx's secret (the app's own client sends it) are nginx's.
    let response = app
        .api(Method::GET, "/domains")
        .header("X-Shortlink-Pool", "pool.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(listed(&app.get_json("/domains").await, "pool.example"));
}

/// An alert sent just before the shutdown reaches a slow receiver before the server has stopped:
/// the health job waits for its webhooks in flight within the drain (a detached delivery was
/// cut off with the process, unsent and unlogged).
#[tokio::test]
async fn an_alert_in_flight_at_shutdown_is_delivered_within_the_drain() {
    const SLOW: Duration = Duration::from_secs(1);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    // (arrived, answered): answered is counted before the answer is written, so a sender that
    // has read its answer is counted.
    let counts: Arc<Mutex<(usize, usize)>> = Arc::default();
    let kept = Arc::clone(&counts);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let kept = Arc::clone(&kept);
            tokio::spawn(async move {
                read_request(&mut stream).await;
                kept.lock().unwrap().0 += 1;
                tokio::time::sleep(SLOW).await;
                kept.lock().unwrap().1 += 1;
                let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await;
            });
        }
    });
    let app = spawn_app(Backend::Sqlite).await;
    // The canary's edge refuses connections: every domain is unreachable at the first check,
    // a change that sends an alert.
    let hourly = [
        "--short-domains",
        "s1.example",
        "--domain-health-every",
        "1h",
    ];
    let alerting = canary_alerting("127.0.0.1:1", &hook);
    let config = app.config(&[&hourly[..], &alerting].concat());
    let server = shortlink_sidecar::Application::build(&config)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    let arrived = eventually(Duration::from_secs(10), || async {
        counts.lock().unwrap().0 > 0
    })
    .await;
    assert!(arrived, "no alert reached the receiver");
    let signalled = std::time::Instant::now();
    stop.send(()).unwrap();
    let drain = shortlink_core::background::DRAIN;
    tokio::time::timeout(drain * 2, running)
        .await
        .expect("run_until returns")
        .unwrap()
        .unwrap();
    let took = signalled.elapsed();
    let (arrived, answered) = *counts.lock().unwrap();
    assert!(
        answered >= 1 && answered == arrived,
        "stopped with alerts unanswered: {answered} of {arrived} answered, {took:?} after the signal"
    );
    assert!(took < drain, "{took:?}");
}

/// A domain whose links only a scanner fetches sees no people: a carrier's scanner sweeping a
/// campaign's links on s2 (one /24, one browser agent, every link within seconds: hindsight's
/// sweep, issue 78) keeps it suspected blocked beside s1, which people click.
#[tokio::test]
async fn a_domain_only_a_scanner_clicks_is_suspected_blocked() {
    use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
    use shortlink_visits::hindsight::Hindsight;
    let dns = dns_server(Arc::new(AtomicBool::new(false)))
        .await
        .to_string();
    let app = app_resolving_through(&dns, &[]).await;
    let items: Vec<Value> = (0..120)
        .map(|i| json!({"url": format!("https://t.example/{i}"), "campaign": "spring", "ref": format!("r{i}")}))
        .collect();
    let body = batch_answer(
        app.api(Method::POST, "/links/batch")
            .header(
                "X-Shortlink-Public-Base",
                "https://s1.example https://s2.example",
            )
            .header("X-Shortlink-Pool", "s1.example s2.example")
            .json(&items),
    )
    .await;
    let on_s2: Vec<String> = (body["results"].as_array().unwrap().iter())
        .filter_map(|r| r["link"]["short_url"].as_str())
        .filter_map(|url| url.strip_prefix("https://s2.example/"))
        .map(str::to_owned)
        .collect();
    assert!(on_s2.len() >= 40, "{} on s2", on_s2.len());
    add_clicks(&app, "s1.example", 60).await;
    let now = chrono::Utc::now().timestamp_millis();
    let mut sweep: Vec<_> = (on_s2.iter().enumerate())
        .map(|(i, code)| {
            let fields = [
                ("c", code.clone()),
                ("t", (now + i as i64 * 30).to_string()),
                ("ip", format!("198.51.100.{}", i % 200)),
                ("ua", PHONE.to_owned()),
                ("host", "s2.example".to_owned()),
            ];
            let event = VisitEvent::from_fields(format!("{now}-s2-{i}"), fields).unwrap();
            Enricher::new(GeoDb::disabled(), false).enrich(&event)
        })
        .collect();
    let store = app.visit_store().await;
    let codes = Hindsight::codes(&sweep);
    let facts = store.link_facts(&codes).await.unwrap();
    let corrections = Hindsight::default().judge(&mut sweep, &facts);
    store
        .store_corrected(&sweep, &corrections, false)
        .await
        .unwrap();

    let settled = eventually(Duration::from_secs(10), || async {
        state_of(&app, "s2.example").await["state"] == "suspected-blocked"
    })
    .await;
    assert!(settled, "{}", state_of(&app, "s2.example").await);
    assert_eq!(state_of(&app, "s1.example").await["state"], "healthy");
    let scanners = app
        .db
        .scalar("SELECT COALESCE(SUM(scanners), 0) FROM domain_clicks WHERE short_domain = 's2.example'")
        .await;
    assert_eq!(scanners, on_s2.len() as i64);
}
