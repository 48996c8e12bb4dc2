//! The links the cluster tests load, and the load and checks they run against nginx: a fixed
//! set of codes written straight to the primaries with the marker of every slot but a few.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shortlink_wire::cluster::{key_slot, marker_key};
use testkit::{wait_until, RedisCluster};

use crate::cluster::{record, set_all, slot_owners, FALLBACK_STATUS};
use crate::{http_client, status_and_location};

pub const CODES: usize = 3000;

/// Slots whose marker the test leaves out: a miss there is unknown, so it goes to the fallback.
pub fn unmarked(slot: u16) -> bool {
    slot % 5 == 0
}

pub fn code(i: usize) -> String {
    format!("k{i:05}")
}

pub fn target(i: usize, version: u32) -> String {
    format!("https://example.com/{i}/v{version}")
}

/// `CODES` links and the marker of every slot but the [`unmarked`] ones.
pub fn load(cluster: &RedisCluster) -> HashMap<String, String> {
    let links: HashMap<String, String> = (0..CODES).map(|i| (code(i), target(i, 1))).collect();
    let mut pairs: Vec<(String, String)> = links
        .iter()
        .map(|(code, target)| (format!("sl:c:{code}"), record(target)))
        .collect();
    pairs.extend(
        (0..16384u16)
            .filter(|&slot| !unmarked(slot))
            .map(|slot| (marker_key(slot), "1700000000000".to_owned())),
    );
    set_all(cluster, &pairs);
    links
}

thread_local! {
    /// One client per thread: building one costs more than the request.
    static CLIENT: reqwest::blocking::Client = http_client();
}

/// A request on a connection of its own, so that requests spread over nginx's workers.
pub fn answer(port: u16, code: &str) -> Result<(u16, String), String> {
    let response = CLIENT
        .with(|client| {
            client
                .get(format!("http://127.0.0.1:{port}/{code}"))
                .header("Connection", "close")
                .send()
        })
        .map_err(|e| e.to_string())?;
    Ok(status_and_location(&response))
}

/// What a load run saw. A fallback answer is not wrong (the fallback would ask SQL); a wrong
/// answer is a redirect elsewhere or a 404 for a link that exists.
#[derive(Default)]
pub struct Tally {
    pub right: AtomicU64,
    pub fallback: AtomicU64,
    pub wrong: AtomicU64,
    pub errors: AtomicU64,
}

/// Redirect requests over every code from two threads until `stop`.
pub fn run_load(
    port: u16,
    links: Arc<HashMap<String, String>>,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..2)
        .map(|t| {
            let (links, stop, tally) = (links.clone(), stop.clone(), tally.clone());
            std::thread::spawn(move || {
                let codes: Vec<(&String, &String)> = links.iter().collect();
                let mut i = t * 7919;
                while !stop.load(Ordering::Relaxed) {
                    let (code, target) = codes[i % codes.len()];
                    i += 1;
                    match answer(port, code) {
                        Ok((302, location)) if &location == target => &tally.right,
                        Ok((FALLBACK_STATUS, _)) => &tally.fallback,
                        Ok((status, location)) => {
                            eprintln!("wrong answer for {code}: {status} {location}");
                            &tally.wrong
                        }
                        Err(e) => {
                            eprintln!("request for {code} failed: {e}");
                            &tally.errors
                        }
                    }
                    .fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect()
}

pub fn assert_all_served(port: u16, links: &HashMap<String, String>) {
    for (code, target) in links {
        assert_eq!(
            answer(port, code).unwrap(),
            (302, target.clone()),
            "code {code} (slot {})",
            key_slot(format!("sl:c:{code}").as_bytes())
        );
    }
}

/// A code of the module's shape that no link has, in a slot marked or not as asked.
pub fn missing_code(marked: bool) -> String {
    (0..)
        .map(|i| format!("m{i:05}"))
        .find(|c| unmarked(key_slot(format!("sl:c:{c}").as_bytes())) != marked)
        .unwrap()
}

/// Waits until every node gives the same owner for every slot.
pub fn wait_for_agreement(cluster: &RedisCluster) {
    cluster.wait_ok(Duration::from_secs(30));
    let agreed = wait_until(Duration::from_secs(30), || {
        let maps: Vec<Vec<String>> = cluster
            .nodes()
            .iter()
            .map(|node| slot_owners(&node.addr()))
            .collect();
        maps.windows(2).all(|pair| pair[0] == pair[1])
    });
    assert!(agreed, "the nodes did not agree on the slot map");
}
