//! `kill -9` of the primary under create load: a replica promoted, creates back, no acknowledged
//! link missing or wrong on the new primary.

use super::*;
use redis::AsyncCommands;
use shortlink_core::projection::{encode_record, RecordWorkspace};
use shortlink_wire::keys::PROJECTION_MARKER;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use testkit::{SentinelGroup, SentinelTiming};

/// Creates acknowledged before the kill, and after the promotion.
const BEFORE: usize = 300;
const AFTER: usize = 300;

/// What the create loops saw.
#[derive(Default)]
pub(crate) struct Load {
    /// (code, target) of every 201.
    pub(crate) acked: Mutex<Vec<(String, String)>>,
    /// When each 201 came.
    pub(crate) acked_at: Mutex<Vec<Instant>>,
    pub(crate) refused: AtomicU64,
    /// Answers other than 201 and the 503s of an outage.
    pub(crate) unexpected: Mutex<Vec<(u16, Value)>>,
    pub(crate) stop: AtomicBool,
}

impl Load {
    pub(crate) fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Stops the create loops; none saw an answer but 201 and the 503s of an outage.
    pub(crate) async fn stop_writers(&self, writers: Vec<tokio::task::JoinHandle<()>>) {
        self.stop.store(true, Ordering::Relaxed);
        for writer in writers {
            writer.await.unwrap();
        }
        let unexpected = self.unexpected.lock().unwrap().clone();
        assert!(unexpected.is_empty(), "unexpected answers: {unexpected:?}");
    }
}

pub(crate) fn spawn_writers(address: &str, load: &Arc<Load>) -> Vec<tokio::task::JoinHandle<()>> {
    (0..WRITERS)
        .map(|writer| {
            let load = Arc::clone(load);
            let address = address.to_owned();
            tokio::spawn(async move {
                let client = client();
                let mut i = 0u64;
                while !load.stop.load(Ordering::Relaxed) {
                    i += 1;
                    let url = format!("https://t.example/{writer}/{i}");
                    match post(&client, &address, &url).await {
                        (201, body) => {
                            let code = body["code"].as_str().unwrap().to_owned();
                            load.acked.lock().unwrap().push((code, url));
                            load.acked_at.lock().unwrap().push(Instant::now());
                        }
                        // Redis between two primaries; or, on SQLite, the one write lock held
                        // meanwhile by a create waiting for Redis. Refused, nothing stored.
                        (503, body)
                            if body["error"]["code"] == "redis_unavailable"
                                || body["error"]["code"] == "database_unavailable" =>
                        {
                            load.refused.fetch_add(1, Ordering::Relaxed);
                            // A client backs off a little before trying again.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        other => load.unexpected.lock().unwrap().push(other),
                    }
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_killed_under_create_load_loses_no_acknowledged_link() {
    let mut group = SentinelGroup::start(2, 3, SentinelTiming::default());
    let sidecar = start_on_sentinels(&group, "500ms").await;

    let load = Arc::new(Load::default());
    let writers = spawn_writers(&sidecar.address, &load);
    assert!(
        eventually(Duration::from_secs(60), || async { load.acked() >= BEFORE }).await,
        "creates before the failover: {} acknowledged, {} refused",
        load.acked(),
        load.refused.load(Ordering::Relaxed)
    );

    // The keeper set the marker on the primary at start-up; the replicas have it too.
    assert!(
        testkit::wait_until(Duration::from_secs(10), || {
            std::iter::once(&group.primary)
                .chain(&group.replicas)
                .all(|server| server.cli_raw(&["EXISTS", PROJECTION_MARKER]) == "1")
        }),
        "the projection marker is on the primary and its replicas before the kill"
    );
    let acked_at_kill = load.acked();
    let refused_at_kill = load.refused.load(Ordering::Relaxed);
    let killed = Instant::now();
    group.primary.kill();
    let promoted_within = Duration::from_secs(30);
    assert!(
        testkit::wait_until(promoted_within, || group.promoted().is_some()),
        "no replica promoted within {promoted_within:?}; first sentinel's log:\n{}",
        group.sentinels[0].log_text()
    );
    let promoted_after = killed.elapsed();
    let target = acked_at_kill + 1;
    assert!(
        eventually(Duration::from_secs(30), || async { load.acked() >= target }).await,
        "no create acknowledged after the failover ({} refused since the kill)",
        load.refused.load(Ordering::Relaxed) - refused_at_kill
    );
    let target = acked_at_kill + AFTER;
    assert!(
        eventually(Duration::from_secs(60), || async { load.acked() >= target }).await,
        "creates after the failover: {}",
        load.acked() - acked_at_kill
    );
    load.stop_writers(writers).await;

    let acked = load.acked.lock().unwrap().clone();
    let refused = load.refused.load(Ordering::Relaxed);
    // The create outage: the longest time without an acknowledgement around the kill.
    let outage = load
        .acked_at
        .lock()
        .unwrap()
        .windows(2)
        .filter(|w| w[1] > killed)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    eprintln!(
        "sentinel failover: {} acknowledged ({acked_at_kill} before the kill), {refused} refused \
         with 503 ({} before the kill); replica promoted {:.2} s after the kill (as the test \
         saw it), no create acknowledged for {:.2} s",
        acked.len(),
        refused_at_kill,
        promoted_after.as_secs_f64(),
        outage.as_secs_f64()
    );

    // Every acknowledged link is in SQL as created, and on the new primary exactly as SQL says.
    let mut redis = promoted_primary(&group).await;
    let mut missing = Vec::new();
    let mut wrong = Vec::new();
    for (code, url) in &acked {
        let link = sidecar
            .storage
            .link_by_code(code)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("acknowledged link {code} is not in SQL"));
        assert_eq!(&link.target, url, "SQL holds {code} as created");
        let record: Option<String> = redis.get(format!("sl:c:{code}")).await.unwrap();
        match record {
            None => missing.push(code.clone()),
            Some(record) if record.as_bytes() != encode_record(&link, RecordWorkspace::DEFAULT) => {
                wrong.push((code.clone(), record))
            }
            Some(_) => {}
        }
    }
    assert!(
        missing.is_empty() && wrong.is_empty(),
        "after the failover, of {} acknowledged links {} are missing from the new primary \
         ({missing:?}) and {} wrong ({wrong:?})",
        acked.len(),
        missing.len(),
        wrong.len()
    );
    // Nothing refused stayed in SQL: it holds exactly the acknowledged links.
    assert_eq!(
        sidecar.links_in_sql().await,
        acked.len(),
        "SQL holds exactly the acknowledged links"
    );
    // The keeper refills the new primary from SQL and sets the marker again, so the module
    // answers 404 from Redis again for unknown codes.
    let marker_back = eventually(Duration::from_secs(20), || {
        let mut redis = redis.clone();
        async move { redis.exists::<_, bool>(PROJECTION_MARKER).await.unwrap() }
    })
    .await;
    assert!(
        marker_back,
        "the projection marker is back on the new primary"
    );
    eprintln!(
        "sentinel failover: 0 of {} acknowledged links missing or wrong on the new primary",
        acked.len()
    );

    // The visit consumer follows the promotion too: a visit queued on the new primary is counted.
    let (code, _) = &acked[0];
    let t = chrono::Utc::now().timestamp_millis().to_string();
    let mut xadd = redis::cmd("XADD");
    xadd.arg(shortlink_wire::keys::EVENT_STREAM).arg("*");
    for (field, value) in [
        ("c", code.as_str()),
        ("t", t.as_str()),
        ("s", "302"),
        ("ip", "192.0.2.7"),
        (
            "ua",
            "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
        ),
    ] {
        xadd.arg(field).arg(value);
    }
    let _: String = xadd.query_async(&mut redis).await.unwrap();
    let storage = &sidecar.storage;
    assert!(
        eventually(Duration::from_secs(30), || async {
            storage
                .link_by_code(code)
                .await
                .unwrap()
                .unwrap()
                .visit_count
                == 1
        })
        .await,
        "the visit queued on the new primary was counted"
    );
}
