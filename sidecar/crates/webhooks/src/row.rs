//! The row the store reads for one visit, which [`super::event`] turns into what a receiver sees.
//! Its own file so the event does not import the store, which imports the subscriptions.

use chrono::{DateTime, Utc};

/// A stored visit with what its link says about it, as the feed reads it.
#[derive(Debug, Clone, Default)]
pub struct FeedRow {
    pub event_id: String,
    /// The owner of the visit's link; `None` if the link is no longer stored.
    pub workspace: Option<shortlink_model::WorkspaceId>,
    pub code: String,
    pub visited_at: DateTime<Utc>,
    pub status: Option<i64>,
    pub ip: Option<String>,
    pub browser: Option<String>,
    pub browser_version: Option<String>,
    pub os: Option<String>,
    pub os_version: Option<String>,
    pub device: String,
    pub audience: String,
    /// Why `audience` (`shortlink_wire::verdict::Reasons` bits).
    pub reasons: i64,
    pub agent: Option<String>,
    /// The client network's name as the visit store kept it (ISP or autonomous system).
    pub isp: Option<String>,
    pub country: Option<String>,
    pub region: Option<String>,
    pub city: Option<String>,
    pub referrer_host: Option<String>,
    pub short_domain: Option<String>,
    pub language: Option<String>,
    pub rule: Option<String>,
    pub campaign: Option<String>,
    pub recipient_ref: Option<String>,
    /// The link's tags column (JSON), rules (JSON) and targets.
    pub tags: Option<String>,
    pub target: Option<String>,
    pub rules: Option<String>,
    pub not_yet_url: Option<String>,
    pub expired_url: Option<String>,
    pub valid_since: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
}
