use super::*;
use super::{parse_ts, ts};
use crate::Slot;
use crate::{LinkFilter, Storage};
use shortlink_model::{Link, WorkspaceId};
use std::time::Duration;

#[test]
fn timestamps_sort_as_text_and_round_trip() {
    let a = DateTime::from_timestamp_micros(1_700_000_000_000_001).unwrap();
    let b = DateTime::from_timestamp_micros(1_700_000_000_100_000).unwrap();
    assert!(ts(a) < ts(b));
    assert_eq!(ts(a), "2023-11-14T22:13:20.000001Z");
    assert_eq!(parse_ts(&ts(a)).unwrap(), a);
}

/// A storage on a new database file, in a directory that goes with the returned guard.
async fn fresh_storage() -> (tempfile::TempDir, SqliteStorage) {
    let dir = tempfile::tempdir().unwrap();
    let storage = SqliteStorage::connect(&ConnectOptions {
        url: format!("sqlite://{}", dir.path().join("t.db").display()),
        max_connections: 2,
        acquire_timeout: Duration::from_secs(10),
        sqlite_cache: Default::default(),
    })
    .await
    .unwrap();
    (dir, storage)
}

fn row(code: &str, slot: Option<Slot>) -> NewRow {
    let now = crate::now();
    NewRow {
        link: Link::new(
            code.into(),
            WorkspaceId::DEFAULT,
            format!("https://t.example/{code}"),
            format!("{code:0>64}"),
            now,
        ),
        slot,
    }
}

/// The live-link lookup goes through the stored URL-hash prefix (migration 7): every writer
/// of `url_hash` (batch insert, single insert, update) keeps it in step.
#[tokio::test]
async fn live_link_lookup_follows_every_writer_of_the_url_hash() {
    let (_dir, storage) = fresh_storage().await;
    let hash = |digit: &str| digit.repeat(64);
    let mut batch = row("a", None);
    batch.link.url_hash = hash("a");
    let mut single = row("b", None);
    single.link.url_hash = hash("b");
    let mut tx = storage.begin().await.unwrap();
    let rows = [batch.clone()];
    let encoded = storage.encode_rows(&rows).unwrap();
    assert_eq!(tx.insert_links(&rows, encoded).await.unwrap(), ["a"]);
    tx.insert_link(&single.link, None).await.unwrap();
    tx.commit().await.unwrap();
    let now = crate::now();
    let found = |hash: String| {
        let storage = storage.clone();
        async move {
            let link = storage
                .find_live_link(WorkspaceId::DEFAULT, &hash, None, now)
                .await
                .unwrap();
            link.map(|link| link.code)
        }
    };
    assert_eq!(found(hash("a")).await.as_deref(), Some("a"));
    assert_eq!(found(hash("b")).await.as_deref(), Some("b"));

    let mut moved = batch.link.clone();
    moved.url_hash = hash("c");
    let mut tx = storage.begin().await.unwrap();
    tx.update_link(&moved).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(found(hash("c")).await.as_deref(), Some("a"));
    assert_eq!(found(hash("a")).await, None);
}

/// The codes `insert_links` reports are exactly those it inserted, also when some rows of a
/// statement are skipped (the count no longer covers every row).
#[tokio::test]
async fn insert_links_reports_the_rows_inserted() {
    let (_dir, storage) = fresh_storage().await;
    let slot = |index| Some(Slot { batch_id: 7, index });
    let mut tx = storage.begin().await.unwrap();
    let first = [row("a", None), row("b", slot(1))];
    assert_eq!(
        tx.insert_links(&first, storage.encode_rows(&first).unwrap())
            .await
            .unwrap(),
        ["a", "b"]
    );
    tx.commit().await.unwrap();

    let mut tx = storage.begin().await.unwrap();
    // "a" is taken, slot 1 is taken: only "c" and "e" go in.
    let second = [
        row("a", None),
        row("c", None),
        row("d", slot(1)),
        row("e", slot(2)),
    ];
    let mut inserted = tx
        .insert_links(&second, storage.encode_rows(&second).unwrap())
        .await
        .unwrap();
    inserted.sort();
    assert_eq!(inserted, ["c", "e"]);
    // All skipped.
    assert!(tx
        .insert_links(&second[..1], storage.encode_rows(&second[..1]).unwrap())
        .await
        .unwrap()
        .is_empty());
    tx.commit().await.unwrap();
    assert_eq!(
        storage
            .count_links(&LinkFilter::in_workspace(WorkspaceId::DEFAULT))
            .await
            .unwrap(),
        4
    );
}

/// A batch statement leaves out the columns all its rows leave at their default, and sends a
/// column some row sets for every row: links read back as written either way.
#[tokio::test]
async fn batch_rows_read_back_as_written_with_columns_left_out() {
    let (_dir, storage) = fresh_storage().await;
    let plain = row("plain", None);
    let mut rich = row(
        "rich",
        Some(Slot {
            batch_id: 3,
            index: 9,
        }),
    );
    let link = &mut rich.link;
    link.flags = shortlink_model::LinkFlags(1);
    link.expires_at = Some(link.created_at + chrono::Duration::days(30));
    link.campaign = Some("spring".into());
    link.recipient_ref = Some("r-1".into());
    link.tags = vec!["vip".into()];
    link.visit_count = 7;
    let mut tx = storage.begin().await.unwrap();
    for rows in [vec![plain.clone()], vec![rich.clone(), row("mixed", None)]] {
        let encoded = storage.encode_rows(&rows).unwrap();
        assert_eq!(
            tx.insert_links(&rows, encoded).await.unwrap().len(),
            rows.len()
        );
    }
    tx.commit().await.unwrap();
    for expected in [plain, rich, row("mixed", None)] {
        let stored = storage
            .get_link(WorkspaceId::DEFAULT, &expected.link.code)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.code, expected.link.code);
        assert_eq!(stored.flags, expected.link.flags);
        assert_eq!(stored.expires_at, expected.link.expires_at);
        assert_eq!(stored.campaign, expected.link.campaign);
        assert_eq!(stored.recipient_ref, expected.link.recipient_ref);
        assert_eq!(stored.tags, expected.link.tags);
        assert_eq!(stored.visit_count, expected.link.visit_count);
    }
    let slots = storage.links_by_slots(3, 0, 100).await.unwrap();
    let slots: Vec<(i64, &str)> = (slots.iter())
        .map(|(index, link)| (*index, link.code.as_str()))
        .collect();
    assert_eq!(slots, [(9, "rich")]);
}

/// An update rewrites every field a link's writers change, and leaves what it does not own: the
/// code, the creation time, and the visit counters the click path raises meanwhile (the updater
/// read them before). The column list decides both (`sql::columns::LINK`).
#[tokio::test]
async fn an_update_rewrites_the_link_but_not_its_visit_counters() {
    let (_dir, storage) = fresh_storage().await;
    let first = row("u", None).link;
    let mut tx = storage.begin().await.unwrap();
    tx.insert_link(&first, None).await.unwrap();
    tx.commit().await.unwrap();
    let clicked_at = first.created_at + chrono::Duration::seconds(5);
    // Another workspace's import of the same code raises nothing of this link.
    let other = shortlink_model::WorkspaceId::from_db(first.workspace.get() + 1);
    (storage
        .raise_visit_count(other, "u", 1000, clicked_at)
        .await)
        .unwrap();
    storage
        .raise_visit_count(first.workspace, "u", 40, clicked_at)
        .await
        .unwrap();

    let later = first.created_at + chrono::Duration::seconds(10);
    let mut next = first.clone();
    next.target = "https://t.example/moved".into();
    next.url_hash = "f".repeat(64);
    next.redirect = 308;
    next.flags = shortlink_model::LinkFlags(1);
    next.created_at = later;
    next.updated_at = later;
    next.expires_at = Some(later + chrono::Duration::days(1));
    next.revoked_at = Some(later);
    next.campaign = Some("autumn".into());
    next.recipient_ref = Some("r-2".into());
    next.tags = vec!["a".into(), "b".into()];
    next.extras = shortlink_model::LinkExtras {
        valid_since: Some(first.created_at),
        not_yet_url: Some("https://t.example/soon".into()),
        expired_url: Some("https://t.example/gone".into()),
        rules: Some("[]".into()),
        max_visits: Some(100),
        password_digest: Some("00".into()),
        preview: Some("{}".into()),
        click_id_param: Some("sl_click".into()),
    };
    let mut tx = storage.begin().await.unwrap();
    tx.update_link(&next).await.unwrap();
    tx.commit().await.unwrap();

    let stored = storage.link_by_code("u").await.unwrap().unwrap();
    let expected = Link {
        created_at: first.created_at,
        visit_count: 40,
        last_visit_at: Some(clicked_at),
        ..next
    };
    assert_eq!(stored, expected);
}

/// The search reads the index kept off the write path (`sqlite_search`) for the links it holds
/// and `LIKE`s the rest: the same answer before and after the indexer caught up.
#[tokio::test]
async fn the_search_answers_the_same_before_and_after_the_index_caught_up() {
    let (_dir, storage) = fresh_storage().await;
    let mut rows: Vec<NewRow> = (0..30).map(|i| row(&format!("c{i}"), None)).collect();
    rows[7].link.campaign = Some("Spring-Seven".into());
    let mut tx = storage.begin().await.unwrap();
    tx.insert_links(&rows, storage.encode_rows(&rows).unwrap())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let search = |text: &str| {
        let mut filter = LinkFilter::in_workspace(WorkspaceId::DEFAULT);
        filter.search = Some(text.into());
        let storage = &storage;
        async move {
            let found = storage.list_links(&filter, None, 50).await.unwrap();
            found.into_iter().map(|l| l.code).collect::<Vec<_>>()
        }
    };
    assert_eq!(search("spring-seven").await, ["c7"]);
    // c2 and c20 to c29.
    assert_eq!(search("t.example/c2").await.len(), 11);
    let caught_up = || async {
        let progress: i64 = sqlx::query_scalar("SELECT last_rowid FROM link_search_progress")
            .fetch_one(&storage.reader)
            .await
            .unwrap();
        progress == 30
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !caught_up().await {
        assert!(
            std::time::Instant::now() < deadline,
            "the indexer caught up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(search("spring-seven").await, ["c7"]);
    assert_eq!(search("t.example/c2").await.len(), 11);
}
