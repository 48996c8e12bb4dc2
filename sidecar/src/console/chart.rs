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
