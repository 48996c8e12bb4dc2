//! A campaign's totals (links by state, visits) count every link of the campaign: a few hundred
//! milliseconds for a million links, too long to make a page wait. So they are counted by a task
//! of their own and the last count is kept; the page answers at once with that count and the time
//! it was taken, starts a new count when it is older than [`FRESH`], and while a campaign's first
//! count runs it says so and reloads itself (an HTTP `Refresh`, as the bulk progress page does).

use chrono::{DateTime, Utc};
use shortlink_core::service::{LinkService, ServiceError};
use shortlink_core::sync::LockOrRecover;
use shortlink_model::WorkspaceId;
use shortlink_store::CampaignStats;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a count is shown before a page view starts the next one.
pub const FRESH: Duration = Duration::from_secs(30);
/// Campaigns whose last count is kept; past it the stalest counts are dropped (each is ~100
/// bytes, but campaign names come from the query string).
const KEPT: usize = 10_000;

/// A campaign of a workspace: two workspaces may both have a campaign named `spring`.
type Campaign = (WorkspaceId, String);

#[derive(Default)]
pub struct Totals {
    campaigns: Mutex<HashMap<Campaign, Entry>>,
}

#[derive(Default)]
struct Entry {
    last: Option<Count>,
    counting: bool,
    /// The last count failed: shown once, then the next view counts again.
    failed: bool,
}

/// One finished count.
#[derive(Clone)]
pub struct Count {
    /// `None`: no link has this campaign.
    pub stats: Option<CampaignStats>,
    pub at: DateTime<Utc>,
    taken: Instant,
}

/// What a page shows.
pub enum Shown {
    Counted(Count),
    /// The first count is running.
    Counting,
    /// The count failed (logged); the next view tries again.
    Failed,
}

impl Totals {
    /// The campaign's last count, starting a new one in the background when there is none or it
    /// is older than [`FRESH`] (at most one count per campaign at a time).
    pub fn show(
        self: &Arc<Self>,
        links: &Arc<LinkService>,
        workspace: WorkspaceId,
        campaign: &str,
    ) -> Shown {
        let key = (workspace, campaign.to_owned());
        let mut campaigns = self.campaigns.lock_or_recover();
        if !campaigns.contains_key(&key) && campaigns.len() >= KEPT {
            evict_stalest(&mut campaigns);
        }
        let entry = campaigns.entry(key.clone()).or_default();
        if std::mem::take(&mut entry.failed) && entry.last.is_none() {
            return Shown::Failed;
        }
        let stale = entry
            .last
            .as_ref()
            .is_none_or(|count| count.taken.elapsed() >= FRESH);
        if stale && !entry.counting {
            entry.counting = true;
            tokio::spawn(count(Arc::clone(self), Arc::clone(links), key));
        }
        match &entry.last {
            Some(count) => Shown::Counted(count.clone()),
            None => Shown::Counting,
        }
    }

    fn finish(&self, campaign: Campaign, outcome: Option<Count>) {
        let mut campaigns = self.campaigns.lock_or_recover();
        let entry = campaigns.entry(campaign).or_default();
        entry.counting = false;
        entry.failed = outcome.is_none();
        if outcome.is_some() {
            entry.last = outcome;
        }
    }
}

async fn count(totals: Arc<Totals>, links: Arc<LinkService>, campaign: Campaign) {
    let stats = match links.campaign(campaign.0, &campaign.1).await {
        Ok(stats) => Some(stats),
        Err(ServiceError::NotFound) => None,
        Err(e) => {
            let name = &campaign.1;
            tracing::error!(error = %e, campaign = name, "counting a campaign's totals failed");
            totals.finish(campaign, None);
            return;
        }
    };
    let count = Count {
        stats,
        at: Utc::now(),
        taken: Instant::now(),
    };
    totals.finish(campaign, Some(count));
}

/// Drops the tenth of the entries counted longest ago, failed ones first (never one being
/// counted: its task will come back to it).
fn evict_stalest(campaigns: &mut HashMap<Campaign, Entry>) {
    let mut taken: Vec<(Option<Instant>, Campaign)> = campaigns
        .iter()
        .filter(|(_, entry)| !entry.counting)
        .map(|(name, entry)| (entry.last.as_ref().map(|count| count.taken), name.clone()))
        .collect();
    taken.sort_unstable();
    for (_, name) in taken.into_iter().take(KEPT / 10) {
        campaigns.remove(&name);
    }
}
