//! Not-found redirects (issue 70) through the API: checked as targets are (422 naming the field),
//! scoped to the key's workspace and its domains (another's domain answers as one never seen),
//! stored in SQL, audited, projected to Redis (`sl:nf`, as `shortlink_wire::not_found` spells it),
//! answered by the fallback from SQL, and gone with their domain's setting or their workspace.

use super::*;
use reqwest::Method;
use shortlink_wire::not_found::{domain_field, workspace_field, Redirects};
use std::collections::HashMap;

const LISTS: &str = "https://s.example [brand-a] https://a1.brand-a.example [brand-b] \
                     https://b1.brand-b.example";
const POOL: &str = "s.example a1.brand-a.example b1.brand-b.example";
const A1: &str = "a1.brand-a.example";

/// A request of `key` as nginx's API server sends it (pool and issuing lists).
fn through_nginx(app: &TestApp, key: &str, method: Method, path: &str) -> reqwest::RequestBuilder {
    with_key(app, key, method, path)
        .header("x-shortlink-public-base", LISTS)
        .header("x-shortlink-pool", POOL)
}

async fn put(app: &TestApp, key: &str, path: &str, body: Value) -> (u16, Value) {
    let answer = through_nginx(app, key, Method::PUT, path)
        .json(&body)
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

async fn hash(app: &TestApp) -> HashMap<String, String> {
    let mut redis = app.redis().await;
    redis::cmd("HGETALL")
        .arg(shortlink_wire::not_found::KEY)
        .query_async(&mut redis)
        .await
        .unwrap()
}

fn url(url: &str) -> Option<String> {
    Some(url.to_owned())
}

async fn checked_scoped_stored_audited_and_projected(backend: Backend) {
    let app = spawn_app(backend).await;
    let operator = operator_key(&app).await;
    create_workspace(&app, &operator, "brand-a").await;
    create_workspace(&app, &operator, "brand-b").await;
    let a = workspace_key(&app, &operator, "brand-a", "admin").await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    let viewer = workspace_key(&app, &operator, "brand-a", "viewer").await;

    // Checked as a link's target: the field is named.
    for (body, field) in [
        (
            json!({"unknown_url": "ftp://brand-a.example/"}),
            "unknown_url",
        ),
        (json!({"root_url": "https://s.example/loop"}), "root_url"),
        (json!({"expired_url": "/relative"}), "expired_url"),
    ] {
        let (status, error) = put(&app, &a, "/not-found-redirects", body).await;
        assert_eq!(status, 422, "{error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{field}: {error}");
    }
    let domain_path = format!("/domains/{A1}/not-found-redirects");
    // Another workspace's domain is one never seen; a viewer changes nothing.
    let (status, error) = put(
        &app,
        &b,
        &domain_path,
        json!({"unknown_url": "https://b.example/"}),
    )
    .await;
    assert_eq!(status, 404, "{error}");
    let (status, _) = put(&app, &viewer, &domain_path, json!({})).await;
    assert_eq!(status, 403);
    assert!(hash(&app).await.is_empty(), "nothing was projected yet");

    let own = json!({"root_url": "https://brand-a.example/", "unknown_url": "https://brand-a.example/lost",
        "expired_url": "https://brand-a.example/over"});
    let (status, view) = put(&app, &a, "/not-found-redirects", own).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["domain"], Value::Null);
    let (status, view) = put(
        &app,
        &a,
        &domain_path,
        json!({"unknown_url": "https://brand-a.example/a1"}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["domain"], A1);

    let workspace = Redirects {
        root: url("https://brand-a.example/"),
        unknown: url("https://brand-a.example/lost"),
        expired: url("https://brand-a.example/over"),
    };
    let domain = Redirects {
        unknown: url("https://brand-a.example/a1"),
        ..Redirects::default()
    };
    assert_eq!(
        hash(&app).await,
        HashMap::from([
            (workspace_field("brand-a"), workspace.encode()),
            (domain_field("brand-a", A1), domain.encode()),
        ])
    );
    let audited = app
        .db
        .scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'not_found_redirects.set'")
        .await;
    assert_eq!(audited, 2);

    // The fallback answers from SQL: the domain's page beats the workspace's, the rest falls
    // through, another workspace's host keeps its 404.
    let fallback = |workspace: &'static str, host: &'static str| {
        let app = &app;
        async move {
            let answer = app
                .fallback(workspace, "no-such-alias")
                .await
                .header(shortlink_wire::fallback::HOST_HEADER, host)
                .send()
                .await
                .unwrap();
            let location = answer
                .headers()
                .get("location")
                .map(|l| l.to_str().unwrap().to_owned());
            (answer.status().as_u16(), location)
        }
    };
    assert_eq!(
        fallback("brand-a", A1).await,
        (302, url("https://brand-a.example/a1"))
    );
    assert_eq!(
        fallback("brand-a", "a9.brand-a.example").await,
        (302, url("https://brand-a.example/lost"))
    );
    assert_eq!(fallback("brand-b", "b1.brand-b.example").await, (404, None));

    // The domain's setting removed: it falls through to the workspace's.
    let answer = through_nginx(&app, &a, Method::DELETE, &domain_path)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 204);
    assert_eq!(
        hash(&app).await,
        HashMap::from([(workspace_field("brand-a"), workspace.encode())])
    );
    assert_eq!(
        fallback("brand-a", A1).await,
        (302, url("https://brand-a.example/lost"))
    );

    // Deleted with the workspace, in SQL and in Redis.
    let answer = with_key(&app, &operator, Method::DELETE, "/workspaces/brand-a")
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{:?}", answer.text().await);
    assert!(hash(&app).await.is_empty());
    let rows = app
        .db
        .scalar("SELECT COUNT(*) FROM not_found_redirects")
        .await;
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn not_found_redirects_on_sqlite() {
    checked_scoped_stored_audited_and_projected(Backend::Sqlite).await;
}

#[tokio::test]
async fn not_found_redirects_on_postgres() {
    checked_scoped_stored_audited_and_projected(Backend::Postgres).await;
}

#[tokio::test]
async fn not_found_redirects_on_mariadb() {
    checked_scoped_stored_audited_and_projected(Backend::Mariadb).await;
}

async fn post_form(
    browser: &mut crate::console::Browser<'_>,
    fields: Vec<(&'static str, String)>,
) -> reqwest::Response {
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    browser.post("/console/not-found", &fields).await
}

/// The console's page edits the workspace's settings as the API does: refused with the field
/// named, saved, shown again, projected; another workspace's domain is one never seen.
#[tokio::test]
async fn the_console_page_shows_and_saves_the_workspaces_settings() {
    use crate::console::{csrf_of, location, Browser};
    let (app, operator) = app_with_workspaces(&["brand-b"]).await;
    let b = workspace_key(&app, &operator, "brand-b", "admin").await;
    // brand-b's domain, named by a request through nginx.
    let answer = through_nginx(&app, &b, Method::GET, "/domains")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

    let mut browser = Browser::new(&app);
    browser.sign_in(API_KEY).await;
    let page = browser.page("/console/not-found").await;
    assert!(page.contains("This workspace"), "{page}");
    assert!(
        !page.contains("b1.brand-b.example"),
        "another workspace's domain: {page}"
    );
    let csrf = csrf_of(&page);
    let form = |domain: &'static str, unknown: &'static str| {
        vec![
            ("csrf", csrf.clone()),
            ("domain", domain.to_owned()),
            ("root_url", String::new()),
            ("unknown_url", unknown.to_owned()),
            ("expired_url", String::new()),
        ]
    };
    let refused = post_form(&mut browser, form("", "ftp://default.example/")).await;
    assert_eq!(refused.status(), 422);
    assert!(refused.text().await.unwrap().contains("unknown_url"));
    assert!(hash(&app).await.is_empty());
    let foreign = post_form(
        &mut browser,
        form("b1.brand-b.example", "https://default.example/"),
    )
    .await;
    assert_eq!(foreign.status(), 404);

    let saved = post_form(&mut browser, form("", "https://default.example/lost")).await;
    assert_eq!(saved.status(), 303);
    assert_eq!(location(&saved), "/console/not-found");
    let page = browser.page("/console/not-found").await;
    assert!(page.contains("https://default.example/lost"), "{page}");
    let expected = Redirects {
        unknown: url("https://default.example/lost"),
        ..Redirects::default()
    };
    assert_eq!(
        hash(&app).await,
        HashMap::from([(workspace_field("default"), expected.encode())])
    );
}
