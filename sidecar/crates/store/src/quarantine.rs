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

/// A quarantine or a release told to the link's workspace's webhook subscribers: written in the
/// transaction that made it ([`crate::LinkTx::stage_link_event`]) with a feed row of its own, so
/// the click webhooks' deliverers give it away in the same order, signed and retried. No target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkEvent {
    /// `le_` and 16 random hex digits: the event's id in every delivery.
    pub id: String,
    pub workspace: WorkspaceId,
    pub code: String,
    pub kind: LinkEventKind,
    pub feed: String,
    pub entry: String,
    pub reason: LinkEventReason,
    pub at: DateTime<Utc>,
}

/// What happened to the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEventKind {
    /// It answers the warning page.
    Quarantined,
    /// It answers again.
    Released,
}

/// Why it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEventReason {
    /// A feed (or the workspace's block list) came to list its target.
    Listed,
    /// Stored quarantined at its creation, held for review.
    Held,
    /// An admin of its workspace or the operator released it.
    Released,
    /// The entry left its feed.
    Unlisted,
    /// Its target was changed to one no feed lists.
    TargetChanged,
}

impl LinkEventKind {
    pub const ALL: [Self; 2] = [Self::Quarantined, Self::Released];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Quarantined => "link.quarantined",
            Self::Released => "link.released",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

impl LinkEventReason {
    pub const ALL: [Self; 5] = [
        Self::Listed,
        Self::Held,
        Self::Released,
        Self::Unlisted,
        Self::TargetChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Listed => "listed",
            Self::Held => "held",
            Self::Released => "released",
            Self::Unlisted => "unlisted",
            Self::TargetChanged => "target_changed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == text)
    }
}

/// The prefix of a [`LinkEvent`]'s id: how the feed's reader tells it from a visit's.
pub const LINK_EVENT_PREFIX: &str = "le_";

impl LinkEvent {
    /// The event of `quarantine`'s link: `kind` for `reason`, now, with a new id.
    pub fn of(
        quarantine: &Quarantine,
        kind: LinkEventKind,
        reason: LinkEventReason,
        at: DateTime<Utc>,
    ) -> Self {
        let mut bytes = [0u8; 8];
        // An id only has to be unique; without randomness the time and code make it so.
        if getrandom::fill(&mut bytes).is_err() {
            bytes = at.timestamp_nanos_opt().unwrap_or_default().to_be_bytes();
        }
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        LinkEvent {
            id: format!("{LINK_EVENT_PREFIX}{hex}"),
            workspace: quarantine.workspace,
            code: quarantine.code.clone(),
            kind,
            feed: quarantine.feed.clone(),
            entry: quarantine.entry.clone(),
            reason,
            at,
        }
    }
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
