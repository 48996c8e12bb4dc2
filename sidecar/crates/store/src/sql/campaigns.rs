//! Per-campaign aggregates: one campaign's (the API's `GET /api/v1/campaigns/{campaign}`) and
//! many at once (the console's overview and campaigns list), from the same select list so that a
//! number on a page is the number the API answers. The statements and the rows' reading only:
//! the store (`store.rs`) runs them.

use super::dialect::Dialect;
use super::driver::Driver;
use super::rows;
use super::statement::{Statement, Value};
use crate::api::StorageResult;
use crate::model::CampaignStats;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use sqlx::Database;

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

/// One row's aggregates.
pub(super) fn stats<D: Dialect>(row: &<D::DB as Database>::Row) -> StorageResult<CampaignStats> {
    Ok(CampaignStats {
        links: D::DB::int(row, "links")?,
        live: D::DB::int(row, "live")?,
        expired: D::DB::int(row, "expired")?,
        revoked: D::DB::int(row, "revoked")?,
        visits: D::DB::int(row, "visits")?,
    })
}

/// The aggregates of `campaign` in `workspace`: one row.
pub(super) fn one<D: Dialect>(
    workspace: WorkspaceId,
    campaign: &str,
    now: DateTime<Utc>,
) -> Statement {
    let mut query = select_aggregates::<D>("", now);
    query
        .bind(Value::Int(workspace.get()))
        .push(" AND campaign = ");
    query.bind(Value::Text(campaign.to_owned()));
    query
}

/// The campaigns of `workspace` (or those of `only`) with their aggregates, most visited first,
/// at most `limit`: one pass over the workspace's campaign index; `None` when `only` is empty.
/// Each row has `campaign` beside the aggregates.
pub(super) fn many<D: Dialect>(
    workspace: WorkspaceId,
    only: Option<&[String]>,
    now: DateTime<Utc>,
    limit: u32,
) -> Option<Statement> {
    let mut query = select_aggregates::<D>("campaign, ", now);
    query
        .bind(Value::Int(workspace.get()))
        .push(" AND campaign IS NOT NULL");
    if let Some(names) = only {
        if names.is_empty() {
            return None;
        }
        query.push(" AND campaign IN");
        rows::push_list(&mut query, names.iter().cloned().map(Value::Text));
    }
    query.push(" GROUP BY campaign ORDER BY visits DESC, campaign LIMIT ");
    query.bind(Value::Int(i64::from(limit)));
    Some(query)
}
