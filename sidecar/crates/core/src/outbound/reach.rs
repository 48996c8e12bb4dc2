//! Which addresses the SMS gateways' client may reach (issue 77): the public internet, the
//! non-public networks the operator lists (`--gateway-allow-networks`), and never the operator's
//! own listeners, whatever the list says: the sidecar's API and metrics listeners, its Redis, its
//! database, and what `--gateway-deny` adds (nginx's status and metrics listeners). A gateway is
//! named by a workspace's admin, and the sidecar's answer to its request must not become a way
//! to read or poke those services.
//!
//! A listener is an address and a port: a Kannel on 127.0.0.1:13013 is allowed beside a sidecar
//! on 127.0.0.1:8700. A listener bound to an unspecified address (`0.0.0.0:8700`) answers on every
//! address of the host: it stands for every non-public address on its port.
//!
//! Checked on the URL's address literal, on every address its name resolves to when a gateway is
//! set, and at each connection by the client's resolver ([`ReachResolver`]), so a name re-pointed
//! after the check (DNS rebinding) reaches nothing more.

use super::address::{embedded_v4, is_public};
use shortlink_config::Network;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// The addresses a client may reach.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// Non-public networks allowed besides the public internet.
    pub networks: Vec<Network>,
    /// Listeners never reached.
    pub denied: Vec<SocketAddr>,
}

impl Reach {
    /// Whether a connection to `addr` is allowed.
    pub fn allows(&self, addr: SocketAddr) -> bool {
        let ip = judged(addr.ip());
        if self.is_denied(ip, addr.port()) {
            return false;
        }
        is_public(ip) || self.networks.iter().any(|net| net.contains(ip))
    }

    fn is_denied(&self, ip: IpAddr, port: u16) -> bool {
        self.denied.iter().any(|listener| {
            let own = judged(listener.ip());
            listener.port() == port && (own == ip || (own.is_unspecified() && !is_public(ip)))
        })
    }

    /// Adds the listeners `addresses` name (`host:port`, or a URL with a host), resolved now;
    /// `default_port` for a URL that names none. Names that do not resolve add nothing.
    pub fn deny_named(&mut self, addresses: &[String], default_port: u16) {
        for address in addresses {
            let host_port = match url::Url::parse(address) {
                Ok(url) if url.host_str().is_some() => {
                    let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
                    (host.to_owned(), url.port().unwrap_or(default_port))
                }
                _ => match address.rsplit_once(':') {
                    Some((host, port)) => match port.parse() {
                        Ok(port) => (host.trim_matches(['[', ']']).to_owned(), port),
                        Err(_) => continue,
                    },
                    None => (address.clone(), default_port),
                },
            };
            match host_port.to_socket_addrs() {
                Ok(found) => self.denied.extend(found),
                Err(error) => {
                    tracing::warn!(%error, "a listener of the deployment did not resolve")
                }
            }
        }
    }
}

/// The address an IPv6 one stands for when it carries an IPv4 one (`::ffff:127.0.0.1`,
/// NAT64's `64:ff9b::7f00:1`), else itself.
fn judged(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The system resolver keeping only the addresses [`Reach`] allows on `port` (the one URL's
/// port the client is built for).
#[derive(Debug, Clone)]
pub struct ReachResolver {
    pub reach: Arc<Reach>,
    pub port: u16,
}

impl reqwest::dns::Resolve for ReachResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (reach, port) = (Arc::clone(&self.reach), self.port);
        Box::pin(async move {
            let found = tokio::net::lookup_host((name.as_str(), port)).await?;
            let kept: Vec<SocketAddr> = found.filter(|a| reach.allows(*a)).collect();
            if kept.is_empty() {
                let refused = format!("{} has no allowed address", name.as_str());
                return Err(refused.into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn listed_networks_open_and_listeners_stay_shut() {
        let reach = Reach {
            networks: vec![
                "127.0.0.0/8".parse().unwrap(),
                "10.0.0.0/8".parse().unwrap(),
            ],
            denied: vec![addr("127.0.0.1:8700"), addr("0.0.0.0:9145")],
        };
        assert!(reach.allows(addr("127.0.0.1:13013")));
        assert!(reach.allows(addr("93.184.216.34:8700")));
        assert!(reach.allows(addr("10.1.2.3:80")));
        assert!(!reach.allows(addr("192.168.1.1:80")), "not listed");
        assert!(!reach.allows(addr("127.0.0.1:8700")));
        assert!(!reach.allows(addr("[::ffff:127.0.0.1]:8700")));
        assert!(!reach.allows(addr("[64:ff9b::7f00:1]:8700")));
        // Unspecified: every non-public address on the port, no public one.
        assert!(!reach.allows(addr("10.1.2.3:9145")));
        assert!(!reach.allows(addr("127.0.0.1:9145")));
        assert!(reach.allows(addr("93.184.216.34:9145")));
    }

    #[tokio::test]
    async fn names_resolve_to_allowed_addresses_only_at_each_connection() {
        use reqwest::dns::Resolve;
        let reach = Arc::new(Reach {
            networks: vec!["127.0.0.0/8".parse().unwrap()],
            denied: vec![addr("127.0.0.1:8700")],
        });
        let resolve = |port| {
            let resolver = ReachResolver {
                reach: Arc::clone(&reach),
                port,
            };
            resolver.resolve("localhost".parse().unwrap())
        };
        // The denied listener's port: nothing left to connect to.
        assert!(resolve(8700).await.is_err());
        // Another port: loopback IPv4 only (::1 is in no listed network).
        let kept: Vec<SocketAddr> = resolve(13013).await.unwrap().collect();
        assert_eq!(kept, [addr("127.0.0.1:13013")]);
    }

    #[test]
    fn named_listeners_are_resolved() {
        let mut reach = Reach::default();
        let names = [
            "redis://127.0.0.1:6390/0".to_owned(),
            "postgres://u:p@127.0.0.1/db".to_owned(),
            "127.0.0.1:26379".to_owned(),
        ];
        reach.deny_named(&names[..1], 6379);
        reach.deny_named(&names[1..2], 5432);
        reach.deny_named(&names[2..], 6379);
        assert_eq!(
            reach.denied,
            [
                addr("127.0.0.1:6390"),
                addr("127.0.0.1:5432"),
                addr("127.0.0.1:26379")
            ]
        );
    }
}
