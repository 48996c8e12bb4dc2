//! PostgreSQL plans the ingest's chunk reads well only with statistics of the delivery tables;
//! the sidecar gives them their first ones itself, once, after its first thousand receipts
//! (`visits-sql/src/postgres/young.rs`), instead of waiting for autovacuum.

use super::*;

/// How many of the two delivery tables PostgreSQL has never analyzed.
async fn never_analyzed(app: &TestApp) -> i64 {
    app.db
        .scalar(
            "SELECT COUNT(*) FROM pg_class WHERE reltuples < 0 AND oid IN \
             (to_regclass('delivery_receipts'), to_regclass('delivery_messages'))",
        )
        .await
}

#[tokio::test]
async fn the_delivery_tables_get_their_first_statistics_after_a_thousand_receipts() {
    let app = spawn_app(Backend::Postgres).await;
    let code = app.create_code("https://shop.example/stats").await;
    let lines = |from: usize, to: usize| -> Vec<String> {
        (from..to)
            .map(|n| {
                json!({"code": code, "message_id": format!("m-{n}"), "state": "delivered"})
                    .to_string()
            })
            .collect()
    };
    // A deployment whose autovacuum has not come round yet: it must not analyze them under the
    // test either.
    for table in ["delivery_receipts", "delivery_messages"] {
        app.db
            .execute(&format!(
                "ALTER TABLE {table} SET (autovacuum_enabled = false)"
            ))
            .await;
    }
    assert_eq!(never_analyzed(&app).await, 2);
    let (status, _) = post_lines(&app, API_KEY, &lines(0, 999)).await;
    assert_eq!(status, 200);
    assert_eq!(never_analyzed(&app).await, 2, "not before the thousandth");
    let (status, answers) = post_lines(&app, API_KEY, &lines(999, 1_000)).await;
    assert_eq!(status, 200, "{answers:?}");
    assert_eq!(never_analyzed(&app).await, 0);
    assert_eq!(rows(&app, "delivery_messages").await, 1_000);
}
