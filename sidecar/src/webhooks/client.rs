//! The webhooks' HTTP client: one pool of kept-alive connections for every subscription, TLS
//! verified against the system's roots or `--webhook-ca`, names resolved to public addresses
//! only ([`address::PublicResolver`]), no redirects followed, every POST signed.

use super::address::{self, PublicResolver};
use super::WebhookSettings;
use crate::signing;
use std::time::Duration;

pub struct Sender {
    client: reqwest::Client,
    allow_private: bool,
}

/// How a POST went wrong, for the retry state and the logs.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("{0} is not a public address")]
    Private(String),
    #[error("answered {0}")]
    Status(u16),
    #[error("{0}")]
    Transport(String),
}

impl Sender {
    pub fn new(settings: &WebhookSettings) -> Result<Self, String> {
        let tls =
            crate::domains::certificate::verifying_config(settings.ca.as_deref(), "--webhook-ca")?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .dns_resolver(std::sync::Arc::new(PublicResolver {
                allow_private: settings.allow_private,
            }))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(5)))
            .build()
            .map_err(|e| format!("webhook client: {e}"))?;
        Ok(Self {
            client,
            allow_private: settings.allow_private,
        })
    }

    /// POSTs `body` (JSON) signed with `secret`; a 2xx is success, anything else an error.
    pub async fn post(&self, url: &url::Url, secret: &str, body: Vec<u8>) -> Result<(), SendError> {
        if !self.allow_private {
            // Literals never reach the resolver.
            if let Some(host) = address::refused_host(url) {
                return Err(SendError::Private(host));
            }
        }
        let signature = signing::signature_now(secret.as_bytes(), &body);
        let answer = self
            .client
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(signing::HEADER, signature)
            .body(body)
            .send()
            .await
            .map_err(|e| SendError::Transport(describe(&e)))?;
        let status = answer.status();
        // Read to the end, so that the connection goes back to the pool.
        let _ = answer.bytes().await;
        match status.is_success() {
            true => Ok(()),
            false => Err(SendError::Status(status.as_u16())),
        }
    }
}

/// The error with its causes (reqwest's own text is only "error sending request").
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
