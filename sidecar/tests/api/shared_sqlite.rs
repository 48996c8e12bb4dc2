//! A command beside a sidecar that writes without pause on one SQLite file (issue 82). SQLite has
//! one writer and no queue: the command's busy handler looks at the lock every 100 ms, the sidecar
//! takes it again within microseconds of each commit, and the command used to give up with
//! "database is locked" at its `--db-timeout` however short each of the sidecar's transactions
//! was. The sidecar now gives way to a command that waits ([`shortlink_store::sqlite_turn`]).

use crate::helpers::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long each of the sidecar's back-to-back transactions holds the write lock: four of them in
/// the command's one-second wait, each begun while the one before commits.
const HOLD: Duration = Duration::from_millis(250);

/// The sidecar's tasks writing at once: the next one waits on the write connection already.
const WRITERS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_beside_a_sidecar_writing_without_pause_gets_its_turn() {
    // This test process is the sidecar.
    shortlink_store::sqlite_turn::serve_beside_commands();
    let dir = testkit::temp_dir();
    let database_url = format!("sqlite://{}", dir.path().join("links.db").display());
    let config = config(&database_url, "redis://127.0.0.1:1", &[]);
    let storage = shortlink_sidecar::open_storage(&config).await.unwrap();

    // The sidecar's writes, one after the other (a batch's groups, a burst of creates).
    let stop = Arc::new(AtomicBool::new(false));
    let writes: Vec<_> = (0..WRITERS)
        .map(|_| {
            let (stop, storage) = (Arc::clone(&stop), Arc::clone(&storage));
            tokio::spawn(async move {
                let mut transactions = 0;
                while !stop.load(Ordering::Relaxed) {
                    let tx = storage.begin().await.expect("the sidecar's write");
                    tokio::time::sleep(HOLD).await;
                    tx.commit().await.expect("the sidecar's commit");
                    transactions += 1;
                }
                transactions
            })
        })
        .collect();

    let command = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_shortlink-sidecar"))
            .args(["workspaces", "create", "brand"])
            .args(["--database-url", &database_url, "--code-secret", SECRET_HEX])
            .args(["--db-timeout", "1s"])
            .env("RUST_LOG", "warn")
            .output()
            .expect("run shortlink-sidecar")
    });
    let output = command.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    let mut transactions = 0;
    for writes in writes {
        transactions += writes.await.unwrap();
    }
    assert!(
        output.status.success(),
        "the command got no turn beside {transactions} transactions: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(transactions > 0, "the sidecar wrote meanwhile");
}
