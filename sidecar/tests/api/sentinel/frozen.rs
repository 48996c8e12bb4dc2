//! Replicas frozen, the primary killed: refused changes a replica got anyway are undone from SQL.

use super::*;
use redis::AsyncCommands;
use shortlink_core::projection::{encode_record, RecordWorkspace};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use testkit::{SentinelGroup, SentinelTiming};

/// Both replicas frozen (nothing replicates: `WAIT` refuses every change), the primary killed
/// meanwhile, then the replicas back. What a frozen replica's socket buffered may hold changes
/// the API refused (and their undo may not follow); after the promotion every link must again
/// be exactly as SQL has it, i.e. as last acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_frozen_then_primary_killed_keeps_every_acknowledged_change() {
    let mut group = SentinelGroup::start(2, 3, SentinelTiming::default());
    let sidecar = start_on_sentinels(&group, "300ms").await;
    let http = client();
    let mut codes = Vec::new();
    for i in 0..20 {
        let (status, body) = post(&http, &sidecar.address, &format!("https://t.example/{i}")).await;
        assert_eq!(status, 201, "{body}");
        codes.push(body["code"].as_str().unwrap().to_owned());
    }

    // Each writer owns some links and changes their target again and again.
    let acked: Arc<Mutex<std::collections::HashMap<String, String>>> = Arc::default();
    let changes = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let mine: Vec<String> = codes
            .iter()
            .skip(writer)
            .step_by(WRITERS)
            .cloned()
            .collect();
        let (acked, changes, refused, stop) = (
            Arc::clone(&acked),
            Arc::clone(&changes),
            Arc::clone(&refused),
            Arc::clone(&stop),
        );
        let address = sidecar.address.clone();
        writers.push(tokio::spawn(async move {
            let client = client();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let code = &mine[n as usize % mine.len()];
                let target = format!("https://t.example/{code}/v{n}");
                let response = client
                    .patch(format!("{address}/api/v1/links/{code}"))
                    .bearer_auth(API_KEY)
                    .json(&json!({ "url": target }))
                    .send()
                    .await
                    .unwrap();
                match response.status().as_u16() {
                    200 => {
                        acked.lock().unwrap().insert(code.clone(), target);
                        changes.fetch_add(1, Ordering::Relaxed);
                    }
                    503 => {
                        refused.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    status => panic!("PATCH answered {status}"),
                }
            }
        }));
    }
    assert!(
        eventually(Duration::from_secs(30), || async {
            changes.load(Ordering::Relaxed) >= 100
        })
        .await
    );

    for replica in &group.replicas {
        replica.process().unwrap().signal(testkit::Signal::Stop);
    }
    let refused_at_freeze = refused.load(Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(30), || async {
            refused.load(Ordering::Relaxed) >= refused_at_freeze + 8
        })
        .await,
        "changes are refused while no replica acknowledges"
    );
    // The writers stop at the kill: a change made after the failover would overwrite whatever
    // the new primary got from the buffers, and hide it.
    group.primary.kill();
    stop.store(true, Ordering::Relaxed);
    for replica in &group.replicas {
        replica.process().unwrap().signal(testkit::Signal::Cont);
    }
    for writer in writers {
        writer.await.unwrap();
    }
    assert!(
        testkit::wait_until(Duration::from_secs(30), || group.promoted().is_some()),
        "no replica promoted; first sentinel's log:\n{}",
        group.sentinels[0].log_text()
    );
    // Writes come back (on a link of their own).
    let created = eventually(Duration::from_secs(60), || {
        let http = http.clone();
        let address = sidecar.address.clone();
        async move { post(&http, &address, "https://t.example/after").await.0 == 201 }
    })
    .await;
    assert!(created, "creates did not come back after the failover");

    let mut redis = promoted_primary(&group).await;
    let acked = acked.lock().unwrap().clone();
    for code in &codes {
        let link = sidecar.storage.link_by_code(code).await.unwrap().unwrap();
        if let Some(target) = acked.get(code) {
            assert_eq!(
                &link.target, target,
                "SQL holds {code}'s last acknowledged change"
            );
        }
    }
    // Records in doubt are written again from SQL within a check of the keeper.
    let deadline = Instant::now() + Duration::from_secs(10);
    let wrong = loop {
        let mut wrong = Vec::new();
        for code in &codes {
            let link = sidecar.storage.link_by_code(code).await.unwrap().unwrap();
            let record: Option<String> = redis.get(format!("sl:c:{code}")).await.unwrap();
            if record.as_deref()
                != Some(
                    String::from_utf8(encode_record(&link, RecordWorkspace::DEFAULT))
                        .unwrap_or_default()
                        .as_str(),
                )
            {
                wrong.push((code.clone(), record, link.target));
            }
        }
        if wrong.is_empty() || Instant::now() >= deadline {
            break wrong;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "frozen replicas: {} changes acknowledged, {} refused; after the failover {} of {} links \
         differ from SQL on the new primary",
        changes.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        wrong.len(),
        codes.len()
    );
    assert!(
        wrong.is_empty(),
        "records differ from SQL on the new primary: {wrong:?}"
    );
}
