//! What workspace B's keys learn of workspace A's objects, for every route of the OpenAPI
//! document: nothing. A route added later is covered without editing this test; the few left
//! out say why in [`NOT_A_WORKSPACE_ROUTE`].
//!
//! The oracle is the answer to a missing object: B's request naming A's object must get exactly
//! what the same request naming an object nobody has gets (status and error code), and a listing
//! or an export must not hold a single mark of A's (codes, campaign, tag, reference, webhook,
//! key names). Then A must still have everything as it was, and A's own keys must see it (so the
//! oracle is not met by a route that finds nothing for anyone).

use super::*;
use reqwest::Method;
use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};

/// Routes that are not a workspace's, each with the reason.
const NOT_A_WORKSPACE_ROUTE: &[(&str, &str)] = &[
    (
        "/api/v1/resolve/{code}",
        "nginx's fallback: its answer depends on the host, checked below",
    ),
    (
        "/api/v1/workspaces",
        "the operator's, refused to every workspace key (checked below)",
    ),
    ("/api/v1/openapi.json", "the same document for everyone"),
    ("/healthz", "no key"),
    ("/readyz", "no key"),
];

/// What A holds, named so a mark of it in B's answers is found.
struct Objects {
    codes: Vec<String>,
    webhook: String,
    key_id: i64,
}

const CAMPAIGN: &str = "a-secret-campaign";
const TAG: &str = "a-secret-tag";
const REFERENCE: &str = "a-secret-recipient";
const ALIAS: &str = "a-secret-alias";

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
        let answer = with_key(app, admin, Method::POST, "/links")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201, "{:?}", answer.text().await);
        let link: Value = answer.json().await.unwrap();
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    let revoked = &codes[2];
    let answer = with_key(app, admin, Method::DELETE, &format!("/links/{revoked}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
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
    // Its domain, named by a request through nginx (the test client sends the proxy secret).
    let answer = with_key(app, admin, Method::GET, "/domains")
        .header("x-shortlink-public-base", LISTS)
        .header("x-shortlink-pool", format!("s.example {A_DOMAIN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    Objects {
        codes,
        webhook: webhook["id"].as_str().unwrap().to_owned(),
        key_id: key["id"].as_i64().unwrap(),
    }
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
            "a.example",
        ]
        .map(str::to_owned),
    );
    marks.push(objects.webhook.clone());
    marks
}

/// `path` with its parameters naming A's objects, or (with `missing`) objects nobody has.
fn fill(path: &str, objects: &Objects, missing: bool) -> Option<String> {
    let mut filled = String::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let end = rest[start..].find('}')? + start;
        filled.push_str(&rest[..start]);
        let value = match (&rest[start + 1..end], missing) {
            ("code", false) => objects.codes[0].clone(),
            ("code", true) => "no-such-alias".into(),
            ("campaign", false) => CAMPAIGN.into(),
            ("campaign", true) => "no-such-campaign".into(),
            ("id", false) if path.starts_with("/api/v1/webhooks") => objects.webhook.clone(),
            ("id", true) if path.starts_with("/api/v1/webhooks") => "wh_0000000000000000".into(),
            ("id", false) if path.starts_with("/api/v1/keys") => objects.key_id.to_string(),
            ("id", true) if path.starts_with("/api/v1/keys") => "999999".into(),
            ("domain", false) => A_DOMAIN.into(),
            ("domain", true) => "s.nobody.example".into(),
            _ => return None,
        };
        filled.push_str(&value);
        rest = &rest[end + 1..];
    }
    filled.push_str(rest);
    Some(filled.trim_start_matches("/api/v1").to_owned())
}

/// A body that gets a write past its checks to the lookup, where one is needed.
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

async fn call(
    app: &TestApp,
    key: &str,
    method: &Method,
    path: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let mut request = with_key(app, key, method.clone(), path);
    if let Some(body) = body {
        request = request.json(body);
    }
    let answer = request.send().await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// The error code of a JSON error body ("" for another body).
fn error_code(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    value["error"]["code"].as_str().unwrap_or("").to_owned()
}

#[tokio::test]
async fn another_workspaces_keys_learn_nothing_of_its_objects() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    create_workspace(&app, &operator, "brand-b").await;
    let a_admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let objects = objects_of_a(&app, &a_admin).await;
    let marks = marks(&objects);
    let b_keys = [
        workspace_key(&app, &operator, "brand-b", "admin").await,
        workspace_key(&app, &operator, "brand-b", "issuer").await,
        workspace_key(&app, &operator, "brand-b", "viewer").await,
        // The default workspace is another workspace too.
        API_KEY.to_owned(),
    ];
    let doc: Value = app.get_json("/openapi.json").await;
    let paths = doc["paths"].as_object().unwrap();
    let mut checked = 0;
    for (path, item) in paths {
        let left_out = NOT_A_WORKSPACE_ROUTE
            .iter()
            .any(|(route, _)| path == route || path.starts_with(&format!("{route}/")));
        if left_out {
            continue;
        }
        for method in item.as_object().unwrap().keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let (Some(theirs), Some(missing)) =
                (fill(path, &objects, false), fill(path, &objects, true))
            else {
                panic!("{method} {path}: a path parameter this test cannot fill; teach `fill` its objects");
            };
            let body = body(&method, path);
            for key in &b_keys {
                let (status, text) = call(&app, key, &method, &theirs, body.as_ref()).await;
                for mark in &marks {
                    assert!(
                        !text.contains(mark.as_str()),
                        "{method} {theirs}: B's answer holds A's {mark:?}: {text}"
                    );
                }
                if theirs != missing {
                    let (missing_status, missing_text) =
                        call(&app, key, &method, &missing, body.as_ref()).await;
                    assert_eq!(
                        (status, error_code(&text)),
                        (missing_status, error_code(&missing_text)),
                        "{method} {theirs}: B's answer differs from a missing object's: {text} / {missing_text}"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} requests: did the document lose its paths?"
    );

    // A still has everything, unchanged, and sees it.
    for code in &objects.codes[..2] {
        let (status, text) = call(
            &app,
            &a_admin,
            &Method::GET,
            &format!("/links/{code}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{text}");
        assert!(text.contains("https://a.example/"), "{text}");
        assert!(!text.contains("b.example"), "B changed A's link: {text}");
    }
    let (status, text) = call(
        &app,
        &a_admin,
        &Method::GET,
        &format!("/webhooks/{}", objects.webhook),
        None,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("hooks.a.example"),
        "B changed A's webhook: {text}"
    );
    let (_, keys) = call(&app, &a_admin, &Method::GET, "/keys", None).await;
    let keys: Value = serde_json::from_str(&keys).unwrap();
    let viewer = (keys["keys"].as_array().unwrap().iter())
        .find(|key| key["id"] == objects.key_id)
        .expect("A's key");
    assert!(viewer["revoked_at"].is_null(), "B revoked A's key");
    let (_, domains) = call(&app, &a_admin, &Method::GET, "/domains", None).await;
    assert!(domains.contains(A_DOMAIN), "A lists its domain: {domains}");
    let (_, links) = call(&app, &a_admin, &Method::GET, "/links", None).await;
    for code in &objects.codes {
        assert!(links.contains(code.as_str()), "A lists its {code}");
    }
    let (_, feed) = call(&app, &a_admin, &Method::GET, "/visits", None).await;
    assert_eq!(feed.lines().count(), 3, "A reads its visits: {feed}");
    let (_, stats) = call(&app, &a_admin, &Method::GET, "/stats", None).await;
    let stats: Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["totals"]["humans"], 3, "{stats}");

    // The operator's routes are no workspace key's.
    for key in [&a_admin, &b_keys[0], &API_KEY.to_owned()] {
        let (status, _) = call(&app, key, &Method::GET, "/workspaces", None).await;
        assert_eq!(status, 403);
    }
}
