//! The audit log (issue 53): the chain on every backend and what `audit verify` finds after SQL
//! edits (chain.rs), retention (retention.rs), and what the API, the CLI and the console record
//! (api.rs).

mod api;
mod chain;
mod fused;
mod page;
mod retention;

use crate::helpers::Backend;
use shortlink_store::audit::{Actor, AuditEntry, Changes};
use shortlink_store::{ConnectOptions, Storage};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// A storage on a fresh database of `backend` (its migrations applied), the database's URL, and
/// the directory that holds a SQLite file.
async fn fresh_storage(backend: Backend) -> (Arc<dyn Storage>, String, tempfile::TempDir) {
    let dir = testkit::temp_dir();
    let url = backend.fresh_database_url(dir.path());
    let storage = shortlink_store::connect(&ConnectOptions {
        url: url.clone(),
        max_connections: 2,
        acquire_timeout: Duration::from_secs(10),
        sqlite_cache: Default::default(),
    })
    .await
    .expect("open the database");
    (storage, url, dir)
}

/// The `n`th test entry: a key's link update with one changed field.
fn entry(n: usize) -> AuditEntry {
    let changes = Changes::new().diff(
        "target",
        format!("https://a.example/{n}"),
        format!("https://b.example/{n}"),
    );
    AuditEntry::new(
        Actor::key(7, "tool"),
        "link.update",
        format!("code{n}"),
        changes,
    )
}

/// The binary with `args` on `database_url`: whether it exited 0, and what it printed (stdout,
/// then stderr).
fn run_cli(database_url: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
        .args(args)
        .args(["--database-url", database_url])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run shortlink-sidecar");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stdout, stderr)
}

/// `audit verify` through the binary: whether it exited 0, and what it printed.
fn verify_cli(database_url: &str) -> (bool, String) {
    let (sound, stdout, stderr) = run_cli(database_url, &["audit", "verify"]);
    (sound, stdout + &stderr)
}
