//! Not-found redirects (issue 70) as SQL keeps them: one row per workspace (`domain` empty) and
//! per domain of it. Redis holds their projection (`shortlink_wire::not_found`).

use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;

/// One workspace's (`domain` empty) or one of its domains' settings; `None`: unset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotFoundRedirects {
    pub workspace: WorkspaceId,
    /// Lower case, without a final dot; empty for the workspace's own settings.
    pub domain: String,
    pub root_url: Option<String>,
    pub unknown_url: Option<String>,
    pub expired_url: Option<String>,
    pub updated_at: DateTime<Utc>,
}

impl NotFoundRedirects {
    /// Whether no URL is set (such a row is not kept).
    pub fn is_empty(&self) -> bool {
        self.root_url.is_none() && self.unknown_url.is_none() && self.expired_url.is_none()
    }
}
