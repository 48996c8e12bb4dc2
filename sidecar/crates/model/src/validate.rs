//! Target URL validation: what may be stored as a redirect target.
//!
//! A target is stored, written to Redis and finally sent in a `Location` header, so it must be an
//! absolute `http`/`https` URL with nothing a browser or proxy could read two ways: no control
//! characters (CR/LF would be header injection), no whitespace, no credentials, and an ASCII form
//! (hosts as punycode, the rest percent-encoded) as the Redis contract requires.

use sha2::{Digest, Sha256};
use std::fmt;
use url::{Host, Url};

/// Policy for target URLs, built once from the configuration.
#[derive(Debug, Clone)]
pub struct UrlPolicy {
    max_len: usize,
    allow_hosts: Vec<String>,
    block_hosts: Vec<String>,
}

/// A target that passed validation, in its normalised ASCII form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUrl(String);

impl TargetUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// SHA-256 of the normalised URL, hex: finds the live link for an idempotent create.
    pub fn hash(&self) -> String {
        url_hash(&self.0)
    }
}

/// SHA-256 of a normalised URL, lower-case hex.
pub fn url_hash(normalized: &str) -> String {
    hex(&Sha256::digest(normalized.as_bytes()))
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlError {
    Empty,
    TooLong { len: usize, max: usize },
    ForbiddenCharacter { position: usize },
    NotAbsolute,
    UnsupportedScheme,
    Malformed(url::ParseError),
    Credentials,
    OwnDomain { host: String },
    Blocked { host: String },
    NotAllowed { host: String },
}

impl UrlError {
    /// Stable machine-readable code for API errors.
    pub fn code(&self) -> &'static str {
        match self {
            UrlError::Empty | UrlError::Malformed(_) | UrlError::NotAbsolute => "invalid_url",
            UrlError::ForbiddenCharacter { .. } => "invalid_url",
            UrlError::Credentials => "invalid_url",
            UrlError::TooLong { .. } => "url_too_long",
            UrlError::UnsupportedScheme => "unsupported_scheme",
            UrlError::OwnDomain { .. } => "own_domain",
            UrlError::Blocked { .. } | UrlError::NotAllowed { .. } => "host_not_allowed",
        }
    }
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::Empty => f.write_str("url is empty"),
            UrlError::TooLong { len, max } => {
                write!(f, "url is {len} bytes; at most {max} are accepted")
            }
            UrlError::ForbiddenCharacter { position } => write!(
                f,
                "url character {position} is a control character or whitespace"
            ),
            UrlError::NotAbsolute => {
                f.write_str("url must be absolute and start with http:// or https://")
            }
            UrlError::UnsupportedScheme => f.write_str("only http and https urls are accepted"),
            UrlError::Malformed(e) => write!(f, "url is malformed: {e}"),
            UrlError::Credentials => f.write_str("urls with a user name or password are refused"),
            UrlError::OwnDomain { host } => write!(
                f,
                "{host} is one of our short domains; a link to it would loop"
            ),
            UrlError::Blocked { host } => write!(f, "targets on {host} are blocked"),
            UrlError::NotAllowed { host } => write!(f, "{host} is not on the allowed host list"),
        }
    }
}

impl std::error::Error for UrlError {}

impl UrlPolicy {
    /// Host lists are normalised like targets (lower case, punycode, no trailing dot); an entry
    /// that is not a host name is an error.
    pub fn new(
        max_len: usize,
        allow_hosts: &[String],
        block_hosts: &[String],
    ) -> Result<Self, String> {
        Ok(Self {
            max_len,
            allow_hosts: normalize_hosts(allow_hosts)?,
            block_hosts: normalize_hosts(block_hosts)?,
        })
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Validates and normalises `raw`. `own_domains` are the short domains of the request's pool
    /// (already normalised with [`normalize_hosts`]).
    pub fn check(&self, raw: &str, own_domains: &[String]) -> Result<TargetUrl, UrlError> {
        if raw.is_empty() {
            return Err(UrlError::Empty);
        }
        if raw.len() > self.max_len {
            return Err(UrlError::TooLong {
                len: raw.len(),
                max: self.max_len,
            });
        }
        // The url crate silently drops tabs and newlines and trims spaces; refuse them instead,
        // so what is stored is exactly what the caller meant.
        if let Some(position) = raw
            .chars()
            .position(|c| c.is_control() || c.is_whitespace())
        {
            return Err(UrlError::ForbiddenCharacter {
                position: position + 1,
            });
        }
        // Demand the literal `scheme://` so lenient forms such as `http:example.com` or
        // `https:\\host` are refused rather than reinterpreted.
        let lower_prefix = raw.get(..8).unwrap_or(raw).to_ascii_lowercase();
        if !(lower_prefix.starts_with("http://") || lower_prefix.starts_with("https://")) {
            return Err(match Url::parse(raw) {
                Err(url::ParseError::RelativeUrlWithoutBase) => UrlError::NotAbsolute,
                Ok(url) if url.scheme() != "http" && url.scheme() != "https" => {
                    UrlError::UnsupportedScheme
                }
                _ => UrlError::NotAbsolute,
            });
        }
        let url = Url::parse(raw).map_err(UrlError::Malformed)?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError::Credentials);
        }
        let host = match url.host() {
            Some(Host::Domain(domain)) => domain.trim_end_matches('.').to_owned(),
            Some(Host::Ipv4(ip)) => ip.to_string(),
            Some(Host::Ipv6(ip)) => format!("[{ip}]"),
            None => return Err(UrlError::Malformed(url::ParseError::EmptyHost)),
        };
        if host.is_empty() {
            return Err(UrlError::Malformed(url::ParseError::EmptyHost));
        }
        if own_domains.contains(&host) {
            return Err(UrlError::OwnDomain { host });
        }
        if self
            .block_hosts
            .iter()
            .any(|entry| host_matches(&host, entry))
        {
            return Err(UrlError::Blocked { host });
        }
        if !self.allow_hosts.is_empty()
            && !self
                .allow_hosts
                .iter()
                .any(|entry| host_matches(&host, entry))
        {
            return Err(UrlError::NotAllowed { host });
        }
        let normalized: String = url.into();
        if normalized.len() > self.max_len {
            return Err(UrlError::TooLong {
                len: normalized.len(),
                max: self.max_len,
            });
        }
        // The url crate's serialisation is ASCII; the Redis record relies on it.
        debug_assert!(normalized.is_ascii());
        Ok(TargetUrl(normalized))
    }
}

/// `host` equals `entry` or is a subdomain of it (suffix match on a label boundary).
fn host_matches(host: &str, entry: &str) -> bool {
    host == entry
        || (host.len() > entry.len()
            && host.ends_with(entry)
            && host.as_bytes()[host.len() - entry.len() - 1] == b'.')
}

/// Normalises host names from configuration or the `X-Shortlink-Pool` header: lower case,
/// punycode, no port, no trailing dot. Empty entries are skipped.
pub fn normalize_hosts<S: AsRef<str>>(hosts: &[S]) -> Result<Vec<String>, String> {
    hosts
        .iter()
        .map(|h| h.as_ref().trim())
        .filter(|h| !h.is_empty())
        .map(normalize_host)
        .collect()
}

fn normalize_host(entry: &str) -> Result<String, String> {
    // Accept `host:port` (as nginx's $host never has, but a hand-written list might).
    let bare = match entry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => entry,
    };
    match Host::parse(bare) {
        Ok(Host::Domain(domain)) => Ok(domain.trim_end_matches('.').to_owned()),
        Ok(Host::Ipv4(ip)) => Ok(ip.to_string()),
        Ok(Host::Ipv6(ip)) => Ok(format!("[{ip}]")),
        Err(_) => Err(entry.to_owned()),
    }
}

/// Validates a public base URL (`X-Shortlink-Public-Base` or `--public-base-url`) and returns it
/// without a trailing slash.
pub fn public_base(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("contains control characters or whitespace".into());
    }
    let url = Url::parse(raw).map_err(|e| e.to_string())?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err("must be an absolute http or https URL".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not have a query or fragment".into());
    }
    Ok(String::from(url).trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> UrlPolicy {
        UrlPolicy::new(100, &[], &["bad.example".into()]).unwrap()
    }

    fn own() -> Vec<String> {
        normalize_hosts(&["S1.example", "s2.example."]).unwrap()
    }

    #[test]
    fn accepts_and_normalises() {
        let p = policy();
        let ok = |raw: &str| p.check(raw, &own()).unwrap().into_string();
        assert_eq!(ok("https://example.com"), "https://example.com/");
        assert_eq!(
            ok("HTTP://Example.COM:80/a?b=c#d"),
            "http://example.com/a?b=c#d"
        );
        assert_eq!(
            ok("https://bücher.example/ä"),
            "https://xn--bcher-kva.example/%C3%A4"
        );
        assert_eq!(ok("https://a.example/x|y"), "https://a.example/x|y");
        assert_eq!(ok("http://127.0.0.1:8080/"), "http://127.0.0.1:8080/");
        assert_eq!(ok("https://notbad.example/"), "https://notbad.example/");
    }

    #[test]
    fn refuses_hostile_input() {
        let p = policy();
        let err = |raw: &str| p.check(raw, &own()).unwrap_err();
        assert_eq!(err(""), UrlError::Empty);
        assert_eq!(err("javascript:alert(1)"), UrlError::UnsupportedScheme);
        assert_eq!(err("data:text/html,hi"), UrlError::UnsupportedScheme);
        assert_eq!(err("file:///etc/passwd"), UrlError::UnsupportedScheme);
        assert_eq!(err("ftp://example.com/"), UrlError::UnsupportedScheme);
        assert_eq!(err("//example.com/"), UrlError::NotAbsolute);
        assert_eq!(err("/relative"), UrlError::NotAbsolute);
        assert_eq!(err("http:example.com"), UrlError::NotAbsolute);
        assert_eq!(err("https:\\\\evil.example"), UrlError::NotAbsolute);
        assert!(matches!(
            err("https://a.example/\r\nSet-Cookie:x"),
            UrlError::ForbiddenCharacter { position: 19 }
        ));
        assert!(matches!(
            err("https://a.example/\t"),
            UrlError::ForbiddenCharacter { .. }
        ));
        assert!(matches!(
            err("https://a.example/ x"),
            UrlError::ForbiddenCharacter { .. }
        ));
        assert!(matches!(
            err("https://a.example/\u{0}"),
            UrlError::ForbiddenCharacter { .. }
        ));
        assert!(matches!(
            err("https://a.example/\u{85}"),
            UrlError::ForbiddenCharacter { .. }
        ));
        assert_eq!(err("https://user:pw@a.example/"), UrlError::Credentials);
        assert_eq!(
            err("https://google.com@evil.example/"),
            UrlError::Credentials
        );
        assert!(matches!(err("https://"), UrlError::Malformed(_)));
        assert!(matches!(
            err("https://exa mple.com"),
            UrlError::ForbiddenCharacter { .. }
        ));
        assert!(matches!(
            err(&format!("https://a.example/{}", "x".repeat(100))),
            UrlError::TooLong { .. }
        ));
        // Percent-encoding can grow a URL past the limit after normalisation.
        assert!(matches!(
            err(&format!("https://a.example/{}", "é".repeat(40))),
            UrlError::TooLong { .. }
        ));
    }

    #[test]
    fn own_domains_and_lists() {
        let p = policy();
        let err = |raw: &str| p.check(raw, &own()).unwrap_err();
        assert_eq!(
            err("https://s1.EXAMPLE/x"),
            UrlError::OwnDomain {
                host: "s1.example".into()
            }
        );
        assert_eq!(
            err("https://s2.example./x"),
            UrlError::OwnDomain {
                host: "s2.example".into()
            }
        );
        assert_eq!(
            err("https://bad.example/"),
            UrlError::Blocked {
                host: "bad.example".into()
            }
        );
        assert_eq!(
            err("https://x.bad.example/"),
            UrlError::Blocked {
                host: "x.bad.example".into()
            }
        );

        let allow =
            UrlPolicy::new(100, &["Good.example".into()], &["evil.good.example".into()]).unwrap();
        assert!(allow.check("https://good.example/", &[]).is_ok());
        assert!(allow.check("https://www.good.example/", &[]).is_ok());
        assert!(matches!(
            allow.check("https://notgood.example/", &[]),
            Err(UrlError::NotAllowed { .. })
        ));
        assert!(matches!(
            allow.check("https://evil.good.example/", &[]),
            Err(UrlError::Blocked { .. })
        ));
    }

    #[test]
    fn idn_pool_entries_are_punycode() {
        let own = normalize_hosts(&["bücher.example:443", " ", "[::1]"]).unwrap();
        assert_eq!(
            own,
            vec!["xn--bcher-kva.example".to_string(), "[::1]".to_string()]
        );
        assert!(normalize_hosts(&["bad host"]).is_err());
    }

    #[test]
    fn public_bases() {
        assert_eq!(
            public_base("https://s.example/").unwrap(),
            "https://s.example"
        );
        assert_eq!(
            public_base("https://s.example/go/").unwrap(),
            "https://s.example/go"
        );
        assert!(public_base("javascript:x").is_err());
        assert!(public_base("https://s.example/?q").is_err());
    }
}
