//! A serving sidecar's background work (`Application::build_serving`, src/lib.rs): every job
//! starts on one `Tasks` and stops on its one signal, after the requests in flight.

use crate::helpers::*;
use redis::AsyncCommands;
use shortlink_core::background::DRAIN;
use shortlink_sidecar::Application;
use shortlink_wire::keys::EVENT_STREAM;
use shortlink_wire::keys::PROJECTION_MARKER;
use std::time::{Duration, Instant};

/// Every job `serve` runs is on: the visit consumer, the cleanup jobs, the marker's keeper, the
/// idempotency key pruner, the domain health checks and webhook delivery. Each observes the
/// signal, so the shutdown takes what their drains take, far short of the bound at which one
/// that ignored it would be aborted (a task cut at the bound: `background`'s unit tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_every_background_task_on_the_signal_well_within_the_drain() {
    let app = spawn_app(Backend::Sqlite).await;
    let config = app.config(&[
        "--projection-check-interval",
        "50ms",
        "--expire-idle-after",
        "30d",
        "--visit-retention",
        "30d",
    ]);
    assert!(config.consumer && config.webhooks);
    let server = Application::build_serving(&config).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    // Running: the keeper sets the marker (the test app runs no keeper) and the consumer has
    // made its group on the stream.
    let redis = app.redis().await;
    let started = |mut redis: redis::aio::MultiplexedConnection| async move {
        let marker: bool = redis.exists(PROJECTION_MARKER).await.unwrap_or(false);
        let groups: redis::RedisResult<redis::Value> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(EVENT_STREAM)
            .query_async(&mut redis)
            .await;
        marker && matches!(groups, Ok(redis::Value::Array(groups)) if !groups.is_empty())
    };
    assert!(eventually(Duration::from_secs(20), || started(redis.clone())).await);

    let signalled = Instant::now();
    stop.send(()).unwrap();
    tokio::time::timeout(DRAIN * 2, running)
        .await
        .expect("run_until returns")
        .unwrap()
        .unwrap();
    let took = signalled.elapsed();
    println!("serve's background work stopped {took:.0?} after the signal (drain bound {DRAIN:?})");
    assert!(took < DRAIN / 2, "a task waited for the bound: {took:?}");
}

/// A wrong setting of one of `serve`'s jobs stops it before anything is opened: no database
/// file, no migration, no port (the jobs were once made after the wiring, which left a migrated
/// database behind).
#[tokio::test]
async fn a_wrong_setting_of_a_job_stops_serve_before_the_database_is_opened() {
    let dir = testkit::temp_dir();
    // A geo database that exists but cannot be read (a directory) is an error, not "left out".
    let geo = dir.path().display().to_string();
    let cases: [(&[&str], &str); 2] = [
        (&["--consumer-batch", "0"], "--consumer-batch"),
        (&["--geoip-db", &geo], &geo),
    ];
    for (flags, says) in cases {
        let database = dir.path().join("links.db");
        let url = format!("sqlite://{}", database.display());
        let args: Vec<&str> = flags.iter().copied().chain(["serve"]).collect();
        let serve = shortlink_sidecar::cli::run(cli(&url, "redis://127.0.0.1:1", &args));
        let error = serve.await.expect_err("refused");
        assert!(error.to_string().contains(says), "{flags:?}: {error}");
        assert!(!database.exists(), "{flags:?}: the database was opened");
    }
}
