//! Changing a link: update and revoke, each a locked SQL row rewritten and its record re-projected.

use super::commit::Scope;
use super::rescreen::Screened;
use super::{LinkPatch, LinkService, ServiceError};
use crate::projection::RecordWrite;
use shortlink_model::{Link, WorkspaceId};
use shortlink_store as storage;
use shortlink_store::audit::{link_changes, AuditEntry, Origin};
use tokio::sync::OwnedRwLockReadGuard;

/// Held while a link of a workspace is changed ([`super::in_flight`]).
type WriteGate = OwnedRwLockReadGuard<()>;

impl LinkService {
    pub async fn update(
        &self,
        workspace: WorkspaceId,
        code: &str,
        patch: LinkPatch,
        origin: &Origin,
    ) -> Result<Link, ServiceError> {
        let (_writing, mut tx, current) = self.lock_for_change(workspace, code).await?;
        if current.revoked_at.is_some() {
            let _ = tx.rollback().await;
            return Err(ServiceError::Revoked);
        }
        let mut next = current.clone();
        if let Some(target) = patch.target {
            next.url_hash = target.hash();
            next.target = target.into_string();
        }
        set(&mut next.expires_at, patch.expires_at);
        set(&mut next.redirect, patch.redirect);
        if let Some(forward) = patch.forward_query {
            next.flags.set_forward_query(forward);
        }
        set(&mut next.campaign, patch.campaign);
        set(&mut next.recipient_ref, patch.recipient_ref);
        set(&mut next.tags, patch.tags);
        let extras = &mut next.extras;
        set(&mut extras.valid_since, patch.valid_since);
        set(&mut extras.not_yet_url, patch.not_yet_url);
        set(&mut extras.expired_url, patch.expired_url);
        set(&mut extras.rules, patch.rules);
        set(&mut extras.max_visits, patch.max_visits);
        set(&mut extras.password_digest, patch.password_digest);
        set(&mut extras.preview, patch.preview);
        set(&mut extras.click_id_param, patch.click_id_param);
        if let Err(invalid) = super::accept::whole_link(&next) {
            let _ = tx.rollback().await;
            return Err(ServiceError::Invalid(invalid));
        }
        next.updated_at = storage::now().max(current.updated_at);
        let moved = match self.rescreen(tx.as_mut(), &current, &mut next).await? {
            Screened::Clean => None,
            Screened::Moved { feed, entry } => Some((feed, entry)),
            Screened::Refused { url, refusal } => {
                // Rolled back first: the refusal's audit row is written outside it.
                let _ = tx.rollback().await;
                self.audit_refusal(origin, &url, &refusal).await;
                return Err(ServiceError::UnsafeTarget(refusal));
            }
        };
        tx.update_link(&next).await?;
        super::destinations::index(tx.as_mut(), &next, Some(&current)).await?;
        let mut changes = link_changes(&current, &next);
        if let Some((feed, entry)) = &moved {
            changes = changes
                .set("feed", feed.as_str())
                .set("entry", entry.as_str());
        }
        let audit = origin.entry("link.update", code, changes);
        self.publish_and_commit(tx, &next, Some(&current), &audit)
            .await?;
        super::rescreen::count(moved.as_ref(), &next);
        Ok(next)
    }

    /// Revokes a link for good. Revoking a revoked link changes nothing in SQL, rewrites the
    /// tombstone (repairing Redis if needed) and returns the link as it is. The link's click
    /// counter (`max_visits`) goes once the revoke is committed, never before: a revoke undone
    /// after a failure must find the count it had, or the cap would start again.
    pub async fn revoke(
        &self,
        workspace: WorkspaceId,
        code: &str,
        origin: &Origin,
    ) -> Result<Link, ServiceError> {
        let (_writing, mut tx, current) = self.lock_for_change(workspace, code).await?;
        let mut next = current.clone();
        if current.revoked_at.is_none() {
            let now = storage::now().max(current.updated_at);
            next.revoked_at = Some(now);
            next.updated_at = now;
            tx.update_link(&next).await?;
        }
        self.publish_and_commit(
            tx,
            &next,
            Some(&current),
            &origin.entry("link.revoke", code, link_changes(&current, &next)),
        )
        .await?;
        if let Err(error) = self.projection.delete_visit_count(code).await {
            // Harmless but for the memory: a tombstone answers 410 without reading it.
            tracing::warn!(%code, %error, "the revoked link's click counter could not be deleted");
        }
        Ok(next)
    }

    /// Link `code` of `workspace`, locked in a new transaction for a change, with the
    /// workspace's write gate held: a delete of the workspace waits for the change, or the
    /// change for it ([`super::authority`]). Not found: nothing is left open.
    pub(super) async fn lock_for_change(
        &self,
        workspace: WorkspaceId,
        code: &str,
    ) -> Result<(WriteGate, Box<dyn storage::LinkTx>, Link), ServiceError> {
        let writing = self.in_flight.enter(workspace).await;
        let mut tx = self.storage.begin().await?;
        match tx.lock_link(workspace, code).await? {
            Some(current) => Ok((writing, tx, current)),
            None => {
                let _ = tx.rollback().await;
                Err(ServiceError::NotFound)
            }
        }
    }

    pub(super) async fn publish_and_commit(
        &self,
        tx: Box<dyn storage::LinkTx>,
        link: &Link,
        previous: Option<&Link>,
        audit: &AuditEntry,
    ) -> Result<(), ServiceError> {
        let workspace = self.record_workspace(link.workspace).await?;
        let now = storage::now();
        let writes = RecordWrite::for_link_and_card(link, workspace, now, self.grace);
        // Undoing puts the previous record back, as SQL keeps it.
        let restore = || {
            let restore =
                RecordWrite::restore_with_card(&link.code, previous, workspace, now, self.grace);
            async move { self.projection.apply(&restore).await }
        };
        let scope = Scope::Link(link);
        if let Err(error) = self.projection.apply(&writes).await {
            self.roll_back_after_redis(tx, scope, &error, restore())
                .await;
            return Err(error.into());
        }
        self.commit_or_undo(tx, scope, Some(audit), restore()).await
    }
}

/// A patch's field: `None` leaves the link's as it is.
fn set<T>(field: &mut T, change: Option<T>) {
    if let Some(value) = change {
        *field = value;
    }
}
