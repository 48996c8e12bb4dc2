//! PostgreSQL's raw visits partitioned by day (issue 56, migration 54): the migration converts a
//! populated table keeping every row and every answer; a redelivered visit is still refused; the
//! cleanup job drops a day past retention whole while the consumer writes, losing no visit and
//! keeping the part of a day still inside retention; a day created late takes its visits from
//! the default partition; a read of a day or two names the days' partitions and answers as the
//! table does, whatever became of those days.

use crate::conversions::{visit, CURL, IPHONE};
use crate::helpers::*;
use chrono::{DateTime, Duration, Utc};
use shortlink_model::WorkspaceId;
use shortlink_visit_enrich::Visit;
use shortlink_visits::cleanup::delete_old_visits;
use shortlink_visits::rollup::Interval;
use shortlink_visits::store::{DayPartitions, StatsQuery, VisitStore};
use shortlink_visits_sql::PgVisitStore;
use shortlink_webhooks::WebhookStore;
use sqlx::PgPool;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const DAY_MS: i64 = 86_400_000;
/// The first migration of the partitioned table.
const PARTITIONED: i64 = 20261126000054;

fn partition(at: DateTime<Utc>) -> String {
    format!("visits_p{}", at.format("%Y%m%d"))
}

async fn exists(pool: &PgPool, table: &str) -> bool {
    sqlx::query_scalar::<_, Option<String>>("SELECT to_regclass($1)::text")
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap()
        .is_some()
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// Every visit row as JSON, in id order: what a conversion must leave as it was.
async fn rows(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT row_to_json(v)::text FROM visits v ORDER BY event_id, visited_at")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// The PostgreSQL visit store itself: these tests read its pools and its feed as well.
async fn visit_store(url: &str) -> Arc<PgVisitStore> {
    let timeout = std::time::Duration::from_secs(5);
    Arc::new(PgVisitStore::connect(url, 4, timeout).await.unwrap())
}

fn days(store: &PgVisitStore) -> &dyn DayPartitions {
    store
        .day_partitions()
        .expect("PostgreSQL keeps day partitions")
}

/// Every answer read from the raw visits (rules per variant, over several windows, with and
/// without bots), and the stats of each link.
async fn answers(store: &dyn VisitStore, codes: &[&str], now: i64) -> Vec<String> {
    let mut out = Vec::new();
    let day = |ms: i64| ms.div_euclid(DAY_MS) * 86_400;
    for code in codes {
        for (from, to) in [
            (day(now - 600 * DAY_MS), day(now + 10 * DAY_MS)),
            (day(now - 3 * DAY_MS), day(now)),
            (day(now), day(now) + 86_400),
        ] {
            for include_bots in [false, true] {
                let q = StatsQuery {
                    workspace: WorkspaceId::DEFAULT,
                    code: Some((*code).to_owned()),
                    from,
                    to,
                    interval: Interval::Day,
                    include_bots,
                    top: 10,
                };
                out.push(format!("{:?}", store.rule_breakdown(&q).await.unwrap()));
                out.push(format!("{:?}", store.stats(&q).await.unwrap()));
            }
        }
    }
    out.push(store.visit_rows().await.unwrap().to_string());
    out
}

/// Visits over 500 days (one before the 400 the migration gives partitions to), a day ahead,
/// three links, rules and variants, people and a bot.
fn history(now: i64) -> Vec<Visit> {
    let mut visits = Vec::new();
    let ages = [
        -2 * DAY_MS,
        0,
        3_600_000,
        DAY_MS,
        3 * DAY_MS + 5,
        40 * DAY_MS,
        500 * DAY_MS,
    ];
    for (a, age) in ages.into_iter().enumerate() {
        for (c, code) in ["alpha", "beta", "gamma"].into_iter().enumerate() {
            for n in 0..3 {
                let rule = [None, Some("1"), Some("2.1")][(a + n) % 3];
                let ua = if n == 2 { CURL } else { IPHONE };
                let ip = format!("203.0.113.{}", 10 + n + c);
                let id = format!("{}-{}", 1_700_000_000_000 + a as i64 * 100 + c as i64, n);
                visits.push(visit(&id, code, now - age - n as i64, &ip, ua, rule));
            }
        }
    }
    visits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_keeps_every_row_and_answer() {
    let url = testkit::postgres().fresh_database_url();
    let pool = PgPool::connect(&url).await.unwrap();
    let all = sqlx_macros::migrate!("../migrations/postgres");
    let mut before = sqlx_macros::migrate!("../migrations/postgres");
    // Every migration but the partitioning: the rows are written by today's store, which needs
    // the later ones' columns (migration 58's feed times); 54 is then applied last, as on an
    // upgrade.
    before.migrations = (all.migrations.iter())
        .filter(|m| m.version != PARTITIONED)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    before.run(&pool).await.unwrap();

    let now = Utc::now().timestamp_millis();
    let visits = history(now);
    let store = visit_store(&url).await;
    let stored = store.store_batch(&visits, false).await.unwrap();
    assert_eq!(stored.inserted, visits.len() as u64);
    let codes = ["alpha", "beta", "gamma"];
    let (rows_before, answers_before) = (rows(&pool).await, answers(&*store, &codes, now).await);

    all.run(&pool).await.unwrap();
    let kind: String =
        sqlx::query_scalar("SELECT relkind::text FROM pg_class WHERE oid = 'visits'::regclass")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(kind, "p", "visits is partitioned");
    assert_eq!(rows(&pool).await, rows_before);
    assert_eq!(answers(&*store, &codes, now).await, answers_before);
    // Each day in the data has its partition; yesterday to 7 days ahead too; 500 days ago is
    // older than the 400 days the migration goes back: the default partition holds it.
    let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap();
    for age in [-2 * DAY_MS, 0, DAY_MS, 3 * DAY_MS, 40 * DAY_MS, -7 * DAY_MS] {
        assert!(exists(&pool, &partition(at(now - age))).await, "{age}");
    }
    assert!(!exists(&pool, &partition(at(now - 500 * DAY_MS))).await);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM visits_default").await, 9);

    // A redelivery is still refused, whatever partition its visits are in; the answers stay.
    let again = store.store_batch(&visits, false).await.unwrap();
    assert_eq!((again.inserted, again.duplicates), (0, visits.len() as u64));
    assert_eq!(answers(&*store, &codes, now).await, answers_before);
}

/// Creates the partition of the day holding `at`, as the cleanup job did on that day.
async fn day_partition(pool: &PgPool, at: DateTime<Utc>) {
    let day = at.date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    sqlx::query(&format!(
        "CREATE TABLE {} PARTITION OF visits FOR VALUES FROM ('{}') TO ('{}')",
        partition(at),
        day.to_rfc3339(),
        (day + Duration::days(1)).to_rfc3339()
    ))
    .execute(pool)
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_past_retention_is_dropped_whole_while_the_consumer_writes() {
    let app = spawn_app(Backend::Postgres).await;
    let pool = PgPool::connect(&app.database_url).await.unwrap();
    let store = visit_store(&app.database_url).await;
    let now = Utc::now();
    let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap();
    let (ten_days_ago, five_days_ago) = (now - Duration::days(10), now - Duration::days(5));
    // The day 5 days ago: its part before `now - 5 days` is past retention, the rest is not
    // (unless the test runs right at midnight, when that day has no part inside retention).
    let old_day = five_days_ago
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let ms = |t: DateTime<Utc>| t.timestamp_millis();
    let mut old = Vec::new();
    for n in 0..3 {
        let t = ms(ten_days_ago) + n * 3_600_000;
        old.push(visit(
            &format!("old-{n}"),
            "alpha",
            t,
            "203.0.113.9",
            IPHONE,
            None,
        ));
    }
    let expired = ms(five_days_ago) - 60_000;
    let kept = ms(five_days_ago) + 60_000;
    old.push(visit(
        "edge-expired",
        "alpha",
        expired,
        "203.0.113.9",
        IPHONE,
        None,
    ));
    old.push(visit(
        "edge-kept",
        "alpha",
        kept,
        "203.0.113.9",
        IPHONE,
        None,
    ));
    // A partition for every day the old visits fall on: three hours from `ten_days_ago` cross
    // midnight when the test runs after 21:00 UTC.
    let mut days: Vec<_> = old.iter().map(|v| at(v.time_ms).date_naive()).collect();
    days.dedup();
    for day in days {
        day_partition(&pool, day.and_hms_opt(12, 0, 0).unwrap().and_utc()).await;
    }
    store.store_batch(&old, false).await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM visits_default").await, 0);

    // The consumer: batches of 50 visits of now, until the cleanup is done, and then two more.
    let done = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn({
        let (store, done) = (store.clone(), done.clone());
        async move {
            let mut written = 0u64;
            let mut after_done = 0;
            for batch in 0.. {
                let visits: Vec<Visit> = (0..50)
                    .map(|n| {
                        let id = format!("load-{batch}-{n}");
                        visit(
                            &id,
                            "beta",
                            Utc::now().timestamp_millis(),
                            "203.0.113.7",
                            IPHONE,
                            None,
                        )
                    })
                    .collect();
                written += store.store_batch(&visits, false).await.unwrap().inserted;
                if done.load(Ordering::SeqCst) {
                    after_done += 1;
                    if after_done == 2 {
                        break;
                    }
                }
            }
            written
        }
    });
    assert!(
        eventually(std::time::Duration::from_secs(20), || async {
            count(&pool, "SELECT COUNT(*) FROM visits WHERE code = 'beta'").await >= 200
        })
        .await
    );
    let deleted = delete_old_visits(&*store, Some(std::time::Duration::from_secs(5 * 86_400)))
        .await
        .unwrap();
    done.store(true, Ordering::SeqCst);
    let written = load.await.unwrap();

    assert!(
        !exists(&pool, &partition(ten_days_ago)).await,
        "dropped whole"
    );
    assert!(
        exists(&pool, &partition(old_day)).await,
        "still partly inside retention"
    );
    let ids = app
        .db
        .texts("SELECT event_id FROM visits WHERE code = 'alpha' ORDER BY event_id")
        .await;
    let same_day = at(kept).date_naive() == old_day.date_naive();
    assert_eq!(ids, ["edge-kept"], "same day: {same_day}");
    assert_eq!(deleted.visits, 4);
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM visits WHERE code = 'beta'").await,
        written as i64,
        "no visit of the consumer lost"
    );
    // The coming days were created by the same run.
    for ahead in 0..=7 {
        assert!(exists(&pool, &partition(now + Duration::days(ahead))).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_created_late_takes_its_visits_from_the_default_partition() {
    let app = spawn_app(Backend::Postgres).await;
    let pool = PgPool::connect(&app.database_url).await.unwrap();
    let store = visit_store(&app.database_url).await;
    let now = Utc::now();
    // A clock 9 days ahead: no partition yet (7 days are created ahead).
    let ahead = now + Duration::days(9);
    let visits = [
        visit(
            "ahead-0",
            "alpha",
            ahead.timestamp_millis(),
            "203.0.113.9",
            IPHONE,
            None,
        ),
        visit(
            "ahead-1",
            "alpha",
            ahead.timestamp_millis() + 1,
            "203.0.113.9",
            CURL,
            None,
        ),
    ];
    store.store_batch(&visits, false).await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM visits_default").await, 2);

    // Two days later, the job creates that day.
    let created = days(&store)
        .prepare_days(now + Duration::days(2))
        .await
        .unwrap();
    assert!(created >= 1, "{created}");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM visits_default").await, 0);
    let table = partition(ahead);
    assert_eq!(
        count(&pool, &format!("SELECT COUNT(*) FROM {table}")).await,
        2
    );
    // Still one table to the readers, and a redelivery is still refused.
    assert_eq!(store.visit_rows().await.unwrap(), 2);
    let again = store.store_batch(&visits, false).await.unwrap();
    assert_eq!((again.inserted, again.duplicates), (0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_row_names_its_visits_days_and_its_readers_look_only_there() {
    let app = spawn_app(Backend::Postgres).await;
    let pool = PgPool::connect(&app.database_url).await.unwrap();
    let store = visit_store(&app.database_url).await;
    let now = Utc::now().timestamp_millis();
    let times = [now - 3 * DAY_MS, now - DAY_MS, now];
    let visits: Vec<Visit> = (times.iter().enumerate())
        .map(|(n, &at)| {
            visit(
                &format!("days-{n}"),
                "alpha",
                at,
                "203.0.113.7",
                IPHONE,
                None,
            )
        })
        .collect();
    store.store_batch(&visits, false).await.unwrap();

    let (first, last): (Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT first_visit_ms, last_visit_ms FROM visit_feed ORDER BY seq DESC LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((first, last), (Some(times[0]), Some(times[2])));

    let feed: &dyn WebhookStore = &*store;
    let batch = feed.feed_batches(0, 10).await.unwrap().pop().unwrap();
    assert_eq!(batch.visits_within, Some((times[0], times[2])));
    let mut found: Vec<String> = (feed.feed_rows(&batch.event_ids, batch.visits_within))
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.event_id)
        .collect();
    found.sort();
    let mut written = batch.event_ids.clone();
    written.sort();
    assert_eq!(found, written);
    // The bound is applied: the same ids outside their days are not looked for there. A row
    // without times (written before migration 58) looks everywhere.
    let elsewhere = Some((times[0] - 10 * DAY_MS, times[0] - 9 * DAY_MS));
    let outside = feed.feed_rows(&batch.event_ids, elsewhere).await.unwrap();
    assert!(outside.is_empty(), "{} found", outside.len());
    let unbounded = feed.feed_rows(&batch.event_ids, None).await.unwrap();
    assert_eq!(unbounded.len(), visits.len());
}

/// The statements the sessions of `store`'s reader have prepared that read the per-rule clicks
/// or a feed row's visits. Every session is held at once; the pool's size is read again after
/// each acquire (a session on its way back to the pool is counted, and waited for).
async fn prepared_reads(store: &PgVisitStore) -> Vec<String> {
    let reader = &store.reader;
    let mut sessions = Vec::new();
    while sessions.len() < reader.size() as usize {
        sessions.push(reader.acquire().await.unwrap());
    }
    let mut statements = Vec::new();
    for session in &mut sessions {
        let texts: Vec<String> = sqlx::query_scalar(
            "SELECT statement FROM pg_prepared_statements \
             WHERE statement LIKE '%GROUP BY rule%' OR statement LIKE '%v.event_id IN%'",
        )
        .fetch_all(&mut **session)
        .await
        .unwrap();
        statements.extend(texts);
    }
    statements
}

/// Whether one of `statements` reads `day`'s partition by name.
fn names(statements: &[String], day: DateTime<Utc>, what: &str) -> bool {
    (statements.iter()).any(|s| s.contains(&partition(day)) && s.contains(what))
}

/// Six visits of `alpha`, a minute apart, the last at `at_ms`, ids `<prefix>-<n>`: each rule
/// and variant, two people, a bot.
fn six_visits(prefix: &str, at_ms: i64) -> Vec<Visit> {
    (0..6)
        .map(|n| {
            let rule = [None, Some("1"), Some("2.1")][n % 3];
            let ua = if n == 5 { CURL } else { IPHONE };
            let ip = format!("203.0.113.{}", 10 + n % 2);
            let t = at_ms - n as i64 * 60_000;
            visit(&format!("{prefix}-{n}"), "alpha", t, &ip, ua, rule)
        })
        .collect()
}

/// A read of a day or two of raw visits (a link's per-rule clicks over 24 h or a day, a feed
/// row's visits) names the days' partitions: no planning over every day's partition and no
/// lock on each. Its answers stay the table's whether the day has its partition, has none (its
/// visits in the default partition), was created late by another sidecar (this one still reads
/// `visits` until it lists the days again), or was dropped by another sidecar after this one
/// listed it (the statement fails, the read is made on `visits`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_a_day_or_two_name_their_partitions_and_answer_as_the_table_does() {
    let app = spawn_app(Backend::Postgres).await;
    let pool = PgPool::connect(&app.database_url).await.unwrap();
    let (store, other) = (
        visit_store(&app.database_url).await,
        visit_store(&app.database_url).await,
    );
    let now = Utc::now();
    let midnight = |at: DateTime<Utc>| at.date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    // Today's 24 h (its partitions and yesterday's were made by the migrations); the day 3
    // days ago (a partition made here, dropped later); the day 9 days ahead (no partition:
    // the default partition takes its visits until the day is created).
    let past = midnight(now) - Duration::days(3) + Duration::hours(12);
    let ahead = midnight(now) + Duration::days(9) + Duration::hours(12);
    day_partition(&pool, past).await;
    let hour = now.timestamp() / 3600 * 3600;
    let windows = [
        (now, hour - 23 * 3600, hour + 3600),
        (
            past,
            midnight(past).timestamp(),
            midnight(past).timestamp() + 86_400,
        ),
        (
            ahead,
            midnight(ahead).timestamp(),
            midnight(ahead).timestamp() + 86_400,
        ),
    ];
    // Six visits in each window, the last at `at`.
    for (d, (at, _, _)) in windows.iter().enumerate() {
        let visits = six_visits(&format!("named-{d}"), at.timestamp_millis());
        store.store_batch(&visits, false).await.unwrap();
    }
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM visits_default").await, 6);
    let people = [(None, 2, 2), (Some("1"), 2, 2), (Some("2.1"), 1, 1)];
    let everyone = [(None, 2, 2), (Some("1"), 2, 2), (Some("2.1"), 2, 2)];
    let feed: &dyn WebhookStore = &*store;
    let batches = feed.feed_batches(0, 10).await.unwrap();
    assert_eq!(batches.len(), 3);

    // What `store` answers for each window (with and without bots) and each feed row.
    let answers = || async {
        let mut out = Vec::new();
        for (_, from, to) in windows {
            let mut rules = Vec::new();
            for include_bots in [false, true] {
                let q = StatsQuery {
                    workspace: WorkspaceId::DEFAULT,
                    code: Some("alpha".to_owned()),
                    from,
                    to,
                    interval: Interval::Hour,
                    include_bots,
                    top: 10,
                };
                let entries = store.rule_breakdown(&q).await.unwrap();
                rules.push(
                    (entries.into_iter())
                        .map(|e| (e.rule, e.clicks, e.unique_visitors))
                        .collect::<Vec<_>>(),
                );
            }
            out.push(rules);
        }
        let mut found = Vec::new();
        for batch in &batches {
            let rows = feed.feed_rows(&batch.event_ids, batch.visits_within).await;
            found.push(rows.unwrap().len());
        }
        (out, found)
    };
    let expect = |rules: &[(Option<&str>, i64, i64)]| -> Vec<(Option<String>, i64, i64)> {
        (rules.iter())
            .map(|(rule, clicks, visitors)| (rule.map(str::to_owned), *clicks, *visitors))
            .collect()
    };
    let all_there = vec![expect(&people), expect(&everyone)];
    let before = vec![all_there.clone(), all_there.clone(), all_there.clone()];
    assert_eq!(answers().await, (before.clone(), vec![6, 6, 6]));
    let read = prepared_reads(&store).await;
    assert!(names(&read, past, "GROUP BY rule"), "{read:#?}");
    assert!(names(&read, now, "GROUP BY rule"), "{read:#?}");
    assert!(names(&read, past, "v.event_id IN"), "{read:#?}");

    // Another sidecar creates the day ahead (its visits move out of the default partition):
    // this one still lists it as missing and reads `visits`.
    let created = days(&other)
        .prepare_days(now + Duration::days(2))
        .await
        .unwrap();
    assert!(created >= 1, "{created}");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM visits_default").await, 0);
    assert_eq!(answers().await, (before.clone(), vec![6, 6, 6]));

    // Another sidecar drops the day 3 days ago (past a retention of 2 days), which this one
    // still lists: its reads fail on the name, list the days again and read `visits`.
    let dropped = days(&other)
        .drop_days_before(midnight(past) + Duration::days(1))
        .await
        .unwrap();
    assert_eq!(dropped, 6);
    assert!(!exists(&pool, &partition(past)).await);
    let after = vec![all_there.clone(), vec![Vec::new(), Vec::new()], all_there];
    assert_eq!(answers().await, (after, vec![6, 0, 6]));
    // Listed again: the day created late is now read by its name.
    let read = prepared_reads(&store).await;
    assert!(names(&read, ahead, "GROUP BY rule"), "{read:#?}");
    assert!(names(&read, ahead, "v.event_id IN"), "{read:#?}");
}

/// What PostgreSQL did to read a link's people's clicks per rule from `table` (the per-rule
/// statement, with nothing but the index allowed): the scan's node and how many heap pages it
/// fetched.
async fn rules_scan(pool: &PgPool, table: &str, day: DateTime<Utc>) -> (String, i64) {
    let mut conn = pool.acquire().await.unwrap();
    for off in ["enable_seqscan", "enable_bitmapscan"] {
        sqlx::query(&format!("SET {off} = off"))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    let plan: serde_json::Value = sqlx::query_scalar(&format!(
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT rule, COUNT(*), COUNT(DISTINCT visitor) \
         FROM {table} WHERE code = $1 AND visited_at >= $2 AND visited_at < $3 \
         AND audience = 'human' GROUP BY rule"
    ))
    .bind("alpha")
    .bind(day)
    .bind(day + Duration::days(1))
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    let mut nodes = vec![&plan[0]["Plan"]];
    while let Some(node) = nodes.pop() {
        if node["Relation Name"] == table {
            let kind = node["Node Type"].as_str().unwrap_or_default().to_owned();
            return (kind, node["Heap Fetches"].as_i64().unwrap_or(-1));
        }
        nodes.extend(node["Plans"].as_array().into_iter().flatten());
    }
    panic!("no scan of {table}: {plan:#}");
}

/// A day that has ended is vacuumed once by the cleanup job; a link's per-rule clicks of that
/// day are then read from the covering index alone, no heap page fetched, with the same answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_day_is_vacuumed_once_and_read_from_its_index_alone() {
    // A database with no sidecar: an app's own cleanup job would settle the days at its start,
    // racing this test's settle.
    let url = testkit::postgres().fresh_database_url();
    let pool = PgPool::connect(&url).await.unwrap();
    sqlx_macros::migrate!("../migrations/postgres")
        .run(&pool)
        .await
        .unwrap();
    let store = visit_store(&url).await;
    let now = Utc::now();
    let day = now.date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc() - Duration::days(2);
    day_partition(&pool, day).await;
    let visits = six_visits("settle", (day + Duration::hours(12)).timestamp_millis());
    store.store_batch(&visits, false).await.unwrap();
    let rules = || async {
        let q = StatsQuery {
            workspace: WorkspaceId::DEFAULT,
            code: Some("alpha".to_owned()),
            from: day.timestamp(),
            to: day.timestamp() + 86_400,
            interval: Interval::Hour,
            include_bots: false,
            top: 10,
        };
        (store.rule_breakdown(&q).await.unwrap().into_iter())
            .map(|e| (e.rule, e.clicks, e.unique_visitors))
            .collect::<Vec<_>>()
    };
    let answer = rules().await;
    assert_eq!(
        answer,
        [
            (None, 2, 2),
            (Some("1".to_owned()), 2, 2),
            (Some("2.1".to_owned()), 1, 1)
        ]
    );
    let table = partition(day);
    // Not vacuumed yet: the index has every column the read needs, but not which rows all see.
    let (kind, fetched) = rules_scan(&pool, &table, day).await;
    assert_eq!(kind, "Index Only Scan");
    assert!(fetched > 0, "{fetched}");

    let settle = days(&store);
    assert!(settle.settle_days(now).await.unwrap() >= 1);
    let vacuumed: bool = sqlx::query_scalar(
        "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relname = $1",
    )
    .bind(&table)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(vacuumed);
    // A vacuumed day is read from the index alone. The test server commits asynchronously
    // (testkit: `synchronous_commit=off`), and a vacuum marks a page all-visible only once the
    // commits of its rows' transaction and of the others sharing its commit-log slot (other
    // tests' databases on the same server) are on disk: each try first flushes the log with a
    // write committed synchronously, as every commit is on a server with PostgreSQL's default.
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SET synchronous_commit = on")
        .execute(&mut *conn)
        .await
        .unwrap();
    // (A logged table: a temporary table's rows write no log, so their commit flushes nothing.)
    sqlx::query("CREATE TABLE flush_log (n int)")
        .execute(&mut *conn)
        .await
        .unwrap();
    let mut scan = (String::new(), -1);
    for _ in 0..20 {
        sqlx::query("INSERT INTO flush_log VALUES (1)")
            .execute(&mut *conn)
            .await
            .unwrap();
        scan = rules_scan(&pool, &table, day).await;
        if scan.1 == 0 {
            break;
        }
        sqlx::query(&format!("VACUUM {table}"))
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    assert_eq!(scan, (kind, 0));
    assert_eq!(rules().await, answer);
    // Once: every finished day is settled now; today has not ended.
    assert_eq!(settle.settle_days(now).await.unwrap(), 0);
}
