//! A domain moved between workspaces (nginx's issuing list, `DomainContext`, shows it in another
//! workspace's part): the settings its former owner made for it are dropped, so that the module
//! and the fallback both answer the new owner's. Apart from the not-found routes, which the
//! extractor that notices the move must not import (an import circle).

use crate::{AppState, Result};
use chrono::Utc;
use shortlink_core::projection::not_found::{project, NotFoundError};
use shortlink_store::audit::{Actor, Changes, Origin};
use shortlink_store::NotFoundRedirects;

/// Drops the domain settings of workspaces that no longer hold the domain, as nginx's issuing
/// list (just taken: `DomainContext`) groups the domains, then rewrites `sl:nf`. Each drop is
/// audited in the former owner's log as `not_found_redirects.moved`. Runs when the list changes
/// (a domain moved between parts, or dropped from its brand's part), so a stale row left by a move
/// is gone whichever sidecar sees the new list first. How many rows it dropped.
pub async fn drop_moved(state: &AppState) -> Result<usize> {
    let storage = state.links.storage();
    let rows = storage.not_found_redirects(None).await?;
    let slugs: std::collections::HashMap<_, _> = (storage.workspaces().await?.into_iter())
        .map(|w| (w.id, w.slug))
        .collect();
    let moved: Vec<_> = (rows.into_iter())
        .filter(|row| !row.domain.is_empty())
        .filter(|row| {
            let owner = state.domains.workspace_of(&row.domain);
            slugs.get(&row.workspace) != Some(&owner)
        })
        .collect();
    for row in &moved {
        let dropped = NotFoundRedirects {
            root_url: None,
            unknown_url: None,
            expired_url: None,
            updated_at: Utc::now(),
            ..row.clone()
        };
        storage.put_not_found_redirects(&dropped).await?;
        let origin = Origin {
            workspace_id: row.workspace.get(),
            ..Origin::new(Actor::system("issuing list"))
        };
        let mut changes = Changes::new();
        for (field, url) in [
            ("root_url", &row.root_url),
            ("unknown_url", &row.unknown_url),
            ("expired_url", &row.expired_url),
        ] {
            changes = changes.diff(field, url.clone(), None);
        }
        let entry = origin.entry("not_found_redirects.moved", row.domain.as_str(), changes);
        storage.append_audit(&entry).await?;
    }
    if !moved.is_empty() {
        reproject(state).await?;
    }
    Ok(moved.len())
}

/// Rewrites `sl:nf` from SQL (every workspace's settings, as the module reads them).
pub(crate) async fn reproject(state: &AppState) -> Result<()> {
    let storage = state.links.storage();
    project(storage.as_ref(), state.links.projection())
        .await
        .map_err(|e| match e {
            NotFoundError::Storage(e) => crate::Error::from(e),
            NotFoundError::Redis(e) => crate::Error::RedisUnavailable(e),
        })
}
