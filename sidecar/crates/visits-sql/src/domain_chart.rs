//! The console's Domains charts in SQL ([`DomainChartStore`]): clicks from `domain_clicks`,
//! rates from `delivery_messages`, one read each over the window.

use crate::deliveries::rate::final_states;
use crate::sql::{db, fetch_all};
use crate::{SqlVisitStore, VisitDialect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::sql::{statement, Dialect, Driver, Value};
use shortlink_store::StorageResult;
use shortlink_visits::domain_chart::{bucket_for, fill, DomainChart, DomainChartStore, Rows};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

#[async_trait]
impl<V: VisitDialect> DomainChartStore for SqlVisitStore<V> {
    async fn domain_chart(
        &self,
        workspace: WorkspaceId,
        domains: &[String],
        window: std::time::Duration,
        now: DateTime<Utc>,
    ) -> StorageResult<DomainChart> {
        let window_secs = i64::try_from(window.as_secs()).unwrap_or(i64::MAX).max(60);
        let bucket = bucket_for(window_secs);
        let to = now.timestamp();
        let from = (to - window_secs).div_euclid(bucket) * bucket;
        let to = to.div_euclid(bucket) * bucket;
        if domains.is_empty() {
            return Ok(fill(domains, from, to, bucket, &Rows::default()));
        }
        let bigint = V::Sql::BIGINT;
        let places = vec!["?"; domains.len()].join(", ");
        // Bucket widths are literals: PostgreSQL takes a bound one in GROUP BY as another
        // expression than the same one in the select list.
        let clicks = statement(
            &format!(
                "SELECT CAST(minute - minute % {bucket} AS {bigint}) AS start, short_domain, \
                 CAST(SUM(humans) AS {bigint}) AS humans FROM domain_clicks \
                 WHERE minute >= ? AND minute < ? AND short_domain IN ({places}) \
                 GROUP BY 1, 2 ORDER BY 1, 2"
            ),
            [Value::Int(from), Value::Int(to + bucket)]
                .into_iter()
                .chain(domains.iter().cloned().map(Value::Text)),
        );
        let bucket_ms = bucket * 1000;
        let delivered = statement(
            &format!(
                "SELECT CAST(at_ms - at_ms % {bucket_ms} AS {bigint}) AS start_ms, short_domain, \
                 CAST(SUM(CASE WHEN state = 'delivered' THEN 1 ELSE 0 END) AS {bigint}) \
                 AS delivered, CAST(COUNT(*) AS {bigint}) AS finals FROM delivery_messages \
                 WHERE workspace_id = ? AND at_ms >= ? AND at_ms < ? \
                 AND short_domain IN ({places}) AND state IN ({}) GROUP BY 1, 2 ORDER BY 1, 2",
                final_states()
            ),
            [
                Value::Int(workspace.get()),
                Value::Int(from * 1000),
                Value::Int((to + bucket) * 1000),
            ]
            .into_iter()
            .chain(domains.iter().cloned().map(Value::Text)),
        );
        let (clicks, delivered) = tokio::try_join!(
            fetch_all::<V>(&self.reader, clicks),
            fetch_all::<V>(&self.reader, delivered)
        )?;
        let int = |row, column| Db::<V>::int(row, column).map_err(db);
        let mut rows = Rows::default();
        for row in &clicks {
            let domain = V::Sql::read_text(row, "short_domain")?;
            rows.clicks
                .push((int(row, "start")?, domain, int(row, "humans")?));
        }
        for row in &delivered {
            let domain = V::Sql::read_text(row, "short_domain")?;
            rows.delivered.push((
                int(row, "start_ms")? / 1000,
                domain,
                int(row, "delivered")?,
                int(row, "finals")?,
            ));
        }
        Ok(fill(domains, from, to, bucket, &rows))
    }
}
