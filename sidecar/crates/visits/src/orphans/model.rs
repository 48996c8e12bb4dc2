//! What an orphan visit is, apart from where it is stored: its kinds, the rows and counts a
//! read answers, and how a consumed event becomes one.

use chrono::{DateTime, Utc};
use serde::Serialize;
use shortlink_visit_enrich::Visit;
use shortlink_wire::event::OrphanKind;

/// The kinds the API and the database name, in the order lists show them.
pub const KINDS: [OrphanKind; 4] = OrphanKind::ALL;

/// The orphan visits a read covers: those recorded with a workspace's name (the workspace nginx
/// mapped the host to when the request came: [`workspace_of`]), or, for the operator, every one
/// (those of no workspace included). Never a list of hosts a sidecar has learned: a sidecar
/// started a second ago answers as one that has run for a month.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrphanScope {
    Workspace(String),
    Every,
    /// A reader whose workspace has no name (yet): nothing.
    Nothing,
}

/// What a row records as "no workspace": events of a module that did not say (before issue 77,
/// or a host nginx maps to no valid name) and rows stored before; only the operator reads them.
pub const NO_WORKSPACE: &str = "";

/// An orphan visit as the API lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct OrphanVisit {
    /// The visit's id (its stream entry's).
    pub id: String,
    /// `base_url`, `invalid_short_url`, `regular_404` or `recovered`.
    pub kind: String,
    /// The host asked.
    pub domain: String,
    /// The path asked for, without the query (at most 512 bytes).
    pub path: String,
    pub at: DateTime<Utc>,
    /// The status the module answered: 404 (410 for a known link that is gone; a redirect's for
    /// `recovered`).
    pub status: Option<u16>,
    /// `desktop`, `mobile`, `tablet`, `bot` or `unknown`.
    pub device: String,
    /// `human`, `bot` or `preview`.
    pub audience: String,
    pub country: Option<String>,
    pub referrer_host: Option<String>,
    pub language: Option<String>,
}

/// What a list of orphan visits asks for.
#[derive(Debug, Clone)]
pub struct OrphanQuery {
    pub scope: OrphanScope,
    pub kind: Option<OrphanKind>,
    pub domain: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// Resume after this visit (its time and id: the list's order).
    pub after: Option<(i64, String)>,
    pub limit: usize,
}

/// A host's orphan visits so far, per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct OrphanCounts {
    pub base_url: u64,
    pub invalid_short_url: u64,
    pub regular_404: u64,
    pub recovered: u64,
}

impl OrphanCounts {
    pub fn add(&mut self, kind: OrphanKind, n: u64) {
        let slot = match kind {
            OrphanKind::BaseUrl => &mut self.base_url,
            OrphanKind::InvalidShortUrl => &mut self.invalid_short_url,
            OrphanKind::Regular404 => &mut self.regular_404,
            OrphanKind::Recovered => &mut self.recovered,
        };
        *slot += n;
    }

    pub fn total(&self) -> u64 {
        self.base_url + self.invalid_short_url + self.regular_404 + self.recovered
    }
}

/// The orphan visit `visit` is, if it is one: the module's orphan events, and a known link's
/// 410 (its path rebuilt as `/<code>`). `None` for a visit of a link.
pub fn orphan_of(visit: &Visit) -> Option<(OrphanKind, String)> {
    match visit.orphan {
        Some(kind) => Some((kind, visit.code.clone())),
        None if visit.status == Some(410) => {
            Some((OrphanKind::InvalidShortUrl, format!("/{}", visit.code)))
        }
        None => None,
    }
}

/// The workspace an orphan visit is filed under: the one the module recorded with it, else
/// [`NO_WORKSPACE`] (not `default`: an event that does not say whose it is is nobody's, so no
/// workspace's key can read another's).
pub fn workspace_of(visit: &Visit) -> &str {
    visit.workspace.as_deref().unwrap_or(NO_WORKSPACE)
}

/// The host asked, normalized by enrichment (lower case, no port). `None`: no host, nobody's
/// orphan.
pub fn domain_of(visit: &Visit) -> Option<String> {
    visit.short_domain.clone()
}
