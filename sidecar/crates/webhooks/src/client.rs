//! The webhooks' HTTP client: one pool of kept-alive connections for every subscription, TLS
//! verified against the system's roots or `--webhook-ca`, the outbound rules of
//! [`shortlink_core::outbound`] (public addresses only, no redirects, no proxy from the environment),
//! every POST signed.

use super::WebhookSettings;
use shortlink_core::outbound::{self, Policy};
use shortlink_core::signing;
use std::time::Duration;

pub struct Sender {
    client: reqwest::Client,
    policy: Policy,
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
        let policy = Policy {
            allow_private: settings.allow_private,
            proxy: settings.proxy.clone(),
            reach: None,
        };
        let client = policy
            .client(settings.ca.as_deref(), "--webhook-ca")?
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(5)))
            .build()
            .map_err(|e| format!("webhook client: {e}"))?;
        Ok(Self { client, policy })
    }

    /// POSTs `body` (JSON) signed with `secret`; a 2xx is success, anything else an error.
    pub async fn post(&self, url: &url::Url, secret: &str, body: Vec<u8>) -> Result<(), SendError> {
        self.policy.check(url).map_err(SendError::Private)?;
        let signature = signing::signature_now(secret.as_bytes(), &body);
        let answer = self
            .client
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(signing::HEADER, signature)
            .body(body)
            .send()
            .await
            .map_err(|e| SendError::Transport(outbound::describe(&e)))?;
        let status = answer.status();
        // Read to the end, so that the connection goes back to the pool.
        let _ = answer.bytes().await;
        match status.is_success() {
            true => Ok(()),
            false => Err(SendError::Status(status.as_u16())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Privacy;

    fn sender(allow_private: bool, proxy: Option<url::Url>) -> Sender {
        Sender::new(&WebhookSettings {
            deliver: true,
            allow_private,
            proxy,
            ca: None,
            retry_window: Duration::from_secs(60),
            timeout: Duration::from_secs(2),
            lease: Duration::from_secs(30),
            poll: Duration::from_secs(1),
            privacy: Privacy { include_ip: false },
        })
        .unwrap()
    }

    /// The delivery path checks the address again when it sends (a subscription saved before
    /// the check existed, or a URL put in the database by hand): nothing is sent.
    #[tokio::test]
    async fn tunnelled_and_reserved_addresses_are_refused_at_send() {
        let sender = sender(false, None);
        for host in [
            "[64:ff9b::7f00:1]",
            "[64:ff9b:1::a00:5]",
            "[::127.0.0.1]",
            "[2002:7f00:1::1]",
            "[2001:0:808:808::f7f7:f7f7]",
            "[fec0::1]",
            "192.0.0.8",
            "[::ffff:127.0.0.1]",
        ] {
            let url = url::Url::parse(&format!("http://{host}:9/hook")).unwrap();
            let sent = sender.post(&url, "0123456789abcdef", b"{}".to_vec()).await;
            assert!(
                matches!(sent, Err(SendError::Private(_))),
                "{url}: {sent:?}"
            );
        }
    }

    /// `--outbound-proxy`: every POST goes to the proxy (named here by a name that resolves to
    /// loopback: the proxy is the operator's choice, not a receiver's).
    #[tokio::test]
    async fn an_explicit_proxy_is_used() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = url::Url::parse(&format!("http://localhost:{port}")).unwrap();
        let accepted = tokio::spawn(async move {
            let accept = tokio::time::timeout(Duration::from_secs(5), listener.accept());
            matches!(accept.await, Ok(Ok(_)))
        });
        let url = url::Url::parse("http://hooks.example/in").unwrap();
        let sender = sender(false, Some(proxy));
        let sent = sender.post(&url, "0123456789abcdef", b"{}".to_vec());
        let _ = tokio::time::timeout(Duration::from_secs(5), sent).await;
        assert!(accepted.await.unwrap(), "the proxy got the connection");
    }
}
