//! Charts drawn on the server: the marks are SVG, stretched to the figure's width; the axes,
//! ticks, units and labels are HTML beside it, so that text keeps its size on a phone (SVG text
//! shrinks with the drawing) and labels never collide (they are laid out as text is). Under each
//! chart, the numbers it draws as a table. No script, no library.

use maud::{html, Markup};
use shortlink_api::stats::PointView;

/// The drawing's own units: stretched to the figure (`preserveAspectRatio="none"`).
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 200.0;

/// The least "round" number (1, 2 or 5 times a power of ten) at or above `peak`: the top tick.
fn round_up(peak: i64) -> i64 {
    let mut unit = 1;
    loop {
        for step in [1, 2, 5] {
            if step * unit >= peak {
                return step * unit;
            }
        }
        unit *= 10;
    }
}

/// The x axis: the first, middle and last buckets' labels.
fn x_axis(labels: &[String]) -> Markup {
    let middle = labels.len() / 2;
    html! {
        div.x-axis aria-hidden="true" {
            @if let Some(first) = labels.first() { span { (first) } }
            @if labels.len() > 2 { span { (labels[middle]) } }
            @if labels.len() > 1 { span { (labels[labels.len() - 1]) } }
        }
    }
}

/// Clicks per bucket as stacked bars (humans, bots, previews, scanners); `label` formats a bucket's
/// start, `unit` says what a bar counts ("visits per day, UTC").
pub fn clicks(points: &[PointView], label: impl Fn(&PointView) -> String, unit: &str) -> Markup {
    let sum =
        |p: &PointView| p.counts.humans + p.counts.bots + p.counts.previews + p.counts.scanners;
    let peak = points.iter().map(sum).max().unwrap_or(0);
    let top = round_up(peak.max(1));
    let total: i64 = points.iter().map(|p| p.counts.humans).sum();
    let step = WIDTH / points.len().max(1) as f64;
    let bar = (step * 0.8).max(1.0);
    let scale = HEIGHT / top as f64;
    let labels: Vec<String> = points.iter().map(&label).collect();
    let description = format!(
        "{total} human clicks over {} buckets, at most {peak} visits in one",
        points.len()
    );
    html! {
        figure.chart {
            div.plot {
                div.y-axis aria-hidden="true" { span { (top) } span { (top / 2) } span { "0" } }
                svg.bars xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                    preserveAspectRatio="none" role="img" aria-label=(description) {
                    @for y in [0.0, HEIGHT / 2.0, HEIGHT] {
                        line.grid x1="0" x2=(WIDTH) y1=(fmt(y)) y2=(fmt(y)) vector-effect="non-scaling-stroke" {}
                    }
                    @for (i, point) in points.iter().enumerate() {
                        @let x = i as f64 * step;
                        @let c = &point.counts;
                        @let (h, b, p) = (c.humans as f64 * scale, c.bots as f64 * scale, c.previews as f64 * scale);
                        @let s = c.scanners as f64 * scale;
                        g {
                            title { (labels[i]) ": " (c.humans) " humans, " (c.bots) " bots, " (c.previews) " previews, " (c.scanners) " scanners" }
                            rect.human x=(fmt(x)) y=(fmt(HEIGHT - h)) width=(fmt(bar)) height=(fmt(h)) {}
                            rect.bot x=(fmt(x)) y=(fmt(HEIGHT - h - b)) width=(fmt(bar)) height=(fmt(b)) {}
                            rect.preview x=(fmt(x)) y=(fmt(HEIGHT - h - b - p)) width=(fmt(bar)) height=(fmt(p)) {}
                            rect.scanner x=(fmt(x)) y=(fmt(HEIGHT - h - b - p - s)) width=(fmt(bar)) height=(fmt(s)) {}
                        }
                    }
                }
                (x_axis(&labels))
                div.unit { "Bars: " (unit) "." }
            }
            figcaption.legend {
                span.human { "■ humans" } span.bot { "■ bots" } span.preview { "■ link previews" } span.scanner { "■ scanners" }
                @if peak == 0 { span.hint { "(no visits in this period)" } }
            }
            details.numbers {
                summary { "The numbers" }
                table.chart-numbers {
                    thead { tr { th scope="col" { "From" } th.num scope="col" { "Humans" } th.num scope="col" { "Bots" } th.num scope="col" { "Previews" } th.num scope="col" { "Scanners" } } }
                    tbody {
                        @for (i, point) in points.iter().enumerate() {
                            tr { td { (labels[i]) } td.num { (point.counts.humans) } td.num { (point.counts.bots) } td.num { (point.counts.previews) } td.num { (point.counts.scanners) } }
                        }
                    }
                }
            }
        }
    }
}

fn fmt(value: f64) -> String {
    format!("{value:.1}")
}

/// A funnel: one bar per step, its length the step's share of the first; each step beside its
/// share of the step before it, so that a step counted apart from the one above (a click
/// without a receipt) is never drawn as a part of it unsaid.
pub fn funnel(stages: &[(&str, i64)]) -> Markup {
    let first = stages.first().map_or(0, |stage| stage.1).max(1);
    let share = |n: i64, of: i64| n as f64 * 100.0 / of.max(1) as f64;
    html! {
        figure.chart {
            div.bar-chart role="list" {
                @for (i, (name, n)) in stages.iter().enumerate() {
                    div.row role="listitem" {
                        div.value { strong { (name) } " " (n)
                            @if i > 0 { " (" (fmt(share(*n, stages[i - 1].1))) "% of " (stages[i - 1].0.to_lowercase()) ")" } }
                        // A bar without inline style (the CSP): a stretched SVG of 100 units.
                        svg.track xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 1"
                            preserveAspectRatio="none" aria-hidden="true" {
                            rect.stage x="0" y="0" height="1" width=(fmt(share(*n, first).max(0.3))) {}
                        }
                    }
                }
            }
        }
    }
}

/// A rate in percent over time as a line, broken where a bucket has no value; `label` gives a
/// point's exact numbers (its tooltip and its row in the table), `x_label` its time on the axis.
pub fn rate_line<P>(
    points: &[P],
    percent: impl Fn(&P) -> Option<f64>,
    label: impl Fn(&P) -> String,
    x_label: impl Fn(&P) -> String,
) -> Markup {
    let step = WIDTH / points.len().saturating_sub(1).max(1) as f64;
    let y = |percent: f64| HEIGHT * (1.0 - percent / 100.0);
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
    let times: Vec<String> = points.iter().map(&x_label).collect();
    html! {
        figure.chart {
            div.plot {
                div.y-axis aria-hidden="true" { span { "100%" } span { "50%" } span { "0%" } }
                svg.bars.line xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                    preserveAspectRatio="none" role="img" aria-label=(description) {
                    @for y in [0.0, HEIGHT / 2.0, HEIGHT] {
                        line.grid x1="0" x2=(WIDTH) y1=(fmt(y)) y2=(fmt(y)) vector-effect="non-scaling-stroke" {}
                    }
                    @for run in runs.iter().filter(|run| !run.is_empty()) {
                        polyline.rate fill="none" points=(run.join(" ")) vector-effect="non-scaling-stroke" {}
                    }
                    // Points as zero-length round-capped lines: a circle would be stretched.
                    @for (i, point) in points.iter().enumerate() {
                        @if let Some(value) = percent(point) {
                            @let (x, y) = (fmt(i as f64 * step), fmt(y(value)));
                            line.point x1=(x) x2=(x) y1=(y) y2=(y) vector-effect="non-scaling-stroke" {
                                title { (label(point)) }
                            }
                        }
                    }
                }
                (x_axis(&times))
                div.unit { "Delivered, in percent of the messages with a final report (UTC)." }
            }
            figcaption.legend { span.hint { (description) } }
            details.numbers {
                summary { "The numbers" }
                table.chart-numbers {
                    thead { tr { th scope="col" { "From" } th scope="col" { "Delivered" } } }
                    tbody { @for point in points { tr { td { (x_label(point)) } td { (label(point)) } } } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_top_tick_is_round() {
        let tops: Vec<i64> = [1, 3, 7, 10, 11, 293, 1520].map(super::round_up).to_vec();
        assert_eq!(tops, [1, 5, 10, 10, 20, 500, 2000]);
    }
}
