//! The one spelling of a host and of a URL that feeds and targets are compared in: a feed entry
//! written `WWW.Evil.example.` and a target `https://www.evil.example/` meet, and a URL entry
//! with a fragment matches a target without one.

use url::{Host, Url};

/// Lower case, punycode, no trailing dot, no port; `None` for what is not a host name or address.
pub fn host(raw: &str) -> Option<String> {
    let raw = raw.trim().trim_end_matches('.');
    // 253 bytes: the longest name DNS has.
    if raw.is_empty() || raw.len() > 253 || raw.contains(['/', ' ', '\t']) {
        return None;
    }
    let bare = match raw.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => raw,
    };
    match Host::parse(bare).ok()? {
        Host::Domain(domain) if domain.contains('.') => {
            Some(domain.trim_end_matches('.').to_owned())
        }
        Host::Domain(_) => None,
        Host::Ipv4(ip) => Some(ip.to_string()),
        Host::Ipv6(ip) => Some(format!("[{ip}]")),
    }
}

/// A URL as the url crate serialises it (what a target is stored as), without its fragment,
/// which never reaches a server; `None` for anything but an absolute http(s) URL.
pub fn url(raw: &str) -> Option<String> {
    let mut url = Url::parse(raw.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return None;
    }
    url.set_fragment(None);
    Some(url.into())
}

/// The host of a normalised URL, in [`host`]'s spelling.
pub fn host_of(url: &str) -> Option<String> {
    let url = Url::parse(url).ok()?;
    match url.host()? {
        Host::Domain(domain) => Some(domain.trim_end_matches('.').to_ascii_lowercase()),
        Host::Ipv4(ip) => Some(ip.to_string()),
        Host::Ipv6(ip) => Some(format!("[{ip}]")),
    }
}

/// A target as the url crate serialised it (`TargetUrl`, already [`url`]'s spelling but for the
/// fragment), split without parsing it again: the URL without its fragment, and its host. A
/// create asks this once per link, and parsing was most of a check's time.
pub fn serialized_parts(target: &str) -> Option<(&str, &str)> {
    let url = target.split('#').next()?;
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?']).next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => &authority[..v6.find(']')? + 2],
        None => authority.split(':').next()?,
    };
    (!host.is_empty()).then_some((url, host))
}

/// `host` and each parent domain it has below its last label, longest first:
/// `a.b.example` gives `a.b.example`, `b.example`. An address has no parents.
pub fn self_and_parents(host: &str) -> impl Iterator<Item = &str> {
    let address = host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok();
    let mut rest = Some(host);
    std::iter::from_fn(move || {
        let current = rest?;
        rest = match current.split_once('.') {
            Some((_, parent)) if !address && parent.contains('.') => Some(parent),
            _ => None,
        };
        Some(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_urls_meet_in_one_spelling() {
        assert_eq!(host("WWW.Evil.example."), Some("www.evil.example".into()));
        assert_eq!(
            host("bücher.example:443"),
            Some("xn--bcher-kva.example".into())
        );
        assert_eq!(host("localhost"), None);
        assert_eq!(host("a b.example"), None);
        assert_eq!(host("10.0.0.1"), Some("10.0.0.1".into()));
        assert_eq!(
            url("HTTP://Evil.example:80/a?b#frag"),
            Some("http://evil.example/a?b".into())
        );
        assert_eq!(url("ftp://evil.example/"), None);
        assert_eq!(host_of("https://X.example/p"), Some("x.example".into()));
        for target in [
            "https://a.example:8443/p?q#f",
            "http://[::1]:80/",
            "https://b.example?x",
            "http://10.0.0.1/",
        ] {
            let normal = url(target).unwrap();
            let (at, host) = serialized_parts(&normal).unwrap();
            assert_eq!(at, normal);
            assert_eq!(Some(host.to_owned()), host_of(&normal));
        }
    }

    #[test]
    fn parents_stop_before_the_last_label() {
        let all: Vec<&str> = self_and_parents("a.b.evil.example").collect();
        assert_eq!(all, ["a.b.evil.example", "b.evil.example", "evil.example"]);
        let ip: Vec<&str> = self_and_parents("10.0.0.1").collect();
        assert_eq!(ip, ["10.0.0.1"]);
    }
}
