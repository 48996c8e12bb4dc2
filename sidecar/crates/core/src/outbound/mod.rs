//! Every HTTP request the sidecar makes on a user's behalf (click webhooks, imports from another
//! shortener, from the console or the `import` command) goes through a client built here, with
//! one set of rules:
//!
//! - public addresses only ([`address`]): the URL's host before each request, every address a
//!   name resolves to at each connection ([`address::PublicResolver`]); an operator flag per use
//!   lifts it (`--webhook-allow-private`, `--import-allow-private`). The SMS gateways' client
//!   reaches the non-public networks the operator lists, never the deployment's own listeners
//!   ([`reach`]);
//! - no redirects: a `3xx` is an answer like any other, so neither a redirect to an internal
//!   address nor a credential header sent to another host can happen;
//! - no proxy from the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`), where the proxy
//!   would resolve the name and the address check would be skipped; `--outbound-proxy` names one
//!   explicitly, and then the proxy is trusted to resolve names and refuse internal ones;
//! - callers never show an answer's body to whoever asked (a status and a short description).

pub mod address;
pub mod reach;
pub mod tls;

use address::PublicResolver;
use reach::{Reach, ReachResolver};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

/// Where a client may go, from the configuration.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Lifts the public-address rule (receivers or sources inside the deployment's network).
    pub allow_private: bool,
    /// `--outbound-proxy`: requests go through it; `None` ignores the environment's proxies.
    pub proxy: Option<url::Url>,
    /// Instead of the rule above, per address and port (the SMS gateways').
    pub reach: Option<Arc<Reach>>,
}

impl Policy {
    /// The import sources' policy.
    pub fn imports(config: &shortlink_config::Config) -> Self {
        Self {
            allow_private: config.import_allow_private,
            proxy: config.outbound_proxy.clone(),
            reach: None,
        }
    }

    /// The SMS gateways' policy (compose's hand-off to Kannel): the networks the operator
    /// allows, never `listening` (this sidecar's bound listeners), its Redis, its database or
    /// `--gateway-deny`. Names among them are resolved now, once.
    pub fn gateways(config: &shortlink_config::Config, listening: &[SocketAddr]) -> Self {
        let mut reach = Reach {
            networks: config.gateway_allow_networks.clone(),
            denied: [listening, &config.gateway_deny].concat(),
        };
        let redis = [
            std::slice::from_ref(&config.redis_url),
            &config.redis_sentinels,
            &config.redis_cluster,
        ]
        .concat();
        reach.deny_named(&redis, 6379);
        let database = &config.database_url;
        if let Some((scheme, _)) = database.split_once("://") {
            match scheme {
                "postgres" | "postgresql" => reach.deny_named(std::slice::from_ref(database), 5432),
                "mysql" | "mariadb" => reach.deny_named(std::slice::from_ref(database), 3306),
                _ => {}
            }
        }
        Self {
            allow_private: false,
            proxy: config.outbound_proxy.clone(),
            reach: Some(Arc::new(reach)),
        }
    }

    /// The same networks, without the denied listeners: for requests to where the sidecar's own
    /// callbacks are served (a gateway's callback base, which is often this very sidecar).
    pub fn without_denied(&self) -> Self {
        let reach = (self.reach.as_deref()).map(|reach| {
            Arc::new(Reach {
                networks: reach.networks.clone(),
                denied: Vec::new(),
            })
        });
        Self {
            reach,
            ..self.clone()
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
        if let Some(reach) = &self.reach {
            let port = url.port_or_known_default().unwrap_or(0);
            let host = url.host_str().unwrap_or_default().to_owned();
            return match literal_addresses(url) {
                Some(ips)
                    if ips
                        .iter()
                        .any(|ip| !reach.allows(SocketAddr::new(*ip, port))) =>
                {
                    Err(host)
                }
                _ => Ok(()),
            };
        }
        match self.allow_private {
            true => Ok(()),
            false => address::refused_host(url).map_or(Ok(()), Err),
        }
    }

    /// [`Self::check`], and with per-address rules every address the URL's name resolves to
    /// now (a name that does not resolve passes: the client's resolver checks it at each
    /// connection). `Err` names the refused host.
    pub async fn check_resolved(&self, url: &url::Url) -> Result<(), String> {
        self.check(url)?;
        let (Some(reach), Some(url::Host::Domain(name))) = (&self.reach, url.host()) else {
            return Ok(());
        };
        let port = url.port_or_known_default().unwrap_or(0);
        if let Ok(found) = tokio::net::lookup_host((name, port)).await {
            for addr in found {
                if !reach.allows(addr) {
                    return Err(name.to_owned());
                }
            }
        }
        Ok(())
    }

    /// [`Self::client`] for requests to `url` only: with per-address rules, its resolver keeps
    /// the addresses allowed on the URL's port.
    pub fn client_for(
        &self,
        url: &url::Url,
        ca: Option<&Path>,
        ca_flag: &str,
    ) -> Result<reqwest::ClientBuilder, String> {
        let builder = self.client(ca, ca_flag)?;
        Ok(match (&self.reach, &self.proxy) {
            (Some(reach), None) => builder.dns_resolver(Arc::new(ReachResolver {
                reach: Arc::clone(reach),
                port: url.port_or_known_default().unwrap_or(0),
            })),
            _ => builder,
        })
    }
}

/// The addresses a URL's host stands for without a lookup: a literal, or `localhost`.
fn literal_addresses(url: &url::Url) -> Option<Vec<IpAddr>> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(vec![IpAddr::V4(ip)]),
        url::Host::Ipv6(ip) => Some(vec![IpAddr::V6(ip)]),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            (name == "localhost" || name.ends_with(".localhost")).then(|| {
                vec![
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(Ipv6Addr::LOCALHOST),
                ]
            })
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
