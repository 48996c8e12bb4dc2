//! The sidecar on Redis Sentinel (docs/DEPLOYMENT.md, "Sentinel"): [`failover`] kills the primary
//! under create load, [`frozen`] under update load with the replicas frozen, [`wait`] refuses what
//! too few replicas hold. Real servers on loopback: 1 primary + 2 replicas + 3 sentinels.

pub(crate) mod failover;
mod frozen;
mod wait;

use crate::helpers::*;
use serde_json::{json, Value};
use shortlink_sidecar::Application;
use shortlink_store::Storage;
use std::sync::Arc;
use std::time::Duration;

/// Concurrent write loops.
const WRITERS: usize = 4;

/// The sidecar as `serve` runs it ([`Application::build_serving`]): the API, the visit consumer
/// and the projection marker's keeper, each on its own connection to the primary.
pub(crate) struct Sidecar {
    pub(crate) address: String,
    pub(crate) database_url: String,
    pub(crate) storage: Arc<dyn Storage>,
    server: tokio::task::JoinHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Sidecar {
    /// How many links SQL holds.
    pub(crate) async fn links_in_sql(&self) -> usize {
        let filter = shortlink_store::LinkFilter::all_workspaces();
        let links = self.storage.scan_links(&filter, None, 100_000).await;
        links.unwrap().len()
    }

    /// Stops the API and its background work (the keeper with it) as SIGTERM stops `serve`.
    pub(crate) async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.server).await.expect("the server stopped");
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        // Aborting the server drops its background tasks, which aborts them.
        self.server.abort();
    }
}

pub(crate) async fn start_sidecar(redis_url: &str, extra: &[&str]) -> Sidecar {
    let dir = testkit::temp_dir();
    let database_url = format!("sqlite://{}", dir.path().join("var/links.db").display());
    let config = config(&database_url, redis_url, extra);
    std::sync::LazyLock::force(&TRACING);
    let app = Application::build_serving(&config)
        .await
        .expect("build the sidecar");
    let address = format!("http://{}", app.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let stopped = async {
            let _ = stopped.await;
        };
        app.run_until(stopped).await.expect("serve");
    });
    let storage = shortlink_sidecar::open_storage(&config).await.unwrap();
    Sidecar {
        address,
        database_url,
        storage,
        server,
        stop: Some(stop),
        _dir: dir,
    }
}

/// A connection to the replica the sentinels promoted (panics when none was).
async fn promoted_primary(group: &testkit::SentinelGroup) -> redis::aio::MultiplexedConnection {
    let primary = group.promoted().expect("a promoted primary");
    redis::Client::open(primary.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

pub(crate) fn client() -> reqwest::Client {
    shortlink_e2e::install_tls_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

pub(crate) async fn post(client: &reqwest::Client, address: &str, url: &str) -> (u16, Value) {
    let response = client
        .post(format!("{address}/api/v1/links"))
        .bearer_auth(API_KEY)
        .json(&json!({ "url": url }))
        .send()
        .await
        .expect("POST /links");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A sidecar on the group's sentinels, `WAIT`ing for one replica.
async fn start_on_sentinels(group: &testkit::SentinelGroup, wait_timeout: &str) -> Sidecar {
    let sentinels = group.addresses();
    let flags = [
        "--redis-sentinels",
        &sentinels,
        "--redis-sentinel-service",
        testkit::sentinel::SERVICE,
        "--redis-wait-replicas",
        "1",
        "--redis-wait-timeout",
        wait_timeout,
        "--projection-check-interval",
        "200ms",
    ];
    // `--redis-url` gives only the database and credentials: the sentinels name the primary.
    start_sidecar(&group.primary.url(), &flags).await
}
