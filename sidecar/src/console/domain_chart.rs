//! The Domains page's charts (issue 70): small multiples, one per domain of the workspace, on
//! the same time axis (the domain health window) and the same click scale. Each draws its human
//! clicks per bucket over its workspace's other domains in grey, the moments it was drained and
//! restored as vertical markers, and below it the delivered rate of its messages where receipts
//! name it. A bucket without data is a gap in the line, not a zero (see
//! [`shortlink_visits::domain_chart`]). A table gives every number for those who do not see the
//! lines.
//!
//! The markers come from the drain state every sidecar reads from SQL (its periods), not from
//! the audit log: a workspace's audit chain holds every link change and has no index a
//! time-and-action read could use on each page view.

use super::layout::when;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use shortlink_domains::drain::{By, Drain, Mode};
use shortlink_domains::health::DomainStatus;
use shortlink_visits::domain_chart::{DomainChart, DomainSeries};

const WIDTH: f64 = 720.0;
const CLICKS_HEIGHT: f64 = 150.0;
const RATE_HEIGHT: f64 = 60.0;
/// Room under the plot for the time labels, and above it for the markers' labels.
const AXIS: f64 = 18.0;
const TOP: f64 = 16.0;

/// A drain or the end of one, on the time axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub at: DateTime<Utc>,
    pub drained: bool,
    pub label: String,
    pub reason: String,
}

/// The drains and restores of `drain` within `[from, to]`: every period it kept; the reason of
/// the last change only (the state keeps that one; earlier ones are in the audit log).
pub fn markers(drain: &Drain, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Marker> {
    let within = |at: DateTime<Utc>| from <= at && at <= to;
    let by = match drain.by {
        By::Health => "by the health check",
        By::Operator => "by hand",
    };
    let latest = |at: DateTime<Utc>| drain.since == Some(at);
    let earlier = "an earlier change: its reason is in the audit log".to_owned();
    let mut markers = Vec::new();
    for period in &drain.drained {
        if within(period.from) {
            let reason = match latest(period.from) && drain.mode == Mode::Drained {
                true => drain.reason.clone(),
                false => earlier.clone(),
            };
            let label = match latest(period.from) {
                true => format!("drained {by}"),
                false => "drained".to_owned(),
            };
            markers.push(Marker {
                at: period.from,
                drained: true,
                label,
                reason,
            });
        }
        if let Some(until) = period.until.filter(|until| within(*until)) {
            let (label, reason) = match (latest(until), drain.mode) {
                (true, Mode::Pinned) => (format!("pinned {by}"), drain.reason.clone()),
                (true, _) => (format!("restored {by}"), drain.reason.clone()),
                (false, _) => ("drain ended".to_owned(), earlier.clone()),
            };
            markers.push(Marker {
                at: until,
                drained: false,
                label,
                reason,
            });
        }
    }
    markers
}

/// The charts of `statuses`' domains (in the chart's order), the table of their numbers after.
pub fn charts(chart: &DomainChart, statuses: &[DomainStatus], now: DateTime<Utc>) -> Markup {
    let end = chart.start(chart.buckets.saturating_sub(1)) + bucket(chart);
    let peak = (chart.series.iter())
        .flat_map(|s| s.clicks.iter().flatten())
        .copied()
        .max()
        .unwrap_or(0);
    let axis = Axis {
        chart,
        max: peak.max(1) as f64,
    };
    let markers_of = |domain: &str| {
        (statuses.iter().find(|s| s.domain == domain))
            .map(|s| markers(&s.drain, chart.from, now.min(end)))
            .unwrap_or_default()
    };
    html! {
        p.hint { "Human clicks per " (bucket_name(chart.bucket_secs)) " on each domain over the "
            "health window, from " (when(Some(chart.from))) " on; every chart on the same scale "
            "(at most " (peak) "), the workspace's other domains in grey. A break in a line is a "
            (bucket_name(chart.bucket_secs)) " with no visit counted on any domain of the "
            "workspace; a zero was measured while others had visits." }
        div.domain-charts {
            @for (i, series) in chart.series.iter().enumerate() {
                @let markers = markers_of(&series.domain);
                @let drained = statuses.iter().any(|s| s.domain == series.domain && s.drain.mode == Mode::Drained);
                (domain_figure(&axis, i, series, &markers, drained))
            }
        }
        (numbers_table(chart, &markers_of))
    }
}

fn bucket(chart: &DomainChart) -> chrono::Duration {
    chrono::Duration::seconds(chart.bucket_secs)
}

fn bucket_name(secs: i64) -> String {
    match secs {
        60 => "minute".into(),
        3600 => "hour".into(),
        86_400 => "day".into(),
        secs => format!("{} minutes", secs / 60),
    }
}

/// Where a bucket and a moment fall on the x axis, and clicks on the y axis.
struct Axis<'a> {
    chart: &'a DomainChart,
    max: f64,
}

impl Axis<'_> {
    fn step(&self) -> f64 {
        WIDTH / self.chart.buckets.saturating_sub(1).max(1) as f64
    }

    fn x(&self, bucket: usize) -> f64 {
        bucket as f64 * self.step()
    }

    fn x_at(&self, at: DateTime<Utc>) -> f64 {
        (self.chart.position(at) * self.step()).clamp(0.0, WIDTH)
    }

    fn y(&self, clicks: i64) -> f64 {
        TOP + (CLICKS_HEIGHT - TOP - AXIS) * (1.0 - clicks as f64 / self.max)
    }
}

/// Runs of consecutive values as polyline points (`None` ends a run).
fn runs(values: impl Iterator<Item = Option<(f64, f64)>>) -> Vec<String> {
    let mut runs: Vec<Vec<String>> = vec![Vec::new()];
    for value in values {
        match value {
            Some((x, y)) => {
                (runs.last_mut().expect("one run")).push(format!("{},{}", fmt(x), fmt(y)))
            }
            None => runs.push(Vec::new()),
        }
    }
    (runs.into_iter().filter(|run| !run.is_empty()))
        .map(|run| run.join(" "))
        .collect()
}

fn fmt(value: f64) -> String {
    format!("{value:.1}")
}

fn domain_figure(
    axis: &Axis,
    index: usize,
    series: &DomainSeries,
    markers: &[Marker],
    drained: bool,
) -> Markup {
    let chart = axis.chart;
    let line = |s: &DomainSeries| {
        runs((s.clicks.iter().enumerate()).map(|(i, c)| c.map(|c| (axis.x(i), axis.y(c)))))
    };
    let total: i64 = series.clicks.iter().flatten().sum();
    let last = series.clicks.iter().rev().flatten().next();
    let mut description = format!(
        "{}: {total} human clicks over the window, {} in the last {} with data",
        series.domain,
        last.map_or("none".into(), i64::to_string),
        bucket_name(chart.bucket_secs)
    );
    for marker in markers {
        description.push_str(&format!(
            "; {} at {}",
            marker.label,
            marker.at.format("%H:%M:%S UTC")
        ));
    }
    let baseline = axis.y(0);
    let own_class = if drained { "clicks drained" } else { "clicks" };
    html! {
        figure.chart.domain-chart data-domain=(series.domain) {
            figcaption { strong { (series.domain) } @if drained { " (drained)" } }
            // Text beside the drawing, in HTML: it keeps its size at any width.
            div.plot {
                div.y-axis aria-hidden="true" { span { (axis.max) } span { "0" } }
                svg.bars xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (CLICKS_HEIGHT) }
                    preserveAspectRatio="none" role="img" aria-labelledby={ "domain-chart-" (index) } {
                    title id={ "domain-chart-" (index) } { (description) }
                    line.grid x1="0" x2=(WIDTH) y1=(fmt(baseline)) y2=(fmt(baseline)) vector-effect="non-scaling-stroke" {}
                    line.grid x1="0" x2=(WIDTH) y1=(fmt(axis.y(axis.max as i64))) y2=(fmt(axis.y(axis.max as i64))) vector-effect="non-scaling-stroke" {}
                    @for other in chart.series.iter().filter(|s| s.domain != series.domain) {
                        @for run in line(other) {
                            polyline.peer fill="none" data-domain=(other.domain) points=(run) vector-effect="non-scaling-stroke" {}
                        }
                    }
                    @for run in line(series) {
                        polyline class=(own_class) fill="none" data-domain=(series.domain) points=(run) vector-effect="non-scaling-stroke" {}
                    }
                    // Points as zero-length round-capped lines: a circle would be stretched.
                    @for (i, clicks) in series.clicks.iter().enumerate() {
                        @if let Some(clicks) = clicks {
                            @let (x, y) = (fmt(axis.x(i)), fmt(axis.y(*clicks)));
                            line class={ "point " (own_class) } x1=(x) x2=(x) y1=(y) y2=(y) vector-effect="non-scaling-stroke" {
                                title { (chart.start(i).format("%H:%M UTC")) ": " (clicks) " human clicks" }
                            }
                        }
                    }
                    @for marker in markers {
                        @let x = fmt(axis.x_at(marker.at));
                        g.marker.drain[marker.drained].restore[!marker.drained] data-at=(marker.at.to_rfc3339()) {
                            title { (marker.label) " at " (marker.at.format("%Y-%m-%d %H:%M:%S UTC")) ": " (marker.reason) }
                            line x1=(x) x2=(x) y1="0" y2=(fmt(baseline)) vector-effect="non-scaling-stroke" {}
                        }
                    }
                }
                div.x-axis aria-hidden="true" {
                    span { (chart.from.format("%H:%M")) }
                    span { (chart.start(chart.buckets.saturating_sub(1)).format("%H:%M UTC")) }
                }
                div.unit { "Human clicks per " (bucket_name(chart.bucket_secs)) "; grey: the workspace's other domains." }
            }
            @if !markers.is_empty() {
                ul.markers {
                    @for marker in markers {
                        li.drain[marker.drained].restore[!marker.drained] {
                            "┆ " (marker.label) " at " (marker.at.format("%H:%M UTC"))
                        }
                    }
                }
            }
            @if series.has_receipts() {
                (rate_strip(axis, series))
            }
        }
    }
}

/// The delivered rate of the domain's messages, 0 to 100%, on the clicks' time axis.
fn rate_strip(axis: &Axis, series: &DomainSeries) -> Markup {
    let y = |percent: f64| 4.0 + (RATE_HEIGHT - 8.0) * (1.0 - percent / 100.0);
    let points =
        runs((0..axis.chart.buckets).map(|i| series.percent(i).map(|p| (axis.x(i), y(p)))));
    let (delivered, finals) =
        (series.delivered.iter().flatten()).fold((0, 0), |(a, b), (d, f)| (a + d, b + f));
    html! {
        div.plot.rate-strip {
            div.y-axis aria-hidden="true" { span { "100%" } span { "0%" } }
            svg.bars xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (RATE_HEIGHT) }
                preserveAspectRatio="none" role="img" aria-label={ (series.domain) ": " (delivered) " of " (finals)
                    " messages with a final report delivered over the window" } {
                line.grid x1="0" x2=(WIDTH) y1=(fmt(y(100.0))) y2=(fmt(y(100.0))) vector-effect="non-scaling-stroke" {}
                line.grid x1="0" x2=(WIDTH) y1=(fmt(y(50.0))) y2=(fmt(y(50.0))) vector-effect="non-scaling-stroke" {}
                line.grid x1="0" x2=(WIDTH) y1=(fmt(y(0.0))) y2=(fmt(y(0.0))) vector-effect="non-scaling-stroke" {}
                @for run in points {
                    polyline.rate fill="none" points=(run) vector-effect="non-scaling-stroke" {}
                }
                @for i in 0..axis.chart.buckets {
                    @if let (Some(percent), Some((d, f))) = (series.percent(i), series.delivered[i]) {
                        @let (x, y) = (fmt(axis.x(i)), fmt(y(percent)));
                        line.point x1=(x) x2=(x) y1=(y) y2=(y) vector-effect="non-scaling-stroke" {
                            title { (axis.chart.start(i).format("%H:%M UTC")) ": " (d) " of " (f) " delivered" }
                        }
                    }
                }
            }
            div.unit { "Delivered, in percent of the messages with a final report: "
                (delivered) " of " (finals) " over the window." }
        }
    }
}

/// Every bucket's numbers: clicks per domain (— where no data), delivered of final reports
/// where receipts exist, and the markers as text.
fn numbers_table(chart: &DomainChart, markers_of: &dyn Fn(&str) -> Vec<Marker>) -> Markup {
    let with_rate: Vec<&DomainSeries> = chart.series.iter().filter(|s| s.has_receipts()).collect();
    html! {
        details.domain-numbers {
            summary { "The charts' numbers" }
            ul {
                @for series in &chart.series {
                    @for marker in markers_of(&series.domain) {
                        li { (series.domain) ": " (marker.label) " at "
                            (marker.at.format("%Y-%m-%d %H:%M:%S UTC")) " — " (marker.reason) }
                    }
                }
            }
            div.wide { table.domain-clicks {
                thead { tr {
                    th scope="col" { "From (UTC)" }
                    @for series in &chart.series { th.num scope="col" { (series.domain) " clicks" } }
                    @for series in &with_rate { th.num scope="col" { (series.domain) " delivered" } }
                } }
                tbody {
                    @for i in 0..chart.buckets {
                        tr {
                            th scope="row" { (chart.start(i).format("%H:%M")) }
                            @for series in &chart.series {
                                td.num { @match series.clicks[i] { Some(n) => (n), None => "—" } }
                            }
                            @for series in &with_rate {
                                td.num { @match series.delivered[i] {
                                    Some((d, f)) => { (d) " of " (f) }
                                    None => "—",
                                } }
                            }
                        }
                    }
                }
            } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shortlink_domains::drain::Period;

    #[test]
    fn the_last_change_has_its_reason_and_earlier_ones_point_to_the_audit_log() {
        let t = |minute: i64| DateTime::from_timestamp(minute * 60, 0).unwrap();
        let drain = Drain {
            mode: Mode::Active,
            by: By::Operator,
            reason: "restored".into(),
            since: Some(t(20)),
            drained: vec![
                Period {
                    from: t(2),
                    until: Some(t(5)),
                },
                Period {
                    from: t(12),
                    until: Some(t(20)),
                },
            ],
            ..Drain::default()
        };
        let found = markers(&drain, t(10), t(30));
        let summary: Vec<_> = (found.iter())
            .map(|m| (m.at, m.drained, m.label.as_str()))
            .collect();
        assert_eq!(
            summary,
            [(t(12), true, "drained"), (t(20), false, "restored by hand")]
        );
        assert_eq!(found[1].reason, "restored");
        assert!(found[0].reason.contains("audit log"));
    }
}
