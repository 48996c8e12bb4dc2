//! Appends, listings with filters and a cursor, and `audit verify` against rows deleted, edited
//! and inserted in SQL, on SQLite, PostgreSQL and MariaDB.

use super::{entry, fresh_storage, open_storage, sound_chain, verify_cli};
use crate::helpers::{Backend, TestDb};
use crate::on_each_backend;
use shortlink_store::audit::{Actor, AuditEntry, AuditFilter, Changes};

on_each_backend!(
    a_row_deleted_edited_or_inserted_in_sql_is_reported,
    listings_filter_and_page_newest_first,
    two_processes_and_a_rollback_keep_one_chain,
);

async fn a_row_deleted_edited_or_inserted_in_sql_is_reported(backend: Backend) {
    let (storage, url, _dir) = fresh_storage(backend).await;
    for n in 1..=5 {
        storage.append_audit(&entry(n)).await.unwrap();
    }
    let (sound, said) = verify_cli(&url);
    assert!(sound, "{said}");
    assert!(
        said.contains("workspace 1: 5 rows checked: sound"),
        "{said}"
    );

    let db = TestDb::connect(backend, &url).await;
    let field =
        |column: &str, seq: i64| format!("SELECT {column} FROM audit_log WHERE seq = {seq}");
    let broken = |expected: &str| {
        let (sound, said) = verify_cli(&url);
        assert!(!sound, "verify passed, expected {expected:?}: {said}");
        assert!(said.contains(expected), "expected {expected:?}: {said}");
    };

    // An edited change, then an edited actor: the row no longer gives its hash.
    let changes = db.texts(&field("changes", 3)).await.remove(0);
    db.execute("UPDATE audit_log SET changes = '{\"target\":[\"x\",\"y\"]}' WHERE seq = 3")
        .await;
    broken("2 rows checked, then: row 3");
    db.execute(&format!(
        "UPDATE audit_log SET changes = '{changes}' WHERE seq = 3"
    ))
    .await;
    db.execute("UPDATE audit_log SET actor_name = 'someone else' WHERE seq = 2")
        .await;
    broken("(edited)");
    db.execute("UPDATE audit_log SET actor_name = 'tool' WHERE seq = 2")
        .await;
    assert!(verify_cli(&url).0, "restored");

    // A row inserted after the last, linked to it, with a made-up hash.
    let last = db.texts(&field("hash", 5)).await.remove(0);
    db.execute(&format!(
        "INSERT INTO audit_log (workspace_id, seq, at_ms, actor_kind, actor_id, actor_name, \
         action, object, changes, prev_hash, hash) VALUES (1, 6, 1, 'key', 7, 'tool', \
         'link.update', 'forged', '{{}}', '{last}', '{}')",
        "f".repeat(64)
    ))
    .await;
    broken("row 6");
    db.execute("DELETE FROM audit_log WHERE seq = 6").await;
    assert!(verify_cli(&url).0, "the inserted row removed");

    // A row of a workspace no append ever made.
    db.execute(&format!(
        "INSERT INTO audit_log (workspace_id, seq, at_ms, actor_kind, actor_name, action, \
         object, changes, prev_hash, hash) VALUES (9, 1, 1, 'cli', 'x', 'key.create', '1', \
         '{{}}', '{0}', '{0}')",
        "0".repeat(64)
    ))
    .await;
    broken("workspace 9: 0 rows checked, then: rows without a chain head");
    db.execute("DELETE FROM audit_log WHERE workspace_id = 9")
        .await;

    // A row deleted from the middle, then from the end.
    db.execute("DELETE FROM audit_log WHERE seq = 3").await;
    broken("rows 3 to 3 are missing");
    db.execute("DELETE FROM audit_log WHERE seq >= 3").await;
    broken("rows 3 to 5 are missing from the end");
}

async fn listings_filter_and_page_newest_first(backend: Backend) {
    let (storage, _url, _dir) = fresh_storage(backend).await;
    let rows = [
        (1, Actor::key(7, "tool"), "webhook.create", "w1"),
        (1, Actor::key(8, "crm"), "webhook.delete", "w1"),
        (1, Actor::cli(), "key.create", "8"),
        (2, Actor::console("ana"), "webhook.update", "w2"),
        (1, Actor::key(7, "tool"), "webhooks.other", "w3"),
    ];
    for (workspace, actor, action, object) in rows.clone() {
        let mut entry = AuditEntry::new(actor, action, object, Changes::new().set("n", 1));
        entry.workspace_id = workspace;
        storage.append_audit(&entry).await.unwrap();
    }
    let list = |filter: AuditFilter| {
        let storage = storage.clone();
        async move {
            let rows = storage.list_audit(&filter).await.unwrap();
            rows.into_iter()
                .map(|r| format!("{}:{}:{}", r.workspace_id, r.action, r.object))
                .collect::<Vec<_>>()
        }
    };
    let all = || AuditFilter {
        limit: 50,
        ..AuditFilter::default()
    };
    assert_eq!(list(all()).await.len(), 5);
    assert_eq!(
        list(AuditFilter {
            action: Some("webhook.*".into()),
            ..all()
        })
        .await,
        [
            "2:webhook.update:w2",
            "1:webhook.delete:w1",
            "1:webhook.create:w1"
        ],
        "a family: webhooks.other is not in it"
    );
    assert_eq!(
        list(AuditFilter {
            action: Some("key.create".into()),
            ..all()
        })
        .await,
        ["1:key.create:8"]
    );
    assert_eq!(
        list(AuditFilter {
            actor: Some("key:7".into()),
            ..all()
        })
        .await,
        ["1:webhooks.other:w3", "1:webhook.create:w1"]
    );
    assert_eq!(
        list(AuditFilter {
            actor: Some("ana".into()),
            ..all()
        })
        .await,
        ["2:webhook.update:w2"]
    );
    assert_eq!(
        list(AuditFilter {
            object: Some("w1".into()),
            workspace_id: Some(1),
            ..all()
        })
        .await,
        ["1:webhook.delete:w1", "1:webhook.create:w1"]
    );
    assert_eq!(
        list(AuditFilter {
            workspace_id: Some(2),
            ..all()
        })
        .await,
        ["2:webhook.update:w2"]
    );
    let now = chrono::Utc::now().timestamp_millis();
    assert_eq!(
        list(AuditFilter {
            since_ms: Some(now + 60_000),
            ..all()
        })
        .await
        .len(),
        0
    );
    assert_eq!(
        list(AuditFilter {
            until_ms: Some(now + 60_000),
            ..all()
        })
        .await
        .len(),
        5
    );
    assert_eq!(
        list(AuditFilter {
            until_ms: Some(now - 60_000),
            ..all()
        })
        .await
        .len(),
        0
    );

    // Pages of two, each after the last id of the one before: every row once, newest first.
    let (mut seen, mut before_id) = (Vec::new(), None);
    loop {
        let page = storage
            .list_audit(&AuditFilter {
                before_id,
                limit: 2,
                ..AuditFilter::default()
            })
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        before_id = Some(last.id);
        seen.extend(page.iter().map(|r| r.id));
    }
    let mut sorted = seen.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.dedup();
    assert_eq!(seen, sorted);
    assert_eq!(seen.len(), 5);

    // Each workspace's chain is its own, and both verify.
    let reports = shortlink_store::audit::verify(storage.as_ref(), None)
        .await
        .unwrap();
    let checked: Vec<_> = reports
        .iter()
        .map(|r| (r.workspace_id, r.rows_checked, r.problem.clone()))
        .collect();
    assert_eq!(checked, [(1, 4, None), (2, 1, None)]);
}

/// Two storages on one database (two sidecars) appending in turn, each from its own idea of the
/// head, and an append rolled back with its transaction: one chain without a gap or a fork.
async fn two_processes_and_a_rollback_keep_one_chain(backend: Backend) {
    let (one, url, _dir) = fresh_storage(backend).await;
    let other = open_storage(&url).await;
    for n in 0..6 {
        let storage = if n % 3 == 0 { &other } else { &one };
        storage.append_audit(&entry(n)).await.unwrap();
    }
    let mut tx = one.begin().await.unwrap();
    tx.append_audit(&entry(100)).await.unwrap();
    tx.rollback().await.unwrap();
    for n in 6..9 {
        one.append_audit(&entry(n)).await.unwrap();
        other.append_audit(&entry(n + 10)).await.unwrap();
    }
    let objects = sound_chain(one.as_ref(), 12).await;
    assert!(
        objects.iter().all(|row| row.object != "code100"),
        "rolled back"
    );
    let (sound, said) = verify_cli(&url);
    assert!(sound, "{said}");
}
