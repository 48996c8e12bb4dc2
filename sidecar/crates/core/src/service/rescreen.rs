//! A change of a link's destinations meets the check a new link meets (issue 79): a destination
//! the change adds that a feed or the workspace's block list names is refused (`unsafe_target`,
//! nothing written) or, where the workspace holds listed targets for review, quarantines the
//! link under that entry. A quarantined link whose change leaves no listed destination answers
//! again: the quarantine is lifted (its workspace told, `target_changed`).

use super::destinations;
use super::{LinkService, ServiceError};
use shortlink_model::Link;
use shortlink_store::{LinkEvent, LinkEventKind, LinkEventReason, LinkTx, Quarantine};
use shortlink_threats::Refusal;
use std::sync::Arc;

/// What the check made of a change.
pub(super) enum Screened {
    /// Nothing to do with quarantines.
    Clean,
    /// `next` is quarantined (held for review) or no longer: under this feed and entry.
    Moved { feed: String, entry: String },
    /// Refused: `url`, for `refusal`. Nothing is written; the caller rolls back.
    Refused { url: String, refusal: Arc<Refusal> },
}

impl LinkService {
    /// Checks the destinations `next` adds to `current`'s, inside the change's transaction
    /// (`next` locked), and writes what follows for its quarantine.
    pub(super) async fn rescreen(
        &self,
        tx: &mut dyn LinkTx,
        current: &Link,
        next: &mut Link,
    ) -> Result<Screened, ServiceError> {
        let before = destinations::of(&current.target, &current.extras);
        let after = destinations::of(&next.target, &next.extras);
        let added: Vec<String> = (after.iter())
            .filter(|url| !before.contains(url))
            .cloned()
            .collect();
        if added.is_empty() {
            return Ok(Screened::Clean);
        }
        let lists = self.screening(next.workspace).await?;
        if let Some((url, refusal)) = self.screen_with(&lists, &added).await {
            if !lists.lists.hold_for_review {
                return Ok(Screened::Refused { url, refusal });
            }
            let quarantine = Quarantine {
                code: next.code.clone(),
                workspace: next.workspace,
                feed: refusal.feed.clone(),
                entry: refusal.entry.clone(),
                quarantined_at: next.updated_at,
                released_at: None,
                released_by: None,
            };
            next.quarantined_at = Some(next.updated_at);
            return self
                .tell(
                    tx,
                    quarantine,
                    LinkEventKind::Quarantined,
                    LinkEventReason::Held,
                    true,
                )
                .await;
        }
        if current.quarantined_at.is_none() || self.screen_with(&lists, &after).await.is_some() {
            return Ok(Screened::Clean);
        }
        let Some(quarantine) = tx.quarantine_of(&next.code).await? else {
            return Ok(Screened::Clean);
        };
        next.quarantined_at = None;
        let reason = LinkEventReason::TargetChanged;
        self.tell(tx, quarantine, LinkEventKind::Released, reason, false)
            .await
    }

    /// Writes (`hold`) or forgets the quarantine row and tells the workspace.
    async fn tell(
        &self,
        tx: &mut dyn LinkTx,
        quarantine: Quarantine,
        kind: LinkEventKind,
        reason: LinkEventReason,
        hold: bool,
    ) -> Result<Screened, ServiceError> {
        match hold {
            true => tx.put_quarantine(&quarantine).await?,
            // The entry no longer concerns this link: a later listing of its new target
            // quarantines it again, whatever this one was.
            false => tx.delete_quarantine(&quarantine.code).await?,
        }
        let at = shortlink_store::now();
        tx.stage_link_event(LinkEvent::of(&quarantine, kind, reason, at));
        Ok(Screened::Moved {
            feed: quarantine.feed,
            entry: quarantine.entry,
        })
    }
}

/// Counts a committed change that quarantined `next` or released it, under `moved`'s feed.
pub(super) fn count(moved: Option<&(String, String)>, next: &Link) {
    if let Some((feed, _)) = moved {
        let event = match next.quarantined_at {
            Some(_) => "quarantined",
            None => "released",
        };
        crate::metrics::link_quarantine(feed, event);
    }
}
