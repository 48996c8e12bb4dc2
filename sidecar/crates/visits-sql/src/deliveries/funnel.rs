//! A campaign's funnel in SQL ([`FunnelStore`]): its messages grouped by current state, domain
//! and carrier with their links' clicks and conversions, folded by [`fold`].

use crate::sql::{db, fetch_all};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Value};
use shortlink_store::{StorageError, StorageResult};
use shortlink_visits::deliveries::funnel::{fold, Funnel, FunnelStore, GroupRow};
use shortlink_visits::deliveries::model::DeliveryState;
use shortlink_visits::deliveries::DeliveredRate;

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

#[async_trait]
impl<V: VisitDialect> FunnelStore for SqlVisitStore<V> {
    async fn funnel(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
    ) -> StorageResult<Option<Funnel>> {
        let bigint = V::Sql::BIGINT;
        let clicked = "CASE WHEN l.visit_count > 0 THEN 1 ELSE 0 END";
        let converted = "CASE WHEN EXISTS (SELECT 1 FROM conversions c \
             WHERE c.workspace_id = l.workspace_id AND c.code = l.code) THEN 1 ELSE 0 END";
        let values = || [Value::Int(workspace.get()), Value::Text(campaign.into())];
        let links = statement(
            &format!(
                "SELECT CAST(COUNT(*) AS {bigint}) AS links, \
                 CAST(COALESCE(SUM({clicked}), 0) AS {bigint}) AS clicked, \
                 CAST(COALESCE(SUM({converted}), 0) AS {bigint}) AS converted \
                 FROM links l WHERE l.workspace_id = ? AND l.campaign = ?"
            ),
            values(),
        );
        let groups = statement(
            &format!(
                "SELECT m.short_domain, m.carrier, m.state, m.error_code, \
                 CAST({clicked} AS {bigint}) AS clicked, \
                 CAST({converted} AS {bigint}) AS converted, CAST(COUNT(*) AS {bigint}) AS n \
                 FROM links l LEFT JOIN delivery_messages m \
                 ON m.workspace_id = l.workspace_id AND m.code = l.code \
                 WHERE l.workspace_id = ? AND l.campaign = ? \
                 GROUP BY m.short_domain, m.carrier, m.state, m.error_code, 5, 6"
            ),
            values(),
        );
        let (links, groups) = tokio::try_join!(
            fetch_all::<V>(&self.reader, links),
            fetch_all::<V>(&self.reader, groups)
        )?;
        let int = |row, column| Db::<V>::int(row, column).map_err(db);
        let Some(totals) = links.first() else {
            return Ok(None);
        };
        let totals = (
            int(totals, "links")?,
            int(totals, "clicked")?,
            int(totals, "converted")?,
        );
        if totals.0 == 0 {
            return Ok(None);
        }
        let mut rows = Vec::with_capacity(groups.len());
        for row in &groups {
            let state = (V::Sql::read_opt_text(row, "state")?)
                .map(|text| {
                    DeliveryState::parse(&text).ok_or_else(|| {
                        StorageError::Corrupt(format!("unknown delivery state {text:?}"))
                    })
                })
                .transpose()?;
            rows.push(GroupRow {
                short_domain: V::Sql::read_opt_text(row, "short_domain")?,
                carrier: V::Sql::read_opt_text(row, "carrier")?,
                state,
                error_code: V::Sql::read_opt_text(row, "error_code")?,
                clicked: int(row, "clicked")? != 0,
                converted: int(row, "converted")? != 0,
                n: int(row, "n")?,
            });
        }
        Ok(Some(fold(totals, &rows)))
    }

    async fn delivered_rate(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
    ) -> StorageResult<DeliveredRate> {
        self.campaign_delivered_rate(workspace, campaign).await
    }
}
