//! The console's Domains charts (issue 70): per short domain of a workspace, its human clicks per
//! time bucket over the domain health window, and the delivered rate of its messages over the
//! same buckets, from SQL so that every sidecar draws the same chart.
//!
//! Clicks come from `domain_clicks`, the per-minute counts the health check reads (humans only,
//! as the check counts them): its key `(minute, short_domain)` serves the window's range, so the
//! query reads at most a row per minute and domain whatever the traffic. Rates come from
//! `delivery_messages` by the gateway's time of each message's final report (as the campaign's
//! rate line), on its `(workspace_id, at_ms)` index.
//!
//! A bucket in which none of the workspace's domains had a single visit counted (human, bot or
//! preview) has no data: visits were not being counted then, or nobody used any link of the
//! workspace. It is a gap for every domain. In a bucket where some of them had visits, a domain
//! without any had zero clicks: that zero was measured.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use shortlink_model::WorkspaceId;
use shortlink_store::StorageResult;
use std::collections::HashMap;

/// One domain's series, a value per bucket of the chart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainSeries {
    pub domain: String,
    /// Human clicks; `None` where the bucket has no data (see the module's doc).
    pub clicks: Vec<Option<i64>>,
    /// (delivered, final reports); `None` where no message of the domain ended in the bucket.
    pub delivered: Vec<Option<(i64, i64)>>,
}

impl DomainSeries {
    /// Delivered of final in the bucket, in percent.
    pub fn percent(&self, bucket: usize) -> Option<f64> {
        let (delivered, finals) = self.delivered.get(bucket).copied().flatten()?;
        (finals > 0).then(|| delivered as f64 * 100.0 / finals as f64)
    }

    pub fn has_receipts(&self) -> bool {
        self.delivered.iter().any(Option::is_some)
    }
}

/// The workspace's domains over the same buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainChart {
    /// The first bucket's start.
    pub from: DateTime<Utc>,
    pub bucket_secs: i64,
    pub buckets: usize,
    /// In the order the domains were asked for.
    pub series: Vec<DomainSeries>,
}

impl DomainChart {
    pub fn start(&self, bucket: usize) -> DateTime<Utc> {
        self.from + chrono::Duration::seconds(self.bucket_secs * bucket as i64)
    }

    /// Where `at` falls on the axis, in buckets from the first one's start (fractional).
    pub fn position(&self, at: DateTime<Utc>) -> f64 {
        (at - self.from).num_milliseconds() as f64 / (self.bucket_secs * 1000) as f64
    }
}

/// The bucket widths a chart may use, in seconds: the finest that draws the window in at most
/// [`MAX_BUCKETS`] (the default 30-minute window by the minute).
const BUCKET_SECS: [i64; 5] = [60, 5 * 60, 15 * 60, 3600, 86_400];
pub const MAX_BUCKETS: i64 = 96;

pub fn bucket_for(window_secs: i64) -> i64 {
    (BUCKET_SECS.into_iter())
        .find(|bucket| window_secs / bucket <= MAX_BUCKETS)
        .unwrap_or(BUCKET_SECS[BUCKET_SECS.len() - 1])
}

/// The rows of the two queries, as read.
#[derive(Debug, Default)]
pub struct Rows {
    /// (bucket start in Unix seconds, domain, human clicks).
    pub clicks: Vec<(i64, String, i64)>,
    /// (bucket start in Unix seconds, domain, delivered, final reports).
    pub delivered: Vec<(i64, String, i64, i64)>,
}

/// The chart of `domains` from the rows, buckets from `from_secs` (aligned) to `to_secs`
/// (pure).
pub fn fill(
    domains: &[String],
    from_secs: i64,
    to_secs: i64,
    bucket: i64,
    rows: &Rows,
) -> DomainChart {
    let buckets = usize::try_from((to_secs - from_secs) / bucket + 1).unwrap_or(0);
    let index = |start: i64| {
        usize::try_from((start - from_secs) / bucket)
            .ok()
            .filter(|i| *i < buckets)
    };
    let mut measured = vec![false; buckets];
    let mut clicks: HashMap<&str, Vec<Option<i64>>> = HashMap::new();
    let mut delivered: HashMap<&str, Vec<Option<(i64, i64)>>> = HashMap::new();
    let asked = |domain: &String| domains.contains(domain);
    for (start, domain, humans) in rows.clicks.iter().filter(|row| asked(&row.1)) {
        let Some(i) = index(*start) else { continue };
        measured[i] = true;
        let series = clicks.entry(domain).or_insert_with(|| vec![None; buckets]);
        series[i] = Some(series[i].unwrap_or(0) + humans);
    }
    for (start, domain, yes, finals) in &rows.delivered {
        let Some(i) = index(*start) else { continue };
        let series = delivered
            .entry(domain)
            .or_insert_with(|| vec![None; buckets]);
        let (a, b) = series[i].unwrap_or((0, 0));
        series[i] = Some((a + yes, b + finals));
    }
    let series = (domains.iter())
        .map(|domain| {
            let own = clicks.get(domain.as_str());
            DomainSeries {
                domain: domain.clone(),
                clicks: (0..buckets)
                    .map(|i| match own.and_then(|own| own[i]) {
                        Some(n) => Some(n),
                        None => measured[i].then_some(0),
                    })
                    .collect(),
                delivered: (delivered.remove(domain.as_str()))
                    .unwrap_or_else(|| vec![None; buckets]),
            }
        })
        .collect();
    DomainChart {
        from: DateTime::from_timestamp(from_secs, 0).unwrap_or_default(),
        bucket_secs: bucket,
        buckets,
        series,
    }
}

#[async_trait]
pub trait DomainChartStore: Send + Sync {
    /// The chart of the workspace's `domains` over the `window` that ends `now`.
    async fn domain_chart(
        &self,
        workspace: WorkspaceId,
        domains: &[String],
        window: std::time::Duration,
        now: DateTime<Utc>,
    ) -> StorageResult<DomainChart>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_window_is_drawn_by_the_minute_and_a_day_by_the_quarter_hour() {
        assert_eq!(bucket_for(30 * 60), 60);
        assert_eq!(bucket_for(96 * 60), 60);
        assert_eq!(bucket_for(97 * 60), 300);
        assert_eq!(bucket_for(86_400), 900);
        assert_eq!(bucket_for(400 * 86_400), 86_400);
    }

    #[test]
    fn a_bucket_without_any_visit_is_a_gap_and_one_with_others_visits_a_measured_zero() {
        let domains = ["a.example".to_owned(), "b.example".to_owned()];
        let rows = Rows {
            clicks: vec![
                (600, "a.example".into(), 4),
                (600, "b.example".into(), 2),
                // b had only bots at 660: a row of zero humans, measured.
                (660, "b.example".into(), 0),
                (780, "a.example".into(), 3),
                // Another domain's rows (not asked for) are not drawn.
                (720, "c.example".into(), 9),
            ],
            delivered: vec![(660, "a.example".into(), 1, 2)],
        };
        let chart = fill(&domains, 600, 780, 60, &rows);
        assert_eq!(chart.buckets, 4);
        assert_eq!(chart.series[0].clicks, [Some(4), Some(0), None, Some(3)]);
        assert_eq!(chart.series[1].clicks, [Some(2), Some(0), None, Some(0)]);
        assert_eq!(chart.series[0].percent(1), Some(50.0));
        assert_eq!(chart.series[0].percent(0), None);
        assert!(!chart.series[1].has_receipts());
        assert_eq!(chart.start(3).timestamp(), 780);
        assert_eq!(
            chart.position(chart.start(2) + chrono::Duration::seconds(30)),
            2.5
        );
    }
}
