//! Workspaces (issue 53): the operator's create, change and delete, each recorded in the
//! installation's audit chain. A deleted workspace's own chain stays, rows and head (issue 66):
//! an audit log outlives what it audits, `audit verify` still proves it, and the head tells the
//! visit consumer that codes of that workspace may still be clicked (late events are dropped,
//! never counted as `default`'s).
//!
//! The slugs link records carry are kept by [`crate::projection::Slugs`].

use super::{LinkService, ServiceError};
use serde_json::{json, Value};
use shortlink_model::WorkspaceId;
use shortlink_store::audit::{Changes, Origin, INSTALLATION_CHAIN};
use shortlink_store::{
    self as storage, display_name, is_valid_slug, DeletedWorkspace, LinkFilter, Quotas,
    StorageError, Workspace, WorkspaceChange,
};

/// Why a workspace change was refused.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("no such workspace")]
    NotFound,
    #[error("a workspace with this slug exists")]
    SlugTaken,
    #[error("a slug is 1 to 32 of a-z and 0-9, in words joined by single '-'")]
    BadSlug,
    #[error("{}", shortlink_store::NAME_RULE)]
    BadName,
    #[error("the default workspace cannot be deleted")]
    DefaultKept,
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<StorageError> for WorkspaceError {
    fn from(error: StorageError) -> Self {
        match error {
            StorageError::Conflict => WorkspaceError::SlugTaken,
            other => WorkspaceError::Service(other.into()),
        }
    }
}

/// Links read per page while a deleted workspace's records leave Redis.
const DELETE_PAGE: u32 = 1000;

impl LinkService {
    pub async fn create_workspace(
        &self,
        slug: &str,
        name: &str,
        quotas: Quotas,
        origin: &Origin,
    ) -> Result<Workspace, WorkspaceError> {
        if !is_valid_slug(slug) {
            return Err(WorkspaceError::BadSlug);
        }
        let name = display_name(name).ok_or(WorkspaceError::BadName)?;
        let workspace = (self.storage)
            .create_workspace(slug, name, quotas, storage::now())
            .await?;
        self.slugs.remember(workspace.id, &workspace.slug)?;
        let changes = Changes::new()
            .set("slug", workspace.slug.clone())
            .set("name", workspace.name.clone())
            .set("quotas", quotas_json(&workspace.quotas));
        self.record(origin, "workspace.create", &workspace, changes)
            .await?;
        Ok(workspace)
    }

    pub async fn change_workspace(
        &self,
        id: WorkspaceId,
        change: &WorkspaceChange,
        origin: &Origin,
    ) -> Result<Workspace, WorkspaceError> {
        let name = match &change.name {
            Some(name) => Some(
                display_name(name)
                    .ok_or(WorkspaceError::BadName)?
                    .to_owned(),
            ),
            None => None,
        };
        let change = &WorkspaceChange {
            name,
            ..change.clone()
        };
        let before = self.storage.workspace(id).await?;
        let after = self.storage.change_workspace(id, change).await?;
        let (Some(before), Some(after)) = (before, after) else {
            return Err(WorkspaceError::NotFound);
        };
        let changes = Changes::new()
            .diff("name", before.name.clone(), after.name.clone())
            .diff(
                "suspended",
                before.suspended_at.is_some(),
                after.suspended_at.is_some(),
            )
            .diff(
                "quotas",
                quotas_json(&before.quotas),
                quotas_json(&after.quotas),
            );
        if !changes.is_empty() {
            self.record(origin, "workspace.update", &after, changes)
                .await?;
        }
        Ok(after)
    }

    /// Appends a workspace change to the installation's chain.
    async fn record(
        &self,
        origin: &Origin,
        action: &str,
        workspace: &Workspace,
        changes: Changes,
    ) -> Result<(), ServiceError> {
        let entry = origin.entry_in(INSTALLATION_CHAIN, action, &workspace.slug, changes);
        Ok(self.storage.append_audit(&entry).await?)
    }

    /// Deletes a workspace and everything it owns. Its links leave Redis first, page by page, so
    /// no record outlives its row: a code of a deleted workspace answers 404 everywhere (an
    /// operator's deliberate act; links once sent by that client stop working).
    ///
    /// Its running jobs (batches, composes, reissues, console uploads and imports, on any
    /// sidecar) are stopped first, by the suspension ([`super::authority`]): every group of
    /// chunks reads the workspace's row before it writes and again, holding it, before it
    /// commits, so once the suspension has answered no group of the workspace commits any more.
    /// Single creates, updates and revokes are held back by the workspace's gate instead, closed
    /// from the scan until the rows are gone.
    /// Then this sidecar's groups still in flight (taking their records back) are waited for.
    /// No second scan: when both are done, the scan below meets every record the workspace's
    /// jobs will have left.
    pub async fn delete_workspace(
        &self,
        id: WorkspaceId,
        origin: &Origin,
    ) -> Result<DeletedWorkspace, WorkspaceError> {
        if id == WorkspaceId::DEFAULT {
            return Err(WorkspaceError::DefaultKept);
        }
        let Some(workspace) = self.storage.workspace(id).await? else {
            return Err(WorkspaceError::NotFound);
        };
        // Suspended first: its keys stop creating links, and its jobs writing, while the records
        // go (always written, so also a suspended workspace's waits for its groups in flight).
        let suspend = WorkspaceChange {
            suspended_at: Some(Some(storage::now())),
            ..WorkspaceChange::default()
        };
        self.storage.change_workspace(id, &suspend).await?;
        // Held until the rows are gone: no write of the workspace's links starts meanwhile.
        let _closed = self.in_flight.close(id).await;
        let filter = LinkFilter::in_workspace(id);
        let mut after: Option<String> = None;
        loop {
            let page = (self.storage)
                .scan_links(&filter, after.as_deref(), DELETE_PAGE)
                .await?;
            let Some(last) = page.last() else { break };
            after = Some(last.code.clone());
            let keys: Vec<String> = (page.iter())
                .flat_map(|link| {
                    [
                        shortlink_wire::keys::link_key(&link.code),
                        shortlink_wire::keys::preview_key(&link.code),
                        shortlink_wire::keys::visit_count_key(&link.code),
                    ]
                })
                .collect();
            (self.projection.delete_keys(&keys).await).map_err(ServiceError::from)?;
        }
        let deleted = self.storage.delete_workspace(id).await?;
        // Its not-found redirects went with its rows: the hash is written again without them
        // (a failure leaves them to the next change's rewrite; no link of theirs answers now).
        let storage = self.storage.as_ref();
        if let Err(error) = crate::projection::not_found::project(storage, &self.projection).await {
            tracing::warn!(%error, workspace = %id, "not-found redirects not rewritten in Redis");
        }
        self.slugs.forget(id);
        self.in_flight.forget(id);
        let changes = Changes::new()
            .set("links", deleted.links)
            .set("keys", deleted.keys)
            .set("webhooks", deleted.webhooks);
        self.record(origin, "workspace.delete", &workspace, changes)
            .await?;
        Ok(deleted)
    }
}

/// The quotas as one audit value (`null`: the setting's default).
fn quotas_json(quotas: &Quotas) -> Value {
    json!({
        "links_per_day": quotas.links_per_day,
        "compose_recipients": quotas.compose_recipients,
        "webhooks": quotas.webhooks,
    })
}
