//! `verify-import`: every link of the source asked of an edge with its domain as `Host`; a link
//! changed after the import is caught. The edge here is the sidecar's own fallback resolver
//! (`/api/v1/resolve/{code}`, which answers exactly what the module answers), behind a few lines
//! that take a phone's request (`GET /<code>`, `Host`) as nginx's `@resolve` location does.

use super::{fixture, import};
use crate::helpers::*;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

struct Edge {
    sidecar: String,
    client: reqwest::Client,
    /// nginx's fallback key (role `resolve`).
    key: &'static str,
    /// The `Host` of every request, to check that each link was asked on its domain.
    hosts: Mutex<Vec<String>>,
}

async fn redirect(
    State(edge): State<Arc<Edge>>,
    Path(code): Path<String>,
    headers: HeaderMap,
) -> Response {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_owned();
    edge.hosts.lock().unwrap().push(host);
    let request = (edge.client)
        .get(format!("{}/api/v1/resolve/{code}", edge.sidecar))
        .bearer_auth(edge.key);
    // Every host of this edge is `default`'s, as domains.conf maps a host nobody named.
    let answer = from_workspace(request, "default").send().await.unwrap();
    let mut response = axum::http::StatusCode::from_u16(answer.status().as_u16())
        .unwrap()
        .into_response();
    if let Some(location) = answer.headers().get("location") {
        response.headers_mut().insert("location", location.clone());
    }
    response
}

async fn start_edge(app: &TestApp) -> (String, Arc<Edge>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let edge = Arc::new(Edge {
        sidecar: app.address.clone(),
        client: app.client.clone(),
        key: app.resolve_key().await,
        hosts: Mutex::default(),
    });
    let router = axum::Router::new()
        .route("/{code}", axum::routing::get(redirect))
        .with_state(Arc::clone(&edge));
    let task = tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (url, edge, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_import_catches_a_link_that_changed() {
    let app = spawn_app(Backend::Sqlite).await;
    let export = fixture("shlink-export.csv");
    let export = export.to_str().unwrap();
    let (outcome, report) = import(&app, &["--from", "shlink", export]).await;
    outcome.unwrap();
    assert_eq!(report["imported"], 2, "{report}");
    let (edge_url, edge, task) = start_edge(&app).await;
    let dir = testkit::temp_dir();
    let verify_report = dir.path().join("verify.json");
    let verify = |report: String| {
        let cli = app.cli(&[
            "verify-import",
            "--from",
            "shlink",
            export,
            "--edge",
            &edge_url,
            "--report",
            &report,
        ]);
        shortlink_sidecar::cli::run(cli)
    };
    let report_path = verify_report.to_str().unwrap().to_owned();
    verify(report_path.clone())
        .await
        .expect("every link answers as before");
    let clean: Value = serde_json::from_slice(&std::fs::read(&verify_report).unwrap()).unwrap();
    assert_eq!(clean["checked"], 2, "{clean}");
    assert_eq!(clean["same"], 2, "{clean}");
    assert!(edge
        .hosts
        .lock()
        .unwrap()
        .iter()
        .all(|h| h == "s.old.example"));

    // Someone points one imported link elsewhere: verify names it, and only it.
    let response = app
        .patch_link("csv-one", &json!({"url": "https://wrong.example/"}))
        .await;
    assert_eq!(response.status(), 200);
    let error = verify(report_path).await.unwrap_err().to_string();
    assert!(
        error.contains("1 links would not answer as before"),
        "{error}"
    );
    let found: Value = serde_json::from_slice(&std::fs::read(&verify_report).unwrap()).unwrap();
    assert_eq!(found["same"], 1, "{found}");
    let difference = &found["differences"][0];
    assert_eq!(difference["code"], "csv-one");
    assert_eq!(difference["status"], 302);
    assert_eq!(difference["location"], "https://wrong.example/");
    assert_eq!(
        difference["expected_location"],
        "https://shop.example/csv-one"
    );
    task.abort();
}
