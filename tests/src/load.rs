//! Create and redirect load for the failover tests: writers create links through the sidecar's
//! API and keep the acknowledged ones; a reader redirects them through an edge and sorts every
//! answer into right, failed (an error status or no answer: the fallback may refuse while its
//! Redis fails over) and wrong (anything else, never allowed).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;
use testkit::wait_until;

use crate::{http_client, status_and_location, Api};

/// What the load saw.
#[derive(Default)]
pub struct Load {
    /// (code, target) of every link whose create answered 201.
    pub acked: Mutex<Vec<(String, String)>>,
    /// Creates answered 503 (Redis unavailable): refused, so nothing is promised.
    pub refused: AtomicU64,
    /// Creates answered anything else.
    pub unexpected: Mutex<Vec<String>>,
    pub redirects: AtomicU64,
    /// Redirects that answered something else than the link's target (never allowed).
    pub wrong: Mutex<Vec<String>>,
    /// Redirects that failed (an error status or no answer).
    pub failed: AtomicU64,
    stop: AtomicBool,
}

impl Load {
    pub fn acked_count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }
}

/// The running load; [`LoadRun::stop`] ends it.
pub struct LoadRun {
    pub load: Arc<Load>,
    threads: Vec<JoinHandle<()>>,
}

/// (status, Location) of a redirect of `code` for host `s1.test` through the edge on `port`;
/// `None` when the request failed.
pub fn redirect_answer(
    client: &reqwest::blocking::Client,
    port: u16,
    code: &str,
) -> Option<(u16, String)> {
    let response = client
        .get(format!("http://127.0.0.1:{port}/{code}"))
        .header("Host", "s1.test")
        .send()
        .ok()?;
    Some(status_and_location(&response))
}

impl LoadRun {
    /// `writers` threads creating links on `api`, one thread redirecting them on `edge`.
    pub fn start(api: impl Fn() -> Api, writers: usize, edge: u16) -> Self {
        let load = Arc::new(Load::default());
        let mut threads = Vec::new();
        for writer in 0..writers {
            let load = Arc::clone(&load);
            let api = api();
            threads.push(std::thread::spawn(move || create(&api, writer, &load)));
        }
        let reader = Arc::clone(&load);
        threads.push(std::thread::spawn(move || redirect(edge, &reader)));
        Self { load, threads }
    }

    /// Waits (a minute at most) until `acked` links are acknowledged in all (creates came back
    /// after a fault), stops, and asserts that no create answered unexpectedly and no redirect
    /// was wrong.
    pub fn stop_after(self, acked: usize) -> Arc<Load> {
        let back = wait_until(Duration::from_secs(60), || self.load.acked_count() >= acked);
        let so_far = self.load.acked_count();
        let load = self.stop();
        assert!(
            back,
            "creates did not come back: {so_far} acknowledged, {acked} awaited"
        );
        let unexpected = load.unexpected.lock().unwrap().clone();
        assert!(
            unexpected.is_empty(),
            "unexpected create answers: {unexpected:?}"
        );
        let wrong = load.wrong.lock().unwrap().clone();
        assert!(wrong.is_empty(), "wrong redirects under load: {wrong:?}");
        load
    }

    /// Stops the threads and returns what they saw.
    pub fn stop(self) -> Arc<Load> {
        self.load.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().unwrap();
        }
        self.load
    }
}

fn create(api: &Api, writer: usize, load: &Load) {
    let mut i = 0;
    while !load.stop.load(Ordering::Relaxed) {
        i += 1;
        let url = format!("https://example.com/{writer}/{i}");
        let (status, body) = api.post("/links", &json!({ "url": url }));
        match status {
            201 => {
                let code = body["code"].as_str().unwrap().to_owned();
                load.acked.lock().unwrap().push((code, url));
            }
            503 => {
                load.refused.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => load
                .unexpected
                .lock()
                .unwrap()
                .push(format!("{status} {body}")),
        }
    }
}

fn redirect(edge: u16, load: &Load) {
    let client = http_client();
    let mut i = 0usize;
    while !load.stop.load(Ordering::Relaxed) {
        let link = {
            let acked = load.acked.lock().unwrap();
            (!acked.is_empty()).then(|| acked[i % acked.len()].clone())
        };
        i = i.wrapping_add(7919);
        let Some((code, target)) = link else {
            std::thread::yield_now();
            continue;
        };
        load.redirects.fetch_add(1, Ordering::Relaxed);
        match redirect_answer(&client, edge, &code) {
            Some((302, location)) if location == target => {}
            Some((status, _)) if status >= 500 => {
                load.failed.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                load.failed.fetch_add(1, Ordering::Relaxed);
            }
            Some(other) => load
                .wrong
                .lock()
                .unwrap()
                .push(format!("{code}: {other:?}")),
        }
    }
}
