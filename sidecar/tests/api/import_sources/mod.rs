//! `import --from yourls|shlink|kutt|bitly|csv` and `verify-import` (issue 40): other
//! shorteners' links kept on their codes. The sources' APIs are recorded answers (fixtures/,
//! in each vendor's documented format) served by an axum server on port 0 that checks the
//! authentication header, paginates, and answers one 429 with `Retry-After`.

mod apis;
mod files;
mod source_server;
mod verify;
mod yourls;

use crate::helpers::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A fixture's path.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/api/import_sources/fixtures")
        .join(name)
}

/// Runs `import` in-process with the app's database and Redis, `--import-allow-private` and
/// `--report`; returns the outcome and the report.
pub async fn import(app: &TestApp, args: &[&str]) -> (Result<(), String>, Value) {
    let dir = testkit::temp_dir();
    let report = dir.path().join("report.json");
    // The sources' fakes are on loopback.
    let mut all = vec!["import", "--import-allow-private"];
    all.extend_from_slice(args);
    all.extend(["--report", report.to_str().unwrap()]);
    let outcome = shortlink_sidecar::cli::run(app.cli(&all))
        .await
        .map_err(|e| e.to_string());
    let report = std::fs::read(&report)
        .map(|bytes| serde_json::from_slice(&bytes).unwrap())
        .unwrap_or(Value::Null);
    (outcome, report)
}

/// The stored link's target, flags and visit count, read in SQL (SQLite): the API's code rule
/// is the alias rule, which imported codes need not follow.
pub async fn link_row(app: &TestApp, code: &str) -> Option<(String, i64, i64)> {
    let code = code.replace('\'', "''");
    let target = app
        .db
        .texts(&format!("SELECT target FROM links WHERE code = '{code}'"))
        .await
        .pop()?;
    let number =
        |column: &str| format!("SELECT CAST({column} AS BIGINT) FROM links WHERE code = '{code}'");
    let flags = app.db.scalar(&number("flags")).await;
    let visits = app.db.scalar(&number("visit_count")).await;
    Some((target, flags, visits))
}

pub fn skipped(report: &Value, reason: &str) -> u64 {
    report["skipped"][reason].as_u64().unwrap_or(0)
}
