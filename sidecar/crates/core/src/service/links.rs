//! The link service: what every operation of the write path and every read is a method of
//! (their `impl LinkService` blocks are in the files of the parts). Its fields are the parts'.

use super::error::{ServiceError, Stop};
use crate::issuer::Issuer;
use crate::projection::{Projection, RecordWorkspace, Slugs};
use shortlink_model::WorkspaceId;
use shortlink_store::Storage;
use shortlink_threats::Threats;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

pub struct LinkService {
    pub(super) storage: Arc<dyn Storage>,
    pub(super) projection: Arc<Projection>,
    pub(super) issuer: Issuer,
    pub(super) grace: Duration,
    /// How long a commit whose answer was lost is read back for (`--db-timeout`): no request
    /// waits longer for the database.
    pub(super) db_timeout: Duration,
    /// Codes refused because Redis already held them (see `refused_code`).
    pub(super) refused_codes: AtomicU64,
    /// What the records of each workspace's links name.
    pub(super) slugs: Slugs,
    /// The jobs' groups being written, per workspace: what a delete waits for.
    pub(super) in_flight: super::in_flight::InFlight,
    /// The threat feeds every new link's target is checked against (`--threat-feeds`); `None`
    /// when none is configured.
    pub(super) threats: Option<Arc<Threats>>,
    /// Each workspace's own block and allow lists, as last read.
    pub(super) target_lists: super::host_lists::Cache,
    /// The short domains each workspace issues on: a target imitating one of its own is refused
    /// as a look-alike, as the operator's `--threat-brand-hosts` are for every workspace.
    pub(super) own_domains: Option<Arc<dyn OwnDomains>>,
}

/// The short domains of a workspace, by its slug: the issuing list nginx publishes (and the
/// operator's configured domains for the default workspace). Kept by the domains crate, which
/// the core does not depend on.
pub trait OwnDomains: Send + Sync {
    fn of(&self, slug: &str) -> Vec<String>;
}

impl LinkService {
    pub fn new(
        storage: Arc<dyn Storage>,
        projection: Arc<Projection>,
        issuer: Issuer,
        grace: Duration,
        db_timeout: Duration,
    ) -> Self {
        Self {
            storage,
            projection,
            issuer,
            grace,
            db_timeout,
            refused_codes: AtomicU64::new(0),
            slugs: Slugs::default(),
            in_flight: Default::default(),
            threats: None,
            target_lists: Default::default(),
            own_domains: None,
        }
    }

    /// Checks every new link's target against `threats` ([`Self::screen`]).
    pub fn with_threats(mut self, threats: Arc<Threats>) -> Self {
        self.threats = Some(threats);
        self
    }

    /// Refuses targets imitating a workspace's own domains ([`OwnDomains`]).
    pub fn with_own_domains(mut self, own: Arc<dyn OwnDomains>) -> Self {
        self.own_domains = Some(own);
        self
    }

    pub fn threats(&self) -> Option<&Arc<Threats>> {
        self.threats.as_ref()
    }

    /// The workspaces' slugs this service has met (every authenticated key's workspace).
    pub fn slugs(&self) -> &Slugs {
        &self.slugs
    }

    /// What the records of `workspace`'s links name: an error, before anything is written, for
    /// a workspace that cannot be named. A workspace deleted meanwhile stops the work (a job's
    /// next group answers `workspace_deleted`, not an internal error).
    pub async fn record_workspace(
        &self,
        workspace: WorkspaceId,
    ) -> Result<RecordWorkspace, ServiceError> {
        if let Some(known) = self.slugs.known_record_workspace(workspace) {
            return Ok(known);
        }
        if self.storage.workspace(workspace).await?.is_none() {
            return Err(ServiceError::Stopped(Stop::WorkspaceDeleted));
        }
        Ok(self
            .slugs
            .record_workspace(self.storage.as_ref(), workspace)
            .await?)
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub fn projection(&self) -> &Arc<Projection> {
        &self.projection
    }

    pub fn scheme(&self) -> &shortcode::CodeScheme {
        self.issuer.scheme()
    }

    pub fn grace(&self) -> Duration {
        self.grace
    }
}
