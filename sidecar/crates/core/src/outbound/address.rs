//! Which addresses a request made on a user's behalf may reach: not loopback, private,
//! link-local or other non-public addresses unless the deployment allows them
//! (`--webhook-allow-private`, `--import-allow-private`), so a webhook subscription or an import
//! source cannot make the sidecar read or poke internal services. Checked on the URL before
//! every request (address literals never reach a resolver) and on every address a name resolves
//! to, at each connection (a name may be re-pointed between two requests).
//!
//! IPv6 addresses that carry an IPv4 one (mapped, IPv4-compatible, IPv4-translated, NAT64's
//! well-known prefix, 6to4) are judged by the IPv4 address inside: `64:ff9b::7f00:1` is
//! 127.0.0.1 through the deployment's NAT64 gateway. Teredo (`2001::/32`) is refused whatever it
//! carries: an obsolete tunnel no receiver needs, whose relay the sidecar does not choose.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether `ip` is on the public internet, as far as an outbound request is concerned.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

/// The IPv4 address an IPv6 one stands for, where the prefix says it carries one.
pub(super) fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // Mapped ::ffff:0:0/96, IPv4-compatible ::/96 (`::` and `::1` included: 0.0.0.0 and
        // 0.0.0.1 are refused as IPv4), IPv4-translated ::ffff:0:0:0/96.
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0, 0, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => {
            Some(low)
        }
        // NAT64's well-known prefix 64:ff9b::/96 (RFC 6052).
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(low),
        // 6to4 2002:AABB:CCDD::/48 (RFC 3056).
        [0x2002, high, low16, ..] => Some(Ipv4Addr::new(
            (high >> 8) as u8,
            high as u8,
            (low16 >> 8) as u8,
            low16 as u8,
        )),
        _ => None,
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
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
        // IETF protocol assignments 192.0.0.0/24 (DS-Lite, NAT64 discovery); the former 6to4
        // relay anycast 192.88.99.0/24.
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 88 && c == 99)
        // Benchmarking, 198.18.0.0/15; reserved, 240.0.0.0/4.
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // Unique local fc00::/7, link-local fe80::/10, site-local fec0::/10 (deprecated, still
        // routed inside some networks).
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // Documentation 2001:db8::/32; Teredo 2001::/32 (see the top).
        || (s[0] == 0x2001 && (s[1] == 0xdb8 || s[1] == 0))
        // The rest of 64:ff9b::/32: local-use NAT64 64:ff9b:1::/48 (RFC 8215, the operator's own
        // translator, the IPv4 address anywhere in the low bits) and unassigned space.
        || (s[0] == 0x64 && s[1] == 0xff9b)
        // Discard-only 100::/64.
        || (s[0] == 0x100 && s[1] == 0 && s[2] == 0 && s[3] == 0))
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
            "192.0.0.8",
            "192.88.99.1",
            // IPv6 carrying a non-public IPv4 address.
            "64:ff9b::7f00:1",
            "64:ff9b::a00:5",
            "64:ff9b:1::a00:5",
            "64:ff9b:1:2:3:4:808:808",
            "::127.0.0.1",
            "::10.0.0.5",
            "::ffff:0:192.168.1.1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            // Teredo, whatever it carries (here 8.8.8.8 as server and client).
            "2001:0:808:808::f7f7:f7f7",
            "fec0::1",
            "100::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:4860:4860::8888",
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
