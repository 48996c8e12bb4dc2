//! Reads, and the resolver behind nginx's fallback.

use super::click::{self, ClickInput, CountFirst, CountryOf};
use super::error::ServiceError;
use super::links::LinkService;
use super::model::Resolution;
use crate::projection::RecordWrite;
use shortlink_model::{Link, LinkState, WorkspaceId};
use shortlink_store::{self as storage, CampaignStats, LinkFilter, ListCursor};
use shortlink_wire::record::WorkspaceName;
use std::sync::Arc;

impl LinkService {
    pub async fn get(&self, workspace: WorkspaceId, code: &str) -> Result<Link, ServiceError> {
        self.storage
            .get_link(workspace, code)
            .await?
            .ok_or(ServiceError::NotFound)
    }

    pub async fn list(
        &self,
        filter: &LinkFilter,
        after: Option<&ListCursor>,
        limit: u32,
    ) -> Result<Vec<Link>, ServiceError> {
        Ok(self.storage.list_links(filter, after, limit).await?)
    }

    /// Aggregates of a campaign; `NotFound` if it has no link.
    pub async fn campaign(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
    ) -> Result<CampaignStats, ServiceError> {
        let stats = self
            .storage
            .campaign_stats(workspace, campaign, storage::now())
            .await?;
        if stats.links == 0 {
            return Err(ServiceError::NotFound);
        }
        Ok(stats)
    }

    /// The campaigns of `workspace` (those of `only`, if given) with the aggregates
    /// [`LinkService::campaign`] answers for each, most visited first, at most `limit`.
    pub async fn campaigns(
        &self,
        workspace: WorkspaceId,
        only: Option<&[String]>,
        limit: u32,
    ) -> Result<Vec<(String, CampaignStats)>, ServiceError> {
        Ok(self
            .storage
            .campaign_totals(workspace, only, storage::now(), limit)
            .await?)
    }

    /// What nginx would answer for `code` and this click on a host of `host_workspace` (the
    /// workspace nginx maps the short domain to), from SQL. Repairs the Redis key in the
    /// background if it is missing. A code of another workspace is not found, as the module
    /// answers; a host that names no workspace is the caller's to answer (no code answers there).
    pub async fn resolve(
        &self,
        host_workspace: WorkspaceName,
        code: &str,
        click: &ClickInput<'_>,
        country: CountryOf<'_>,
    ) -> Result<Resolution, ServiceError> {
        // An imported code (another shortener's, issue 40) may have any shape of its charset: the
        // module sends one here only from a location whose domain carries imported codes.
        if !self.issuer.scheme().shape(code.as_bytes()).may_exist()
            && !shortcode::is_imported_charset(code.as_bytes())
        {
            return Ok(Resolution::NotFound);
        }
        let Some(link) = self.storage.link_by_code(code).await? else {
            return Ok(Resolution::NotFound);
        };
        // Known here before the repair below writes the record that names it.
        let workspace = self.record_workspace(link.workspace).await?;
        if host_workspace != workspace.slug() {
            return Ok(Resolution::NotFound);
        }
        let now = storage::now();
        let write = RecordWrite::for_link(&link, workspace, now, self.grace);
        let resolution = match link.state(now) {
            // 410 (or the expired URL) while the key would still exist (expiry + grace), then
            // 404, as nginx answers.
            LinkState::Expired if matches!(write, RecordWrite::Delete { .. }) => {
                Resolution::NotFound
            }
            _ => {
                let now = unix_seconds(now);
                match click::answer(&link, click, now, country, None) {
                    Ok(resolution) => resolution,
                    // Counted on the primary as the module counts, with the module's token if
                    // it tried first (once, however many tries reached Redis): a failure is a
                    // 503, never an uncounted redirect.
                    // A machine's click (the module's click-time verdict) reads the count and
                    // is answered as the next person's click would be, spending nothing.
                    Err(CountFirst) => {
                        let visits = if click.spends(host_workspace) {
                            self.projection
                                .count_click(code, click.count_token())
                                .await?
                        } else {
                            self.projection.visit_count(code).await? + 1
                        };
                        // With the count given, the answer never asks for one again; were it to,
                        // a 410 is the answer that redirects no one.
                        click::answer(&link, click, now, country, Some(visits))
                            .unwrap_or(Resolution::Gone)
                    }
                }
            }
        };
        let card = RecordWrite::new_card(&link, &write);
        let projection = Arc::clone(&self.projection);
        tokio::spawn(async move {
            // The card after the record, as a create writes them.
            for write in std::iter::once(write).chain(card) {
                if let Err(error) = projection.repair(&write).await {
                    tracing::debug!(%error, "redis repair after fallback resolve failed");
                }
            }
        });
        Ok(resolution)
    }
}

fn unix_seconds(at: chrono::DateTime<chrono::Utc>) -> u64 {
    u64::try_from(at.timestamp()).unwrap_or(0)
}
