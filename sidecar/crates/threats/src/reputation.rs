//! Commercial lookups of a target, behind one trait so that a provider is a choice of the
//! operator's and not of the code's. Off by default: the project ships no key and no data.
//!
//! Google Web Risk is the one implemented: its licence allows commercial use, which Safe
//! Browsing's (non-commercial only) does not. `uris:search` is asked per create, so it costs one
//! HTTPS round trip per link; its answers are cached by the caller's feeds, not here.

use crate::error::Error;
use async_trait::async_trait;

/// A verdict on one URL from a service outside the installation.
#[async_trait]
pub trait TargetReputation: Send + Sync {
    /// The provider's name, shown as the refusal's feed (`webrisk`).
    fn name(&self) -> &str;

    /// The threat the provider lists `url` under (`SOCIAL_ENGINEERING`), or `None` when it lists
    /// none. An error lets the create through: a provider's outage is not a reason to stop
    /// every campaign, and the feeds still answer.
    async fn lookup(&self, url: &str) -> Result<Option<String>, Error>;
}

/// Google Web Risk's `uris:search` with an API key (`--threat-webrisk-key`).
pub struct WebRisk {
    client: reqwest::Client,
    endpoint: String,
    key: String,
}

impl WebRisk {
    pub const ENDPOINT: &'static str = "https://webrisk.googleapis.com/v1/uris:search";

    pub fn new(client: reqwest::Client, endpoint: &str, key: String) -> Self {
        Self {
            client,
            endpoint: endpoint.to_owned(),
            key,
        }
    }
}

#[derive(serde::Deserialize)]
struct SearchResponse {
    threat: Option<Threat>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Threat {
    #[serde(default)]
    threat_types: Vec<String>,
}

#[async_trait]
impl TargetReputation for WebRisk {
    fn name(&self) -> &str {
        "webrisk"
    }

    async fn lookup(&self, url: &str) -> Result<Option<String>, Error> {
        let query = [
            ("threatTypes", "MALWARE"),
            ("threatTypes", "SOCIAL_ENGINEERING"),
            ("threatTypes", "UNWANTED_SOFTWARE"),
            ("uri", url),
            ("key", &self.key),
        ];
        let endpoint = url::Url::parse_with_params(&self.endpoint, query)
            .map_err(|error| Error::Reputation(error.to_string()))?;
        let failed = |error: reqwest::Error| Error::Reputation(error.without_url().to_string());
        let response = self.client.get(endpoint).send().await.map_err(failed)?;
        if !response.status().is_success() {
            return Err(Error::Reputation(format!("answered {}", response.status())));
        }
        let body = response.bytes().await.map_err(failed)?;
        let body: SearchResponse = (serde_json::from_slice(&body))
            .map_err(|error| Error::Reputation(error.to_string()))?;
        Ok(body.threat.map(|threat| threat.threat_types.join(",")))
    }
}
