//! A campaign's delivered rate over time: of the messages whose final report (delivered,
//! failed, rejected, expired) falls in a time bucket, how many were delivered. A message counts
//! once, in the bucket of its current state's gateway time (`delivery_messages`), so a rate
//! that drops shows when a carrier started refusing, not when the reports were sent in.
//!
//! The bucket is chosen from the span of the campaign's final reports so that a chart has at
//! most [`MAX_POINTS`] of them (a day's campaign by the 15 minutes, a month's by the day).

use super::model::at_ms;

use chrono::{DateTime, Utc};

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
