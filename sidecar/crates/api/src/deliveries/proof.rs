//! What a receipt is evidence of (issue 77), beyond its fields' shapes: the short domain it names
//! must be one of its workspace's, and its time must be one a report of a message can have.
//!
//! **The domain.** A receipt's domain feeds the funnel's `by_domain` and the drain on
//! rejections: a host its reporter merely writes would let it judge any domain. A `short_url`'s
//! host is kept only when it is a domain of the receipt's workspace, as nginx's issuing list names
//! them (the `[<slug>]` part; the default workspace's also `--short-domains` and
//! `--public-base-url`); another host is refused, 422 `foreign_domain`, nothing stored. A sidecar
//! that has not yet had nginx's list since it started cannot tell: it keeps the receipt without a
//! domain (it counts on none) rather than lose it. A send job's own reports are signed instead
//! (`shortlink_messaging::signed`): their host is the one the job sent.
//!
//! **The time**: `shortlink_messaging::receipts::believable`, one rule for every gateway.

use crate::{AppState, Error, Result};
use axum::http::StatusCode;

use shortlink_model::WorkspaceId;
use shortlink_visits::deliveries::NewReceipt;

/// The domains of one workspace, as this request sees them.
pub struct WorkspaceDomains {
    state: AppState,
    slug: String,
    /// The default workspace's configured hosts (`--short-domains`, `--public-base-url`).
    configured: Vec<String>,
}

impl WorkspaceDomains {
    pub async fn of(state: &AppState, workspace: WorkspaceId) -> Result<Self> {
        let slugs = state.links.slugs();
        let name = slugs
            .record_workspace(state.links.storage().as_ref(), workspace)
            .await?;
        let mut configured = Vec::new();
        if workspace == WorkspaceId::DEFAULT {
            configured.extend(state.settings.short_domains.iter().cloned());
            let base = (state.settings.public_base_url.as_deref())
                .and_then(|base| url::Url::parse(base).ok());
            configured.extend(base.and_then(|url| url.host_str().map(str::to_ascii_lowercase)));
        }
        Ok(WorkspaceDomains {
            state: state.clone(),
            slug: name.slug().as_str().to_owned(),
            configured,
        })
    }

    /// Keeps `new`'s host when it is one of the workspace's, drops it when no list tells, and
    /// refuses it otherwise (422 `foreign_domain`).
    pub fn admit(&self, new: &mut NewReceipt) -> Result<()> {
        let Some(host) = new.short_domain.as_deref() else {
            return Ok(());
        };
        if self.configured.iter().any(|own| own == host) {
            return Ok(());
        }
        match self.state.domains.names_in(&self.slug, host) {
            Some(true) => Ok(()),
            Some(false) => Err(foreign_domain(host)),
            None => {
                new.short_domain = None;
                Ok(())
            }
        }
    }
}

/// [`WorkspaceDomains::admit`] for one receipt; nothing to look up when it names no host.
pub async fn admit_one(
    state: &AppState,
    workspace: WorkspaceId,
    new: &mut NewReceipt,
) -> Result<()> {
    if new.short_domain.is_none() {
        return Ok(());
    }
    WorkspaceDomains::of(state, workspace).await?.admit(new)
}

pub fn foreign_domain(host: &str) -> Error {
    Error::Request {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        code: "foreign_domain",
        message: format!(
            "`short_url`'s host {host} is not a domain of this workspace: a receipt is only about \
             the workspace's own links on its own domains; nothing stored"
        ),
    }
}
