//! Who may ask `GET /api/v1/resolve/{code}` and for which host (issue 66): nginx's fallback key
//! alone (role `resolve`), and only for the workspace nginx names for the request's host
//! (`X-Shortlink-Workspace: ws=<name>`). Any other key is refused before the lookup, so it reads
//! no target, sees no password page and uses up no capped link; a host of another workspace, or
//! one that names none, gets exactly an unknown code's 404.

use crate::helpers::*;
use crate::workspaces::{app_with_workspaces, link_in, workspace_key};
use redis::AsyncCommands;
use reqwest::Method;
use serde_json::{json, Value};
use shortlink_wire::fallback::WORKSPACE_HEADER;
use shortlink_wire::keys::visit_count_key;

/// Brand A's link made by A's admin; returns its code.
async fn link_of_a(app: &TestApp, admin: &str, body: Value) -> String {
    link_in(app, admin, body).await["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// An app with workspaces `brand-a` and `brand-b`: the app, its operator's key and an admin key
/// of A's.
async fn brands_a_and_b() -> (TestApp, String, String) {
    let (app, operator) = app_with_workspaces(&["brand-a", "brand-b"]).await;
    let a_admin = workspace_key(&app, &operator, "brand-a", "admin").await;
    (app, operator, a_admin)
}

/// How many clicks Redis has counted for `code` (none: 0).
async fn counted(app: &TestApp, code: &str) -> i64 {
    let count: Option<i64> = app.redis().await.get(visit_count_key(code)).await.unwrap();
    count.unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_but_the_fallbacks_resolves_and_a_refusal_counts_no_click() {
    let (app, operator, a_admin) = brands_a_and_b().await;
    let capped = link_of_a(
        &app,
        &a_admin,
        json!({"url": "https://a.example/p?token=secret", "max_visits": 1}),
    )
    .await;
    let locked = link_of_a(
        &app,
        &a_admin,
        json!({"url": "https://a.example/locked", "password": "hunter22"}),
    )
    .await;

    let mut keys = vec![
        ("A's first admin".to_owned(), a_admin.clone()),
        (
            "the default workspace's admin".to_owned(),
            API_KEY.to_owned(),
        ),
        ("the operator".to_owned(), operator.clone()),
    ];
    for slug in ["brand-a", "brand-b"] {
        for role in ["admin", "issuer", "viewer"] {
            let key = workspace_key(&app, &operator, slug, role).await;
            keys.push((format!("{slug}'s {role}"), key));
        }
    }
    for (who, key) in &keys {
        for code in [&capped, &locked] {
            for method in [Method::GET, Method::HEAD] {
                // The header nginx would send on A's own host: the key alone is refused.
                let answer = app
                    .client
                    .request(method.clone(), app.url(&format!("/api/v1/resolve/{code}")))
                    .bearer_auth(key)
                    .header(WORKSPACE_HEADER, "ws=brand-a")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), 403, "{who}: {method} {code}");
                if method == Method::GET {
                    let body: Value = answer.json().await.unwrap();
                    assert_eq!(body["error"]["code"], "forbidden", "{who}: {body}");
                    assert!(!body.to_string().contains("a.example"), "{who}: {body}");
                }
            }
        }
    }
    assert_eq!(
        counted(&app, &capped).await,
        0,
        "a refused key counted a click"
    );

    // A's recipient still gets A's capped link, once, through nginx's fallback.
    let first = app.resolve_on("brand-a", &capped).await;
    assert_eq!(first.status(), 302);
    assert_eq!(
        first.headers()["location"],
        "https://a.example/p?token=secret"
    );
    assert_eq!(app.resolve_on("brand-a", &capped).await.status(), 410);
    assert_eq!(app.resolve_on("brand-a", &locked).await.status(), 401);
}

/// Status, body and the headers a relayed 404 is judged by.
async fn answer(request: reqwest::RequestBuilder) -> (u16, String, String, String) {
    let response = request.send().await.unwrap();
    let header = |name: &str| {
        let value = response.headers().get(name);
        value.map_or("", |v| v.to_str().unwrap()).to_owned()
    };
    let (content_type, cache_control) = (header("content-type"), header("cache-control"));
    let status = response.status().as_u16();
    (
        status,
        response.text().await.unwrap(),
        content_type,
        cache_control,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_answers_a_code_only_for_its_workspaces_hosts() {
    let (app, _, a_admin) = brands_a_and_b().await;
    let capped = link_of_a(
        &app,
        &a_admin,
        json!({"url": "https://a.example/only-a", "max_visits": 1}),
    )
    .await;
    let key = app.resolve_key().await;
    let request = |code: &str, header: Option<&str>| {
        let request = app
            .client
            .get(app.url(&format!("/api/v1/resolve/{code}")))
            .bearer_auth(key);
        match header {
            Some(value) => request.header(WORKSPACE_HEADER, value),
            None => request,
        }
    };
    let unknown = answer(request("nosuchcode", Some("ws=brand-a"))).await;
    assert_eq!(unknown.0, 404, "{unknown:?}");

    for (host, header) in [
        ("no header (a host nginx did not name)", None),
        ("a host mapped to \"\"", Some("ws=")),
        ("a host mapped to an invalid name", Some("ws=Brand_A")),
        ("A's name without the prefix", Some("brand-a")),
        ("B's host", Some("ws=brand-b")),
        ("a host of default (an unmapped one)", Some("ws=default")),
    ] {
        let seen = answer(request(&capped, header)).await;
        assert_eq!(seen, unknown, "{host}: A's link answers as an unknown code");
    }
    assert_eq!(
        counted(&app, &capped).await,
        0,
        "a wrong host counted a click"
    );

    let own = request(&capped, Some("ws=brand-a")).send().await.unwrap();
    assert_eq!(own.status(), 302);
    assert_eq!(own.headers()["location"], "https://a.example/only-a");
}
