//! The one check every new link's target meets, whichever path makes it (the API's create and
//! batch, compose, reissue, the console, imports all come through [`LinkService::create`] or
//! [`LinkService::create_chunks`]): the threat feeds, the shorteners' list, the brands'
//! look-alikes and the commercial lookup if one is configured ([`shortlink_threats::Threats`]),
//! and the link's workspace's own block and allow lists ([`super::target_lists`]). A listed
//! target is refused before anything is reserved or written, and the refusal is audited
//! (`link.refused`, in the workspace's log: its admins see who tried which target, and which
//! feed stopped it).

use super::authority::Authority;
use super::destinations;
use super::host_lists::TargetLists;
use super::{ItemFailure, ItemOutcome, LinkService, NewLink, ServiceError};
use shortlink_model::WorkspaceId;
use shortlink_store::audit::{Actor, Changes, Origin};
use shortlink_threats::{lookalike, normalize, Refusal, LOOKALIKE_FEED};
use std::sync::Arc;

/// Items of chunks refused by the check, with the chunk each came from.
pub(super) type Refused = Vec<(usize, (i64, ItemOutcome))>;

impl LinkService {
    /// `Err(UnsafeTarget)` naming the feed and its entry when one of `urls` (a link's
    /// destinations, [`super::destinations`]) is listed: by a feed first (an allow list never
    /// lets a feed-listed target through), then by `workspace`'s own lists, which apply to its
    /// links only. `Ok(Some(..))` instead when the workspace holds listed targets for review:
    /// the link is then stored quarantined.
    pub(super) async fn screen(
        &self,
        workspace: WorkspaceId,
        urls: &[String],
        origin: &Origin,
    ) -> Result<Option<Arc<Refusal>>, ServiceError> {
        let lists = self.screening(workspace).await?;
        match self.screen_with(&lists, urls).await {
            Some((_, refusal)) if lists.lists.hold_for_review => Ok(Some(refusal)),
            Some((url, refusal)) => {
                self.audit_refusal(origin, &url, &refusal).await;
                Err(ServiceError::UnsafeTarget(refusal))
            }
            None => Ok(None),
        }
    }

    /// Records a refusal; a failure to is logged, never a reason to store the link.
    pub(super) async fn audit_refusal(&self, origin: &Origin, url: &str, refusal: &Refusal) {
        let changes = Changes::new()
            .set("target", url)
            .set("feed", refusal.feed.as_str())
            .set("entry", refusal.entry.as_str());
        let entry = origin.entry("link.refused", refusal.feed.as_str(), changes);
        if let Err(error) = self.storage.append_audit(&entry).await {
            tracing::warn!(%error, feed = refusal.feed, "a refused target was not audited");
        }
    }

    /// What `workspace`'s links are checked against besides the feeds.
    pub(super) async fn screening(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Screening, ServiceError> {
        let lists = self.target_lists(workspace).await?;
        let own = match &self.own_domains {
            Some(own) => {
                let name = self.record_workspace(workspace).await?.slug();
                lookalike::brands(&own.of(name.as_str()))
            }
            None => Vec::new(),
        };
        Ok(Screening { lists, own })
    }

    /// The first of `urls` listed, and why: by a feed, the workspace's lists, or as a
    /// look-alike of one of the workspace's own domains.
    pub(super) async fn screen_with(
        &self,
        screening: &Screening,
        urls: &[String],
    ) -> Option<(String, Arc<Refusal>)> {
        for url in urls {
            let feeds = match &self.threats {
                Some(threats) => threats.screen(url).await,
                None => None,
            };
            let refusal = feeds
                .or_else(|| screening.lists.refusal(url))
                .or_else(|| screening.imitation(url));
            if let Some(refusal) = refusal {
                return Some((url.clone(), Arc::new(refusal)));
            }
        }
        None
    }

    /// The chunks without their listed items, and those items answered as refused.
    pub(super) async fn screen_chunks(
        &self,
        chunks: Vec<Vec<(i64, NewLink)>>,
        authority: Authority,
    ) -> (Vec<Vec<(i64, NewLink)>>, Refused) {
        let mut refused = Vec::new();
        let Some(workspace) = chunks.iter().flatten().map(|(_, new)| new.workspace).next() else {
            return (chunks, refused);
        };
        let lists = match self.screening(workspace).await {
            Ok(lists) => lists,
            // Refused whole, as a chunk whose database is unavailable is.
            Err(error) => {
                let failure = ItemOutcome::Failed(ItemFailure::of(&error));
                for (at, items) in chunks.iter().enumerate() {
                    refused.extend(
                        items
                            .iter()
                            .map(|(index, _)| (at, (*index, failure.clone()))),
                    );
                }
                return (vec![Vec::new(); chunks.len()], refused);
            }
        };
        if self.threats.is_none() && lists.is_empty() {
            return (chunks, refused);
        }
        let mut kept = Vec::with_capacity(chunks.len());
        for (at, items) in chunks.into_iter().enumerate() {
            let mut keep = Vec::with_capacity(items.len());
            for (index, mut new) in items {
                let urls = destinations::of(new.target.as_str(), &new.extras);
                match self.screen_with(&lists, &urls).await {
                    None => keep.push((index, new)),
                    Some((_, refusal)) if lists.lists.hold_for_review => {
                        new.held = Some(refusal);
                        keep.push((index, new));
                    }
                    Some((url, refusal)) => {
                        let origin = job_origin(authority);
                        self.audit_refusal(&origin, &url, &refusal).await;
                        let error = ServiceError::UnsafeTarget(refusal);
                        let failure = ItemOutcome::Failed(ItemFailure::of(&error));
                        refused.push((at, (index, failure)));
                    }
                }
            }
            kept.push(keep);
        }
        (kept, refused)
    }
}

/// A workspace's own checks: its block and allow lists and its domains' shapes.
pub(super) struct Screening {
    pub(super) lists: Arc<TargetLists>,
    /// The workspace's short domains with their skeletons ([`lookalike::brands`]).
    own: Vec<(String, String)>,
}

impl Screening {
    fn is_empty(&self) -> bool {
        *self.lists == TargetLists::default() && self.own.is_empty()
    }

    /// `url`'s host imitates one of the workspace's own domains: refused as the operator's
    /// brands' look-alikes are, under the same feed name.
    fn imitation(&self, url: &str) -> Option<Refusal> {
        let host = normalize::host_of(url)?;
        lookalike::imitated(&host, &self.own).map(|domain| Refusal {
            feed: LOOKALIKE_FEED.to_owned(),
            entry: domain.to_owned(),
        })
    }
}

/// Who a job's refusals are audited as: its key (named by id: the job does not carry its
/// name), or the command line.
fn job_origin(authority: Authority) -> Origin {
    let actor = match authority.key {
        Some(id) => Actor::key(id, format!("key {id}")),
        None => Actor::cli(),
    };
    Origin {
        workspace_id: authority.workspace.get(),
        ..Origin::new(actor)
    }
}

/// The outcomes of the chunks written (`outcomes[i]` is chunk `positions[i]`'s) with the
/// `refused` items put back in their chunks, each chunk in the order of its items: one
/// vector per chunk of the request (`chunks`), an empty chunk's empty.
pub(super) fn merge(
    refused: Refused,
    positions: Vec<usize>,
    outcomes: Vec<Vec<(i64, ItemOutcome)>>,
    chunks: usize,
) -> Vec<Vec<(i64, ItemOutcome)>> {
    if refused.is_empty() && positions.len() == chunks {
        return outcomes;
    }
    let mut merged: Vec<Vec<(i64, ItemOutcome)>> = vec![Vec::new(); chunks];
    for (at, written) in positions.into_iter().zip(outcomes) {
        merged[at].extend(written);
    }
    for (at, item) in refused {
        merged[at].push(item);
    }
    for chunk in &mut merged {
        chunk.sort_by_key(|(index, _)| *index);
    }
    merged
}
