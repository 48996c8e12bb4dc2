//! Both ways of telling which rows a batch added, on a real MariaDB: the server's `RETURNING`
//! (MariaDB) and the lookup with row counts (MySQL, which has no `RETURNING`; forced here, as the
//! tests have no MySQL server).

use super::*;
use shortlink_store::ConnectOptions;
use shortlink_visit_enrich::{Enricher, GeoDb, VisitEvent};
use shortlink_visits::store::VisitStore;

const IPHONE: &str =
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 \
     (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

#[test]
fn returning_is_mariadb_from_10_5() {
    assert!(has_returning("10.11.6-MariaDB-0+deb12u1"));
    assert!(has_returning("10.5.0-MariaDB"));
    assert!(has_returning("11.4.2-MariaDB-log"));
    assert!(!has_returning("10.4.32-MariaDB"));
    assert!(!has_returning("8.0.36"));
    assert!(!has_returning("8.4.0-commercial"));
    assert!(!has_returning("MariaDB"));
}

/// A store on a fresh, migrated MariaDB database, telling new rows by `RETURNING` or not.
async fn store(returning: bool) -> MysqlVisitStore {
    let url = testkit::mariadb().fresh_database_url();
    let options = ConnectOptions {
        url: url.clone(),
        max_connections: 4,
        acquire_timeout: Duration::from_secs(10),
        sqlite_cache: Default::default(),
    };
    shortlink_store::connect(&options).await.expect("migrate");
    let mut store = MysqlVisitStore::connect(&url, 4, Duration::from_secs(10))
        .await
        .expect("open the visit store");
    assert!(store.dialect.returning, "the test server is MariaDB 10.5+");
    store.dialect.returning = returning;
    store
}

/// Visit `i` of `code`: from one of 20 visitors (each visits twice among 40).
fn visit(code: &str, i: usize) -> Visit {
    let t = 1_700_000_000_000 + i as i64;
    let ip = format!("198.51.100.{}", i % 20);
    let fields = [
        ("c", code),
        ("t", &t.to_string()),
        ("ip", &ip),
        ("ua", IPHONE),
    ]
    .map(|(k, v)| (k, v.to_owned()));
    let event = VisitEvent::from_fields(format!("{t}-{i}"), fields).unwrap();
    Enricher::new(GeoDb::disabled(), false).enrich(&event)
}

async fn count(store: &MysqlVisitStore, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(&store.reader)
        .await
        .unwrap()
}

/// A batch partly stored before (redelivered visits among new ones, one id twice): only the new
/// visits are added, and a visitor is new once, whichever way the new rows are told.
async fn partly_stored_batch(returning: bool) {
    let store = store(returning).await;
    let visits: Vec<Visit> = (0..40).map(|i| visit("abc", i)).collect();
    let first: Vec<Visit> = visits.iter().skip(1).step_by(2).cloned().collect();
    let outcome = store.store_batch(&first, false).await.unwrap();
    assert_eq!((outcome.inserted, outcome.duplicates), (20, 0));
    // The odd visits came from the 10 odd visitors.
    let new_visitors = "SELECT CAST(SUM(new_visitors) AS SIGNED) FROM visit_buckets \
         WHERE code = 'abc' AND span = 86400";
    assert_eq!(count(&store, new_visitors).await, 10);

    let mut again = visits.clone();
    again.push(visits[0].clone());
    let outcome = store.store_batch(&again, false).await.unwrap();
    assert_eq!((outcome.inserted, outcome.duplicates), (20, 21));
    assert_eq!(count(&store, "SELECT COUNT(*) FROM visits").await, 40);
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM link_visitors").await,
        20
    );
    assert_eq!(count(&store, new_visitors).await, 20);
    let humans = "SELECT CAST(SUM(humans) AS SIGNED) FROM visit_buckets \
         WHERE code = 'abc' AND span = 86400";
    assert_eq!(count(&store, humans).await, 40);
}

#[tokio::test]
async fn partly_stored_batch_with_returning() {
    partly_stored_batch(true).await;
}

#[tokio::test]
async fn partly_stored_batch_without_returning() {
    partly_stored_batch(false).await;
}

/// The same new batch stored by two writers at once (a consumer that lost its claim and the one
/// that took it over): every visit and visitor is added once between them.
async fn racing_writers(returning: bool) {
    let store = store(returning).await;
    let visits: Vec<Visit> = (0..400).map(|i| visit("race", i)).collect();
    let (a, b) = tokio::join!(
        store.store_batch(&visits, false),
        store.store_batch(&visits, false)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.inserted + b.inserted, 400, "{a:?} {b:?}");
    assert_eq!(a.duplicates + b.duplicates, 400, "{a:?} {b:?}");
    assert_eq!(count(&store, "SELECT COUNT(*) FROM visits").await, 400);
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM link_visitors").await,
        20
    );
    let new_visitors = "SELECT CAST(SUM(new_visitors) AS SIGNED) FROM visit_buckets \
         WHERE code = 'race' AND span = 86400";
    assert_eq!(count(&store, new_visitors).await, 20);
}

#[tokio::test]
async fn racing_writers_with_returning() {
    racing_writers(true).await;
}

#[tokio::test]
async fn racing_writers_without_returning() {
    racing_writers(false).await;
}
