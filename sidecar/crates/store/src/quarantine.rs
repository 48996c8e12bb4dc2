//! Quarantines (issue 79) as SQL keeps them: a link whose target a threat feed lists answers the
//! warning page until it is released; the row says which feed and entry, and whether a release
//! holds against them. How links are found by host: [`host_key`]. And visitors' abuse reports.

use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;

/// A link a feed listed: quarantined while `released_at` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantine {
    pub code: String,
    pub workspace: WorkspaceId,
    /// The feed's name (`--threat-feeds`), or `workspace` for the workspace's own block list.
    pub feed: String,
    /// The feed's entry the target matched, as the feed's index spells it (a host or a URL).
    pub entry: String,
    pub quarantined_at: DateTime<Utc>,
    /// Set by a release: the link answers again, and the same feed entry does not quarantine
    /// it again (another entry does, and so does this one once it left the feed and came back).
    pub released_at: Option<DateTime<Utc>>,
    /// Who released it, as the audit log names the actor.
    pub released_by: Option<String>,
}

/// A visitor's report of a short link (the warning page's or a domain's home page's form), for
/// the operator's queue: the code and the host, never a target or the visitor's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbuseReport {
    pub code: String,
    pub host: String,
    pub reported_at: DateTime<Utc>,
}

/// The workspace's own block list, as a quarantine's feed name.
pub const WORKSPACE_LIST: &str = "workspace";

/// The indexed form of a target's host (`links.target_host`): its labels reversed, then a dot
/// (`www.evil.example` gives `example.evil.www.`), so a host and all its subdomains are one range
/// of the index ([`host_range`]). `None` for a target without a host. `target` is a stored target,
/// the url crate's serialisation: the host is already lower case and punycode.
pub fn host_key(target: &str) -> Option<String> {
    let (_, rest) = target.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match host_port.strip_prefix('[') {
        // An IPv6 address is one label.
        Some(v6) => return Some(format!("[{}].", v6.split(']').next()?)),
        None => host_port.split(':').next()?,
    };
    let host = host.trim_end_matches('.');
    if host.is_empty() {
        return None;
    }
    let mut key = String::with_capacity(host.len() + 1);
    for label in host.rsplit('.') {
        key.push_str(label);
        key.push('.');
    }
    Some(key.to_ascii_lowercase())
}

/// The keys of `host` and of every subdomain of it: `[start, end)`, `end` being `start` with its
/// final dot raised to `/`, the next byte (a key holds no byte between them).
pub fn host_range(host: &str) -> Option<(String, String)> {
    let start = host_key(&format!("http://{host}/"))?;
    let end = format!("{}/", &start[..start.len() - 1]);
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_and_its_subdomains_are_one_range() {
        let key = |target: &str| host_key(target).unwrap();
        assert_eq!(key("https://www.evil.example/a?b"), "example.evil.www.");
        assert_eq!(key("http://u:p@evil.example:8080/"), "example.evil.");
        assert_eq!(key("https://[::1]:443/x"), "[::1].");
        let (start, end) = host_range("evil.example").unwrap();
        for inside in ["https://evil.example/", "https://a.b.evil.example/x"] {
            assert!((start.as_str()..end.as_str()).contains(&key(inside).as_str()));
        }
        for outside in ["https://notevil.example/", "https://evil.example.org/"] {
            assert!(!(start.as_str()..end.as_str()).contains(&key(outside).as_str()));
        }
    }
}
