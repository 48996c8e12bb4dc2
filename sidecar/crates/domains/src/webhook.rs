//! The domain health job's webhook: on every change of a domain's state, a JSON POST signed as
//! every webhook of the sidecar is ([`shortlink_core::signing`]), retried with backoff, to an `http://` or `https://` URL
//! (the latter verified against `--domain-webhook-ca` or the system's roots).
//!
//! The deliveries are tasks of the health job's own ([`Alerts`]), not detached: on shutdown the
//! job waits for the alerts in flight up to a bound within [`background::DRAIN`], and each one
//! still undelivered then is logged as not sent, never lost silently.

use super::http1;
use rustls::pki_types::ServerName;
use shortlink_config::{Config, ConfigError};
use shortlink_core::background;
use shortlink_core::signing;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

const ATTEMPTS: u32 = 4;
const TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Clone)]
pub struct Webhook {
    url: url::Url,
    secret: Arc<[u8]>,
    /// For `https://` URLs.
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Webhook {
    /// `None` without `--domain-webhook-url`. Every problem stops the start: a webhook that
    /// cannot be delivered would only show in the logs, on the first change of state.
    pub fn from_config(config: &Config) -> Result<Option<Self>, ConfigError> {
        let problem = |text: String| ConfigError::Webhook(text);
        let Some(raw) = &config.domain_webhook_url else {
            if config.domain_webhook_ca.is_some() {
                return Err(problem(
                    "--domain-webhook-ca needs --domain-webhook-url".into(),
                ));
            }
            return Ok(None);
        };
        let url = url::Url::parse(raw)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| problem(format!("{raw:?} is not an http:// or https:// URL")))?;
        let secret = config
            .domain_webhook_secret
            .as_deref()
            .filter(|s| s.len() >= 16)
            .ok_or_else(|| {
                problem("--domain-webhook-secret (at least 16 bytes) signs the webhook".into())
            })?;
        let tls = match url.scheme() {
            "https" => Some(
                shortlink_core::outbound::tls::verifying_connector(
                    config.domain_webhook_ca.as_deref(),
                    "--domain-webhook-ca",
                )
                .map_err(problem)?,
            ),
            _ if config.domain_webhook_ca.is_some() => {
                return Err(problem(
                    "--domain-webhook-ca is for an https:// webhook".into(),
                ))
            }
            _ => None,
        };
        Ok(Some(Self {
            url,
            secret: secret.as_bytes().into(),
            tls,
        }))
    }

    /// POSTs until a 2xx, with backoff (receivers must accept a repeat); what is not delivered
    /// is logged, also when the delivery is dropped (aborted at shutdown).
    async fn deliver(self, body: String) {
        let mut unsent = Unsent(Some(&body));
        let mut pause = Duration::from_millis(500);
        for attempt in 1..=ATTEMPTS {
            let result = match http1::split_url(&self.url).await {
                Ok((to, host, path)) => {
                    // Signed per attempt: the signed time is when it was sent.
                    let signature = signing::signature_now(&self.secret, body.as_bytes());
                    let head = format!(
                        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{}: {signature}",
                        signing::HEADER
                    );
                    let tls = match (&self.tls, self.url.host_str()) {
                        (Some(connector), Some(name)) => {
                            // `[::1]` in a URL is `::1` as a TLS name.
                            let name = name.trim_start_matches('[').trim_end_matches(']');
                            match ServerName::try_from(name.to_owned()) {
                                Ok(name) => Some((connector, name)),
                                Err(_) => {
                                    unsent.0 = None;
                                    tracing::warn!(%name, body, "domain webhook not sent: not a TLS name");
                                    return;
                                }
                            }
                        }
                        _ => None,
                    };
                    http1::exchange(to, tls, &head, body.as_bytes(), TIMEOUT).await
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(a) if (200..300).contains(&a.status) => {
                    unsent.0 = None;
                    return;
                }
                Ok(a) => tracing::warn!(attempt, status = a.status, "domain webhook refused"),
                Err(error) => tracing::warn!(attempt, %error, "domain webhook failed"),
            }
            if attempt < ATTEMPTS {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
        unsent.0 = None;
        tracing::warn!(attempts = ATTEMPTS, body, "domain webhook not sent");
    }
}

/// Logs its alert as not sent when dropped still holding it: a delivery aborted mid-way.
struct Unsent<'a>(Option<&'a str>);

impl Drop for Unsent<'_> {
    fn drop(&mut self) {
        if let Some(body) = self.0 {
            tracing::warn!(body, "domain webhook not sent: stopped at shutdown");
        }
    }
}

/// How long the health job waits for its alerts in flight once stopping: short of the bound at
/// which [`background::Tasks`] would abort the job itself, so that it logs what is left.
pub const ALERT_DRAIN: Duration = background::DRAIN.saturating_sub(Duration::from_secs(2));

/// The alerts being delivered, as tasks owned by the health job.
#[derive(Default)]
pub struct Alerts(JoinSet<()>);

impl Alerts {
    /// Starts delivering `body` (the check goes on meanwhile: a receiver's backoff must not hold
    /// back the next domain's alert).
    pub fn send(&mut self, webhook: &Webhook, body: String) {
        self.reap();
        self.0.spawn(webhook.clone().deliver(body));
    }

    /// Forgets the deliveries that have finished.
    fn reap(&mut self) {
        while self.0.try_join_next().is_some() {}
    }

    /// Waits up to `bound` for the deliveries in flight; the ones still going then are aborted
    /// and logged as not sent (before this returns).
    pub async fn drain(mut self, bound: Duration) {
        self.reap();
        if self.0.is_empty() {
            return;
        }
        tracing::debug!(
            alerts = self.0.len(),
            "domain health: waiting for its webhooks"
        );
        let all = async { while self.0.join_next().await.is_some() {} };
        if tokio::time::timeout(bound, all).await.is_err() {
            self.0.abort_all();
            while self.0.join_next().await.is_some() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    /// Counts the warnings saying an alert was not sent.
    #[derive(Clone, Default)]
    struct NotSent(Arc<AtomicUsize>);

    struct Message(String);

    impl Visit for Message {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0 = format!("{value:?}");
            }
        }
    }

    impl Subscriber for NotSent {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut message = Message(String::new());
            event.record(&mut message);
            if message.0.contains("not sent") {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// A receiver that takes the alert and never answers: the drain stops at its bound, and the
    /// alert is logged as not sent before it returns, not dropped silently.
    #[tokio::test(flavor = "current_thread")]
    async fn an_alert_still_in_flight_at_the_bound_is_logged_as_not_sent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = url::Url::parse(&format!("http://{}/hook", listener.local_addr().unwrap()));
        let (taken, mut arrived) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            taken.send(stream).await.unwrap();
            std::future::pending::<()>().await;
        });
        let webhook = Webhook {
            url: url.unwrap(),
            secret: b"a-secret-of-16-bytes".as_slice().into(),
            tls: None,
        };
        let not_sent = NotSent::default();
        let count = Arc::clone(&not_sent.0);
        // Current thread: the deliveries run where the subscriber is the default.
        let _default = tracing::subscriber::set_default(not_sent);
        let mut alerts = Alerts::default();
        alerts.send(&webhook, r#"{"domain":"s1.example"}"#.to_owned());
        let _stream = arrived.recv().await.unwrap();
        const BOUND: Duration = Duration::from_millis(200);
        let started = std::time::Instant::now();
        alerts.drain(BOUND).await;
        let took = started.elapsed();
        assert!(took >= BOUND && took < TIMEOUT, "{took:?}");
        assert_eq!(count.load(Ordering::SeqCst), 1, "logged as not sent once");
    }
}
