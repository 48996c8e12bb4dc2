//! The projection marker `sl:meta:projection` (src/projection/marker.rs): the serving sidecar sets
//! it once Redis holds every link, and puts links and marker back by itself after Redis loses its
//! data; `resync` sets it after a complete run only; the refill never overwrites a newer record.

use crate::helpers::*;
use redis::AsyncCommands;
use serde_json::json;
use shortlink_core::background::{Tasks, DRAIN};
use shortlink_core::projection::marker::{self as projection_marker, ProjectionMarker};
use shortlink_wire::keys::PROJECTION_MARKER;
use std::time::{Duration, Instant};

async fn marker_present(app: &TestApp) -> bool {
    app.redis().await.exists(PROJECTION_MARKER).await.unwrap()
}

/// The state a serving sidecar has, on the test app's database and Redis, checking every 50 ms.
async fn keeper_config(app: &TestApp) -> shortlink_config::Config {
    app.config(&["--projection-check-interval", "50ms"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_refills_redis_after_a_flush() {
    let app = spawn_app(Backend::Sqlite).await;
    let mut codes = Vec::new();
    for i in 0..30 {
        let link = app
            .create(json!({"url": format!("https://k.example/{i}")}))
            .await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    assert_eq!(app.delete_link(&codes[0]).await.status(), 200);
    let before = app.stored().await;
    assert!(
        !marker_present(&app).await,
        "the in-process test app runs no keeper"
    );

    let config = keeper_config(&app).await;
    let state = shortlink_sidecar::build_state(&config).await.unwrap();
    let keeper = projection_marker::Keeper::new(
        ProjectionMarker::new(&config).unwrap(),
        &config,
        std::sync::Arc::clone(state.links.storage()),
        std::sync::Arc::clone(state.links.projection()),
    );
    let mut tasks = Tasks::new();
    tasks.spawn("projection marker keeper", |shutdown| keeper.run(shutdown));
    // Start-up: Redis was complete but unmarked; the keeper fills nothing new and sets the marker.
    assert!(eventually(Duration::from_secs(10), || marker_present(&app)).await);
    assert_eq!(app.stored().await, before);

    for round in 0..3 {
        app.redis.cli(&["FLUSHALL"]);
        let flushed = Instant::now();
        assert!(
            eventually(Duration::from_secs(10), || marker_present(&app)).await,
            "marker back after FLUSHALL"
        );
        let back = flushed.elapsed();
        assert_eq!(
            app.stored().await,
            before,
            "every record back, tombstone included"
        );
        println!(
            "keeper, round {round}: {} records and the marker back {back:.0?} after FLUSHALL \
             (check interval 50 ms)",
            before.redis_keys
        );
    }
    tasks.shutdown(DRAIN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_sets_the_marker_after_a_complete_run_only() {
    let app = spawn_app(Backend::Sqlite).await;
    let mut codes = Vec::new();
    for i in 0..5 {
        let link = app
            .create(json!({"url": format!("https://r.example/{i}")}))
            .await;
        codes.push(link["code"].as_str().unwrap().to_owned());
    }
    codes.sort();
    app.run_cli(&["resync", "--from-code", &codes[1]]).await;
    assert!(
        !marker_present(&app).await,
        "a resumed run vouches for nothing"
    );
    app.run_cli(&["resync"]).await;
    assert!(marker_present(&app).await);
    let token: Option<String> = app
        .redis()
        .await
        .get(shortlink_wire::keys::RESYNC_TOKEN)
        .await
        .unwrap();
    assert_eq!(
        token, None,
        "the resync token is removed with the marker set"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refill_never_overwrites_a_newer_record_and_a_flush_mid_way_leaves_no_marker() {
    let app = spawn_app(Backend::Sqlite).await;
    let (a, b) = (
        &app.create_code("https://n.example/a").await,
        &app.create_code("https://n.example/b").await,
    );
    let config = keeper_config(&app).await;
    let state = shortlink_sidecar::build_state(&config).await.unwrap();
    let marker = ProjectionMarker::new(&config).unwrap();
    let storage = state.links.storage();

    // What a write-through racing the refill leaves: a record newer than SQL as the refill reads
    // it (here a tombstone), and a key still missing.
    let mut redis = app.redis().await;
    let _: () = redis
        .set(format!("sl:c:{a}"), "1|R|410|0|0|")
        .await
        .unwrap();
    let _: () = redis.del(format!("sl:c:{b}")).await.unwrap();
    let restored = projection_marker::restore(storage.as_ref(), &marker, GRACE)
        .await
        .unwrap();
    assert!(restored.is_some());
    assert_eq!(app.redis_get(a).await.as_deref(), Some("1|R|410|0|0|"));
    assert_eq!(
        app.redis_get(b).await.as_deref(),
        Some("1|L|302|0|0|https://n.example/b")
    );
    assert!(marker_present(&app).await);

    // Data lost between begin and finish: the marker is not set.
    let _: () = redis.del(PROJECTION_MARKER).await.unwrap();
    let token = marker.begin().await.unwrap();
    app.redis.cli(&["FLUSHALL"]);
    assert!(!marker.finish(token).await.unwrap());
    assert!(!marker_present(&app).await);
}

const GRACE: Duration = Duration::from_secs(GRACE_SECS as u64);
