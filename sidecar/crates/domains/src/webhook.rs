//! The domain health job's webhook: on every change of a domain's state, a JSON POST signed as
//! every webhook of the sidecar is ([`shortlink_core::signing`]), retried with backoff, to an `http://` or `https://` URL
//! (the latter verified against `--domain-webhook-ca` or the system's roots).

use super::http1;
use rustls::pki_types::ServerName;
use shortlink_config::{Config, ConfigError};
use shortlink_core::signing;
use std::sync::Arc;
use std::time::Duration;

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

    /// Delivers `body` in the background.
    pub fn send(&self, body: String) {
        tokio::spawn(self.clone().deliver(body));
    }

    /// POSTs until a 2xx, with backoff (receivers must accept a repeat).
    async fn deliver(self, body: String) {
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
                                    tracing::warn!(%name, "domain webhook: not a TLS name");
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
                Ok(a) if (200..300).contains(&a.status) => return,
                Ok(a) => tracing::warn!(attempt, status = a.status, "domain webhook refused"),
                Err(error) => tracing::warn!(attempt, %error, "domain webhook failed"),
            }
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
}
