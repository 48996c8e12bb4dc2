//! What a subject request is about and what it keeps: the types the service and its store
//! share (their own file, so the store does not import the service that imports it).

use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;

/// Whose data a request is about, within one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Every link with this `ref`.
    Ref(String),
    /// The links of one campaign with this `ref`.
    CampaignRef { campaign: String, reference: String },
    /// One link.
    Code(String),
}

impl Selector {
    /// What the request row and the audit log keep of it: its kind, never the value.
    pub fn kind(&self) -> &'static str {
        match self {
            Selector::Ref(_) => "ref",
            Selector::CampaignRef { .. } => "campaign_ref",
            Selector::Code(_) => "code",
        }
    }
}

/// A raw visit as stored, for an export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectVisit {
    pub event_id: String,
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
    pub agent: Option<String>,
    pub country: Option<String>,
    pub region: Option<String>,
    pub city: Option<String>,
    pub isp: Option<String>,
    pub referrer_host: Option<String>,
    pub short_domain: Option<String>,
    pub language: Option<String>,
    pub rule: Option<String>,
}

/// An erase request and how far it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectRequest {
    /// `sr_` and 16 hex digits.
    pub id: String,
    pub workspace: WorkspaceId,
    /// The caller's `request_id`.
    pub key: String,
    /// [`Selector::kind`].
    pub selector: String,
    pub done: bool,
    /// The links found when the request was first made.
    pub codes: Vec<String>,
    pub tombstone: String,
    /// Links whose ref was replaced (set when done).
    pub links: i64,
    pub visits: i64,
    pub conversions: i64,
    pub created_ms: i64,
    pub finished_ms: Option<i64>,
}
