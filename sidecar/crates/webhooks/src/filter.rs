//! Which visits a reader wants: the feed endpoint's query and a subscription's choice. Its own
//! file so a subscription names it without importing the feed reader.

use super::event::FeedEvent;
use shortlink_model::WorkspaceId;

/// Which visits a reader wants: always of one workspace's links ([`FeedFilter::of`]).
#[derive(Debug, Clone)]
pub struct FeedFilter {
    workspace: WorkspaceId,
    /// Any of these campaigns, or any of `tags` (both empty: every visit).
    pub campaigns: Vec<String>,
    pub tags: Vec<String>,
    /// Only this recipient reference.
    pub recipient_ref: Option<String>,
    /// Bots and link previews too, not only people.
    pub include_bots: bool,
    /// The quarantines and releases of the workspace's links too (a subscription's choice;
    /// the visit feed has none), whatever their campaign or tags.
    pub link_events: bool,
}

impl FeedFilter {
    /// Every visit of `workspace`'s links; narrow it with the fields.
    pub fn of(workspace: WorkspaceId) -> Self {
        Self {
            workspace,
            campaigns: Vec::new(),
            tags: Vec::new(),
            recipient_ref: None,
            include_bots: false,
            link_events: false,
        }
    }

    /// Whether a visit of a link owned by `owner` may be read at all. A visit of a code SQL
    /// does not hold (Redis had a record SQL lost in a restore) is the default workspace's, as
    /// every such visit was before workspaces; a deleted workspace's visits went with it.
    pub(crate) fn owns(&self, owner: Option<WorkspaceId>) -> bool {
        owner.unwrap_or(WorkspaceId::DEFAULT) == self.workspace
    }

    pub(crate) fn admits(&self, event: &FeedEvent) -> bool {
        let chosen = (self.campaigns.is_empty() && self.tags.is_empty())
            || (event.campaign.as_ref()).is_some_and(|c| self.campaigns.contains(c))
            || event.tags.iter().any(|t| self.tags.contains(t));
        chosen
            && (self.recipient_ref.is_none() || event.recipient_ref == self.recipient_ref)
            && (self.include_bots || event.concerns_people())
    }
}
