//! API keys: every `/api/v1` route needs a valid, unrevoked key; health endpoints need none.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{json, Value};
use std::process::Command;

/// Every route of one link (`known`) and of the list, a key's everyday requests.
const LINK_ROUTES: [(Method, &str); 5] = [
    (Method::POST, "/links"),
    (Method::GET, "/links"),
    (Method::GET, "/links/known"),
    (Method::PATCH, "/links/known"),
    (Method::DELETE, "/links/known"),
];

crate::on_each_backend!(
    requests_without_a_valid_key_are_refused,
    keys_from_the_cli_work_until_revoked,
    a_resolve_key_resolves_and_nothing_else,
    viewers_read_and_issuers_change_links,
);

// MariaDB's schema starts with roles (migrations/mysql): there is no older database to upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_roles_migration_narrows_the_old_fallback_key_sqlite() {
    the_roles_migration_narrows_the_old_fallback_key(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_roles_migration_narrows_the_old_fallback_key_postgres() {
    the_roles_migration_narrows_the_old_fallback_key(Backend::Postgres).await
}

async fn requests_without_a_valid_key_are_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://a.example/", "code": "known"}))
        .await;
    let before = app.stored().await;
    let body = json!({"url": "https://b.example/"});

    let attempts: Vec<(Option<String>, &str)> = vec![
        (None, "missing_api_key"),
        (Some("Bearer".into()), "missing_api_key"),
        (Some("Bearer ".into()), "missing_api_key"),
        (Some(format!("Basic {API_KEY}")), "missing_api_key"),
        (Some("Bearer slk_wrong".into()), "invalid_api_key"),
        (Some(format!("Bearer {API_KEY}x")), "invalid_api_key"),
        (
            Some(format!("Bearer {}", "k".repeat(10_000))),
            "invalid_api_key",
        ),
        (Some("Bearer ' OR 1=1 --".into()), "invalid_api_key"),
    ];
    for (authorization, code) in &attempts {
        let others = [
            (Method::GET, "/resolve/known"),
            (Method::GET, "/openapi.json"),
            (Method::GET, "/no/such/route"),
        ];
        for (method, path) in LINK_ROUTES.into_iter().chain(others) {
            let mut request = app
                .client
                .request(method.clone(), app.url(&format!("/api/v1{path}")))
                .json(&body);
            if let Some(authorization) = authorization {
                request = request.header("Authorization", authorization);
            }
            let response = request.send().await.unwrap();
            assert_eq!(
                response.status(),
                401,
                "{method} {path} with {authorization:?}"
            );
            assert_eq!(
                response.headers()["www-authenticate"],
                "Bearer",
                "{method} {path}"
            );
            let error: Value = response.json().await.unwrap();
            assert_eq!(
                error["error"]["code"], *code,
                "{method} {path} with {authorization:?}"
            );
        }
    }
    assert_eq!(app.stored().await, before, "refused requests store nothing");

    // The scheme name is case-insensitive.
    let response = app
        .client
        .get(app.url("/api/v1/links/known"))
        .header("Authorization", format!("bearer {API_KEY}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    // Health needs no key.
    for path in ["/healthz", "/readyz"] {
        let response = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
}

/// nginx's fallback key (`keys create --role resolve`): `GET /resolve/{code}` answers (for the
/// host's workspace nginx names); every other route, known or not, answers 403 `forbidden` and
/// changes nothing.
async fn a_resolve_key_resolves_and_nothing_else(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://a.example/", "code": "known", "campaign": "spring"}))
        .await;
    let key = sidecar_cli(
        &app.database_url,
        &["keys", "create", "--name", "fallback", "--role", "resolve"],
    );
    let key = key.trim().to_owned();
    let listing = sidecar_cli(&app.database_url, &["keys", "list"]);
    let line = listing
        .lines()
        .find(|line| line.ends_with("fallback"))
        .unwrap_or_else(|| panic!("key listed:\n{listing}"));
    assert_eq!(line.split_whitespace().nth(1), Some("resolve"), "{listing}");

    for method in [Method::GET, Method::HEAD] {
        let request = (app.client)
            .request(method.clone(), app.url("/api/v1/resolve/known"))
            .bearer_auth(&key);
        let response = from_workspace(request, "default").send().await.unwrap();
        assert_eq!(response.status(), 302, "{method} resolve");
    }

    let before = app.stored().await;
    let body = json!({"url": "https://attacker.example/phish"});
    for (method, path) in LINK_ROUTES.into_iter().chain([
        (Method::POST, "/links/batch"),
        (Method::GET, "/links/known/stats"),
        (Method::GET, "/stats"),
        (Method::GET, "/campaigns/spring"),
        (Method::GET, "/openapi.json"),
        (Method::GET, "/no/such/route"),
    ]) {
        let response = app
            .client
            .request(method.clone(), app.url(&format!("/api/v1{path}")))
            .bearer_auth(&key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{method} {path}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "forbidden", "{method} {path}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("may only resolve"),
            "{error}"
        );
    }
    assert_eq!(app.stored().await, before, "refused requests store nothing");

    // The admin key keeps every route but resolve (tests/api/resolve_scope.rs).
    for path in ["/links", "/links/known", "/stats", "/campaigns/spring"] {
        let response = app.api(Method::GET, path).send().await.unwrap();
        assert_eq!(response.status(), 200, "admin GET {path}");
    }
    let response = app.post_link(&json!({"url": "https://b.example/"})).await;
    assert_eq!(response.status(), 201);
}

/// `keys create` prints a key once; it works until `keys revoke`, then gets `revoked_api_key`.
async fn keys_from_the_cli_work_until_revoked(backend: Backend) {
    let app = spawn_app(backend).await;
    let sidecar = |args: &[&str]| sidecar_cli(&app.database_url, args);
    let key = sidecar(&["keys", "create", "--name", "campaign tool"]);
    let key = key.trim();
    assert!(key.starts_with("slk_") && key.len() == 68, "{key:?}");

    let listing = sidecar(&["keys", "list"]);
    let line = listing
        .lines()
        .find(|line| line.ends_with("campaign tool"))
        .unwrap_or_else(|| panic!("key listed:\n{listing}"));
    assert!(!listing.contains(key), "keys are never shown again");
    let id = line.split_whitespace().next().unwrap().to_owned();

    let with_key = |key: String| {
        app.client
            .post(app.url("/api/v1/links"))
            .bearer_auth(key)
            .json(&json!({"url": "https://a.example/"}))
            .send()
    };
    assert_eq!(with_key(key.to_owned()).await.unwrap().status(), 201);

    let revoked = sidecar(&["keys", "revoke", &id]);
    assert!(revoked.contains("revoked"), "{revoked}");
    let before = app.stored().await;
    let response = with_key(key.to_owned()).await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        "revoked_api_key"
    );
    assert_eq!(app.stored().await, before);

    // Revoking an unknown id fails; other keys keep working.
    let status = Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .args([
            "keys",
            "revoke",
            "999999",
            "--database-url",
            &app.database_url,
        ])
        .output()
        .unwrap()
        .status;
    assert!(!status.success());
    assert_eq!(
        app.api(Method::GET, "/links")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

/// Upgrading a database from before roles: every key keeps full rights except nginx's fallback key
/// (`nginx-resolve`, as scripts/run named it), which nginx keeps sending, now as a `resolve` key.
async fn the_roles_migration_narrows_the_old_fallback_key(backend: Backend) {
    const ROLES: i64 = 20261123000011;
    let dir = testkit::temp_dir();
    let (mut migrator, url) = match backend {
        Backend::Sqlite => (
            sqlx_macros::migrate!("../migrations/sqlite"),
            format!("sqlite://{}", dir.path().join("old.db").display()),
        ),
        Backend::Postgres => (
            sqlx_macros::migrate!("../migrations/postgres"),
            testkit::postgres().fresh_database_url(),
        ),
        Backend::Mariadb => unreachable!("MariaDB's first migration has the roles"),
    };
    let all = migrator.migrations.clone();
    migrator.migrations = all.iter().filter(|m| m.version < ROLES).cloned().collect();
    let insert = "INSERT INTO api_keys (name, key_hash, created_at) VALUES \
                  ('nginx-resolve', 'h1', '2026-01-01T00:00:00Z'), \
                  ('campaign tool', 'h2', '2026-01-01T00:00:00Z')";
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(&format!("{url}?mode=rwc"))
                .await
                .unwrap();
            migrator.run(&pool).await.unwrap();
            sqlx::query(insert).execute(&pool).await.unwrap();
            migrator.migrations = all;
            migrator.run(&pool).await.unwrap();
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            migrator.run(&pool).await.unwrap();
            sqlx::query(&insert.replace("'2026-01-01T00:00:00Z'", "now()"))
                .execute(&pool)
                .await
                .unwrap();
            migrator.migrations = all;
            migrator.run(&pool).await.unwrap();
        }
        Backend::Mariadb => unreachable!(),
    }
    let listing = sidecar_cli(&url, &["keys", "list"]);
    let role = |name: &str| {
        let line = listing.lines().find(|line| line.ends_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().to_owned()
    };
    assert_eq!(role("nginx-resolve"), "resolve", "{listing}");
    assert_eq!(role("campaign tool"), "admin", "{listing}");
}

/// `viewer` keys read links, campaigns and statistics and change nothing; `issuer` keys also
/// create, change and revoke links; neither resolves (nginx's key does).
async fn viewers_read_and_issuers_change_links(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://a.example/", "code": "known", "campaign": "spring"}))
        .await;
    let key = |role: &str| {
        sidecar_cli(
            &app.database_url,
            &["keys", "create", "--name", role, "--role", role],
        )
        .trim()
        .to_owned()
    };
    let (viewer, issuer) = (key("viewer"), key("issuer"));
    let send = |key: &str, method: Method, path: &str, body: Value| {
        app.client
            .request(method, app.url(&format!("/api/v1{path}")))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    let reads = [
        "/links",
        "/links/known",
        "/links/known/stats",
        "/links/known/qr",
        "/stats",
        "/campaigns/spring",
        "/openapi.json",
    ];
    for key in [&viewer, &issuer] {
        for path in reads {
            let response = send(key, Method::GET, path, json!(null)).await.unwrap();
            assert_eq!(response.status(), 200, "GET {path}");
        }
        let response = send(key, Method::GET, "/resolve/known", json!(null))
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "resolve");
    }

    let before = app.stored().await;
    let writes = [
        (Method::POST, "/links", json!({"url": "https://b.example/"})),
        (
            Method::POST,
            "/links/batch",
            json!([{"url": "https://b.example/"}]),
        ),
        (
            Method::PATCH,
            "/links/known",
            json!({"url": "https://b.example/"}),
        ),
        (Method::DELETE, "/links/known", json!(null)),
    ];
    for (method, path, body) in &writes {
        let response = send(&viewer, method.clone(), path, body.clone())
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "viewer {method} {path}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "forbidden");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("may only read"),
            "{error}"
        );
    }
    assert_eq!(app.stored().await, before, "a viewer changed nothing");

    for ((method, path, body), expected) in writes.iter().zip([201, 200, 200, 200]) {
        let response = send(&issuer, method.clone(), path, body.clone())
            .await
            .unwrap();
        assert_eq!(response.status(), expected, "issuer {method} {path}");
    }
    let known: Value = app.get_link("known").await.json().await.unwrap();
    assert_eq!(known["url"], "https://b.example/");
    assert!(known["revoked_at"].is_string(), "{known}");
}
