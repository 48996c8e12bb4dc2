//! A create's audit row appended in its insert's round trip (`LinkTx::insert_link_audited`):
//! taken when the process's hint of the chain head is right, on SQLite and PostgreSQL; declined
//! (the caller appends before its commit) on a stale hint or MariaDB. Either way one sound chain.

use super::{fresh_storage, open_storage, sound_chain};
use crate::helpers::Backend;
use crate::on_each_backend;
use shortlink_model::{Link, WorkspaceId};
use shortlink_store::audit::{Actor, AuditEntry, Changes};
use shortlink_store::{self, Storage};

on_each_backend!(a_create_and_its_audit_row_in_one_round_trip_keep_one_chain);

fn link(n: usize) -> (Link, AuditEntry) {
    let now = shortlink_store::now();
    let code = format!("fused{n}");
    let link = Link::new(
        code.clone(),
        WorkspaceId::DEFAULT,
        format!("https://t.example/{n}"),
        "0".repeat(64),
        now,
    );
    let changes = Changes::new().set("target", link.target.clone());
    let entry = AuditEntry::new(Actor::key(7, "tool"), "link.create", code, changes);
    (link, entry)
}

/// Creates link `n` as the service does; whether its row went in with the insert.
async fn create(storage: &dyn Storage, n: usize, commit: bool) -> bool {
    let (link, entry) = link(n);
    let mut tx = storage.begin().await.unwrap();
    let fused = tx.insert_link_audited(&link, None, &entry).await.unwrap();
    if !fused {
        tx.append_audit(&entry).await.unwrap();
    }
    if commit {
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap();
    }
    fused
}

async fn a_create_and_its_audit_row_in_one_round_trip_keep_one_chain(backend: Backend) {
    let (one, url, _dir) = fresh_storage(backend).await;
    let other = open_storage(&url).await;
    // No hint yet: the first appends the slow way and learns the head; then its hint holds.
    let mut fused = Vec::new();
    for n in 0..3 {
        fused.push(create(one.as_ref(), n, true).await);
    }
    // The other process moves the head: `one`'s hint is stale, then right again.
    fused.push(create(other.as_ref(), 3, true).await);
    fused.push(create(one.as_ref(), 4, true).await);
    fused.push(create(one.as_ref(), 5, true).await);
    // Rolled back with its transaction: neither the link nor its row; the hint is stale again.
    fused.push(create(one.as_ref(), 6, false).await);
    fused.push(create(one.as_ref(), 7, true).await);
    fused.push(create(one.as_ref(), 8, true).await);
    let expected = match backend {
        Backend::Mariadb => [false; 9],
        _ => [false, true, true, false, false, true, true, false, true],
    };
    assert_eq!(fused, expected);

    let rows = sound_chain(one.as_ref(), 8).await;
    let mut objects: Vec<&str> = rows.iter().map(|row| row.object.as_str()).collect();
    objects.reverse();
    assert_eq!(
        objects,
        ["fused0", "fused1", "fused2", "fused3", "fused4", "fused5", "fused7", "fused8"]
    );
    for n in 0..9 {
        let stored = one.link_by_code(&format!("fused{n}")).await.unwrap();
        assert_eq!(stored.is_some(), n != 6, "fused{n}");
    }
}
