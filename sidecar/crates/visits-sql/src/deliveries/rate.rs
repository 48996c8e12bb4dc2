//! A campaign's delivered rate in SQL: the final reports per time bucket, filled by [`fill`].

use crate::sql::{db, fetch_all};
use crate::{SqlVisitStore, VisitDialect};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Value};
use shortlink_store::StorageResult;
use shortlink_visits::deliveries::model::DeliveryState;
use shortlink_visits::deliveries::rate::{bucket_for, fill, DeliveredRate};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// `'delivered', 'failed', …`: the final states as SQL literals (ours, never the caller's).
pub(crate) fn final_states() -> String {
    (DeliveryState::ALL.into_iter())
        .filter(|state| state.is_final())
        .map(|state| format!("'{}'", state.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl<V: VisitDialect> SqlVisitStore<V> {
    /// The workspace's campaign's delivered rate (empty when no message of it ended yet).
    pub(super) async fn campaign_delivered_rate(
        &self,
        workspace: WorkspaceId,
        campaign: &str,
    ) -> StorageResult<DeliveredRate> {
        let bigint = V::Sql::BIGINT;
        let from = format!(
            "FROM delivery_messages m JOIN links l \
             ON l.workspace_id = m.workspace_id AND l.code = m.code \
             WHERE m.workspace_id = ? AND l.campaign = ? AND m.state IN ({})",
            final_states()
        );
        let values = || [Value::Int(workspace.get()), Value::Text(campaign.into())];
        let int = |row, column| Db::<V>::int(row, column).map_err(db);
        let span = statement(
            &format!(
                "SELECT CAST(COALESCE(MIN(m.at_ms), 0) AS {bigint}) AS first_ms, \
                 CAST(COALESCE(MAX(m.at_ms), 0) AS {bigint}) AS last_ms {from}"
            ),
            values(),
        );
        let span = fetch_all::<V>(&self.reader, span).await?;
        let Some(span) = span.first() else {
            return Ok(DeliveredRate::default());
        };
        let bucket = bucket_for(int(span, "last_ms")? - int(span, "first_ms")?);
        // The bucket is a literal: PostgreSQL takes a bound one in GROUP BY as another
        // expression than the same one in the select list.
        let buckets = statement(
            &format!(
                "SELECT CAST(m.at_ms - m.at_ms % {bucket} AS {bigint}) AS start_ms, \
                 CAST(SUM(CASE WHEN m.state = 'delivered' THEN 1 ELSE 0 END) AS {bigint}) \
                 AS delivered, CAST(COUNT(*) AS {bigint}) AS finals {from} \
                 GROUP BY 1 ORDER BY 1"
            ),
            values(),
        );
        let mut rows = Vec::new();
        for row in &fetch_all::<V>(&self.reader, buckets).await? {
            rows.push((
                int(row, "start_ms")?,
                int(row, "delivered")?,
                int(row, "finals")?,
            ));
        }
        Ok(fill(bucket, &rows))
    }
}
