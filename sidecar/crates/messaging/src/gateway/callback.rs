//! Receipts never lost at start-up: a job hands a message to the gateway only while its
//! `dlr-url` answers. Kannel fetches a report's `dlr-url` once by default (smsbox's
//! `http-request-retry` is 0): a message handed over while nginx, or this sidecar behind it, is
//! not yet up would stay `submitted` forever. So before a job sends its first message, and after
//! each hand-off that failed, it asks `GET <callback base>/callbacks/ping` (204 from any sidecar,
//! through the same nginx location as the reports) and waits, sending nothing, until it answers.

use reqwest::Url;
use shortlink_core::background::{fired, Shutdown};
use std::time::Duration;

/// The first wait between two probes, doubling.
const FIRST_WAIT: Duration = Duration::from_millis(100);
/// The longest wait between two probes.
const LONGEST_WAIT: Duration = Duration::from_secs(5);
/// One probe's longest wait for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a job's reports come back, probed.
pub struct Callback {
    client: reqwest::Client,
    ping: Url,
}

/// How a wait for the callback base ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Waited {
    /// It answers: send.
    Answers,
    /// The sidecar stops.
    Stopping,
}

impl Callback {
    /// The probe of the job whose `dlr-url` base is `dlr_base`
    /// (`<callback base>/callbacks/<token>/kannel`), with the gateway's `client` rules.
    pub fn new(client: reqwest::ClientBuilder, dlr_base: &str) -> Result<Callback, String> {
        let base = match dlr_base.rfind("/callbacks/") {
            Some(at) => &dlr_base[..at],
            None => dlr_base,
        };
        let ping = Url::parse(&format!("{base}/callbacks/ping"))
            .map_err(|_| "the job's callback URL is not a URL".to_owned())?;
        let client = (client.timeout(PROBE_TIMEOUT).build()).map_err(|e| e.to_string())?;
        Ok(Callback { client, ping })
    }

    /// Whether the callback base answers now (a 2xx to the ping).
    pub async fn answers(&self) -> bool {
        let answer = self.client.get(self.ping.clone()).send().await;
        answer.is_ok_and(|answer| answer.status().is_success())
    }

    /// Waits until the callback base answers, probing with a doubling wait (its first probe
    /// after the first wait: the caller's own just failed).
    pub async fn until_answers(&self, mut shutdown: Shutdown) -> Waited {
        let mut wait = FIRST_WAIT;
        loop {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = fired(&mut shutdown) => return Waited::Stopping,
            }
            if self.answers().await {
                return Waited::Answers;
            }
            wait = (wait * 2).min(LONGEST_WAIT);
        }
    }
}
