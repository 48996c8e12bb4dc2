//! Clicks over time as an SVG drawn on the server: stacked bars (humans, bots, previews) per
//! bucket, a `<title>` per bar for the exact numbers, and a text summary for screen readers.
//! No script, no library: a few hundred rectangles are all a chart of 30 days or 48 hours needs.

use crate::http::stats::PointView;
use maud::{html, Markup};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 200.0;
const AXIS: f64 = 18.0;

/// `label` formats a bucket's start for its tooltip and the axis.
pub fn clicks(points: &[PointView], label: impl Fn(&PointView) -> String) -> Markup {
    let peak = points
        .iter()
        .map(|p| p.counts.humans + p.counts.bots + p.counts.previews)
        .max()
        .unwrap_or(0);
    let max = peak.max(1);
    let total: i64 = points.iter().map(|p| p.counts.humans).sum();
    let step = WIDTH / points.len().max(1) as f64;
    let bar = (step * 0.8).max(1.0);
    let scale = (HEIGHT - AXIS) / max as f64;
    let description = format!(
        "{} human clicks over {} buckets, at most {peak} visits in one",
        total,
        points.len()
    );
    html! {
        figure.chart {
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                role="img" aria-label=(description) {
                @for (i, point) in points.iter().enumerate() {
                    @let x = i as f64 * step;
                    @let c = &point.counts;
                    @let (h, b, p) = (c.humans as f64 * scale, c.bots as f64 * scale, c.previews as f64 * scale);
                    @let base = HEIGHT - AXIS;
                    g {
                        title { (label(point)) ": " (c.humans) " humans, " (c.bots) " bots, " (c.previews) " previews" }
                        rect.human x=(fmt(x)) y=(fmt(base - h)) width=(fmt(bar)) height=(fmt(h)) {}
                        rect.bot x=(fmt(x)) y=(fmt(base - h - b)) width=(fmt(bar)) height=(fmt(b)) {}
                        rect.preview x=(fmt(x)) y=(fmt(base - h - b - p)) width=(fmt(bar)) height=(fmt(p)) {}
                    }
                }
                @if let (Some(first), Some(last)) = (points.first(), points.last()) {
                    text x="0" y=(fmt(HEIGHT - 4.0)) font-size="12" { (label(first)) }
                    text x=(fmt(WIDTH)) y=(fmt(HEIGHT - 4.0)) font-size="12" text-anchor="end" { (label(last)) }
                }
            }
            figcaption.legend {
                span.human { "■ humans" } span.bot { "■ bots" } span.preview { "■ link previews" }
                @if peak == 0 {
                    span.hint { "(no visits in this period)" }
                } @else {
                    span.hint { "(tallest bar: " (peak) @if peak == 1 { " visit)" } @else { " visits)" } }
                }
            }
        }
    }
}

fn fmt(value: f64) -> String {
    format!("{value:.1}")
}

/// A funnel: one centred bar per stage, its width the stage's share of the first, labelled
/// with the count and that share.
pub fn funnel(stages: &[(&str, i64)]) -> Markup {
    const ROW: f64 = 34.0;
    let height = ROW * stages.len() as f64;
    let top = stages.first().map_or(0, |stage| stage.1).max(1);
    let share = |n: i64| n as f64 * 100.0 / top as f64;
    let description = (stages.iter())
        .map(|(name, n)| format!("{name} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    html! {
        figure.chart {
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (height) }
                role="img" aria-label=(description) {
                @for (i, (name, n)) in stages.iter().enumerate() {
                    @let width = (WIDTH * share(*n) / 100.0).max(1.0);
                    @let y = i as f64 * ROW;
                    g {
                        title { (name) ": " (n) " (" (fmt(share(*n))) "% of " (stages[0].0) ")" }
                        rect.stage x=(fmt((WIDTH - width) / 2.0)) y=(fmt(y + 2.0))
                            width=(fmt(width)) height=(fmt(ROW - 4.0)) {}
                        text x=(fmt(WIDTH / 2.0)) y=(fmt(y + ROW / 2.0 + 5.0)) font-size="14"
                            text-anchor="middle" { (name) " " (n) }
                    }
                }
            }
        }
    }
}

/// A rate in percent over time as a line, broken where a bucket has no value; a `<title>` per
/// point gives its exact numbers (`label` formats them).
pub fn rate_line<P>(
    points: &[P],
    percent: impl Fn(&P) -> Option<f64>,
    label: impl Fn(&P) -> String,
) -> Markup {
    let step = WIDTH / points.len().saturating_sub(1).max(1) as f64;
    let y = |percent: f64| (HEIGHT - AXIS) * (1.0 - percent / 100.0);
    // Runs of points with a value, each its own line.
    let mut runs: Vec<Vec<String>> = vec![Vec::new()];
    for (i, point) in points.iter().enumerate() {
        match percent(point) {
            Some(value) => (runs.last_mut().unwrap()).push(format!(
                "{},{}",
                fmt(i as f64 * step),
                fmt(y(value))
            )),
            None => runs.push(Vec::new()),
        }
    }
    let valued: Vec<f64> = points.iter().filter_map(&percent).collect();
    let description = match (
        valued.iter().copied().reduce(f64::min),
        valued.iter().copied().reduce(f64::max),
    ) {
        (Some(low), Some(high)) => format!(
            "delivered rate over {} buckets, from {low:.0}% to {high:.0}%",
            points.len()
        ),
        _ => "no message has a final report yet".to_owned(),
    };
    html! {
        figure.chart {
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                role="img" aria-label=(description) {
                line.grid x1="0" x2=(WIDTH) y1=(fmt(y(100.0))) y2=(fmt(y(100.0))) {}
                line.grid x1="0" x2=(WIDTH) y1=(fmt(y(50.0))) y2=(fmt(y(50.0))) {}
                @for run in runs.iter().filter(|run| !run.is_empty()) {
                    polyline.rate fill="none" points=(run.join(" ")) {}
                }
                @for (i, point) in points.iter().enumerate() {
                    @if let Some(value) = percent(point) {
                        circle.rate cx=(fmt(i as f64 * step)) cy=(fmt(y(value))) r="3" {
                            title { (label(point)) }
                        }
                    }
                }
                text x="0" y=(fmt(y(100.0) + 12.0)) font-size="12" { "100%" }
                text x="0" y=(fmt(y(50.0) + 12.0)) font-size="12" { "50%" }
            }
            figcaption.legend { span.hint { (description) } }
        }
    }
}
