//! Where a webhook may be sent: not to loopback, private, link-local or other non-public
//! addresses unless the deployment allows them (`--webhook-allow-private`), so a subscription
//! cannot make the sidecar POST to internal services. Checked on the URL when a subscription is
//! saved and on every address a name resolves to when it is sent (a name may be re-pointed).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether `ip` is on the public internet, as far as a webhook is concerned.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (a == 100 && (64..128).contains(&b))
        // Benchmarking, 198.18.0.0/15; reserved, 240.0.0.0/4.
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // Unique local fc00::/7, link-local fe80::/10, documentation 2001:db8::/32.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first == 0x2001 && ip.segments()[1] == 0xdb8))
}

/// What the URL's host says before any lookup: an address literal that is not public, or a name
/// that always means this machine.
pub fn refused_host(url: &url::Url) -> Option<String> {
    match url.host()? {
        url::Host::Ipv4(ip) => (!is_public(IpAddr::V4(ip))).then(|| ip.to_string()),
        url::Host::Ipv6(ip) => (!is_public(IpAddr::V6(ip))).then(|| ip.to_string()),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            (name == "localhost" || name.ends_with(".localhost")).then_some(name)
        }
    }
}

/// The system resolver, keeping only public addresses (all of them with `allow_private`).
#[derive(Debug, Clone, Copy)]
pub struct PublicResolver {
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let found = tokio::net::lookup_host((name.as_str(), 0)).await?;
            let kept: Vec<SocketAddr> = found
                .filter(|a| allow_private || is_public(a.ip()))
                .collect();
            if kept.is_empty() {
                let refused = format!("{} has no public address", name.as_str());
                return Err(refused.into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_pass() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
            "198.18.0.1",
            "255.255.255.255",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn refuses_local_hosts_before_any_lookup() {
        let host = |u: &str| refused_host(&url::Url::parse(u).unwrap());
        assert_eq!(host("http://127.0.0.1:9/x").as_deref(), Some("127.0.0.1"));
        assert_eq!(host("https://[::1]/").as_deref(), Some("::1"));
        assert_eq!(host("https://LOCALHOST./").as_deref(), Some("localhost"));
        assert_eq!(host("https://a.localhost/").as_deref(), Some("a.localhost"));
        assert_eq!(host("https://hooks.example/"), None);
    }
}
