//! Limits that hold (issue 66): the operator's ceilings on a workspace's key rates, which an
//! admin cannot lift (`per_second: 0` included) and which hold keys made before them; the
//! console's forms counted against the same quotas as the API; and a console import that sees
//! only its own workspace (another's code is "taken", its visit count left alone).

use crate::console::{location, Browser};
use crate::helpers::*;
use crate::workspaces::{create_workspace, operator_key, send_json, with_key, workspace_key};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

crate::on_each_backend!(
    a_keys_rate_is_refused_at_zero_and_above_the_workspaces_ceiling,
    a_lowered_ceiling_holds_a_key_made_before_it,
);

/// Sets `slug`'s quotas (as a whole) as the operator.
async fn set_quotas(app: &TestApp, operator: &str, slug: &str, quotas: Value) {
    let answer = with_key(app, operator, Method::PATCH, &format!("/workspaces/{slug}"))
        .json(&json!({ "quotas": quotas }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
}

/// A workspace `slug` with these quotas, its admin key and a console session of it.
async fn brand<'a>(app: &'a TestApp, operator: &str, slug: &str, quotas: Value) -> Brand<'a> {
    create_workspace(app, operator, slug).await;
    set_quotas(app, operator, slug, quotas).await;
    let admin = workspace_key(app, operator, slug, "admin").await;
    let mut browser = Browser::new(app);
    browser.sign_in(&admin).await;
    let csrf = browser.csrf().await;
    Brand {
        admin,
        browser,
        csrf,
    }
}

struct Brand<'a> {
    admin: String,
    browser: Browser<'a>,
    csrf: String,
}

/// The codes of the links `key`'s workspace has.
async fn codes(app: &TestApp, key: &str) -> Vec<String> {
    let list = send_json(with_key(app, key, Method::GET, "/links?limit=100")).await;
    (list["links"].as_array().unwrap().iter())
        .map(|link| link["code"].as_str().unwrap().to_owned())
        .collect()
}

/// A new key of `key`'s workspace with this rate, made by its admin.
async fn key_with_rate(app: &TestApp, admin: &str, rate: Value) -> reqwest::Response {
    with_key(app, admin, Method::POST, "/keys")
        .json(&json!({"name": "tool", "role": "issuer", "rate": rate}))
        .send()
        .await
        .unwrap()
}

async fn a_keys_rate_is_refused_at_zero_and_above_the_workspaces_ceiling(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    // A ceiling of 0 would be a rate of none: refused, naming the field.
    let zero = with_key(&app, &operator, Method::PATCH, "/workspaces/brand-a")
        .json(&json!({"quotas": {"key_rate_per_second": 0}}))
        .send()
        .await
        .unwrap();
    assert_eq!(zero.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let zero: Value = zero.json().await.unwrap();
    assert_eq!(zero["error"]["code"], "invalid_quota");
    assert!(
        (zero["error"]["message"].as_str().unwrap()).contains("quotas.key_rate_per_second"),
        "{zero}"
    );
    let ceilings = json!({"key_rate_per_second": 10, "key_rate_burst": 20});
    set_quotas(&app, &operator, "brand-a", ceilings.clone()).await;
    let seen = send_json(with_key(
        &app,
        &operator,
        Method::GET,
        "/workspaces/brand-a",
    ))
    .await;
    assert_eq!(seen["quotas"]["key_rate_per_second"], 10, "{seen}");
    assert_eq!(seen["quotas"]["key_rate_burst"], 20, "{seen}");
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    create_workspace(&app, &operator, "brand-b").await;
    let b_admin = workspace_key(&app, &operator, "brand-b", "admin").await;
    let keys_before = app.stored().await.api_keys;

    for (rate, field, says) in [
        // Today's "no limit": refused, as any rate an admin could lift the ceiling with.
        (
            json!({"per_second": 0, "burst": 5}),
            "rate.per_second",
            "at least 1",
        ),
        (
            json!({"per_second": -3, "burst": 5}),
            "rate.per_second",
            "at least 1",
        ),
        (
            json!({"per_second": 11, "burst": 5}),
            "rate.per_second",
            "ceiling of 10",
        ),
        (
            json!({"per_second": 5, "burst": 21}),
            "rate.burst",
            "ceiling of 20",
        ),
    ] {
        let refused = key_with_rate(&app, &admin, rate.clone()).await;
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY, "{rate}");
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_rate", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(field) && message.contains(says),
            "{rate}: {message}"
        );
    }
    // The operator's own route is held to the same ceilings.
    let by_operator = with_key(&app, &operator, Method::POST, "/workspaces/brand-a/keys")
        .json(&json!({"name": "fast", "role": "viewer", "rate": {"per_second": 50, "burst": 5}}))
        .send()
        .await
        .unwrap();
    assert_eq!(by_operator.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // A workspace without ceilings refuses 0 all the same.
    let unlimited = key_with_rate(&app, &b_admin, json!({"per_second": 0, "burst": 1})).await;
    assert_eq!(unlimited.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // The console's key form goes through the same check.
    let mut browser = Browser::new(&app);
    browser.sign_in(&admin).await;
    let csrf = browser.csrf().await;
    let form = [
        ("csrf", csrf.as_str()),
        ("name", "console tool"),
        ("role", "issuer"),
        ("per_second", "0"),
        ("burst", "5"),
    ];
    let refused = browser.post("/console/workspace/keys", &form).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(refused.text().await.unwrap().contains("rate.per_second"));
    assert_eq!(app.stored().await.api_keys, keys_before, "nothing stored");

    // Within the ceilings: made.
    let made = key_with_rate(&app, &admin, json!({"per_second": 10, "burst": 20})).await;
    assert_eq!(made.status(), StatusCode::CREATED);
}

async fn a_lowered_ceiling_holds_a_key_made_before_it(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    let admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    let made = key_with_rate(&app, &admin, json!({"per_second": 1000, "burst": 1000})).await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let fast: Value = made.json().await.unwrap();
    let fast = fast["key"].as_str().unwrap().to_owned();
    set_quotas(
        &app,
        &operator,
        "brand-a",
        json!({"key_rate_per_second": 1, "key_rate_burst": 2}),
    )
    .await;
    // The key keeps working, clamped at use to the ceiling (its stored rate unchanged).
    let mut statuses = Vec::new();
    let mut policy = String::new();
    for _ in 0..3 {
        let answer = with_key(&app, &fast, Method::GET, "/links")
            .send()
            .await
            .unwrap();
        statuses.push(answer.status());
        if let Some(value) = answer.headers().get("ratelimit-policy") {
            policy = value.to_str().unwrap().to_owned();
        }
    }
    assert_eq!(
        statuses[..2],
        [StatusCode::OK, StatusCode::OK],
        "{statuses:?}"
    );
    assert_eq!(statuses[2], StatusCode::TOO_MANY_REQUESTS, "{statuses:?}");
    assert_eq!(policy, r#""api-key";q=2;w=2"#);
    // An admin key with no rate of its own (the installation's is off) is held too.
    let mut held = false;
    for _ in 0..4 {
        let answer = with_key(&app, &admin, Method::GET, "/links")
            .send()
            .await
            .unwrap();
        held |= answer.status() == StatusCode::TOO_MANY_REQUESTS;
    }
    assert!(
        held,
        "a key without a rate of its own is held to the ceiling"
    );
}

/// The console's bulk upload counts against the day's quota before anything starts: a file
/// over it is refused whole, nothing created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_bulk_upload_over_the_daily_quota_is_refused_whole() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    let mut a = brand(&app, &operator, "brand-a", json!({"links_per_day": 2})).await;
    let csv = "url\nhttps://a.example/1\nhttps://a.example/2\nhttps://a.example/3\n";
    let refused = a.browser.upload_bulk(&a.csrf, csv).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let page = refused.text().await.unwrap();
    assert!(page.contains("links per UTC day"), "{page}");
    assert!(codes(&app, &a.admin).await.is_empty(), "nothing created");
    assert_eq!(app.stored().await.links, 0);

    // Within it: made, and counted (the API's next create is over).
    let csv = "url\nhttps://a.example/1\nhttps://a.example/2\n";
    let uploaded = a.browser.upload_bulk(&a.csrf, csv).await;
    assert_eq!(uploaded.status(), StatusCode::SEE_OTHER);
    let job = location(&uploaded).to_owned();
    let mut finished = false;
    for _ in 0..100 {
        if a.browser.page(&job).await.contains("Finished") {
            finished = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(finished);
    assert_eq!(codes(&app, &a.admin).await.len(), 2);
    let over = with_key(&app, &a.admin, Method::POST, "/links")
        .json(&json!({"url": "https://a.example/api"}))
        .send()
        .await
        .unwrap();
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// The console's create counts against the same day's quota as the API's: one API create and
/// two console creates fill a quota of three, and the next of either is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_and_api_creates_fill_one_quota() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    let mut a = brand(&app, &operator, "brand-a", json!({"links_per_day": 3})).await;
    let api = with_key(&app, &a.admin, Method::POST, "/links")
        .json(&json!({"url": "https://a.example/api"}))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::CREATED);
    for n in 1..=2 {
        let url = format!("https://a.example/console-{n}");
        let form = [("csrf", a.csrf.as_str()), ("url", url.as_str())];
        let made = a.browser.post("/console/create", &form).await;
        assert_eq!(made.status(), StatusCode::SEE_OTHER, "console create {n}");
    }
    let form = [("csrf", a.csrf.as_str()), ("url", "https://a.example/over")];
    let refused = a.browser.post("/console/create", &form).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let page = refused.text().await.unwrap();
    assert!(page.contains("links per UTC day"), "{page}");
    let api = with_key(&app, &a.admin, Method::POST, "/links")
        .json(&json!({"url": "https://a.example/api-2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(codes(&app, &a.admin).await.len(), 3);
}

/// A console session's forms count against its key's rate as the key's API requests do: a
/// key of one request per second gets its second form in a row refused (429), and the API's
/// next request with it too (one count for both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_forms_count_against_the_keys_rate() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    let a = brand(&app, &operator, "brand-a", json!({})).await;
    let made = key_with_rate(&app, &a.admin, json!({"per_second": 1, "burst": 1})).await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let made: Value = made.json().await.unwrap();
    let slow = made["key"].as_str().unwrap().to_owned();
    let mut browser = Browser::new(&app);
    browser.sign_in(&slow).await;
    let csrf = browser.csrf().await;
    let form = [("csrf", csrf.as_str()), ("url", "https://a.example/1")];
    let first = browser.post("/console/create", &form).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    let form = [("csrf", csrf.as_str()), ("url", "https://a.example/2")];
    let second = browser.post("/console/create", &form).await;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    let api = with_key(&app, &slow, Method::GET, "/links")
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(codes(&app, &a.admin).await.len(), 1);
}

/// The console's compose sample is held to the recipients' quota as the API's compose is:
/// recipients past it are refused in the sample.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_compose_is_held_to_the_recipients_quota() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    // The default workspace: the one with an issuing domain here.
    set_quotas(&app, &operator, "default", json!({"compose_recipients": 1})).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let csrf = browser.csrf().await;
    let recipients =
        "phone,name,url\n+33612345678,Ann,https://shop.example/\n+33612345679,Bo,https://shop.example/";
    let form = [
        ("csrf", csrf.as_str()),
        ("template", "Hi {{name}}: {{link}}"),
        ("recipients", recipients),
        ("country", "FR"),
        ("budget", "1"),
    ];
    let sample = browser.post("/console/compose", &form).await;
    let status = sample.status();
    let sample = sample.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{sample}");
    assert!(sample.contains("Hi Ann"), "{sample}");
    assert!(sample.contains("at most 1 recipients"), "{sample}");
    assert!(!sample.contains("Hi Bo"), "{sample}");
}

/// The console's webhook form is held to the workspace's quota of subscriptions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_webhook_form_is_held_to_the_webhooks_quota() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    let mut a = brand(&app, &operator, "brand-a", json!({"webhooks": 1})).await;
    let first = with_key(&app, &a.admin, Method::POST, "/webhooks")
        .json(&json!({"url": "https://hooks.example/one", "secret": "webhook-secret-one-1234"}))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    let form = [
        ("csrf", a.csrf.as_str()),
        ("url", "https://hooks.example/two"),
        ("secret", "webhook-secret-two-1234"),
    ];
    let refused = a.browser.post("/console/webhooks", &form).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let page = refused.text().await.unwrap();
    assert!(page.contains("at most 1 webhook subscriptions"), "{page}");
    let listed = send_json(with_key(&app, &a.admin, Method::GET, "/webhooks")).await;
    assert_eq!(listed["webhooks"].as_array().unwrap().len(), 1, "{listed}");
}

/// A dry run of B's import with one of A's codes says "taken", and nothing of A's link: not
/// its target (a password-protected link's here), nor its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_import_dry_run_reports_another_workspaces_code_as_taken() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    let a = brand(&app, &operator, "brand-a", json!({})).await;
    let secret_target = "https://a.example/p?token=s3cr3t-a";
    let made = with_key(&app, &a.admin, Method::POST, "/links")
        .json(&json!({"url": secret_target, "code": "a-private", "password": "hunter2hunter2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let mut b = brand(&app, &operator, "brand-b", json!({})).await;
    let csv = "code,url,domain,visits\na-private,https://b.example/mine,s.old.example,3\n";
    let (page, report) = b.browser.import_csv(&b.csrf, csv, true).await;
    let text = format!("{page}\n{report}");
    assert!(text.contains("taken"), "{text}");
    for leak in ["a.example", "s3cr3t", "token", "protected", "live"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    assert_eq!(report["skipped"]["collision"], 1, "{report}");
}

/// A real import by B of a code A imported from the same source leaves A's link alone: its
/// visit count, its statistics and its feed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_import_of_another_workspaces_code_leaves_its_visits_alone() {
    let app = spawn_app(Backend::Sqlite).await;
    let operator = operator_key(&app).await;
    let mut a = brand(&app, &operator, "brand-a", json!({})).await;
    let csv = "code,url,domain,visits\nq.1,https://old.example/q,s.old.example,4\n";
    let (_, report) = a.browser.import_csv(&a.csrf, csv, false).await;
    assert_eq!(report["imported"], 1, "{report}");
    let link = send_json(with_key(&app, &a.admin, Method::GET, "/links/q.1")).await;
    assert_eq!(link["visit_count"], 4, "{link}");
    let stats_before = send_json(with_key(&app, &a.admin, Method::GET, "/links/q.1/stats")).await;
    let feed = || async {
        let answer = with_key(&app, &a.admin, Method::GET, "/visits")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        answer.text().await.unwrap()
    };
    let feed_before = feed().await;

    // B's copy of the same source's export, with more visits since.
    let mut b = brand(&app, &operator, "brand-b", json!({})).await;
    let csv = "code,url,domain,visits\nq.1,https://old.example/q,s.old.example,9\n";
    let (page, report) = b.browser.import_csv(&b.csrf, csv, false).await;
    let link = send_json(with_key(&app, &a.admin, Method::GET, "/links/q.1")).await;
    assert_eq!(
        link["visit_count"], 4,
        "A's count raised by B's import: {link}"
    );
    assert_eq!(report["imported"], 0, "{report}");
    assert!(page.contains("taken"), "{page}");
    let stats = send_json(with_key(&app, &a.admin, Method::GET, "/links/q.1/stats")).await;
    assert_eq!(stats["totals"], stats_before["totals"]);
    assert_eq!(feed().await, feed_before);
    assert!(
        codes(&app, &b.admin).await.is_empty(),
        "B has no link of it"
    );
}
