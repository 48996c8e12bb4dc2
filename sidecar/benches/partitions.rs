//! PostgreSQL visits partitioned by day (issue 56, migration 54) against the table as it was,
//! in the same run, on two databases of the same server holding the same rows:
//!
//! - `plain`: every migration but 54 and 60 (one `visits` heap, its index as before);
//! - `parted`: the same rows loaded before migration 54, then migrated (the conversion is timed:
//!   seconds per million visits), with the covering index of migration 60; the cleanup job's
//!   vacuum of the days that have ended (`settle_days`) runs once loaded, timed.
//!
//! `BENCH_VISITS` visits (default 3,000,000; the size is 50,000,000) over 60 whole UTC
//! days ending today, over `BENCH_LINKS` codes (default 10,000), written by SQL a day at a time
//! (fast to load), plus one subject's link with 1,000 visits over the same days. Above
//! `BENCH_CONVERT_UP_TO` visits (default 5,000,000) `parted` is partitioned first and loaded
//! into its days (the conversion would hold the table twice on disk; its time per million is
//! then not measured), and migration 60's index is built after the load (timed). With
//! `BENCH_FEED=1` (default) `plain` also gets the feed rows of its visits (one per
//! `BENCH_BATCH` visits, as the consumer writes them). Then, alternating the two:
//!
//! 1. consumer visits/s: `BENCH_CONSUMER_VISITS` (default 80,000) visits of now stored through
//!    the visit store in transactions of `BENCH_BATCH` (default 2,000), as the consumer stores
//!    them, in 4 alternated rounds;
//! 2. retention of the oldest day (`cleanup::delete_old_visits` with `--visit-retention` ending
//!    at that day's end): its time, and the consumer's visits/s while it runs (a writer stores
//!    batches all along; the window is the retention's time, at least 6 s) against the same
//!    writer's idle visits/s over the 6 s just before, and the slowest batch during it;
//! 3. reads over the last 24 h, p50/p99 of `BENCH_READS` (default 1,000) each, and the CPU the
//!    database's backends spent on them (`/proc/<pid>/schedstat`, summed over the reads): a
//!    link's per-rule clicks (`rule_breakdown`, raw visits by code and time; on `parted` the
//!    days' partitions named, and also the same statement on `visits` as it ran before, with
//!    44c1a7d's generic plan and planned per execution) and the feed's rows of 100 visit ids
//!    (`feed_rows`, and on `parted` also on `visits` bounded by the row's times, as before),
//!    spread over the 24 h or of one batch;
//! 4. the erase of the subject's 1,000 visits (`erase_code`);
//! 5. with the feed rows: the retention of the feed's oldest day (`prune_feed`, a `DELETE`),
//!    with the consumer's visits/s during it as in 2.
//!
//! No links rows: the consumer's link counter update touches nothing, in both databases alike.
//! Run through `bench/partitions/run`; prints markdown rows.

use chrono::{DateTime, Duration as Days, Utc};
use shortlink_model::WorkspaceId;
use shortlink_visit_enrich::{Enricher, GeoDb, Visit, VisitEvent};
use shortlink_visits::cleanup::delete_old_visits;
use shortlink_visits::rollup::Interval;
use shortlink_visits::store::{StatsQuery, VisitStore};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const PARTITIONED: i64 = 20261126000054;
/// The per-rule read's covering index (migration 60), part of the partitioned design.
const COVERING: i64 = 20261127000060;
const DAY_MS: i64 = 86_400_000;
/// The shortest window a writer's visits/s is measured over (idle, and during a retention).
const WINDOW: f64 = 6.0;

fn today_start() -> DateTime<Utc> {
    Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
}

/// Runs the migrations `keep` selects.
async fn migrate(pool: &PgPool, keep: impl Fn(i64) -> bool) {
    let mut migrator = sqlx_macros::migrate!("../migrations/postgres");
    migrator.migrations = (migrator.migrations.iter())
        .filter(|m| keep(m.version))
        .cloned()
        .collect::<Vec<_>>()
        .into();
    // The other part of the list may be applied already.
    migrator.ignore_missing = true;
    migrator.run(pool).await.unwrap();
}

/// Runs the migrations from `first` on, and prints their time for the `n` loaded visits (and the
/// subject's 1,000).
async fn timed_migration(pool: &PgPool, what: &str, first: i64, n: usize) {
    let started = Instant::now();
    migrate(pool, |v| v >= first).await;
    let s = started.elapsed().as_secs_f64();
    let visits = n + 1000;
    println!(
        "| {what} on {visits} visits | {s:.1} s | {:.1} s per million | |",
        s * 1e6 / visits as f64
    );
}

/// `n` visits over 60 days from `start` on `links` codes, and 1,000 of code `subject`; with
/// `feed`, the feed rows of the `n` visits, one per `batch`.
async fn load(pool: &PgPool, n: usize, links: usize, start: DateTime<Utc>, feed: Option<usize>) {
    let step_ms = 60.0 * DAY_MS as f64 / n as f64;
    // A day at a time (60 statements): progress is visible, WAL is recycled between them.
    let mut parts: Vec<(i64, i64, String, &str)> = (0..60)
        .map(|d| {
            let (from, to) = (n as i64 * d / 60, n as i64 * (d + 1) / 60);
            (from, to, format!("'c' || (i % {links})"), "b")
        })
        .collect();
    parts.push((0, 1000, "'subject'".to_owned(), "s"));
    for (from, to, code, prefix) in parts {
        let step = if prefix == "s" {
            60.0 * DAY_MS as f64 / 1000.0
        } else {
            step_ms
        };
        if from % (n as i64 / 6).max(1) == 0 && prefix == "b" {
            eprintln!(
                "  {from} of {n} visits at {}",
                Utc::now().format("%H:%M:%S")
            );
        }
        sqlx::query(&format!(
            "INSERT INTO visits (event_id, code, visited_at, status, ip, visitor, agent_id, \
               browser, browser_version, os, os_version, device, audience, agent, country, \
               short_domain, rule) \
             SELECT '{prefix}' || lpad(i::text, 12, '0'), {code}, \
               $1::timestamptz + make_interval(secs => floor(i::float8 * {step}) / 1000.0), 302, \
               '10.' || (i >> 16 & 255) || '.' || (i >> 8 & 255) || '.' || (i & 255), \
               substring(decode(md5(i::text), 'hex') from 1 for 16), 1234567, 'Safari', '17.5', \
               'iOS', '17.5.1', 'mobile', CASE WHEN i % 20 = 0 THEN 'bot' ELSE 'human' END, \
               CASE WHEN i % 20 = 0 THEN 'curl' END, 'DE', 's1.example', \
               CASE i % 3 WHEN 0 THEN NULL WHEN 1 THEN '1' ELSE '2.1' END \
             FROM generate_series({from}::bigint, {}) AS i",
            to - 1
        ))
        .bind(start)
        .execute(pool)
        .await
        .unwrap();
        if let (Some(batch), "b") = (feed, prefix) {
            let batch = batch as i64;
            let start_ms = start.timestamp_millis();
            sqlx::query(&format!(
                "INSERT INTO visit_feed (seq, committed_ms, event_ids, first_visit_ms, \
                   last_visit_ms) \
                 SELECT i / {batch} + 1, {start_ms} + floor(max(i)::float8 * {step})::int8, \
                   string_agg('b' || lpad(i::text, 12, '0'), E'\\n' ORDER BY i), \
                   {start_ms} + floor(min(i)::float8 * {step})::int8, \
                   {start_ms} + floor(max(i)::float8 * {step})::int8 \
                 FROM generate_series({}::bigint, {}) AS i GROUP BY i / {batch}",
                from / batch * batch,
                // A batch across the day's end is written with the next day's.
                (to / batch * batch - 1).max(from / batch * batch - 1),
            ))
            .execute(pool)
            .await
            .unwrap();
        }
    }
    // The consumer numbers its feed rows after the loaded ones.
    sqlx::query("UPDATE visit_feed_clock SET seq = (SELECT COALESCE(MAX(seq), 0) FROM visit_feed)")
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("ANALYZE").execute(pool).await.unwrap();
}

/// The day partitions of the 60 loaded days from `start` that migration 54 did not create on
/// an empty table (it makes yesterday to 7 days ahead), named and bounded as it names them.
async fn partition_days(pool: &PgPool, start: DateTime<Utc>) {
    for d in 0..60 {
        let from = start + Days::days(d);
        sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS visits_p{} PARTITION OF visits FOR VALUES FROM ('{}') TO ('{}')",
            from.format("%Y%m%d"),
            from.to_rfc3339(),
            (from + Days::days(1)).to_rfc3339()
        ))
        .execute(pool)
        .await
        .unwrap();
    }
}

fn visits_of_now(prefix: &str, from: usize, n: usize, links: usize) -> Vec<Visit> {
    let enricher = Enricher::new(GeoDb::disabled(), false);
    let now = Utc::now().timestamp_millis().to_string();
    (from..from + n)
        .map(|i| {
            let ip = format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255);
            let code = format!("c{}", i % links);
            let fields = [
                ("c", code.as_str()),
                ("t", now.as_str()),
                ("s", "302"),
                ("ip", ip.as_str()),
                ("ua", IPHONE),
                ("host", "s1.example"),
            ];
            enricher.enrich(&VisitEvent::from_fields(format!("{prefix}{i:012}"), fields).unwrap())
        })
        .collect()
}

/// Stores `n` visits of now in transactions of `batch`; visits/s.
async fn consume(
    store: &dyn VisitStore,
    prefix: &str,
    n: usize,
    batch: usize,
    links: usize,
) -> f64 {
    let batches: Vec<Vec<Visit>> = (0..n / batch)
        .map(|b| visits_of_now(prefix, b * batch, batch, links))
        .collect();
    let started = Instant::now();
    for visits in &batches {
        store.store_batch(visits, false).await.unwrap();
    }
    (n / batch * batch) as f64 / started.elapsed().as_secs_f64()
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1]
}

/// A writer storing batches until stopped: (instant done, visits, seconds taken) of each batch.
type Log = Arc<Mutex<Vec<(Instant, usize, f64)>>>;

fn writer(
    store: Arc<dyn VisitStore>,
    prefix: String,
    batch: usize,
    links: usize,
    stop: Arc<AtomicBool>,
) -> (tokio::task::JoinHandle<()>, Log) {
    let log: Log = Arc::default();
    let handle = tokio::spawn({
        let log = log.clone();
        async move {
            let mut b = 0;
            while !stop.load(Ordering::SeqCst) {
                let visits = visits_of_now(&prefix, b * batch, batch, links);
                let started = Instant::now();
                store.store_batch(&visits, false).await.unwrap();
                let took = started.elapsed().as_secs_f64();
                log.lock().unwrap().push((Instant::now(), batch, took));
                b += 1;
            }
        }
    });
    (handle, log)
}

/// Visits/s and slowest batch (s) of the batches done within `[from, to]`.
fn rate(log: &Log, from: Instant, to: Instant) -> (f64, f64) {
    let log = log.lock().unwrap();
    let within = log.iter().filter(|(at, _, _)| *at >= from && *at <= to);
    let (visits, slowest) = within.fold((0, 0.0f64), |(v, s), (_, n, t)| (v + n, s.max(*t)));
    (visits as f64 / (to - from).as_secs_f64(), slowest)
}

struct Retention {
    seconds: f64,
    deleted: u64,
    idle: f64,
    during: f64,
    slowest_idle: f64,
    slowest_during: f64,
}

/// What a retention run lets go of the oldest day.
#[derive(Clone, Copy, PartialEq)]
enum Job {
    /// Today's job on one heap: deletes of 10,000 visits by time until none is left.
    Deletes,
    /// The cleanup job: the day's partition dropped.
    Drop,
    /// The feed's rows of the day (`prune_feed`).
    Feed,
}

/// The retention of the oldest day while a writer stores batches.
async fn retention(
    store: Arc<dyn VisitStore>,
    name: &str,
    job: Job,
    batch: usize,
    links: usize,
    end: DateTime<Utc>,
) -> Retention {
    let stop = Arc::new(AtomicBool::new(false));
    let (handle, log) = writer(
        store.clone(),
        // A writer's own ids each time (a redelivered id would be refused, and cheaper).
        format!("w{name}{}", job as u8),
        batch,
        links,
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_from = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(WINDOW)).await;
    let started = Instant::now();
    let (idle, slowest_idle) = rate(&log, idle_from, started);
    let keep = (Utc::now() - end).to_std().unwrap();
    let deleted = match job {
        Job::Deletes => {
            let before = Utc::now() - Days::from_std(keep).unwrap();
            let mut deleted = 0;
            loop {
                let n = store.delete_visits_before(before, 10_000).await.unwrap();
                deleted += n;
                if n < 10_000 {
                    break deleted;
                }
            }
        }
        Job::Drop => {
            (delete_old_visits(store.as_ref(), Some(keep)).await)
                .unwrap()
                .visits
        }
        Job::Feed => store.prune_feed(end.timestamp_millis()).await.unwrap(),
    };
    let seconds = started.elapsed().as_secs_f64();
    let window = Duration::from_secs_f64(seconds.max(WINDOW));
    tokio::time::sleep(window.saturating_sub(started.elapsed())).await;
    let (during, slowest_during) = rate(&log, started, started + window);
    stop.store(true, Ordering::SeqCst);
    handle.await.unwrap();
    Retention {
        seconds,
        deleted,
        idle,
        during,
        slowest_idle,
        slowest_during,
    }
}

fn main() {
    let n = testkit::knob("BENCH_VISITS", 3_000_000);
    let links = testkit::knob("BENCH_LINKS", 10_000);
    let consumer = testkit::knob("BENCH_CONSUMER_VISITS", 80_000);
    let batch = testkit::knob("BENCH_BATCH", 2_000);
    let convert_up_to = testkit::knob("BENCH_CONVERT_UP_TO", 5_000_000);
    let feed = testkit::knob("BENCH_FEED", 1) == 1;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let start = today_start() - Days::days(59);
        let (mut stores, mut feeds_of, mut pools, mut urls) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for name in ["plain", "parted"] {
            let url = testkit::postgres().fresh_database_url();
            let pool = PgPool::connect(&url).await.unwrap();
            let convert = name == "parted" && n <= convert_up_to;
            if name == "parted" && !convert {
                migrate(&pool, |v| v < COVERING).await;
                partition_days(&pool, start).await;
            } else if convert {
                migrate(&pool, |v| v < PARTITIONED).await;
            } else {
                migrate(&pool, |v| v != PARTITIONED && v != COVERING).await;
            }
            let loaded = Instant::now();
            let feed = (feed && name == "plain").then_some(batch);
            load(&pool, n, links, start, feed).await;
            eprintln!("{name}: {n} visits loaded in {:.0} s", loaded.elapsed().as_secs_f64());
            if name == "parted" && !convert {
                println!(
                    "| migration 54 | not measured at this size: `parted` was partitioned, then loaded | | |"
                );
                timed_migration(&pool, "migration 60 (the covering index)", COVERING, n).await;
            } else if convert {
                timed_migration(&pool, "migration 54", PARTITIONED, n).await;
            }
            let index: i64 = sqlx::query_scalar(
                // pg_partition_tree lists nothing for the plain table's one index.
                "SELECT COALESCE((SELECT sum(pg_relation_size(relid)) \
                 FROM pg_partition_tree('visits_code_time')), \
                 pg_relation_size('visits_code_time'))::int8",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            println!(
                "| {name}: size of `visits_code_time` | {:.0} MB, {:.1} bytes a visit | | |",
                index as f64 / 1e6,
                index as f64 / (n + 1000) as f64
            );
            urls.push(url.clone());
            let options = shortlink_store::ConnectOptions {
                url,
                max_connections: 4,
                acquire_timeout: Duration::from_secs(10),
                sqlite_cache: Default::default(),
            };
            let opened = shortlink_visits_sql::connect(&options).await.unwrap();
            let store = opened.visits;
            if name == "parted" {
                // The cleanup job's vacuum of the days that have ended, as on a running install.
                let started = Instant::now();
                let days = (store.day_partitions())
                    .expect("a PostgreSQL URL")
                    .settle_days(Utc::now())
                    .await
                    .unwrap();
                println!(
                    "| the cleanup job's vacuum of the finished days (`settle_days`) | {days} days in {:.1} s | | |",
                    started.elapsed().as_secs_f64()
                );
            }
            stores.push(store);
            feeds_of.push(opened.webhooks);
            pools.push(pool);
        }
        let names = ["plain", "parted"];

        // 1. Consumer visits/s, alternated.
        let mut rates = [Vec::new(), Vec::new()];
        for round in 0..4 {
            for (i, store) in stores.iter().enumerate() {
                let prefix = format!("n{round}-");
                rates[i].push(consume(store.as_ref(), &prefix, consumer / 4, batch, links).await);
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (plain, parted) = (mean(&rates[0]), mean(&rates[1]));
        println!("| consumer visits/s, plain | {plain:.0} | | |");
        println!("| consumer visits/s, parted | {parted:.0} | {:.3}x plain | >= 0.95x |", parted / plain);

        // 3. Reads over the last 24 h (before the retention, which changes no recent row).
        // Two sets of 100 visit ids: spread over the window (random ids), and one batch (ids
        // in order: their visits are seconds apart, as a feed row's).
        let recent = |order: &str| {
            format!(
                "SELECT event_id, (extract(epoch FROM visited_at) * 1000)::bigint FROM visits \
                 WHERE visited_at > now() - interval '24 hours' \
                 AND event_id LIKE 'b%' ORDER BY {order} LIMIT 100000"
            )
        };
        let mut sets = Vec::new();
        for order in ["md5(event_id)", "event_id"] {
            let (ids, times): (Vec<String>, Vec<i64>) =
                sqlx::query_as::<_, (String, i64)>(&recent(order))
                    .fetch_all(&pools[0])
                    .await
                    .unwrap()
                    .into_iter()
                    .unzip();
            sets.push((ids, times));
        }
        let hour = Utc::now().timestamp() / 3600 * 3600;
        let samples = testkit::knob("BENCH_READS", 1000);
        // The ways before run 7 on `parted`: the parent table with one generic plan per
        // session (44c1a7d's pool), and planned per execution on an ordinary session.
        let generic = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(
                PgConnectOptions::from_str(&urls[1])
                    .unwrap()
                    .options([("plan_cache_mode", "force_generic_plan")]),
            )
            .await
            .unwrap();
        // Lists the backends whose CPU is counted; on a database of its own, so never one of them.
        let admin = PgPool::connect(&testkit::postgres().fresh_database_url())
            .await
            .unwrap();
        let dbs: Vec<String> = {
            let mut names = Vec::new();
            for pool in &pools {
                names.push(
                    sqlx::query_scalar("SELECT current_database()::text")
                        .fetch_one(pool)
                        .await
                        .unwrap(),
                );
            }
            names
        };
        // The per-rule reads: plain and parted through the store (parted: the days named),
        // then parted's statement on the parent with the generic plan's pool and planned per
        // execution. Each read is of its own link (a link read twice would be read from cache
        // the second time), the four in turn first.
        let mut rules = [(); 4].map(|_| Vec::new());
        let mut rules_cpu = [0u64; 4];
        // The feed's reads: [spread, one batch] x [plain, parted named, parted's parent].
        let mut feeds = [[(); 3].map(|_| Vec::new()), [(); 3].map(|_| Vec::new())];
        let mut feeds_cpu = [[0u64; 3]; 2];
        let background = [autovacuums(&pools[0]).await, autovacuums(&pools[1]).await];
        for k in 0..samples {
            for turn in 0..4 {
                let v = (k + turn) % 4;
                let q = StatsQuery {
                    workspace: WorkspaceId::DEFAULT,
                    code: Some(format!("c{}", ((k * 4 + v) * 7919) % links)),
                    from: hour - 23 * 3600,
                    to: hour + 3600,
                    interval: Interval::Hour,
                    include_bots: false,
                    top: 10,
                };
                let window = [q.from, q.to].map(|t| DateTime::from_timestamp(t, 0).unwrap());
                let statement = || {
                    sqlx::query(RULES)
                        .bind(q.code.clone())
                        .bind(window[0])
                        .bind(window[1])
                };
                let db = &dbs[usize::from(v > 0)];
                let cpu = backends_cpu(&admin, db).await;
                let started = Instant::now();
                match v {
                    0 | 1 => {
                        stores[v].rule_breakdown(&q).await.unwrap();
                    }
                    2 => {
                        statement().fetch_all(&generic).await.unwrap();
                    }
                    _ => {
                        statement().fetch_all(&pools[1]).await.unwrap();
                    }
                }
                rules[v].push(started.elapsed().as_secs_f64() * 1000.0);
                rules_cpu[v] += cpu.since(&backends_cpu(&admin, db).await);
            }
            for (f, (ids, times)) in sets.iter().enumerate() {
                // Whole chunks of 100 within the ids read; what a feed row says of their times.
                let from = (k * 100) % ids.len().saturating_sub(99).max(1);
                let chunk = &ids[from..][..100.min(ids.len())];
                let times = &times[from..from + chunk.len()];
                let within = times.iter().min().copied().zip(times.iter().max().copied());
                for turn in 0..3 {
                    let i = (k + turn) % 3;
                    let db = &dbs[usize::from(i > 0)];
                    let cpu = backends_cpu(&admin, db).await;
                    let started = Instant::now();
                    let found = match i {
                        0 | 1 => (feeds_of[i].feed_rows(chunk, within).await)
                            .unwrap()
                            .len(),
                        _ => feed_on_parent(&pools[1], chunk, within.unwrap()).await,
                    };
                    feeds[f][i].push(started.elapsed().as_secs_f64() * 1000.0);
                    feeds_cpu[f][i] += cpu.since(&backends_cpu(&admin, db).await);
                    assert_eq!(found, chunk.len());
                }
            }
        }
        // What PostgreSQL did beside the reads: a vacuum or analyze of a day just written to by
        // the consumer's rounds competes with them for the same two cores.
        for (i, before) in background.into_iter().enumerate() {
            let (vacuums, analyzes) = autovacuums(&pools[i]).await;
            println!(
                "| autovacuum during the reads, {} | {} vacuums, {} analyzes | | |",
                names[i],
                vacuums - before.0,
                analyzes - before.1
            );
        }
        let plain = percentile(&mut rules[0], 0.99);
        let per_read = |ns: u64| ns as f64 / samples as f64 / 1000.0;
        for (v, what) in [
            "plain",
            "parted, the days named (run 7)",
            "parted, `visits` with the generic plan's pool (44c1a7d)",
            "parted, `visits` planned per execution (before 44c1a7d)",
        ]
        .into_iter()
        .enumerate()
        {
            let p99 = percentile(&mut rules[v], 0.99);
            println!(
                "| per-rule clicks of a link, 24 h, {what} | p50 {:.2} ms, p99 {p99:.2} ms; PostgreSQL CPU {:.0} us a read | p99 {:.2}x, CPU {:.2}x plain | p99 <= plain |",
                percentile(&mut rules[v], 0.5),
                per_read(rules_cpu[v]),
                p99 / plain,
                rules_cpu[v] as f64 / rules_cpu[0] as f64
            );
        }
        for (f, what) in ["spread over the 24 h", "of one batch"].into_iter().enumerate() {
            let plain = percentile(&mut feeds[f][0], 0.99);
            for (i, way) in ["plain", "parted, the days named (run 7)", "parted, `visits` bounded by the row's times (run 6)"]
                .into_iter()
                .enumerate()
            {
                let p99 = percentile(&mut feeds[f][i], 0.99);
                println!(
                    "| feed rows of 100 ids {what}, {way} | p50 {:.2} ms, p99 {p99:.2} ms; PostgreSQL CPU {:.0} us a read | p99 {:.2}x, CPU {:.2}x plain | p99 <= plain |",
                    percentile(&mut feeds[f][i], 0.5),
                    per_read(feeds_cpu[f][i]),
                    p99 / plain,
                    feeds_cpu[f][i] as f64 / feeds_cpu[f][0] as f64
                );
            }
        }

        // 4. The erase of one subject's 1,000 visits.
        for (i, store) in stores.iter().enumerate() {
            let started = Instant::now();
            let (visits, _) = store
                .subjects()
                .erase_code(WorkspaceId::DEFAULT, "subject", "sr_bench")
                .await
                .unwrap();
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            println!("| erase of {visits} visits, {} | {ms:.1} ms | | <= 1,000 ms |", names[i]);
        }

        // 2. Retention of the oldest day, with a writer going; 5. the feed's.
        let end = start + Days::days(1);
        let mut jobs = vec![(0, Job::Deletes, "plain"), (1, Job::Drop, "parted")];
        if feed {
            jobs.push((0, Job::Feed, "the feed's rows (plain)"));
        }
        for (i, job, what) in jobs {
            let r = retention(stores[i].clone(), names[i], job, batch, links, end).await;
            println!(
                "| retention of one day, {} | {:.2} s, {} rows | consumer {:.0} visits/s during vs {:.0} idle: {:.2}x; slowest batch {:.0} ms vs {:.0} ms idle | >= 0.9x |",
                what,
                r.seconds,
                r.deleted,
                r.during,
                r.idle,
                r.during / r.idle,
                r.slowest_during * 1000.0,
                r.slowest_idle * 1000.0
            );
        }
    });
}

/// CPU time (ns) of each client backend of a database, read from `/proc/<pid>/schedstat` (the
/// testkit server runs on this machine).
struct BackendsCpu(std::collections::HashMap<i32, u64>);

impl BackendsCpu {
    /// The CPU the backends of `now` used since `self` (a backend started since: all of its).
    fn since(&self, now: &BackendsCpu) -> u64 {
        (now.0.iter())
            .map(|(pid, ns)| ns.saturating_sub(self.0.get(pid).copied().unwrap_or(0)))
            .sum()
    }
}

async fn backends_cpu(admin: &PgPool, db: &str) -> BackendsCpu {
    let pids: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
    )
    .bind(db)
    .fetch_all(admin)
    .await
    .unwrap();
    let ns = |pid: i32| -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
        text.split_whitespace().next()?.parse().ok()
    };
    BackendsCpu(
        pids.into_iter()
            .filter_map(|pid| Some((pid, ns(pid)?)))
            .collect(),
    )
}

/// The autovacuum and autoanalyze runs counted so far on a database's visits tables.
async fn autovacuums(pool: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "SELECT COALESCE(SUM(autovacuum_count), 0)::bigint, \
           COALESCE(SUM(autoanalyze_count), 0)::bigint \
         FROM pg_stat_user_tables WHERE relname LIKE 'visits%'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The feed's lookup of `ids` as it ran before run 7: on `visits`, bounded by the row's times
/// (so pruned to their days when planned); how many visits it found.
async fn feed_on_parent(pool: &PgPool, ids: &[String], (first, last): (i64, i64)) -> usize {
    let marks: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT v.event_id, v.code, v.visited_at, CAST(v.status AS BIGINT) AS status, \
           v.ip, v.browser, v.browser_version, v.os, v.os_version, v.device, \
           v.audience, v.agent, v.country, v.region, v.city, v.referrer_host, \
           v.short_domain, v.language, v.rule, l.campaign, l.recipient_ref, \
           l.tags::text AS tags, l.target, l.rules, l.not_yet_url, l.expired_url, \
           l.valid_since, l.expires_at, l.workspace_id \
         FROM visits v LEFT JOIN links l ON l.code = v.code \
         WHERE v.event_id IN ({}) AND v.visited_at >= ${} AND v.visited_at <= ${}",
        marks.join(", "),
        ids.len() + 1,
        ids.len() + 2
    );
    let mut query = sqlx::query(&sql);
    for id in ids {
        query = query.bind(id.as_str());
    }
    let time = |ms| DateTime::from_timestamp_millis(ms).unwrap();
    (query
        .bind(time(first))
        .bind(time(last))
        .fetch_all(pool)
        .await)
        .unwrap()
        .len()
}

/// The per-rule statement of `rule_breakdown` (people only) as PostgreSQL receives it.
const RULES: &str =
    "SELECT rule, COUNT(*) AS clicks, COUNT(DISTINCT visitor) AS visitors FROM visits \
     WHERE code = $1 AND visited_at >= $2 AND visited_at < $3 AND audience = 'human' GROUP BY rule";
