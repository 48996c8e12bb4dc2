//! Per-campaign aggregates: one campaign's (the API's `GET /api/v1/campaigns/{campaign}`) and
//! many at once (the console's overview and campaigns list), from the same select list so that a
//! number on a page is the number the API answers.

use super::dialect::Dialect;
use super::driver::Driver;
use super::rows;
use super::statement::{Statement, Value};
use super::store::{Row, SqlStorage};
use crate::api::{StorageError, StorageResult};
use crate::model::CampaignStats;
use crate::WorkspaceId;
use chrono::{DateTime, Utc};

/// `SELECT <aggregates>`: links by state at the one bound time (twice) and the visits' sum.
fn select_aggregates<D: Dialect>(head: &str, now: DateTime<Utc>) -> Statement {
    let int = D::BIGINT;
    let mut query = Statement::new(format!(
        "SELECT {head}COUNT(*) AS links, \
           CAST(COALESCE(SUM(CASE WHEN revoked_at IS NULL \
             AND (expires_at IS NULL OR expires_at > "
    ));
    query.bind(D::time(now)).push(&format!(
        ") THEN 1 ELSE 0 END), 0) AS {int}) AS live, \
           CAST(COALESCE(SUM(CASE WHEN revoked_at IS NULL AND expires_at <= "
    ));
    query.bind(D::time(now)).push(&format!(
        " THEN 1 ELSE 0 END), 0) AS {int}) AS expired, \
           CAST(COALESCE(SUM(CASE WHEN revoked_at IS NOT NULL THEN 1 ELSE 0 END), 0) \
             AS {int}) AS revoked, \
           CAST(COALESCE(SUM(visit_count), 0) AS {int}) AS visits \
         FROM links WHERE workspace_id = "
    ));
    query
}

fn stats<D: Dialect>(row: &Row<D>) -> StorageResult<CampaignStats> {
    Ok(CampaignStats {
        links: D::DB::int(row, "links")?,
        live: D::DB::int(row, "live")?,
        expired: D::DB::int(row, "expired")?,
        revoked: D::DB::int(row, "revoked")?,
        visits: D::DB::int(row, "visits")?,
    })
}

impl<D: Dialect> SqlStorage<D> {
    pub(super) async fn one_campaign(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
        now: DateTime<Utc>,
    ) -> StorageResult<CampaignStats> {
        let mut query = select_aggregates::<D>("", now);
        query
            .bind(Value::Int(workspace.get()))
            .push(" AND campaign = ");
        query.bind(Value::Text(campaign.to_owned()));
        let row = self
            .row(query)
            .await?
            .ok_or_else(|| StorageError::Corrupt("no campaign aggregate".into()))?;
        stats::<D>(&row)
    }

    /// The campaigns of `workspace` (or those of `only`) with their aggregates, most visited
    /// first, at most `limit`: one pass over the workspace's campaign index.
    pub(super) async fn many_campaigns(
        &self,
        workspace: WorkspaceId,
        only: Option<&[String]>,
        now: DateTime<Utc>,
        limit: u32,
    ) -> StorageResult<Vec<(String, CampaignStats)>> {
        let mut query = select_aggregates::<D>("campaign, ", now);
        query
            .bind(Value::Int(workspace.get()))
            .push(" AND campaign IS NOT NULL");
        if let Some(names) = only {
            if names.is_empty() {
                return Ok(Vec::new());
            }
            query.push(" AND campaign IN");
            rows::push_list(&mut query, names.iter().cloned().map(Value::Text));
        }
        query.push(" GROUP BY campaign ORDER BY visits DESC, campaign LIMIT ");
        query.bind(Value::Int(i64::from(limit)));
        self.rows(query)
            .await?
            .iter()
            .map(|row| Ok((D::read_text(row, "campaign")?, stats::<D>(row)?)))
            .collect()
    }
}
