//! Redis or the database unavailable: writes answer 503 at once and store nothing; the service
//! recovers without a restart.

use crate::helpers::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

crate::on_each_backend!(redis_down_refuses_writes_and_stores_nothing);

async fn redis_down_refuses_writes_and_stores_nothing(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let link = app.create(json!({"url": "https://a.example/"})).await;
    let code = link["code"].as_str().unwrap().to_owned();
    let before = app.stored().await;

    app.redis.stop();
    let started = Instant::now();
    let expect_503 = |response: reqwest::Response| async move {
        assert_eq!(response.status(), 503);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "redis_unavailable", "{body}");
    };
    expect_503(app.post_link(&json!({"url": "https://b.example/"})).await).await;
    expect_503(
        app.post_link(&json!({"url": "https://b.example/", "code": "while-down"}))
            .await,
    )
    .await;
    expect_503(
        app.patch_link(&code, &json!({"url": "https://c.example/"}))
            .await,
    )
    .await;
    expect_503(app.delete_link(&code).await).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refusals are quick: {:?}",
        started.elapsed()
    );
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    assert_eq!(
        ready.json::<Value>().await.unwrap(),
        json!({"status": "unavailable", "database": "ok", "redis": "unavailable"})
    );
    // Reads do not need Redis.
    let read = app.get_link(&code).await;
    assert_eq!(read.status(), 200);
    assert_eq!(read.json::<Value>().await.unwrap(), link, "SQL unchanged");

    // Redis comes back empty: SQL still holds exactly what it held, and writes work again.
    app.redis.start_again();
    let mut after = app.stored().await;
    assert_eq!(
        after.links, before.links,
        "no link stored while Redis was down"
    );
    assert_eq!(after.redis_keys, 0);
    after.redis_keys = before.redis_keys;
    after.redis_values = before.redis_values.clone();
    assert_eq!(after, before);

    let created = app
        .create(json!({"url": "https://b.example/", "code": "while-down"}))
        .await;
    assert_eq!(created["code"], "while-down");
    assert_eq!(
        app.redis_get("while-down").await.as_deref(),
        Some("1|L|302|0|0|https://b.example/")
    );
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
}

/// PostgreSQL refusing connections (sessions terminated, new ones barred): 503
/// `database_unavailable`, promptly, and recovery without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_answers_503_and_recovers() {
    let app = spawn_app(Backend::Postgres).await;
    let code = &app.create_code("https://a.example/").await;
    let database = app.database_url.rsplit('/').next().unwrap().to_owned();
    let cluster = testkit::postgres();
    let TestDb::Postgres(pool) = &app.db else {
        unreachable!()
    };
    pool.close().await;

    cluster
        .query(&format!(
            "ALTER DATABASE {database} ALLOW_CONNECTIONS false; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'"
        ))
        .unwrap();
    let started = Instant::now();
    for _ in 0..3 {
        let response = app.post_link(&json!({"url": "https://b.example/"})).await;
        assert_eq!(response.status(), 503);
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["code"],
            "database_unavailable"
        );
        let response = app.get_link(code).await;
        assert_eq!(response.status(), 503);
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);

    cluster
        .query(&format!("ALTER DATABASE {database} ALLOW_CONNECTIONS true"))
        .unwrap();
    let recovered = eventually(Duration::from_secs(10), || async {
        app.get_link(code).await.status() == 200
    })
    .await;
    assert!(recovered, "the pool reconnects by itself");
    app.create(json!({"url": "https://c.example/"})).await;
}
