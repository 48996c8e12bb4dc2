//! Retention deletes the oldest rows of each chain and moves its anchor: the rows left still
//! verify, and a row deleted after pruning is still found.

use super::{entry, fresh_storage, verify_cli};
use crate::helpers::{eventually, Backend, TestDb};
use crate::on_each_backend;
use shortlink_store::audit::verify;
use std::time::Duration;

on_each_backend!(pruned_chains_still_verify_and_later_deletions_are_found);

async fn pruned_chains_still_verify_and_later_deletions_are_found(backend: Backend) {
    let (storage, url, _dir) = fresh_storage(backend).await;
    for n in 1..=3 {
        storage.append_audit(&entry(n)).await.unwrap();
    }
    // Every row after `cut` is younger than it: wait out the millisecond, no fixed sleep.
    let cut = chrono::Utc::now().timestamp_millis() + 1;
    let later = eventually(Duration::from_secs(1), || async {
        chrono::Utc::now().timestamp_millis() > cut
    });
    assert!(later.await);
    for n in 4..=6 {
        storage.append_audit(&entry(n)).await.unwrap();
    }
    assert_eq!(storage.prune_audit(cut).await.unwrap(), 3);
    assert_eq!(
        storage.prune_audit(cut).await.unwrap(),
        0,
        "nothing more to prune"
    );

    let reports = verify(storage.as_ref(), None).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        (
            reports[0].anchor_seq,
            reports[0].rows_checked,
            &reports[0].problem
        ),
        (3, 3, &None)
    );
    let (sound, said) = verify_cli(&url);
    assert!(sound, "{said}");
    assert!(
        said.contains("3 rows checked after the retention anchor (row 3): sound"),
        "{said}"
    );

    // The chain still appends after the anchor.
    storage.append_audit(&entry(7)).await.unwrap();
    assert!(verify_cli(&url).0);

    let db = TestDb::connect(backend, &url).await;
    // The first row after the anchor deleted, as retention would but without moving it.
    db.execute("DELETE FROM audit_log WHERE seq = 4").await;
    let (sound, said) = verify_cli(&url);
    assert!(!sound, "{said}");
    assert!(said.contains("rows 4 to 4 are missing"), "{said}");
}
