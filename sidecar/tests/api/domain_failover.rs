//! Domain failover (issue 55) on each backend, with the health job checking every 100 ms: two
//! active domains and a standby, clicks on one only → the other is drained within a check, on
//! both sidecars of one database (one transition, audited and sent once), its links go to the
//! standby; clicks back → restored after N healthy checks. An operator drains, restores and
//! pins by hand (API and console); every domain drained → issuing goes on and says so; a batch
//! running at the drain moves its remaining links; a change another sidecar claimed first is
//! taken, not made twice; the re-send list equals the unclicked links the raw rows give.

use crate::domain_health::{add_clicks, webhook_receiver, Received, SECRET};
use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

pub(crate) const LIST: &str = "https://s1.example https://s2.example https://s9.example standby";
pub(crate) const POOL: &str = "s1.example s2.example s9.example";
const SETTLE: Duration = Duration::from_secs(15);

fn flags(hook: &str) -> Vec<String> {
    let draining = [
        "--domain-drain-healthy-checks",
        "2",
        "--domain-webhook-url",
        hook,
        "--domain-webhook-secret",
        SECRET,
    ];
    (QUICK_DOMAIN_HEALTH.iter().chain(&draining))
        .map(|flag| flag.to_string())
        .collect()
}

/// A request as nginx sends it: the issuing list and the pool.
pub(crate) fn through_nginx(app: &TestApp, method: Method, path: &str) -> reqwest::RequestBuilder {
    app.api(method, path)
        .header("X-Shortlink-Public-Base", LIST)
        .header("X-Shortlink-Pool", POOL)
}

/// The spring campaign's links without a click on s2 (`GET /domains/s2.example/unclicked`, as
/// nginx sends it): the answer, asserted 200.
pub(crate) async fn unclicked_spring_on_s2(app: &TestApp) -> reqwest::Response {
    let path = "/domains/s2.example/unclicked?campaign=spring";
    let response = through_nginx(app, Method::GET, path).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response
}

/// An NDJSON list of links, by their code.
pub(crate) fn by_code(text: &str) -> HashMap<String, Value> {
    (text.lines())
        .map(|line| {
            let line: Value = serde_json::from_str(line).unwrap();
            (line["code"].as_str().unwrap().to_owned(), line)
        })
        .collect()
}

/// Issues `count` links on `app`; the number on each domain.
async fn issue(app: &TestApp, count: usize) -> HashMap<String, usize> {
    let items: Vec<Value> = (0..count)
        .map(|i| json!({"url": format!("https://t.example/{i}")}))
        .collect();
    let body = batch_answer(through_nginx(app, Method::POST, "/links/batch").json(&items)).await;
    let mut on = HashMap::new();
    for result in body["results"].as_array().unwrap() {
        assert_eq!(result["status"], 201, "{result}");
        let url = result["link"]["short_url"].as_str().unwrap();
        let host = url::Url::parse(url).unwrap().host_str().unwrap().to_owned();
        *on.entry(host).or_insert(0) += 1;
    }
    on
}

async fn domain(app: &TestApp, name: &str) -> Value {
    let response = through_nginx(app, Method::GET, &format!("/domains/{name}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn mode(app: &TestApp, name: &str) -> String {
    domain(app, name).await["drain"]["mode"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub(crate) async fn operator(
    app: &TestApp,
    name: &str,
    action: &str,
    body: Option<Value>,
) -> Value {
    let mut request = through_nginx(app, Method::POST, &format!("/domains/{name}/{action}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "{action} {name}");
    response.json().await.unwrap()
}

async fn audit_rows(app: &TestApp, action: &str, name: &str) -> i64 {
    app.db
        .scalar(&format!(
            "SELECT COUNT(*) FROM audit_log WHERE action = '{action}' AND object = '{name}'"
        ))
        .await
}

fn drain_webhooks(received: &Received, name: &str, to: &str) -> usize {
    (received.lock().unwrap().iter())
        .filter(|(_, body)| body["domain"] == name && body["drain"]["mode"] == to)
        .count()
}

/// Waits for `checks` more checks of `name` on `app` (its `last_probe` moving).
async fn checks_pass(app: &TestApp, name: &str, checks: usize) {
    for _ in 0..checks {
        let last = domain(app, name).await["last_probe"].clone();
        assert!(
            eventually(SETTLE, || async {
                domain(app, name).await["last_probe"] != last
            })
            .await
        );
    }
}

async fn a_blocked_domain_is_drained_on_every_sidecar_and_restored_by_healthy_checks(
    backend: Backend,
) {
    let (hook, received) = webhook_receiver().await;
    let hook = format!("http://{hook}/hook");
    let flags = flags(&hook);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let dir = testkit::temp_dir();
    let database_url = backend.fresh_database_url(dir.path());
    let a = spawn_app_at(backend, database_url.clone(), dir, &flags).await;
    let b = spawn_app_at(backend, database_url, testkit::temp_dir(), &flags).await;
    // B names the domains too (its checks and snapshot cover them).
    assert_eq!(mode(&b, "s2.example").await, "active");
    // The standby's fresh links get no clicks here: pinned, so that the job does not drain it
    // too while the test counts its links.
    operator(&a, "s9.example", "pin", None).await;

    let before = issue(&a, 200).await;
    assert!(
        before["s1.example"] > 50 && before["s2.example"] > 50,
        "{before:?}"
    );
    assert!(
        !before.contains_key("s9.example"),
        "no standby in normal times: {before:?}"
    );
    add_clicks(&a, "s1.example", 60).await;

    assert!(
        eventually(SETTLE, || async {
            mode(&a, "s2.example").await == "drained" && mode(&b, "s2.example").await == "drained"
        })
        .await,
        "{} / {}",
        domain(&a, "s2.example").await,
        domain(&b, "s2.example").await
    );
    let s2 = domain(&a, "s2.example").await;
    assert_eq!(s2["drain"]["by"], "health", "{s2}");
    assert_eq!(s2["drain"]["evidence"]["clicks"], 0, "{s2}");
    assert!(
        s2["drain"]["evidence"]["expected_clicks"].as_f64().unwrap() > 5.0,
        "{s2}"
    );
    assert!(
        s2["drain"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("suspected-blocked"),
        "{s2}"
    );
    assert_eq!(mode(&a, "s1.example").await, "active");

    // New links on both sidecars: none on s2, its share on the standby.
    for app in [&a, &b] {
        let after = issue(app, 200).await;
        assert!(!after.contains_key("s2.example"), "{after:?}");
        assert!(
            after["s1.example"] > 50 && after["s9.example"] > 50,
            "{after:?}"
        );
    }
    // One transition for two sidecars: one audit row, one webhook.
    checks_pass(&b, "s2.example", 2).await;
    assert_eq!(audit_rows(&a, "domain.drain", "s2.example").await, 1);
    assert!(
        eventually(SETTLE, || async {
            drain_webhooks(&received, "s2.example", "drained") >= 1
        })
        .await
    );
    assert_eq!(drain_webhooks(&received, "s2.example", "drained"), 1);

    // Clicks back on s2: restored after two healthy checks, on both.
    add_clicks(&a, "s2.example", 60).await;
    assert!(
        eventually(SETTLE, || async {
            mode(&a, "s2.example").await == "active" && mode(&b, "s2.example").await == "active"
        })
        .await,
        "{}",
        domain(&a, "s2.example").await
    );
    let s2 = domain(&a, "s2.example").await;
    assert_eq!(s2["drain"]["by"], "health", "{s2}");
    assert_eq!(audit_rows(&a, "domain.restore", "s2.example").await, 1);
    let again = issue(&b, 200).await;
    assert!(
        again["s2.example"] > 50 && !again.contains_key("s9.example"),
        "{again:?}"
    );
}

async fn an_operator_drains_restores_and_pins(backend: Backend) {
    let (hook, received) = webhook_receiver().await;
    let hook = format!("http://{hook}/hook");
    let flags = flags(&hook);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let app = spawn_app_with(backend, &flags).await;
    let missing = through_nginx(&app, Method::POST, "/domains/nowhere.example/drain")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // Only an object (or nothing, or null) is a drain request: serde alone would take `[]`.
    for body in [json!([]), json!(["why"]), json!("why"), json!(3)] {
        let refused = through_nginx(&app, Method::POST, "/domains/s2.example/drain")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "{body}");
        let error: Value = refused.json().await.unwrap();
        assert_eq!(error["error"]["code"], "invalid_body", "{body}");
    }
    assert_eq!(mode(&app, "s2.example").await, "active");

    let drained = operator(
        &app,
        "s2.example",
        "drain",
        Some(json!({"reason": "carrier complaint"})),
    )
    .await;
    assert_eq!(
        (
            &drained["drain"]["mode"],
            &drained["drain"]["by"],
            &drained["drain"]["reason"]
        ),
        (
            &json!("drained"),
            &json!("operator"),
            &json!("carrier complaint")
        )
    );
    let on = issue(&app, 200).await;
    assert!(
        !on.contains_key("s2.example") && on["s9.example"] > 50,
        "{on:?}"
    );
    // Healthy checks never end a drain by hand.
    add_clicks(&app, "s1.example", 60).await;
    add_clicks(&app, "s2.example", 60).await;
    checks_pass(&app, "s2.example", 4).await;
    assert_eq!(mode(&app, "s2.example").await, "drained");

    let restored = operator(&app, "s2.example", "restore", None).await;
    assert_eq!(restored["drain"]["mode"], "active");
    // A repeat changes nothing: the same answer, no second row.
    let repeat = operator(&app, "s2.example", "restore", None).await;
    assert_eq!(repeat["drain"], restored["drain"]);
    assert_eq!(audit_rows(&app, "domain.drain", "s2.example").await, 1);
    assert_eq!(audit_rows(&app, "domain.restore", "s2.example").await, 1);
    let actor = app
        .db
        .texts("SELECT actor_kind FROM audit_log WHERE action = 'domain.restore'")
        .await;
    assert_eq!(actor, ["key"]);

    // Pinned: found blocked (links on it, clicks elsewhere only), still issued on.
    let pinned = operator(&app, "s1.example", "pin", None).await;
    assert_eq!(pinned["drain"]["mode"], "pinned");
    issue(&app, 400).await;
    add_clicks(&app, "s2.example", 3000).await;
    assert!(
        eventually(SETTLE, || async {
            domain(&app, "s1.example").await["state"] == "suspected-blocked"
        })
        .await,
        "{}",
        domain(&app, "s1.example").await
    );
    checks_pass(&app, "s1.example", 2).await;
    assert_eq!(mode(&app, "s1.example").await, "pinned");
    assert!(issue(&app, 200).await["s1.example"] > 50);
    // Each change by hand on the webhook.
    assert!(
        eventually(SETTLE, || async {
            drain_webhooks(&received, "s2.example", "drained") == 1
                && drain_webhooks(&received, "s2.example", "active") == 1
                && drain_webhooks(&received, "s1.example", "pinned") == 1
        })
        .await,
        "{:?}",
        received.lock().unwrap()
    );
}

async fn every_domain_drained_keeps_issuing_and_says_so(backend: Backend) {
    let (hook, received) = webhook_receiver().await;
    let hook = format!("http://{hook}/hook");
    let flags = flags(&hook);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let app = spawn_app_with(backend, &flags).await;
    let normal = through_nginx(&app, Method::POST, "/links")
        .json(&json!({"url": "https://t.example/normal"}))
        .send()
        .await
        .unwrap();
    let normal: Value = normal.json().await.unwrap();
    assert!(normal.get("degraded_issuing").is_none(), "{normal}");
    for name in ["s1.example", "s2.example", "s9.example"] {
        operator(&app, name, "drain", None).await;
    }
    let created = through_nginx(&app, Method::POST, "/links")
        .json(&json!({"url": "https://t.example/anyway"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["degraded_issuing"], true, "{created}");
    assert!(
        created["short_url"]
            .as_str()
            .unwrap()
            .starts_with("https://s"),
        "{created}"
    );
    // The job raises the alert once the check sees the whole list drained.
    assert!(
        eventually(SETTLE, || async {
            (received.lock().unwrap().iter()).any(|(_, body)| {
                body["event"] == "degraded-issuing" && body["degraded_issuing"] == true
            })
        })
        .await
    );
    operator(&app, "s9.example", "restore", None).await;
    let created = through_nginx(&app, Method::POST, "/links")
        .json(&json!({"url": "https://t.example/standby"}))
        .send()
        .await
        .unwrap();
    let created: Value = created.json().await.unwrap();
    assert!(created.get("degraded_issuing").is_none(), "{created}");
    assert!(
        created["short_url"]
            .as_str()
            .unwrap()
            .starts_with("https://s9.example/"),
        "{created}"
    );
}

/// Another sidecar claimed the next change and has not written the state yet: this sidecar's
/// change of the same generation is not made (nor audited), the other's is taken.
async fn a_change_another_sidecar_claimed_first_is_taken_not_made_twice(backend: Backend) {
    use shortlink_domains::drain::{self, By, Drain, Event, Mode};
    let app = spawn_app(backend).await;
    let storage = app.storage().await;
    let theirs = Drain {
        mode: Mode::Drained,
        by: By::Operator,
        reason: "theirs".into(),
        generation: 1,
        ..Drain::default()
    };
    let mut stored = serde_json::to_value(&theirs).unwrap();
    stored["domain"] = json!("s2.example");
    let now = chrono::Utc::now();
    let claim = drain::row_name("s2.example", Some(1));
    storage
        .init_setting(&claim, &stored.to_string(), now)
        .await
        .unwrap();

    let applied = drain::apply(storage.as_ref(), "s2.example", &Event::Pin, 3)
        .await
        .unwrap()
        .unwrap();
    assert!(!applied.ours && !applied.transition(), "{applied:?}");
    assert_eq!(applied.after, theirs);
    assert_eq!(
        drain::load(storage.as_ref(), "s2.example").await.unwrap(),
        theirs
    );

    // The next change is this sidecar's: generation 2, and the claim before it is gone.
    let applied = drain::apply(storage.as_ref(), "s2.example", &Event::Restore, 3)
        .await
        .unwrap()
        .unwrap();
    assert!(applied.ours && applied.transition(), "{applied:?}");
    assert_eq!(
        (applied.after.mode, applied.after.generation),
        (Mode::Active, 2)
    );
    assert_eq!(storage.setting(&claim).await.unwrap(), None);
}

/// A batch started before the drain: its chunks after the drain go to the standby and the other
/// domain, none to the drained one; every link is created.
async fn a_batch_running_when_a_domain_is_drained_moves_its_remaining_links(backend: Backend) {
    let (hook, _received) = webhook_receiver().await;
    let hook = format!("http://{hook}/hook");
    let flags = flags(&hook);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let app = spawn_app_with(backend, &flags).await;
    // Lines enough that the drain lands mid-batch however fast the machine: the answer, unread
    // from the drain until it has answered, holds the batch back. The server renders at most
    // ~80,000 lines ahead of its reader: `HELD_FRAMES` chunks (16,000 lines), two groups in flight
    // and two being rendered (16,000 each), and what the loopback socket buffers hold (10 MB at
    // most, some 25,000 answers).
    const ITEMS: usize = 120_000;
    let body: String = (0..ITEMS)
        .map(|i| format!("{{\"url\":\"https://t.example/{i}\"}}\n"))
        .collect();
    let response = through_nginx(&app, Method::POST, "/links/batch")
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .unwrap();
    let mut answer = crate::streamed::Answer::new(response).await;
    // Drained by hand once some links are answered: a short URL's host is chosen as its group
    // is answered, so stored rows alone (the commit comes first) could all answer after the drain.
    answer.read_until(2_000).await;
    operator(&app, "s2.example", "drain", None).await;
    let hosts: Vec<String> = (answer.read_to_end().await.iter())
        .map(|result| {
            assert_eq!(result["status"], 201, "{result}");
            let url = result["link"]["short_url"].as_str().unwrap();
            url::Url::parse(url).unwrap().host_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(hosts.len(), ITEMS);
    let last_on_s2 = hosts.iter().rposition(|h| h == "s2.example").unwrap();
    assert!(
        last_on_s2 < ITEMS - 1_000,
        "moved mid-way: {last_on_s2} of {ITEMS}"
    );
    let after = &hosts[last_on_s2 + 1..];
    assert!(after.iter().any(|h| h == "s9.example") && after.iter().any(|h| h == "s1.example"));
    assert_eq!(
        app.db.scalar("SELECT COUNT(*) FROM links").await,
        ITEMS as i64
    );
}

/// Human clicks on `codes` (their `visit_count`), stored as the visit consumer stores them.
async fn click(app: &TestApp, codes: &[String]) {
    use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
    const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) \
                         AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 \
                         Safari/604.1";
    let now = chrono::Utc::now().timestamp_millis().to_string();
    let visits: Vec<_> = (codes.iter().enumerate())
        .map(|(i, code)| {
            let fields = [
                ("c", code.as_str()),
                ("t", &now),
                ("ua", PHONE),
                ("host", "s2.example"),
            ]
            .map(|(k, v)| (k, v.to_owned()));
            let event = VisitEvent::from_fields(format!("{now}-{i}"), fields).unwrap();
            Enricher::new(GeoDb::disabled(), false).enrich(&event)
        })
        .collect();
    let store = app.visit_store().await;
    store.store_batch(&visits, false).await.unwrap();
}

/// Creates `items` in one batch; (code, short URL) of each.
pub(crate) async fn create(app: &TestApp, items: &[Value]) -> Vec<(String, String)> {
    let response = through_nginx(app, Method::POST, "/links/batch")
        .json(items)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    (body["results"].as_array().unwrap().iter())
        .map(|r| {
            assert_eq!(r["status"], 201, "{r}");
            let link = &r["link"];
            (
                link["code"].as_str().unwrap().to_owned(),
                link["short_url"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The re-send list of s2 equals what the raw rows say: the links with a ref, of the campaign,
/// with no click, whose create answered a short URL on s2 (before the drain; after it none is).
async fn the_resend_list_is_the_unclicked_links_issued_on_the_drained_domain(backend: Backend) {
    // Checks off: this sidecar's snapshot changes only by its own requests, at once.
    let app = spawn_app_with(backend, &["--domain-health-every", "0"]).await;
    let items = |from: usize, to: usize, campaign: &str, with_ref: bool| -> Vec<Value> {
        (from..to)
            .map(|i| match with_ref {
                true => json!({"url": format!("https://t.example/{i}"), "campaign": campaign, "ref": format!("r{i}")}),
                false => json!({"url": format!("https://t.example/{i}"), "campaign": campaign}),
            })
            .collect()
    };
    let mut issued = create(&app, &items(0, 300, "spring", true)).await;
    issued.extend(create(&app, &items(300, 330, "spring", false)).await);
    issued.extend(create(&app, &items(330, 360, "autumn", true)).await);
    let on_s2: Vec<&String> = (issued.iter())
        .filter(|(_, url)| url.starts_with("https://s2.example/"))
        .map(|(code, _)| code)
        .collect();
    assert!(on_s2.len() > 100, "{}", on_s2.len());
    let clicked: Vec<String> = on_s2.iter().take(20).map(|c| (*c).clone()).collect();
    click(&app, &clicked).await;
    operator(&app, "s2.example", "drain", None).await;
    issued.extend(create(&app, &items(360, 560, "spring", true)).await);

    let response = unclicked_spring_on_s2(&app).await;
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let listed = by_code(&response.text().await.unwrap());

    // From the raw rows: the campaign's links with a ref and no click, on s2 by their create.
    let unclicked: std::collections::HashSet<String> = app
        .db
        .texts(
            "SELECT code FROM links WHERE campaign = 'spring' AND recipient_ref IS NOT NULL \
             AND visit_count = 0",
        )
        .await
        .into_iter()
        .collect();
    let short_urls: HashMap<&String, &String> = issued.iter().map(|(c, u)| (c, u)).collect();
    let expected: std::collections::HashSet<String> = (unclicked.iter())
        .filter(|code| short_urls[code].starts_with("https://s2.example/"))
        .cloned()
        .collect();
    assert!(expected.len() > 50, "{}", expected.len());
    assert_eq!(
        listed
            .keys()
            .cloned()
            .collect::<std::collections::HashSet<_>>(),
        expected
    );
    for (code, line) in &listed {
        assert_eq!(
            line["short_url"].as_str().unwrap(),
            short_urls[code].as_str(),
            "{line}"
        );
        assert_eq!(line["campaign"], "spring");
        assert!(line["ref"].as_str().unwrap().starts_with('r'), "{line}");
    }
    assert!(clicked.iter().all(|code| !listed.contains_key(code)));

    // Nothing issued since a time after the drain: an empty list.
    let since = (chrono::Utc::now() + chrono::Duration::minutes(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let later = through_nginx(
        &app,
        Method::GET,
        &format!("/domains/s2.example/unclicked?since={since}"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(later.status(), 200);
    assert_eq!(later.text().await.unwrap(), "");
    for (path, code) in [
        ("/domains/nowhere.example/unclicked", "unknown_domain"),
        ("/domains/s7.example/unclicked", "not_issuing"),
    ] {
        let response = (app.api(Method::GET, path))
            .header("X-Shortlink-Public-Base", LIST)
            .header(
                "X-Shortlink-Pool",
                "s1.example s2.example s9.example s7.example",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
    }
}

/// The console's Domains page shows each domain's drain with its reason and evidence, and its
/// admin drains, pins and restores with the buttons (audited as the console's).
async fn the_console_shows_the_drain_and_its_buttons_change_it(backend: Backend) {
    use crate::console::Browser;
    let app = spawn_app_with(backend, &["--domain-health-every", "0"]).await;
    mode(&app, "s2.example").await;
    let mut browser = Browser::new(&app);
    assert_eq!(browser.sign_in(API_KEY).await.status(), 303);
    let csrf = browser.csrf().await;
    let drained = browser
        .post("/console/domains/s2.example/drain", &[("csrf", &csrf)])
        .await;
    assert_eq!(drained.status(), 303);
    let s2 = domain(&app, "s2.example").await;
    assert_eq!(
        (&s2["drain"]["mode"], &s2["drain"]["by"]),
        (&json!("drained"), &json!("operator")),
        "{s2}"
    );
    let shown = browser.page("/console/domains").await;
    assert!(shown.contains("no new links: drained by hand"), "{shown}");
    assert!(
        shown.contains("/console/domains/s2.example/restore"),
        "{shown}"
    );
    let kinds = app
        .db
        .texts("SELECT actor_kind FROM audit_log WHERE action = 'domain.drain'")
        .await;
    assert_eq!(kinds, ["console"]);
    // Without the session's token nothing changes.
    let forged = browser
        .post("/console/domains/s2.example/restore", &[("csrf", "forged")])
        .await;
    assert_ne!(forged.status(), 303);
    assert_eq!(mode(&app, "s2.example").await, "drained");
    for (action, now) in [("pin", "pinned"), ("restore", "active")] {
        let answer = browser
            .post(
                &format!("/console/domains/s2.example/{action}"),
                &[("csrf", &csrf)],
            )
            .await;
        assert_eq!(answer.status(), 303, "{action}");
        assert_eq!(mode(&app, "s2.example").await, now);
    }
    let unknown = browser
        .post("/console/domains/nowhere.example/drain", &[("csrf", &csrf)])
        .await;
    assert_eq!(unknown.status(), 404);
}

/// A dry run's sample never shows a drained domain (issue 80): its stand-in links are on the
/// longest domain still taking links, as the real run's links would be.
async fn a_dry_run_shows_no_drained_domain(backend: Backend) {
    let app = spawn_app_with(backend, &[]).await;
    let list = "https://a-longer-domain.example https://s1.example";
    let sample = || async {
        let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
        (url.query_pairs_mut()).extend_pairs([
            ("template", "{{link}}"),
            ("country", "FR"),
            ("dry_run", "true"),
        ]);
        let recipient = json!({"phone": "0612345678", "url": "https://shop.example/"});
        let response = (app.client.post(url).bearer_auth(API_KEY))
            .header("X-Shortlink-Public-Base", list)
            .header("X-Shortlink-Pool", "a-longer-domain.example s1.example")
            .header("content-type", "application/x-ndjson")
            .body(format!("{recipient}\n"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = response.text().await.unwrap();
        let first: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
        first["text"].as_str().unwrap().to_owned()
    };
    assert!(sample()
        .await
        .starts_with("https://a-longer-domain.example/"));
    let drained = (app.api(Method::POST, "/domains/a-longer-domain.example/drain"))
        .header("X-Shortlink-Public-Base", list)
        .header("X-Shortlink-Pool", "a-longer-domain.example s1.example")
        .json(&json!({"reason": "carrier complaint"}))
        .send()
        .await
        .unwrap();
    assert_eq!(drained.status(), 200);
    let text = sample().await;
    assert!(text.starts_with("https://s1.example/"), "{text}");
}

crate::on_each_backend!(
    the_console_shows_the_drain_and_its_buttons_change_it,
    the_resend_list_is_the_unclicked_links_issued_on_the_drained_domain,
    a_batch_running_when_a_domain_is_drained_moves_its_remaining_links,
    a_change_another_sidecar_claimed_first_is_taken_not_made_twice,
    a_blocked_domain_is_drained_on_every_sidecar_and_restored_by_healthy_checks,
    an_operator_drains_restores_and_pins,
    every_domain_drained_keeps_issuing_and_says_so,
    a_dry_run_shows_no_drained_domain,
);
