//! What workspace B's keys and console sessions learn of workspace A's objects, for every route
//! the app serves, read from its router (`crate::routes`): nothing. A route added later is
//! covered without editing this test; one with a path parameter this test cannot fill fails it
//! until `fill` is taught the parameter.
//!
//! The oracle is the answer to a missing object: B's request naming A's object must get exactly
//! what the same request naming an object nobody has gets (status, error code and message, a
//! page's text), and no answer, listing or export may hold a single mark of A's (codes, campaign,
//! tag, reference, webhook, key names, target host). Then A must still have everything as it
//! was, and A's own keys must see it (so the oracle is not met by a route that finds nothing for
//! anyone).

use super::*;
use crate::console::{csrf_of, Browser};
use crate::routes::{routes, Route};
use reqwest::Method;
use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};

/// What A holds, named so a mark of it in B's answers is found.
struct Objects {
    codes: Vec<String>,
    webhook: String,
    key_id: i64,
    /// A's console bulk upload (`/console/bulk/{job}`).
    job: String,
    /// A's callback token's id (`/api/v1/callback-tokens/{id}`).
    callback_token: String,
    /// A's compose send job (`/api/v1/gateway/jobs/{job}`).
    send_job: String,
    /// B's own callback token: a callback's credential is its token, so B calls the callbacks
    /// with its own, naming A's link (`/callbacks/{token}/…?code=`).
    b_token: String,
}

const CAMPAIGN: &str = "a-secret-campaign";
const TAG: &str = "a-secret-tag";
const REFERENCE: &str = "a-secret-recipient";
const ALIAS: &str = "a-secret-alias";
/// The user of A's gateway (`/api/v1/gateway`).
const GATEWAY_USER: &str = "a-secret-gateway-user";

/// Where A's unknown codes go (its workspace's and its domain's not-found redirects).
const NOT_FOUND_URL: &str = "https://a.example/a-secret-not-found";

/// The feed that quarantined A's capped link (issue 79): only A may list or release it.
const QUARANTINE_FEED: &str = "a-secret-feed";

/// A's short domain: its part of the issuing list names it, as nginx's API server sends it.
const A_DOMAIN: &str = "s.a.example";
const LISTS: &str = "https://s.example [brand-a] https://s.a.example";

/// Everything A's admin makes: links (an alias, a generated code, a capped one, a revoked one),
/// a webhook, a key, visits, its short domain, and the audit rows all of it leaves.
async fn objects_of_a(app: &TestApp, admin: &str) -> Objects {
    let mut codes = Vec::new();
    for body in [
        json!({"url": "https://a.example/1", "code": ALIAS, "campaign": CAMPAIGN, "tags": [TAG], "ref": REFERENCE}),
        json!({"url": "https://a.example/2", "campaign": CAMPAIGN, "max_visits": 5}),
        json!({"url": "https://a.example/3", "tags": [TAG]}),
    ] {
        let link = link_in(app, admin, body).await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    let revoked = &codes[2];
    let answer = with_key(app, admin, Method::DELETE, &format!("/links/{revoked}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let storage = app.storage().await;
    let a = storage.workspace_by_slug("brand-a").await.unwrap().unwrap();
    let quarantined = app
        .state
        .links
        .quarantine(a.id, &codes[1], QUARANTINE_FEED, "a.example");
    assert!(quarantined.await.unwrap());
    let answer = with_key(app, admin, Method::POST, "/webhooks")
        .json(
            &json!({"name": "a-secret-hook", "url": "https://hooks.a.example/in",
            "secret": "a-webhook-secret-of-some-length"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201, "{:?}", answer.text().await);
    let webhook: Value = answer.json().await.unwrap();
    let answer = with_key(app, admin, Method::POST, "/keys")
        .json(&json!({"name": "a-secret-key", "role": "viewer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    let key: Value = answer.json().await.unwrap();
    // Visits of A's links, stored as the consumer stores them.
    let store = app.visit_store().await;
    let visits: Vec<_> = (0..3)
        .map(|i| {
            let time = chrono::Utc::now().timestamp_millis().to_string();
            let fields = [
                ("c", codes[i % 2].as_str()),
                ("t", &time),
                ("ip", "203.0.113.9"),
                ("ua", "Mozilla/5.0 (iPhone)"),
                ("host", "s.a.example"),
            ]
            .map(|(k, v)| (k, v.to_owned()));
            let event = VisitEvent::from_fields(format!("1700000000000-{i}"), fields).unwrap();
            Enricher::new(GeoDb::disabled(), false).enrich(&event)
        })
        .collect();
    store.store_batch(&visits, true).await.unwrap();
    // An orphan visit on A's domain (a mistyped code), which only A may list (issue 70), as
    // the module records it: with the workspace nginx maps the host to (issue 77).
    let time = chrono::Utc::now().timestamp_millis().to_string();
    let fields = [
        ("c", "/a-secret-typo"),
        ("t", time.as_str()),
        ("s", "404"),
        ("host", A_DOMAIN),
        ("o", "invalid_short_url"),
        ("ws", "brand-a"),
    ];
    let event = VisitEvent::from_fields("1700000000001-0", fields).unwrap();
    let orphan = Enricher::new(GeoDb::disabled(), false).enrich(&event);
    assert_eq!(store.orphans().store_orphans(&[orphan]).await.unwrap(), 1);
    // Its domain, named by a request through nginx (the test client sends the proxy secret).
    let answer = with_key(app, admin, Method::GET, "/domains")
        .header("x-shortlink-public-base", LISTS)
        .header("x-shortlink-pool", format!("s.example {A_DOMAIN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // Its not-found redirects, the workspace's and its domain's (issue 70).
    for path in [
        "/not-found-redirects".to_owned(),
        format!("/domains/{A_DOMAIN}/not-found-redirects"),
    ] {
        let answer = with_key(app, admin, Method::PUT, &path)
            .json(&json!({"unknown_url": NOT_FOUND_URL}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}: {:?}", answer.text().await);
    }
    // A delivery receipt of A's link, and a callback token.
    let answer = with_key(app, admin, Method::POST, "/deliveries")
        .json(&json!({"code": codes[0], "message_id": "a-secret-message", "state": "delivered"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201, "{:?}", answer.text().await);
    let answer = with_key(app, admin, Method::POST, "/callback-tokens")
        .json(&json!({"name": "a-secret-gateway", "gateway": "kannel"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    let token: Value = answer.json().await.unwrap();
    Objects {
        send_job: send_job_of(app, admin).await,
        codes,
        webhook: webhook["id"].as_str().unwrap().to_owned(),
        key_id: key["id"].as_i64().unwrap(),
        job: bulk_job_of(app, admin).await,
        callback_token: token["id"].as_str().unwrap().to_owned(),
        b_token: String::new(),
    }
}

/// A's gateway (on a port nobody listens on) and a compose through it that sends one message;
/// returns the send job's id.
async fn send_job_of(app: &TestApp, admin: &str) -> String {
    let answer = with_key(app, admin, Method::PUT, "/gateway")
        .json(
            &json!({"url": "http://127.0.0.1:9/cgi-bin/sendsms", "username": GATEWAY_USER,
            "password_file": "gateway-password", "from": "A", "attempts": 1,
            "callback_base": "http://127.0.0.1:9"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
    let mut url = url::Url::parse(&app.url("/api/v1/compose")).unwrap();
    url.query_pairs_mut().extend_pairs([
        ("template", "{{link}}"),
        ("campaign", CAMPAIGN),
        ("send", "true"),
    ]);
    let compose =
        (app.client.post(url).bearer_auth(admin)).header("x-shortlink-public-base", LISTS);
    let recipient = "{\"phone\":\"+447400123456\",\"url\":\"https://a.example/sent\"}\n";
    let summary = compose_summary(compose, recipient.to_owned()).await;
    summary["send_job"].as_str().expect("a send job").to_owned()
}

/// A console bulk upload of one link by A's admin; returns the job's id.
async fn bulk_job_of(app: &TestApp, admin: &str) -> String {
    let mut browser = Browser::new(app);
    assert_eq!(browser.sign_in(admin).await.status(), 303);
    let csrf = browser.csrf().await;
    let csv = "url,campaign\nhttps://a.example/bulk,a-secret-campaign\n";
    let uploaded = browser.upload_bulk(&csrf, csv).await;
    assert_eq!(uploaded.status(), 303);
    let job = crate::console::location(&uploaded);
    job.rsplit('/').next().unwrap().to_owned()
}

/// The marks of A's objects that no answer to B may hold.
fn marks(objects: &Objects) -> Vec<String> {
    let mut marks: Vec<String> = objects.codes.clone();
    marks.extend(
        [
            CAMPAIGN,
            TAG,
            REFERENCE,
            "a-secret-hook",
            "a-secret-key",
            "a-secret-message",
            "a-secret-gateway",
            "a-secret-typo",
            QUARANTINE_FEED,
            GATEWAY_USER,
            "a.example",
        ]
        .map(str::to_owned),
    );
    marks.push(objects.webhook.clone());
    marks.push(objects.callback_token.clone());
    marks.push(objects.send_job.clone());
    marks
}

/// `path` (a route's pattern) with its parameters naming A's objects, or (with `missing`)
/// objects nobody has; `None` for a parameter this test does not know.
fn fill(path: &str, objects: &Objects, missing: bool) -> Option<String> {
    let mut filled = String::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let end = rest[start..].find('}')? + start;
        filled.push_str(&rest[..start]);
        let theirs = |a: String, nobody: &str| if missing { nobody.to_owned() } else { a };
        let value = match &rest[start + 1..end] {
            "code" | "*rest" => theirs(objects.codes[0].clone(), "no-such-alias"),
            "campaign" => theirs(CAMPAIGN.into(), "no-such-campaign"),
            "id" if path.contains("/webhooks/") => {
                theirs(objects.webhook.clone(), "wh_0000000000000000")
            }
            "id" if path.contains("/keys/") => theirs(objects.key_id.to_string(), "999999"),
            "id" if path.contains("/callback-tokens/") => {
                theirs(objects.callback_token.clone(), "cbt_0000000000000000")
            }
            // B's own token: what differs is the link the callback names (below).
            "token" => objects.b_token.clone(),
            "domain" => theirs(A_DOMAIN.into(), "s.nobody.example"),
            "slug" => theirs("brand-a".into(), "no-such-brand"),
            "job" if path.contains("/gateway/jobs/") => {
                theirs(objects.send_job.clone(), "snd_0000000000000000")
            }
            "job" => theirs(objects.job.clone(), "0000000000000000"),
            // The same action on a domain that is A's and on one nobody has.
            "action" => "drain".into(),
            _ => return None,
        };
        filled.push_str(&value);
        rest = &rest[end + 1..];
    }
    filled.push_str(rest);
    if path.starts_with("/callbacks/") {
        // Every gateway's fields of a report that would be stored, naming A's link or none.
        let code = if missing {
            "no-such-alias"
        } else {
            &objects.codes[0]
        };
        filled.push_str(&format!(
            "?code={code}&type=1&mid=m-1&MessageSid=SM1&MessageStatus=sent&messageId=m-1\
             &status=delivered"
        ));
    }
    Some(filled)
}

/// An API body that gets a write past its checks to the lookup, where one is needed.
fn body(method: &Method, path: &str) -> Option<Value> {
    match (method.as_str(), path) {
        ("PATCH", "/api/v1/links/{code}") => Some(json!({"url": "https://b.example/taken"})),
        ("PUT", "/api/v1/webhooks/{id}") => Some(json!({"url": "https://hooks.b.example/",
            "secret": "b-webhook-secret-of-some-length"})),
        ("POST", "/api/v1/webhooks/{id}/replay") => Some(json!({"from": "2020-01-01T00:00:00Z"})),
        ("POST", "/api/v1/links/{code}/preview") => Some(json!({})),
        ("POST" | "PUT" | "PATCH", _) => Some(json!({})),
        _ => None,
    }
}

/// Who B sends a request as.
enum Caller<'a> {
    Key(&'a str),
    Session(Browser<'a>, String),
}

impl Caller<'_> {
    fn describe(&self) -> String {
        match self {
            Caller::Key(key) => format!("key {}…", &key[..12]),
            Caller::Session(..) => "a console session".into(),
        }
    }
}

/// What an answer is compared by: status, where it sends the caller, and its text (a JSON
/// error's code and message, a page's body), with `theirs` (A's object in the path) written as
/// `missing` so that naming the object back is no difference.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    location: String,
    text: String,
}

async fn call(
    app: &TestApp,
    caller: &mut Caller<'_>,
    route: &Route,
    path: &str,
    body: Option<&Value>,
) -> (Answer, String) {
    let response = match caller {
        Caller::Key(key) => {
            let mut request = app.client.request(route.method.clone(), app.url(path));
            request = request.bearer_auth(&**key);
            if let Some(body) = body {
                request = request.json(body);
            }
            request.send().await.unwrap()
        }
        Caller::Session(browser, csrf) => {
            let mut request = browser.request(route.method.clone(), path);
            if route.method == Method::POST {
                request =
                    request.form(&[("csrf", csrf.as_str()), ("url", "https://b.example/taken")]);
            }
            browser.send(request).await
        }
    };
    let status = response.status().as_u16();
    let location = (response.headers().get("location"))
        .map(|value| value.to_str().unwrap_or("").to_owned())
        .unwrap_or_default();
    let raw = response.text().await.unwrap();
    let text = match serde_json::from_str::<Value>(&raw) {
        Ok(value) if value["error"].is_object() => {
            format!("{} {}", value["error"]["code"], value["error"]["message"])
        }
        Ok(_) => String::new(),
        Err(_) => raw.clone(),
    };
    (
        Answer {
            status,
            location,
            text,
        },
        raw,
    )
}

/// A GET with `key` of an API path (after `/api/v1`): status and body.
async fn read(app: &TestApp, key: &str, path: &str) -> (u16, String) {
    let answer = with_key(app, key, Method::GET, path).send().await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// `answer` with every mention of A's objects (in `theirs`, its path) written as in `missing`.
fn as_if_missing(mut answer: Answer, theirs: &str, missing: &str) -> Answer {
    for (a, b) in theirs.split('/').zip(missing.split('/')) {
        if a != b {
            answer.location = replace_word(&answer.location, a, b);
            answer.text = replace_word(&answer.text, a, b);
        }
    }
    answer
}

/// `text` with each `word` that stands alone (not inside a longer name or number) as `with`.
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let part_of_name = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let (before, after) = (&rest[..at], &rest[at + word.len()..]);
        out.push_str(before);
        let alone =
            !part_of_name(before.chars().next_back()) && !part_of_name(after.chars().next());
        out.push_str(if alone { with } else { word });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn another_workspaces_keys_and_sessions_learn_nothing_of_its_objects() {
    // Gateways on: A has one, and a send job.
    let secrets = testkit::temp_dir();
    std::fs::create_dir_all(secrets.path().join("brand-a")).unwrap();
    let file = secrets.path().join("brand-a").join("gateway-password");
    std::fs::write(file, "a-password\n").unwrap();
    let flags = [
        "--gateway-secrets-dir",
        secrets.path().to_str().unwrap(),
        "--gateway-allow-networks",
        "127.0.0.0/8",
    ];
    let app = spawn_app_with(Backend::Sqlite, &flags).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    create_workspace(&app, &operator, "brand-b").await;
    let a_admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let mut objects = objects_of_a(&app, &a_admin).await;
    let marks = marks(&objects);
    let mut b_keys = Vec::new();
    // (`resolve` keys are the installation's, nginx's: not a workspace's role.)
    for role in ["admin", "issuer", "viewer"] {
        b_keys.push(workspace_key(&app, &operator, "brand-b", role).await);
    }
    // The default workspace is another workspace too.
    b_keys.push(API_KEY.to_owned());
    let answer = with_key(&app, &b_keys[0], Method::POST, "/callback-tokens")
        .json(&json!({"name": "b-gateway", "gateway": "kannel"}))
        .send()
        .await
        .unwrap();
    let token: Value = answer.json().await.unwrap();
    objects.b_token = token["token"].as_str().unwrap().to_owned();
    let mut callers: Vec<Caller<'_>> = b_keys.iter().map(|key| Caller::Key(key)).collect();
    for key in &b_keys[..3] {
        let mut browser = Browser::new(&app);
        assert_eq!(browser.sign_in(key).await.status(), 303);
        let csrf = csrf_of(&browser.page("/console/").await);
        callers.push(Caller::Session(browser, csrf));
    }

    let routes = routes(&app.state);
    let mut checked = 0;
    // Every difference, so that one run names them all.
    let mut leaks = Vec::new();
    for route in &routes {
        let (Some(theirs), Some(missing)) = (
            fill(&route.path, &objects, false),
            fill(&route.path, &objects, true),
        ) else {
            panic!(
                "{} {}: a path parameter this test cannot fill; teach `fill` its objects",
                route.method, route.path
            );
        };
        // The console's sign-out would end the session the next routes are walked with. A
        // visitor's abuse report names no one's object (any code gets the same thanks) and
        // spends a budget per address, which the walk would exhaust between A's and nobody's.
        if route.path == "/console/sign-out" || route.path.starts_with("/report-abuse") {
            continue;
        }
        let body = body(&route.method, &route.path);
        for caller in callers.iter_mut() {
            // Keys on the API and the pages outside it; sessions on the console.
            let console = route.path.starts_with("/console");
            if console != matches!(caller, Caller::Session(..)) && route.path != "/healthz" {
                continue;
            }
            let (answer, raw) = call(&app, caller, route, &theirs, body.as_ref()).await;
            let who = caller.describe();
            if let Some(mark) = (marks.iter())
                .find(|mark| raw.contains(mark.as_str()) || answer.location.contains(mark.as_str()))
            {
                leaks.push(format!(
                    "{} {theirs} as {who}: the answer holds A's {mark:?}: {} {}",
                    route.method,
                    answer.status,
                    raw.chars().take(300).collect::<String>()
                ));
            }
            if theirs != missing {
                let (nobody, _) = call(&app, caller, route, &missing, body.as_ref()).await;
                let answer = as_if_missing(answer, &theirs, &missing);
                if answer != nobody {
                    leaks.push(format!(
                        "{} {theirs} as {who}: the answer differs from a missing object's: {answer:?} / {nobody:?}",
                        route.method
                    ));
                }
            }
            checked += 1;
        }
    }
    for expected in [
        "/api/v1/resolve/{code}",
        "/api/v1/workspaces/{slug}",
        "/console/links/{code}",
        "/console/import/{job}",
        "/api/v1/workspace/metrics",
        "/api/v1/deliveries",
        "/api/v1/callback-tokens/{id}",
        "/api/v1/campaigns/{campaign}/funnel",
        "/api/v1/links/{code}/visits",
        "/console/campaigns/{campaign}/funnel",
        "/callbacks/{token}/kannel",
        "/callbacks/{token}/twilio",
        "/callbacks/{token}/vonage",
        "/api/v1/gateway",
        "/api/v1/gateway/jobs/{job}",
        "/api/v1/not-found-redirects",
        "/api/v1/domains/{domain}/not-found-redirects",
    ] {
        assert!(
            routes.iter().any(|route| route.path == expected),
            "{expected} is not among the router's routes: {routes:?}"
        );
    }
    assert!(checked > 300, "only {checked} requests");
    assert!(
        leaks.is_empty(),
        "{} answers to B tell of A's objects:\n{}",
        leaks.len(),
        leaks.join("\n")
    );

    // A still has everything, unchanged, and sees it.

    for code in &objects.codes[..2] {
        let (status, text) = read(&app, &a_admin, &format!("/links/{code}")).await;
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("https://a.example/"), "{text}");
        assert!(!text.contains("b.example"), "B changed A's link: {text}");
    }
    let (status, text) = read(&app, &a_admin, &format!("/webhooks/{}", objects.webhook)).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("hooks.a.example"),
        "B changed A's webhook: {text}"
    );
    let (_, keys) = read(&app, &a_admin, "/keys").await;
    let keys: Value = serde_json::from_str(&keys).unwrap();
    let viewer = (keys["keys"].as_array().unwrap().iter())
        .find(|key| key["id"] == objects.key_id)
        .expect("A's key");
    assert!(viewer["revoked_at"].is_null(), "B revoked A's key");
    let (_, domains) = read(&app, &a_admin, "/domains").await;
    assert!(domains.contains(A_DOMAIN), "A lists its domain: {domains}");
    let (_, links) = read(&app, &a_admin, "/links").await;
    for code in &objects.codes {
        assert!(links.contains(code.as_str()), "A lists its {code}");
    }
    let (_, feed) = read(&app, &a_admin, "/visits").await;
    assert_eq!(feed.lines().count(), 3, "A reads its visits: {feed}");
    let (_, orphans) = read(&app, &a_admin, "/visits/orphan").await;
    assert!(
        orphans.contains("a-secret-typo"),
        "A reads its orphan visit: {orphans}"
    );
    let (_, tokens) = read(&app, &a_admin, "/callback-tokens").await;
    assert!(
        tokens.contains(&objects.callback_token),
        "A lists its token: {tokens}"
    );
    assert!(
        !tokens.contains("\"revoked_at\":\""),
        "B revoked A's token: {tokens}"
    );
    let (_, funnel) = read(&app, &a_admin, &format!("/campaigns/{CAMPAIGN}/funnel")).await;
    let funnel: Value = serde_json::from_str(&funnel).unwrap();
    assert_eq!(
        funnel["total"]["delivered"], 1,
        "A's receipt, once: {funnel}"
    );
    let (status, gateway) = read(&app, &a_admin, "/gateway").await;
    assert_eq!(status, 200, "B removed A's gateway: {gateway}");
    assert!(
        gateway.contains(GATEWAY_USER),
        "B changed A's gateway: {gateway}"
    );
    for path in [
        "/not-found-redirects".to_owned(),
        format!("/domains/{A_DOMAIN}/not-found-redirects"),
    ] {
        let (status, text) = read(&app, &a_admin, &path).await;
        assert_eq!(status, 200, "{path}: {text}");
        assert!(text.contains(NOT_FOUND_URL), "B changed A's {path}: {text}");
    }
    let (status, job) = read(
        &app,
        &a_admin,
        &format!("/gateway/jobs/{}", objects.send_job),
    )
    .await;
    assert_eq!(status, 200, "A reads its send job: {job}");
    let (_, stats) = read(&app, &a_admin, "/stats").await;
    let stats: Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["totals"]["humans"], 3, "{stats}");

    // The operator's routes are no workspace key's.
    for key in [&a_admin, &b_keys[0], &API_KEY.to_owned()] {
        let (status, _) = read(&app, key, "/workspaces").await;
        assert_eq!(status, 403);
    }
}
