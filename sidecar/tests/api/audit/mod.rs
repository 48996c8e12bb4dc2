//! The audit log (issue 53): the chain on every backend and what `audit verify` finds after SQL
//! edits (chain.rs), retention (retention.rs), and what the API, the CLI and the console record
//! (api.rs).

mod api;
mod chain;
mod fused;
mod page;
mod retention;

use crate::helpers::{run_sidecar, Backend};
use shortlink_store::audit::{Actor, AuditEntry, AuditFilter, AuditRecord, Changes};
use shortlink_store::{ConnectOptions, Storage};
use std::sync::Arc;
use std::time::Duration;

/// A storage on a fresh database of `backend` (its migrations applied), the database's URL, and
/// the directory that holds a SQLite file.
async fn fresh_storage(backend: Backend) -> (Arc<dyn Storage>, String, tempfile::TempDir) {
    let dir = testkit::temp_dir();
    let url = backend.fresh_database_url(dir.path());
    (open_storage(&url).await, url, dir)
}

/// Another storage on the database at `url`, as a second process opens it.
async fn open_storage(url: &str) -> Arc<dyn Storage> {
    shortlink_store::connect(&ConnectOptions {
        url: url.to_owned(),
        max_connections: 2,
        acquire_timeout: Duration::from_secs(10),
        sqlite_cache: Default::default(),
    })
    .await
    .expect("open the database")
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

/// Asserts that `storage` holds one chain and that it verifies sound over `rows` rows: its
/// newest 50 rows, newest first.
async fn sound_chain(storage: &dyn Storage, rows: u64) -> Vec<AuditRecord> {
    let reports = shortlink_store::audit::verify(storage, None).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        (reports[0].rows_checked, &reports[0].problem),
        (rows, &None)
    );
    let filter = AuditFilter {
        limit: 50,
        ..AuditFilter::default()
    };
    storage.list_audit(&filter).await.unwrap()
}

/// `audit verify` through the binary: whether it exited 0, and what it printed.
fn verify_cli(database_url: &str) -> (bool, String) {
    let (sound, stdout, stderr) = run_sidecar(database_url, &["audit", "verify"]);
    (sound, stdout + &stderr)
}
