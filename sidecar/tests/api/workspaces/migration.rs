//! An installation from before workspaces becomes the workspace `default` (migration
//! `20261126000044_workspaces`): its links, keys and webhooks are the default's, and everything
//! answers as before. The database is made with the migrations before it and rows written in
//! that schema, then the sidecar starts on it and migrates.

use super::*;
use shortlink_model::WorkspaceId;
use sqlx::migrate::Migrator;
use std::borrow::Cow;
use std::time::Duration;

/// The first migration of workspaces: every one before it made the schema being migrated.
const WORKSPACES: i64 = 20261126000044;

fn migrations(backend: Backend) -> std::path::PathBuf {
    let folder = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
        Backend::Mariadb => "mysql",
    };
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations")
        .join(folder)
}

/// A database of the schema before workspaces, holding a link, a revoked link, an admin key
/// (the bootstrap key's hash, as an installation's campaign tool holds it) and nginx's resolve
/// key, written as that schema's sidecar wrote them.
async fn database_before_workspaces(backend: Backend, url: &str) {
    let mut migrator = Migrator::new(migrations(backend)).await.unwrap();
    let before: Vec<_> = (migrator.migrations.iter())
        .filter(|m| m.version < WORKSPACES)
        .cloned()
        .collect();
    migrator.migrations = Cow::Owned(before);
    let now = match backend {
        Backend::Sqlite => "'2026-11-01T10:00:00.000000Z'",
        _ => "'2026-11-01 10:00:00'",
    };
    let hash = hash_api_key(API_KEY);
    // SQLite keeps the URL hash's prefix as a column of its own; the others derive it.
    let (prefix, a, b) = match backend {
        Backend::Sqlite => (
            ", url_prefix",
            format!(", '{:0>16}'", "a"),
            format!(", '{:0>16}'", "b"),
        ),
        _ => ("", String::new(), String::new()),
    };
    let resolve = hash_api_key("slk_the_nginx_resolve_key_of_the_old_installation");
    let rows = [
        format!(
            "INSERT INTO links (code, target, url_hash{prefix}, redirect_status, flags, \
             created_at, updated_at, campaign) VALUES ('old-alias', 'https://old.example/a', \
             '{0:0>64}'{a}, 302, 0, {now}, {now}, 'spring')",
            "a"
        ),
        format!(
            "INSERT INTO links (code, target, url_hash{prefix}, redirect_status, flags, \
             created_at, updated_at, revoked_at) VALUES ('old-revoked', 'https://old.example/b', \
             '{0:0>64}'{b}, 301, 0, {now}, {now}, {now})",
            "b"
        ),
        format!(
            "INSERT INTO api_keys (name, key_hash, created_at, role) \
             VALUES ('campaign tool', '{hash}', {now}, 'admin')"
        ),
        format!(
            "INSERT INTO api_keys (name, key_hash, created_at, role) \
             VALUES ('nginx-resolve', '{resolve}', {now}, 'resolve')"
        ),
    ];
    match backend {
        Backend::Sqlite => {
            let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
            let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
                .await
                .unwrap();
            migrator.run(&pool).await.unwrap();
            for row in &rows {
                sqlx::query(row).execute(&pool).await.unwrap();
            }
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            migrator.run(&pool).await.unwrap();
            for row in &rows {
                sqlx::query(row).execute(&pool).await.unwrap();
            }
        }
        Backend::Mariadb => {
            let pool = shortlink_store::mysql::pool(url, 2, Duration::from_secs(10))
                .await
                .unwrap();
            migrator.run(&pool).await.unwrap();
            for row in &rows {
                sqlx::query(row).execute(&pool).await.unwrap();
            }
        }
    }
}

async fn an_installation_becomes_the_default_workspace(backend: Backend) {
    let dir = testkit::temp_dir();
    if backend == Backend::Sqlite {
        std::fs::create_dir_all(dir.path().join("var")).unwrap();
    }
    let url = backend.fresh_database_url(dir.path());
    database_before_workspaces(backend, &url).await;
    let app = spawn_app_at(backend, url, dir, &[]).await;
    // The old key reads the old links, which are the default workspace's.
    let link: Value = app.get_json("/links/old-alias").await;
    assert_eq!(link["url"], "https://old.example/a", "{link}");
    let storage = app.storage().await;
    for code in ["old-alias", "old-revoked"] {
        let stored = storage.link_by_code(code).await.unwrap().unwrap();
        assert_eq!(stored.workspace, WorkspaceId::DEFAULT, "{code}");
    }
    let keys = storage.list_api_keys(None).await.unwrap();
    // The bootstrap key is the old campaign tool's (same hash): stored once.
    assert_eq!(keys.len(), 2, "{keys:?}");
    for key in &keys {
        assert_eq!(
            key.workspace.as_ref().map(|w| w.id),
            Some(WorkspaceId::DEFAULT),
            "{key:?}"
        );
    }
    let resolve = keys.iter().find(|key| key.name == "nginx-resolve").unwrap();
    assert_eq!(resolve.role, Role::Resolve, "roles are kept");
    // Redis rebuilt from SQL holds the bytes a default link's record always had: what the old
    // sidecar wrote is what the new one writes.
    app.run_cli(&["resync"]).await;
    let record = app.redis_record("old-alias").await.unwrap();
    assert_eq!(record, b"1|L|302|0|0|https://old.example/a");
    assert_eq!(
        app.redis_record("old-revoked").await.unwrap(),
        b"1|R|410|0|0|"
    );
    assert_eq!(app.resolve("old-alias").await.status(), 302);
    assert_eq!(app.resolve("old-revoked").await.status(), 410);
    // Listings and campaigns are the default workspace's, and new links join it.
    let campaign: Value = app.get_json("/campaigns/spring").await;
    assert_eq!(campaign["links"], 1, "{campaign}");
    let code = app.create_code("https://new.example/").await;
    let stored = storage.link_by_code(&code).await.unwrap().unwrap();
    assert_eq!(stored.workspace, WorkspaceId::DEFAULT);
    let workspaces = storage.workspaces().await.unwrap();
    assert_eq!(workspaces.len(), 1);
    assert_eq!(workspaces[0].slug, "default");
}

#[tokio::test]
async fn an_installation_on_sqlite_becomes_the_default_workspace() {
    an_installation_becomes_the_default_workspace(Backend::Sqlite).await;
}

#[tokio::test]
async fn an_installation_on_postgres_becomes_the_default_workspace() {
    an_installation_becomes_the_default_workspace(Backend::Postgres).await;
}

#[tokio::test]
async fn an_installation_on_mariadb_becomes_the_default_workspace() {
    an_installation_becomes_the_default_workspace(Backend::Mariadb).await;
}
