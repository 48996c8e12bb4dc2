//! A campaign's delivered rate over time: of the messages whose final report (delivered,
//! failed, rejected, expired) falls in a time bucket, how many were delivered. A message counts
//! once, in the bucket of its current state's gateway time (`delivery_messages`), so a rate
//! that drops shows when a carrier started refusing, not when the reports were sent in.
//!
//! The bucket is chosen from the span of the campaign's final reports so that a chart has at
//! most [`MAX_POINTS`] of them (a day's campaign by the 15 minutes, a month's by the day).

use super::model::DeliveryState;
use super::store::at_ms;
use crate::store::sql::{db, fetch_all};
use crate::store::{SqlVisitStore, VisitDialect};
use chrono::{DateTime, Utc};
use shortlink_store::sql::{statement, Dialect, Driver, Value};
use shortlink_store::{StorageResult, WorkspaceId};

type Db<V> = <<V as VisitDialect>::Sql as Dialect>::DB;

/// Bucket widths, in ms, from the finest: a minute up to a day.
pub const BUCKETS_MS: [i64; 6] = [
    60_000,
    5 * 60_000,
    15 * 60_000,
    3_600_000,
    6 * 3_600_000,
    86_400_000,
];
/// Buckets a chart holds at most, but for campaigns longer than that many days.
pub const MAX_POINTS: i64 = 96;

/// One bucket: its start, the messages that ended in it and those of them delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RatePoint {
    pub start: DateTime<Utc>,
    pub delivered: i64,
    pub finals: i64,
}

impl RatePoint {
    /// Delivered of final, in percent; `None` where no message ended in the bucket.
    pub fn percent(&self) -> Option<f64> {
        (self.finals > 0).then(|| self.delivered as f64 * 100.0 / self.finals as f64)
    }
}

/// The delivered rate of a campaign, every bucket from the first final report to the last
/// (empty ones included, so that a gap shows as one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveredRate {
    pub bucket_ms: i64,
    pub points: Vec<RatePoint>,
}

/// The finest bucket that draws `span_ms` in at most [`MAX_POINTS`] buckets (the widest
/// otherwise).
pub fn bucket_for(span_ms: i64) -> i64 {
    (BUCKETS_MS.into_iter())
        .find(|bucket| span_ms / bucket < MAX_POINTS)
        .unwrap_or(BUCKETS_MS[BUCKETS_MS.len() - 1])
}

/// Every bucket from the first row's to the last's, rows as (start ms, delivered, finals) in
/// order of start (pure).
pub fn fill(bucket_ms: i64, rows: &[(i64, i64, i64)]) -> DeliveredRate {
    let mut points = Vec::new();
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        let mut rows = rows.iter().peekable();
        let mut start = first.0;
        while start <= last.0 {
            let (delivered, finals) = match rows.next_if(|row| row.0 == start) {
                Some(&(_, delivered, finals)) => (delivered, finals),
                None => (0, 0),
            };
            points.push(RatePoint {
                start: at_ms(start),
                delivered,
                finals,
            });
            start += bucket_ms;
        }
    }
    DeliveredRate { bucket_ms, points }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_is_the_finest_that_fits_the_span() {
        assert_eq!(bucket_for(0), 60_000);
        assert_eq!(bucket_for(95 * 60_000), 60_000);
        assert_eq!(bucket_for(96 * 60_000), 5 * 60_000);
        assert_eq!(bucket_for(23 * 3_600_000), 15 * 60_000);
        assert_eq!(bucket_for(24 * 3_600_000), 3_600_000);
        assert_eq!(bucket_for(30 * 86_400_000), 86_400_000);
        assert_eq!(bucket_for(400 * 86_400_000), 86_400_000);
    }

    #[test]
    fn empty_buckets_between_reports_are_gaps() {
        let rate = fill(60_000, &[(0, 2, 3), (180_000, 1, 1)]);
        let points: Vec<_> = (rate.points.iter())
            .map(|p| (p.start.timestamp_millis(), p.delivered, p.finals))
            .collect();
        assert_eq!(
            points,
            [(0, 2, 3), (60_000, 0, 0), (120_000, 0, 0), (180_000, 1, 1)]
        );
        assert_eq!(rate.points[1].percent(), None);
        assert_eq!(rate.points[3].percent(), Some(100.0));
        assert!(fill(60_000, &[]).points.is_empty());
    }
}
