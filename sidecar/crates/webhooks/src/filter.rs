//! Which visits a reader wants: the feed endpoint's query and a subscription's choice. Its own
//! file so a subscription names it without importing the feed reader.

use super::event::FeedEvent;

/// Which visits a reader wants.
#[derive(Debug, Clone, Default)]
pub struct FeedFilter {
    /// Any of these campaigns, or any of `tags` (both empty: every visit).
    pub campaigns: Vec<String>,
    pub tags: Vec<String>,
    /// Only this recipient reference.
    pub recipient_ref: Option<String>,
    /// Bots and link previews too, not only people.
    pub include_bots: bool,
}

impl FeedFilter {
    pub(crate) fn admits(&self, event: &FeedEvent) -> bool {
        let chosen = (self.campaigns.is_empty() && self.tags.is_empty())
            || (event.campaign.as_ref()).is_some_and(|c| self.campaigns.contains(c))
            || event.tags.iter().any(|t| self.tags.contains(t));
        chosen
            && (self.recipient_ref.is_none() || event.recipient_ref == self.recipient_ref)
            && (self.include_bots || event.audience == "human")
    }
}
