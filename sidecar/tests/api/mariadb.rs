//! What the MariaDB backend promises beyond the shared API tests: strict, UTC, utf8mb4 sessions,
//! InnoDB tables, codes compared byte for byte, and no acknowledged link lost when the server
//! restarts under load.

use crate::helpers::*;
use crate::on_each_backend;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use testkit::MariaDb;

on_each_backend!(
    codes_differing_only_in_case_are_two_links,
    times_far_ahead_are_stored_as_given,
);

/// `aB3` and `Ab3` are two links (MariaDB: a binary collation on codes; a case-insensitive one
/// would refuse the second as taken, or worse, answer the first for it).
async fn codes_differing_only_in_case_are_two_links(backend: Backend) {
    let app = spawn_app(backend).await;
    app.create(json!({"url": "https://lower.example/", "code": "aB3"}))
        .await;
    app.create(json!({"url": "https://upper.example/", "code": "Ab3"}))
        .await;
    for (code, target) in [
        ("aB3", "https://lower.example/"),
        ("Ab3", "https://upper.example/"),
    ] {
        let link: Value = app.get_link(code).await.json().await.unwrap();
        assert_eq!(link["url"], target, "{code}");
        assert_eq!(
            app.redis_get(code).await.unwrap(),
            format!("1|L|302|0|0|{target}")
        );
    }
    assert_eq!(app.get_link("ab3").await.status(), 404);
    assert_eq!(app.db.scalar("SELECT COUNT(*) FROM links").await, 2);
}

/// An expiry in 2999, alone and in a batch with links that have none, reads back as given
/// (MariaDB once stored it as NULL: a TIMESTAMP parameter ends in 2038).
async fn times_far_ahead_are_stored_as_given(backend: Backend) {
    let app = spawn_app(backend).await;
    let far = "2999-01-01T00:00:00Z";
    let single = app
        .create(json!({"url": "https://far.example/", "expires_at": far}))
        .await;
    let response = app
        .post_batch(&json!([
            {"url": "https://near.example/"},
            {"url": "https://far.example/b", "expires_at": far},
        ]))
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let codes = [&single["code"], &body["results"][1]["link"]["code"]]
        .map(|code| code.as_str().unwrap().to_owned());
    for code in &codes {
        let link: Value = app.get_link(code).await.json().await.unwrap();
        assert_eq!(link["expires_at"], far, "{code}");
    }
}

/// Every session the sidecar opens is strict (a value too long for its column is an error, never
/// cut), in UTC and utf8mb4; every table is InnoDB; codes compare in a binary collation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_strict_and_tables_innodb() {
    let app = spawn_app(Backend::Mariadb).await;
    let TestDb::Mysql(pool) = &app.db else {
        unreachable!()
    };
    // Several sessions at once, so more than the pool's first connection is looked at.
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(pool.acquire().await.unwrap());
    }
    for session in &mut sessions {
        let (mode, zone, charset): (Vec<u8>, Vec<u8>, Vec<u8>) = sqlx::query_as(
            "SELECT @@SESSION.sql_mode, @@SESSION.time_zone, @@SESSION.character_set_connection",
        )
        .fetch_one(&mut **session)
        .await
        .unwrap();
        let mode = String::from_utf8(mode).unwrap();
        for flag in [
            "STRICT_ALL_TABLES",
            "STRICT_TRANS_TABLES",
            "ANSI_QUOTES",
            "NO_ZERO_DATE",
        ] {
            assert!(mode.split(',').any(|m| m == flag), "{flag} in {mode}");
        }
        assert_eq!(zone, b"+00:00");
        assert_eq!(charset, b"utf8mb4");
    }
    drop(sessions);

    let too_long = "x".repeat(65);
    let refused = sqlx::query(
        "INSERT INTO settings (name, value, updated_at) VALUES (?, 'v', UTC_TIMESTAMP(6))",
    )
    .bind(&too_long)
    .execute(pool)
    .await
    .unwrap_err();
    assert!(refused.to_string().contains("too long"), "{refused}");
    assert_eq!(
        app.db
            .scalar("SELECT COUNT(*) FROM settings WHERE name LIKE 'xxxx%'")
            .await,
        0,
        "nothing cut and stored"
    );

    let other_engines = app
        .db
        .scalar(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND ENGINE <> 'InnoDB'",
        )
        .await;
    assert_eq!(other_engines, 0);
    let collation = app
        .db
        .texts(
            "SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = \
             DATABASE() AND TABLE_NAME = 'links' AND COLUMN_NAME = 'code'",
        )
        .await;
    assert_eq!(collation, ["utf8mb4_bin"]);
}

/// MariaDB stopped and started again while eight clients keep creating links: every create
/// answered 2xx is readable afterwards, in SQL and Redis; a create answered otherwise left either
/// nothing in SQL or a complete link.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restart_under_create_load_loses_no_acknowledged_link() {
    const CLIENTS: usize = 8;
    let mut server = MariaDb::dedicated();
    let dir = testkit::temp_dir();
    let app = Arc::new(spawn_app_at(Backend::Mariadb, server.fresh_database_url(), dir, &[]).await);
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..CLIENTS {
        let (app, stop, acknowledged) = (app.clone(), stop.clone(), acknowledged.clone());
        clients.spawn(async move {
            let mut outcomes = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let target = format!("https://t.example/{client}/{i}");
                i += 1;
                let response = app.post_link(&json!({ "url": target })).await;
                let status = response.status().as_u16();
                let body: Value = response.json().await.unwrap_or(Value::Null);
                if status == 201 {
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                outcomes.push((target, status, body["code"].as_str().map(str::to_owned)));
            }
            outcomes
        });
    }
    let created = |n: usize| {
        let acknowledged = acknowledged.clone();
        async move {
            eventually(Duration::from_secs(60), || {
                let done = acknowledged.load(Ordering::Relaxed) >= n;
                async move { done }
            })
            .await
        }
    };
    assert!(created(300).await, "creates before the restart");
    let server = tokio::task::spawn_blocking(move || {
        server.stop();
        server.start_again();
        server
    })
    .await
    .unwrap();
    let before = acknowledged.load(Ordering::Relaxed);
    assert!(
        created(before + 300).await,
        "creates resume after the restart"
    );
    stop.store(true, Ordering::Relaxed);

    let mut outcomes = Vec::new();
    while let Some(done) = clients.join_next().await {
        outcomes.extend(done.unwrap());
    }
    let refused = outcomes
        .iter()
        .filter(|(_, status, _)| *status != 201)
        .count();
    eprintln!(
        "{} creates, {refused} refused during the restart",
        outcomes.len()
    );
    assert!(
        outcomes
            .iter()
            .all(|(_, status, _)| matches!(status, 201 | 503)),
        "only 201 or 503: {:?}",
        outcomes
            .iter()
            .find(|(_, status, _)| !matches!(status, 201 | 503))
    );
    for (target, status, code) in &outcomes {
        if *status == 201 {
            let code = code.as_deref().unwrap();
            let link: Value = app.get_link(code).await.json().await.unwrap();
            assert_eq!(link["url"], *target, "acknowledged {code}");
            assert!(app.redis_get(code).await.is_some(), "{code} in Redis");
        }
    }
    // Whatever SQL holds is complete: every stored link is in Redis with its target, so even a
    // create whose answer was lost left a working link or nothing.
    let stored = app.db.texts("SELECT code FROM links").await;
    assert!(stored.len() >= acknowledged.load(Ordering::Relaxed));
    for code in &stored {
        let response = app.get_link(code).await;
        let status = response.status();
        let link: Value = response.json().await.unwrap();
        let target = link["url"]
            .as_str()
            .unwrap_or_else(|| panic!("stored {code}: GET answered {status} {link}"));
        assert_eq!(
            app.redis_get(code).await.unwrap(),
            format!("1|L|302|0|0|{target}"),
            "{code}"
        );
    }
    drop(server);
}
