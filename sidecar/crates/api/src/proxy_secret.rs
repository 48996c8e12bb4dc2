//! Which requests came through nginx's API server: nginx adds `X-Shortlink-Proxy-Secret` (from
//! an include only its master reads, as the fallback's key) to every request it proxies, and
//! only such a request may add names to the domain health job's set through `X-Shortlink-Pool`
//! and `X-Shortlink-Public-Base`. Anyone else reaching the sidecar's port (a process on the same
//! host, any API key, a viewer's included) still has the headers shape its own answer, as nginx's
//! requests do, but names nothing the job will probe (docs/SECURITY.md, "The pool headers").

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use shortlink_config::{Config, ConfigError};

/// The header nginx sets (never forwarded by it from a client: `proxy_set_header` replaces it).
pub const HEADER: &str = "x-shortlink-proxy-secret";

/// The secret's digest: compared in constant time, the secret itself not kept.
#[derive(Clone)]
pub struct ProxySecret([u8; 32]);

impl std::fmt::Debug for ProxySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxySecret(..)")
    }
}

impl ProxySecret {
    /// `--proxy-secret` or `--proxy-secret-file`; `None` when neither is set (then no request is
    /// trusted, and the job checks configured domains only).
    pub fn from_config(config: &Config) -> Result<Option<Self>, ConfigError> {
        let problem = |text: String| ConfigError::ProxySecret(text);
        let secret = match (&config.proxy_secret, &config.proxy_secret_file) {
            (Some(_), Some(_)) => {
                return Err(problem(
                    "give either --proxy-secret or --proxy-secret-file, not both".into(),
                ))
            }
            (Some(secret), None) => secret.clone(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| problem(format!("cannot read {}: {e}", path.display())))?,
            (None, None) => return Ok(None),
        };
        let secret = secret.trim();
        // What nginx can put in a quoted header value, and long enough not to be guessed.
        if secret.len() < 16 || !secret.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(problem(
                "the secret must be at least 16 letters and digits (scripts/run writes 64 hex)"
                    .into(),
            ));
        }
        Ok(Some(Self(Sha256::digest(secret.as_bytes()).into())))
    }

    /// Whether `headers` carry the secret.
    pub fn matches(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(HEADER) else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        // Constant time: no early exit on the first differing byte.
        digest
            .iter()
            .zip(self.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_secret_matches() {
        let secret = ProxySecret(Sha256::digest(b"0123456789abcdef0123").into());
        let mut headers = HeaderMap::new();
        assert!(!secret.matches(&headers));
        headers.insert(HEADER, "0123456789abcdef0124".parse().unwrap());
        assert!(!secret.matches(&headers));
        headers.insert(HEADER, "0123456789abcdef0123".parse().unwrap());
        assert!(secret.matches(&headers));
    }
}
