//! Drain on rejections (issue 68): delivery receipts rejecting one domain on a carrier drain it
//! within seconds through the usual drain (standby promoted, one audit row, the domain webhook)
//! and clicks do not bring it back; a usual failure rate on every domain drains nothing; a
//! carrier failing every domain is a dead route, reported and not drained; one workspace's
//! receipts never drain another's domains; a workspace without receipts drains on clicks; and
//! a real Kannel's rejection reports drain the domain its SMSC rejects; behind two sidecars, each
//! given half of the rejections, the domain is drained once, as fast.
//! SQLite only: the drain's SQL is the health job's, tested on every backend in
//! `domain_failover`; what is new here is in memory and in Redis.

use crate::deliveries::post_lines;
use crate::domain_failover::{operator, LIST, POOL};
use crate::domain_health::{add_clicks, webhook_receiver, Received, SECRET};
use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, with_key, workspace_key};
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(15);
const CARRIER: &str = "310260";
/// MCC-MNC 001-01, the test network.
const TEST_NETWORK: &str = "00101";

/// The health job every 200 ms (its webhook sends the drains), two healthy checks restore.
async fn app_with_hook() -> (TestApp, Received) {
    let (app, received, _) = app_with_flags(&[]).await;
    (app, received)
}

/// [`app_with_hook`] with `extra` flags: also the flags, for another sidecar to share.
async fn app_with_flags(extra: &[&str]) -> (TestApp, Received, Vec<String>) {
    let (hook, received) = webhook_receiver().await;
    let hook = format!("http://{hook}/hook");
    let mut flags: Vec<String> = [
        "--domain-health-every",
        "200ms",
        "--domain-health-window",
        "10m",
        "--domain-health-min-issued",
        "20",
        "--domain-drain-healthy-checks",
        "2",
        "--domain-webhook-url",
        &hook,
        "--domain-webhook-secret",
        SECRET,
    ]
    .map(str::to_owned)
    .to_vec();
    flags.extend(extra.iter().map(|flag| flag.to_string()));
    let flags_ref: Vec<&str> = flags.iter().map(String::as_str).collect();
    let app = spawn_app_with(Backend::Sqlite, &flags_ref).await;
    (app, received, flags)
}

/// A request of `key`'s as nginx sends it: the issuing lists and the pool.
fn through_nginx(
    app: &TestApp,
    key: &str,
    method: Method,
    path: &str,
    lists: (&str, &str),
) -> reqwest::RequestBuilder {
    with_key(app, key, method, path)
        .header("X-Shortlink-Public-Base", lists.0)
        .header("X-Shortlink-Pool", lists.1)
}

/// Issues `count` links with `key`: their short URLs by domain.
async fn issue(
    app: &TestApp,
    key: &str,
    count: usize,
    lists: (&str, &str),
) -> HashMap<String, Vec<String>> {
    let items: Vec<Value> = (0..count)
        .map(|i| json!({"url": format!("https://t.example/{i}")}))
        .collect();
    let request = through_nginx(app, key, Method::POST, "/links/batch", lists).json(&items);
    let body = answered(request, 200).await;
    let mut on: HashMap<String, Vec<String>> = HashMap::new();
    for result in body["results"].as_array().unwrap() {
        assert_eq!(result["status"], 201, "{result}");
        let url = result["link"]["short_url"].as_str().unwrap().to_owned();
        let host = url::Url::parse(&url)
            .unwrap()
            .host_str()
            .unwrap()
            .to_owned();
        on.entry(host).or_default().push(url);
    }
    on
}

/// One final receipt a link: `failed(i)` says which are rejected (with error `0x0b`, every
/// third `0x45`), the rest delivered.
fn receipts(
    urls: &[String],
    carrier: &str,
    tag: &str,
    failed: impl Fn(usize) -> bool,
) -> Vec<String> {
    (urls.iter().enumerate())
        .map(|(i, url)| {
            let mut receipt = json!({
                "short_url": url,
                "message_id": format!("{tag}-{i}-{url}"),
                "state": "delivered",
                "carrier": carrier,
            });
            if failed(i) {
                receipt["state"] = json!("rejected");
                receipt["error_code"] = json!(if i % 3 == 0 { "0x45" } else { "0x0b" });
            }
            receipt.to_string()
        })
        .collect()
}

async fn post_all(app: &TestApp, key: &str, lines: &[String]) {
    let (status, answers) = post_lines(app, key, lines).await;
    assert_eq!(status, 200);
    assert!(
        answers.iter().all(|a| a["status"] == 201),
        "{:?}",
        answers.iter().find(|a| a["status"] != 201)
    );
}

async fn domain(app: &TestApp, key: &str, name: &str, lists: (&str, &str)) -> Value {
    let answer = through_nginx(app, key, Method::GET, &format!("/domains/{name}"), lists)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{name}");
    answer.json().await.unwrap()
}

/// Domain `name` once it is drained (within [`SETTLE`]), as the default workspace reads it.
async fn once_drained(app: &TestApp, name: &str, lists: (&str, &str)) -> Value {
    let drained =
        || async { domain(app, API_KEY, name, lists).await["drain"]["mode"] == "drained" };
    assert!(
        eventually(SETTLE, drained).await,
        "{}",
        domain(app, API_KEY, name, lists).await
    );
    domain(app, API_KEY, name, lists).await
}

async fn drain_rows(app: &TestApp, name: &str) -> i64 {
    app.db
        .scalar(&format!(
            "SELECT COUNT(*) FROM audit_log WHERE action = 'domain.drain' AND object = '{name}'"
        ))
        .await
}

fn webhooks(received: &Received, event: &str, domain: &str) -> Vec<Value> {
    (received.lock().unwrap().iter())
        .map(|(_, body)| body.clone())
        .filter(|body| body["event"] == event && (domain.is_empty() || body["domain"] == domain))
        .collect()
}

/// Waits for the webhook `event` (on `domain`, or any when empty): those sent by then, which the
/// callers expect to be one.
async fn webhooks_once_sent(received: &Received, event: &str, domain: &str) -> Vec<Value> {
    assert!(
        eventually(SETTLE, || async {
            !webhooks(received, event, domain).is_empty()
        })
        .await,
        "no {event} webhook"
    );
    webhooks(received, event, domain)
}

/// Waits for `checks` more health checks of `name` (its `last_probe` moving).
async fn checks_pass(app: &TestApp, name: &str, checks: usize) {
    for _ in 0..checks {
        let last = domain(app, API_KEY, name, (LIST, POOL)).await["last_probe"].clone();
        assert!(
            eventually(SETTLE, || async {
                domain(app, API_KEY, name, (LIST, POOL)).await["last_probe"] != last
            })
            .await
        );
    }
}

#[tokio::test]
async fn receipts_rejecting_one_domain_on_a_carrier_drain_it_at_once_and_clicks_do_not_undo_it() {
    let (app, received) = app_with_hook().await;
    let lists = (LIST, POOL);
    // The standby's fresh links get no clicks here: pinned, so the click check leaves it be.
    operator(&app, "s9.example", "pin", None).await;
    let on = issue(&app, API_KEY, 200, lists).await;
    assert!(
        on["s1.example"].len() > 40 && on["s2.example"].len() > 40,
        "{on:?}"
    );
    // The carrier rejects every message carrying s2; s1's are delivered (one in 50 failing).
    let mut lines = receipts(&on["s1.example"], CARRIER, "a", |i| i % 50 == 7);
    lines.extend(receipts(&on["s2.example"], CARRIER, "a", |_| true));
    post_all(&app, API_KEY, &lines).await;

    let s2 = once_drained(&app, "s2.example", lists).await;
    let drain = &s2["drain"];
    assert_eq!(drain["by"], "health", "{s2}");
    let reason = drain["reason"].as_str().unwrap();
    for said in [
        "suspected-blocked: receipts",
        "carrier 310260",
        "0x0b: ",
        "0x45: ",
    ] {
        assert!(reason.contains(said), "{said} in {reason}");
    }
    let evidence = &drain["evidence"]["receipts"];
    let s2_links = on["s2.example"].len() as u64;
    assert_eq!(evidence["carrier"], CARRIER, "{s2}");
    assert_eq!(evidence["finals"], s2_links, "{s2}");
    assert_eq!(evidence["failures"], s2_links, "{s2}");
    assert_eq!(
        evidence["peer_finals"],
        on["s1.example"].len() as u64,
        "{s2}"
    );
    assert!(evidence["peer_failures"].as_u64().unwrap() <= 2, "{s2}");
    assert_eq!(
        domain(&app, API_KEY, "s1.example", lists).await["drain"]["mode"],
        "active"
    );

    // New links: none on s2, its share on the standby.
    let after = issue(&app, API_KEY, 200, lists).await;
    assert!(!after.contains_key("s2.example"), "{after:?}");
    assert!(
        after["s1.example"].len() > 40 && after["s9.example"].len() > 40,
        "{after:?}"
    );
    // One audit row, one drain webhook naming the receipts.
    assert_eq!(drain_rows(&app, "s2.example").await, 1);
    let sent = webhooks_once_sent(&received, "drain", "s2.example").await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["drain"]["evidence"]["receipts"]["carrier"], CARRIER);

    // Clicks on both domains judge s2's traffic healthy: a click drain would be restored after
    // two checks; a drain on receipts is not (it would only be rejected again).
    add_clicks(&app, "s1.example", 60).await;
    add_clicks(&app, "s2.example", 60).await;
    checks_pass(&app, "s2.example", 4).await;
    let s2 = domain(&app, API_KEY, "s2.example", lists).await;
    assert_eq!(
        s2["state"], "healthy",
        "the clicks are judged healthy: {s2}"
    );
    assert_eq!(s2["drain"]["mode"], "drained", "{s2}");
    assert_eq!(drain_rows(&app, "s2.example").await, 1);
    // An operator restores it.
    operator(&app, "s2.example", "restore", None).await;
    assert_eq!(
        domain(&app, API_KEY, "s2.example", lists).await["drain"]["mode"],
        "active"
    );
}

#[tokio::test]
async fn a_usual_failure_rate_drains_nothing_and_a_dead_route_is_reported_not_drained() {
    let (app, received) = app_with_hook().await;
    let lists = (LIST, POOL);
    let on = issue(&app, API_KEY, 600, lists).await;
    // Carrier A fails about 4% on every domain: one message in 50, and three in a row every 150.
    let usual = |i: usize| i % 50 < 1 || (i % 150 > 20 && i % 150 < 24);
    let mut lines = receipts(&on["s1.example"], "A", "usual", usual);
    lines.extend(receipts(&on["s2.example"], "A", "usual", usual));
    // Carrier B rejects everything, on every domain: a dead route.
    lines.extend(receipts(&on["s1.example"], "B", "dead", |_| true));
    lines.extend(receipts(&on["s2.example"], "B", "dead", |_| true));
    post_all(&app, API_KEY, &lines).await;

    // The same judgement that sees B dead saw A's failures: it drained nothing.
    let noted = || async {
        let notes = domain(&app, API_KEY, "s2.example", lists).await["receipt_notes"].clone();
        notes.as_array().is_some_and(|notes| !notes.is_empty())
    };
    assert!(
        eventually(SETTLE, noted).await,
        "{}",
        domain(&app, API_KEY, "s2.example", lists).await
    );
    for name in ["s1.example", "s2.example"] {
        let status = domain(&app, API_KEY, name, lists).await;
        assert_eq!(status["drain"]["mode"], "active", "{status}");
        let note = status["receipt_notes"][0].as_str().unwrap();
        assert!(note.contains("dead route: carrier B"), "{note}");
        assert!(note.contains("no domain drained"), "{note}");
        assert_eq!(drain_rows(&app, name).await, 0);
    }
    // The console's Domains page says it beside each domain.
    let mut browser = crate::console::Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page("/console/domains").await;
    for name in ["s1.example", "s2.example"] {
        let note = domain(&app, API_KEY, name, lists).await["receipt_notes"][0].clone();
        let shown = format!(
            "<small class=\"receipt-note\">{}</small>",
            maud::html! { (note.as_str().unwrap()) }.into_string()
        );
        assert!(page.contains(&shown), "{shown} in {page}");
    }
    let sent = webhooks_once_sent(&received, "dead-route", "").await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        (&sent[0]["carrier"], &sent[0]["dead_route"]),
        (&json!("B"), &json!(true))
    );
    assert_eq!(sent[0]["domains"], json!(["s1.example", "s2.example"]));
    assert!(webhooks(&received, "drain", "").is_empty());
    let page = app.metrics_page().await;
    assert!(
        page.contains(r#"shortlink_carrier_dead_route{workspace="default",carrier="B"} 1"#),
        "{page}"
    );
}

#[tokio::test]
async fn one_workspaces_receipts_never_drain_anothers_domains_and_without_receipts_clicks_drain() {
    const LISTS: &str = "https://s1.example https://s2.example https://s9.example standby \
                         [brand-a] https://a1.example https://a2.example \
                         [brand-b] https://b1.example https://b2.example";
    const ALL: &str =
        "s1.example s2.example s9.example a1.example a2.example b1.example b2.example";
    let lists = (LISTS, ALL);
    let (app, _received) = app_with_hook().await;
    let admin = operator_key(&app).await;
    create_workspace(&app, &admin, "brand-a").await;
    create_workspace(&app, &admin, "brand-b").await;
    let a = workspace_key(&app, &admin, "brand-a", "issuer").await;
    let b = workspace_key(&app, &admin, "brand-b", "issuer").await;
    let a_on = issue(&app, &a, 100, lists).await;
    let b_on = issue(&app, &b, 200, lists).await;
    assert!(a_on["a1.example"].len() > 20, "{a_on:?}");
    // B's links, sent with A's domains in their URLs (a code answers on every pool domain):
    // rejected on a1, delivered on a2. Not A's receipts: they judge none of A's domains (on a
    // carrier of their own, judged before CARRIER's in each tick: were they counted, a1 would
    // be drained by the time b1 is).
    let as_a = |urls: &[String], host: &str| -> Vec<String> {
        (urls.iter())
            .map(|url| url.replace("b1.example", host).replace("b2.example", host))
            .collect()
    };
    let b_links: Vec<String> = b_on.values().flatten().cloned().collect();
    let (first, second) = b_links.split_at(b_links.len() / 2);
    let mut forged = receipts(&as_a(first, "a1.example"), TEST_NETWORK, "forged", |_| true);
    forged.extend(receipts(
        &as_a(second, "a2.example"),
        TEST_NETWORK,
        "forged",
        |_| false,
    ));
    // Refused: A's domains are not B's (issue 77).
    let (status, answers) = post_lines(&app, &b, &forged).await;
    assert_eq!(status, 200);
    assert!(answers
        .iter()
        .all(|a| a["error"]["code"] == "foreign_domain"));
    // And B's own: rejected on b1, delivered on b2 (B's drain shows the judgement ran).
    let mut lines = receipts(&b_on["b1.example"], CARRIER, "own", |_| true);
    lines.extend(receipts(&b_on["b2.example"], CARRIER, "own", |_| false));
    post_all(&app, &b, &lines).await;
    let b1_drained =
        || async { domain(&app, &b, "b1.example", lists).await["drain"]["mode"] == "drained" };
    assert!(eventually(SETTLE, b1_drained).await);
    for name in ["a1.example", "a2.example"] {
        let status = domain(&app, &a, name, lists).await;
        assert_eq!(status["drain"]["mode"], "active", "{status}");
        assert_eq!(status["receipt_notes"], json!([]), "{status}");
    }
    assert_eq!(drain_rows(&app, "a1.example").await, 0);

    // The default workspace sends no receipts: its domains drain on clicks, as before.
    let d_on = issue(&app, API_KEY, 200, lists).await;
    assert!(d_on["s1.example"].len() > 40, "{d_on:?}");
    add_clicks(&app, "s1.example", 60).await;
    let s2_drained =
        || async { domain(&app, API_KEY, "s2.example", lists).await["drain"]["mode"] == "drained" };
    assert!(eventually(SETTLE, s2_drained).await);
    let s2 = domain(&app, API_KEY, "s2.example", lists).await;
    assert!(
        s2["drain"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("suspected-blocked: 0 clicks"),
        "{s2}"
    );
    assert!(s2["drain"]["evidence"].get("receipts").is_none(), "{s2}");
}

/// Through a real Kannel (Debian's 1.4.5, testkit) to an SMSC that rejects every message
/// carrying s2 and delivers the others: the reports Kannel calls back with (`dlr-url` naming
/// the short URL, docs/DELIVERIES.md) drain s2, and new links go to the standby.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_kannels_rejection_reports_drain_the_domain_the_smsc_rejects() {
    use crate::deliveries::{callback_token, kannel_on_smsc, send_through_kannel};
    use testkit::Verdict;
    const PER_DOMAIN: usize = 24;
    let (app, _received) = app_with_hook().await;
    let lists = (LIST, POOL);
    let (_smsc, kannel) = kannel_on_smsc(|text| match text.contains("s2.example") {
        true => Verdict::Reject("88 destination blocked"),
        false => Verdict::Deliver,
    });
    let (_, token) = callback_token(&app, API_KEY, "kannel", None).await;
    let on = issue(&app, API_KEY, 120, lists).await;
    let mut sent = 0;
    for host in ["s1.example", "s2.example"] {
        assert!(on[host].len() >= PER_DOMAIN, "{on:?}");
        for short_url in &on[host][..PER_DOMAIN] {
            let (to, mid) = (format!("+44740000{sent:04}"), format!("m-{sent}"));
            let text = format!("Sale: {short_url}");
            send_through_kannel(&app, &kannel, &token, (&to, &mid), (short_url, &text), "19").await;
            sent += 1;
        }
    }
    let drained =
        || async { domain(&app, API_KEY, "s2.example", lists).await["drain"]["mode"] == "drained" };
    assert!(
        eventually(Duration::from_secs(60), drained).await,
        "{}\n{}",
        domain(&app, API_KEY, "s2.example", lists).await,
        kannel.logs()
    );
    let s2 = domain(&app, API_KEY, "s2.example", lists).await;
    let receipts = &s2["drain"]["evidence"]["receipts"];
    assert!(receipts["failures"].as_u64().unwrap() >= 20, "{s2}");
    assert_eq!(receipts["failures"], receipts["finals"], "{s2}");
    assert_eq!(receipts["peer_failures"], 0, "{s2}");
    assert_eq!(
        domain(&app, API_KEY, "s1.example", lists).await["drain"]["mode"],
        "active"
    );
    let after = issue(&app, API_KEY, 60, lists).await;
    assert!(
        !after.contains_key("s2.example") && after.contains_key("s9.example"),
        "{after:?}"
    );
}

/// Behind two sidecars on one database and Redis, each given half of a blocked domain's
/// rejections (and half of its peers' deliveries): neither half reaches `--domain-receipts-min`,
/// the whole does. Both judge every sidecar's counts: the domain is drained with the whole
/// counts as evidence, within the time one sidecar given all of them takes (the first test's
/// bound), and once (one audit row, one webhook).
#[tokio::test]
async fn behind_two_sidecars_each_given_half_the_rejections_the_domain_is_drained_once() {
    const EACH: usize = 40;
    let lists = (LIST, POOL);
    let (app, received, flags) = app_with_flags(&["--domain-receipts-min", "30"]).await;
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let config = app.config(&flags);
    let other = shortlink_sidecar::Application::build(&config)
        .await
        .unwrap();
    let other = format!("http://{}", other_address(other));
    operator(&app, "s9.example", "pin", None).await;
    let on = issue(&app, API_KEY, 200, lists).await;
    assert!(
        on["s1.example"].len() >= EACH && on["s2.example"].len() >= EACH,
        "{on:?}"
    );
    let mut lines = receipts(&on["s1.example"][..EACH], CARRIER, "h", |i| i == 7);
    lines.extend(receipts(&on["s2.example"][..EACH], CARRIER, "h", |_| true));
    // Each sidecar is given every other line: half of each domain's.
    let (mine, theirs): (Vec<_>, Vec<_>) =
        lines.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let body = |half: Vec<(usize, String)>| {
        (half.into_iter().map(|(_, line)| line))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let to_other = |method: Method, path: &str| {
        (app.client.request(method, format!("{other}/api/v1{path}")))
            .bearer_auth(API_KEY)
            .header("X-Shortlink-Public-Base", lists.0)
            .header("X-Shortlink-Pool", lists.1)
    };
    let other_mode = || async {
        let answer = to_other(Method::GET, "/domains/s2.example")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        answer.json::<Value>().await.unwrap()["drain"]["mode"].clone()
    };
    // The other sidecar learns the issuing lists as from nginx.
    assert_eq!(other_mode().await, "active");

    let started = std::time::Instant::now();
    let answer = with_key(&app, API_KEY, Method::POST, "/deliveries")
        .header("content-type", "application/x-ndjson")
        .body(body(mine));
    let (mine, theirs_sent) = tokio::join!(
        answer.send(),
        to_other(Method::POST, "/deliveries")
            .header("content-type", "application/x-ndjson")
            .body(body(theirs))
            .send()
    );
    assert_eq!(mine.unwrap().status(), 200);
    assert_eq!(theirs_sent.unwrap().status(), 200);
    let s2 = once_drained(&app, "s2.example", lists).await;
    tracing::info!(elapsed = ?started.elapsed(), "drained behind two sidecars");
    let evidence = &s2["drain"]["evidence"]["receipts"];
    assert_eq!(
        (&evidence["finals"], &evidence["failures"]),
        (&json!(EACH), &json!(EACH)),
        "both sidecars' receipts judged together: {s2}"
    );
    assert_eq!(evidence["peer_finals"], json!(EACH), "{s2}");
    // Once the other sidecar sees it drained too, neither drains it again.
    assert!(eventually(SETTLE, || async { other_mode().await == "drained" }).await);
    assert_eq!(drain_rows(&app, "s2.example").await, 1);
    assert_eq!(
        webhooks_once_sent(&received, "drain", "s2.example")
            .await
            .len(),
        1
    );
}

/// Serves `server` in the background: its address.
fn other_address(server: shortlink_sidecar::Application) -> std::net::SocketAddr {
    let address = server.local_addr();
    tokio::spawn(async move {
        let _ = server.run_until(std::future::pending()).await;
    });
    address
}

/// Forged receipts (issue 77), with a workspace-made Kannel callback token: 30 rejections of
/// ONE link under 30 made-up message ids on s1, beside 30 delivered links on s2, count as one
/// link and drain nothing; hosts outside the workspace (`evil.example`, another brand's domain)
/// are refused and store nothing; another brand's link is a missing one. Then rejections of 25
/// distinct links on s1 do drain it.
#[tokio::test]
async fn forged_receipts_of_one_link_drain_nothing_and_distinct_links_do() {
    const LISTS: &str =
        "https://s1.example https://s2.example https://s9.example standby [brand-b] https://b1.example";
    const ALL: &str = "s1.example s2.example s9.example b1.example";
    let lists = (LISTS, ALL);
    let (app, _received) = app_with_hook().await;
    operator(&app, "s9.example", "pin", None).await;
    let admin = operator_key(&app).await;
    create_workspace(&app, &admin, "brand-b").await;
    let b = workspace_key(&app, &admin, "brand-b", "issuer").await;
    let on = issue(&app, API_KEY, 200, lists).await;
    let b_on = issue(&app, &b, 5, lists).await;
    assert!(
        on["s1.example"].len() > 60 && on["s2.example"].len() > 40,
        "{on:?}"
    );
    let (_, token) = crate::deliveries::callback_token(&app, API_KEY, "kannel", None).await;
    let dlr = |short_url: &str, mid: &str, kind: u8| {
        let url = app.url(&format!(
            "/callbacks/{token}/kannel?short_url={short_url}&mid={mid}&type={kind}&smsc=carrierX"
        ));
        let client = app.client.clone();
        async move { client.get(url).send().await.unwrap().status().as_u16() }
    };
    let one_link = on["s2.example"][0].replace("s2.example", "s1.example");
    for i in 0..30 {
        assert_eq!(dlr(&one_link, &format!("fake-{i}"), 16).await, 201);
        assert_eq!(
            dlr(&on["s2.example"][i + 1], &format!("ok-{i}"), 1).await,
            201
        );
    }
    // Outside the workspace: refused, nothing stored; another brand's link: missing.
    let code = one_link.rsplit('/').next().unwrap();
    for host in ["evil.example", "b1.example"] {
        let url = format!("https://{host}/{code}");
        assert_eq!(dlr(&url, &format!("x-{host}"), 16).await, 422);
    }
    let theirs = b_on["b1.example"][0].replace("b1.example", "s1.example");
    assert_eq!(dlr(&theirs, "theirs", 16).await, 404);
    let hosts = (app.db)
        .texts("SELECT DISTINCT short_domain FROM delivery_messages ORDER BY 1")
        .await;
    assert_eq!(hosts, ["s1.example", "s2.example"]);

    // A dead route on another carrier, posted after: once it is noted, the judgement has seen
    // every forged receipt, and s1 is still active.
    let mut dead = receipts(&on["s1.example"][1..26], "Z", "dead", |_| true);
    dead.extend(receipts(&on["s2.example"][31..], "Z", "dead", |_| true));
    post_all(&app, API_KEY, &dead).await;
    let noted = || async {
        let notes = domain(&app, API_KEY, "s1.example", lists).await["receipt_notes"].clone();
        notes.as_array().is_some_and(|notes| !notes.is_empty())
    };
    assert!(eventually(SETTLE, noted).await);
    let s1 = domain(&app, API_KEY, "s1.example", lists).await;
    assert_eq!(s1["drain"]["mode"], "active", "{s1}");
    assert_eq!(drain_rows(&app, "s1.example").await, 0);

    // 25 distinct links rejected on s1 on the same carrier: drained.
    let rejected = receipts(&on["s1.example"][26..51], "carrierX", "real", |_| true);
    post_all(&app, API_KEY, &rejected).await;
    let s1 = once_drained(&app, "s1.example", lists).await;
    let evidence = &s1["drain"]["evidence"]["receipts"];
    assert_eq!(evidence["finals"], 26, "the forged link counts once: {s1}");
}
