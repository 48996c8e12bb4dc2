//! Every HTTP request the sidecar makes on a user's behalf (click webhooks, imports from another
//! shortener, from the console or the `import` command) goes through a client built here, with
//! one set of rules:
//!
//! - public addresses only ([`address`]): the URL's host before each request, every address a
//!   name resolves to at each connection ([`address::PublicResolver`]); an operator flag per use
//!   lifts it (`--webhook-allow-private`, `--import-allow-private`);
//! - no redirects: a `3xx` is an answer like any other, so neither a redirect to an internal
//!   address nor a credential header sent to another host can happen;
//! - no proxy from the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`), where the proxy
//!   would resolve the name and the address check would be skipped; `--outbound-proxy` names one
//!   explicitly, and then the proxy is trusted to resolve names and refuse internal ones;
//! - callers never show an answer's body to whoever asked (a status and a short description).

pub mod address;
pub mod tls;

use address::PublicResolver;
use std::path::Path;
use std::sync::Arc;

/// Where a client may go, from the configuration.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Lifts the public-address rule (receivers or sources inside the deployment's network).
    pub allow_private: bool,
    /// `--outbound-proxy`: requests go through it; `None` ignores the environment's proxies.
    pub proxy: Option<url::Url>,
}

impl Policy {
    /// The import sources' policy.
    pub fn imports(config: &shortlink_config::Config) -> Self {
        Self {
            allow_private: config.import_allow_private,
            proxy: config.outbound_proxy.clone(),
        }
    }

    /// The SMS gateways' policy (compose's hand-off to Kannel).
    pub fn gateways(config: &shortlink_config::Config) -> Self {
        Self {
            allow_private: config.gateway_allow_private,
            proxy: config.outbound_proxy.clone(),
        }
    }

    /// A client builder with the rules above: TLS verified against the system's roots or `ca`
    /// (`ca_flag` names it in errors), the filtering resolver, no redirects, no implicit proxy.
    pub fn client(
        &self,
        ca: Option<&Path>,
        ca_flag: &str,
    ) -> Result<reqwest::ClientBuilder, String> {
        let tls = tls::verifying_config(ca, ca_flag)?;
        // Through a proxy, the only name resolved here is the proxy's own, which the operator
        // chose (often an internal one): the targets' names are resolved by the proxy.
        let allow_private = self.allow_private || self.proxy.is_some();
        let builder = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .dns_resolver(Arc::new(PublicResolver { allow_private }))
            .redirect(reqwest::redirect::Policy::none());
        Ok(match &self.proxy {
            Some(proxy) => builder.proxy(
                reqwest::Proxy::all(proxy.as_str())
                    .map_err(|e| format!("--outbound-proxy {proxy}: {e}"))?,
            ),
            None => builder.no_proxy(),
        })
    }

    /// Checked before every request: the URL's host when it is an address literal or
    /// `localhost` (literals never reach the resolver). `Err` names the refused host.
    pub fn check(&self, url: &url::Url) -> Result<(), String> {
        match self.allow_private {
            true => Ok(()),
            false => address::refused_host(url).map_or(Ok(()), Err),
        }
    }
}

/// A request's error with its causes: reqwest's own text is only "error sending request", and
/// the cause names what went wrong (a refused internal address, a timeout, a TLS failure).
pub fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
