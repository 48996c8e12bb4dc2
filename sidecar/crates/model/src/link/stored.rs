//! A link as SQL keeps it: the one row every layer reads (the service checks what makes one,
//! the store writes and reads it, the projection encodes it for nginx).

use crate::workspace::WorkspaceId;
use chrono::{DateTime, Utc};

/// A link as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub code: String,
    /// Who owns it; never changes.
    pub workspace: WorkspaceId,
    /// Normalised ASCII target URL.
    pub target: String,
    /// SHA-256 (hex) of `target`.
    pub url_hash: String,
    /// 301, 302, 307 or 308.
    pub redirect: u16,
    pub flags: LinkFlags,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Whole seconds: the Redis record carries Unix seconds.
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// Since when a threat feed's entry holds the link back (`shortlink_store::Quarantine`): its record
    /// answers the warning page instead of the redirect until it is released.
    pub quarantined_at: Option<DateTime<Utc>>,
    pub visit_count: i64,
    pub last_visit_at: Option<DateTime<Utc>>,
    /// Caller metadata: the campaign the link belongs to.
    pub campaign: Option<String>,
    /// Caller metadata: an opaque recipient reference (`ref` in the API).
    pub recipient_ref: Option<String>,
    /// Caller metadata: free tags, in the caller's order.
    pub tags: Vec<String>,
    /// Lifecycle and click-time rules; all empty for a plain link.
    pub extras: LinkExtras,
}

/// What a link may have beyond a target (issue 34): when it opens, where it sends clicks
/// before it opens and after it expires, its click-time rules, its visit cap, password and preview card.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkExtras {
    /// Whole seconds: before it, the link answers its "not yet" URL or page.
    pub valid_since: Option<DateTime<Utc>>,
    /// Normalised like a target.
    pub not_yet_url: Option<String>,
    /// Normalised like a target; instead of a 410 once expired.
    pub expired_url: Option<String>,
    /// The rules in their API form (`link::rules::RuleSpec`), as normalised JSON text.
    pub rules: Option<String>,
    /// At least 1: at most this many clicks are redirected (counted in Redis, not here).
    pub max_visits: Option<i64>,
    /// The password's salted digest as hex (`wire::record::password::Password::to_hex`); the
    /// password itself is never kept.
    pub password_digest: Option<String>,
    /// The preview card in its API form (`link::card::CardSpec`), as normalised JSON text.
    pub preview: Option<String>,
    /// The query parameter the module appends the click's id in (`[A-Za-z0-9_.-]{1,32}`).
    pub click_id_param: Option<String>,
}

impl LinkExtras {
    pub fn is_empty(&self) -> bool {
        self.valid_since.is_none()
            && self.not_yet_url.is_none()
            && self.expired_url.is_none()
            && self.rules.is_none()
            && self.max_visits.is_none()
            && self.password_digest.is_none()
            && self.preview.is_none()
            && self.click_id_param.is_none()
    }
}

/// The link record's flag bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkFlags(pub u32);

impl LinkFlags {
    /// Append the short URL's query string to the target.
    const FORWARD_QUERY: u32 = shortlink_wire::record::FLAG_FORWARD_QUERY;

    pub fn with_forward_query(forward: bool) -> Self {
        LinkFlags(if forward { Self::FORWARD_QUERY } else { 0 })
    }

    pub fn forward_query(self) -> bool {
        self.0 & Self::FORWARD_QUERY != 0
    }

    pub fn set_forward_query(&mut self, forward: bool) {
        if forward {
            self.0 |= Self::FORWARD_QUERY;
        } else {
            self.0 &= !Self::FORWARD_QUERY;
        }
    }
}

/// What a link answers at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    Live,
    Expired,
    Revoked,
}

impl Link {
    /// A link made at `at` with its target and nothing else: a 302, no flags, no metadata, no
    /// lifecycle or rules, no visits. What a create makes before the request's options.
    pub fn new(
        code: String,
        workspace: WorkspaceId,
        target: String,
        url_hash: String,
        at: DateTime<Utc>,
    ) -> Link {
        Link {
            code,
            workspace,
            target,
            url_hash,
            redirect: crate::link::DEFAULT_REDIRECT,
            flags: LinkFlags::default(),
            created_at: at,
            updated_at: at,
            expires_at: None,
            revoked_at: None,
            quarantined_at: None,
            visit_count: 0,
            last_visit_at: None,
            campaign: None,
            recipient_ref: None,
            tags: Vec::new(),
            extras: LinkExtras::default(),
        }
    }

    pub fn state(&self, now: DateTime<Utc>) -> LinkState {
        if self.revoked_at.is_some() {
            LinkState::Revoked
        } else if self.expires_at.is_some_and(|at| at <= now) {
            LinkState::Expired
        } else {
            LinkState::Live
        }
    }
}
