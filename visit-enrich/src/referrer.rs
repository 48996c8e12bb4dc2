//! Referrer and short-domain hosts, normalised for grouping in breakdowns.

/// The host of a `Referer` value: lowercase, without port, trailing dot or a leading `www.`.
/// Anything that is not an absolute URL with a host (empty, relative, garbage) gives `None`.
/// Non-web schemes keep their host too: Android sends `android-app://com.google.android.gm/`.
pub fn referrer_host(referrer: &str) -> Option<String> {
    let referrer = referrer.trim();
    // scheme ":" "//" authority: a relative path or a bare "example.com" is not a referrer we trust.
    let (scheme, rest) = referrer.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // Userinfo ("user:pass@host") is not part of the host.
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = normalize_host(host_port)?;
    let host = host
        .strip_prefix("www.")
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .unwrap_or(host);
    Some(host)
}

/// The short domain a visit came in on, from the `Host` header: lowercase, without port or
/// trailing dot. Junk (characters no host name or address literal has) gives `None`.
pub fn short_domain(host: &str) -> Option<String> {
    normalize_host(host.trim())
}

/// Lowercases `host[:port]` and drops the port; keeps IPv6 literals in brackets.
fn normalize_host(host_port: &str) -> Option<String> {
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        let end = v6.find(']')?;
        &host_port[..end + 2]
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._[]:".contains(c));
    valid.then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referrers() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                "https://www.Example.COM:8443/path?q=1#x",
                Some("example.com"),
            ),
            ("http://t.co/abc", Some("t.co")),
            (
                "https://user:pw@news.example.org./a",
                Some("news.example.org"),
            ),
            (
                "android-app://com.google.android.gm/",
                Some("com.google.android.gm"),
            ),
            ("https://[2001:DB8::1]:443/", Some("[2001:db8::1]")),
            ("https://www./", Some("www")),
            ("", None),
            ("   ", None),
            ("example.com/path", None),
            ("/relative", None),
            ("https://", None),
            ("https:///nohost", None),
            ("1http://x.example/", None),
            ("https://bad host/", None),
        ];
        for (input, want) in cases {
            assert_eq!(referrer_host(input).as_deref(), *want, "{input:?}");
        }
    }

    #[test]
    fn short_domains() {
        assert_eq!(
            short_domain("S1.Example:8080").as_deref(),
            Some("s1.example")
        );
        assert_eq!(short_domain("s2.example.").as_deref(), Some("s2.example"));
        assert_eq!(
            short_domain("www.s3.example").as_deref(),
            Some("www.s3.example")
        );
        assert_eq!(short_domain("[::1]:80").as_deref(), Some("[::1]"));
        assert_eq!(short_domain(""), None);
        assert_eq!(short_domain("a b"), None);
        assert_eq!(short_domain("evil/x"), None);
    }
}
