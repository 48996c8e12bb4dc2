//! The A/B result pages of a link and of a campaign: per variant clicks, conversions and the
//! conversion rate with its confidence interval drawn as a bar with whiskers (SVG drawn on the
//! server, like `chart.rs`), each split's verdict in words and how many more clicks would settle
//! it. The figures are `shortlink_visits::conversions::results` (docs/CONVERSIONS.md).

use super::layout;
use super::operator::Operator;
use super::page::PageResult;
use crate::http::conversions::arms::{arm_names, ArmNames};
use crate::http::AppState;
use crate::visits::conversions::results::{ArmResult, SplitResult};
use crate::visits::conversions::{ab_result, AbResult, Money, Scope};
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use maud::{html, Markup};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
pub struct AbQuery {
    /// The campaign (campaign page).
    campaign: Option<String>,
    /// Only conversions of this name.
    name: Option<String>,
}

const WIDTH: f64 = 720.0;
const ROW: f64 = 34.0;
const LABEL: f64 = 150.0;

fn percent(rate: f64) -> String {
    format!("{:.2}%", rate * 100.0)
}

/// Where an arm sits in the link's rules: what names it when its URL is unknown (its rule has
/// gone since, or a campaign's links differ), else a hint under the URL.
fn position(arm: &ArmResult) -> String {
    match (arm.rule_index, arm.variant) {
        (None, _) => "own target".to_owned(),
        (Some(rule), None) => format!("rule {rule}"),
        (Some(rule), Some(variant)) => format!("rule {rule}, variant {variant}"),
    }
}

/// An arm's name: the URL it sends a click to (its landing page), else its position.
fn arm_label(arm: &ArmResult, names: &ArmNames) -> String {
    (names.get(arm.rule_index, arm.variant).url).unwrap_or_else(|| position(arm))
}

/// A label short enough for the chart's left column: no scheme, at most 24 characters.
fn short_label(label: &str) -> String {
    let bare = label
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    match bare.char_indices().nth(23) {
        Some((end, _)) => format!("{}…", &bare[..end]),
        None => bare.to_owned(),
    }
}

/// Under an arm's name: its rule's condition and its position.
fn arm_hint(arm: &ArmResult, names: &ArmNames) -> String {
    match names.get(arm.rule_index, arm.variant).condition {
        Some(condition) => format!("when {condition} · {}", position(arm)),
        None => position(arm),
    }
}

/// One split's arms as bars of their per-visitor rate, with the interval as whiskers.
fn split_chart(arms: &[&ArmResult], names: &ArmNames) -> Markup {
    let top = arms
        .iter()
        .map(|a| a.interval.1)
        .fold(0.0_f64, f64::max)
        .max(0.01);
    let scale = (WIDTH - LABEL - 90.0) / top;
    let height = ROW * arms.len() as f64 + 10.0;
    let description = arms
        .iter()
        .map(|a| {
            format!(
                "{}: {} (from {} to {})",
                arm_label(a, names),
                a.rate_per_visitor.map_or("no visitors".into(), percent),
                percent(a.interval.0),
                percent(a.interval.1)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    html! {
        figure.chart {
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (fmt(height)) }
                role="img" aria-label={ "Conversion rate per visitor with its 95% interval: " (description) } {
                @for (i, arm) in arms.iter().enumerate() {
                    @let y = 5.0 + i as f64 * ROW;
                    @let rate = arm.rate_per_visitor.unwrap_or(0.0);
                    @let (low, high) = (LABEL + arm.interval.0 * scale, LABEL + arm.interval.1 * scale);
                    @let middle = y + ROW / 2.0 - 2.0;
                    g {
                        title { (arm_label(arm, names)) ": " (percent(rate)) ", interval " (percent(arm.interval.0)) " to " (percent(arm.interval.1)) }
                        text x="0" y=(fmt(middle + 4.0)) font-size="12" { (short_label(&arm_label(arm, names))) }
                        rect.human x=(fmt(LABEL)) y=(fmt(y + 4.0)) width=(fmt(rate * scale)) height=(fmt(ROW - 12.0)) {}
                        line x1=(fmt(low)) x2=(fmt(high)) y1=(fmt(middle)) y2=(fmt(middle)) stroke="currentColor" stroke-width="2" {}
                        line x1=(fmt(low)) x2=(fmt(low)) y1=(fmt(middle - 6.0)) y2=(fmt(middle + 6.0)) stroke="currentColor" stroke-width="2" {}
                        line x1=(fmt(high)) x2=(fmt(high)) y1=(fmt(middle - 6.0)) y2=(fmt(middle + 6.0)) stroke="currentColor" stroke-width="2" {}
                        text x=(fmt(high + 6.0)) y=(fmt(middle + 4.0)) font-size="12" { (percent(rate)) }
                    }
                }
            }
            figcaption.legend {
                span.human { "■ converting visitors per visitor" }
                span.hint { "(whiskers: the confidence interval at the split's level)" }
            }
        }
    }
}

fn fmt(value: f64) -> String {
    format!("{value:.1}")
}

fn arms_table(arms: &[ArmResult], names: &ArmNames) -> Markup {
    html! {
        div.wide { table {
            thead { tr {
                th scope="col" { "Arm" } th.num scope="col" { "Clicks" } th.num scope="col" { "Visitors" }
                th.num scope="col" { "Conversions" } th.num scope="col" { "Converting visitors" }
                th.num scope="col" { "Per click" } th.num scope="col" { "Per visitor" }
                th scope="col" { "Interval" } th scope="col" { "Value" }
            } }
            tbody {
                @for arm in arms {
                    @let c = &arm.counts;
                    tr {
                        td.arm { (arm_label(arm, names)) br; span.hint { (arm_hint(arm, names)) } }
                        td.num { (c.clicks) } td.num { (c.visitors) }
                        td.num { (c.conversions) } td.num { (c.converting_visitors) }
                        td.num { (arm.rate_per_click.map_or("—".into(), percent)) }
                        td.num { (arm.rate_per_visitor.map_or("—".into(), percent)) }
                        td { (percent(arm.interval.0)) " – " (percent(arm.interval.1)) }
                        td {
                            @for (i, (currency, exponent, minor)) in c.values.iter().enumerate() {
                                @if i > 0 { ", " }
                                (Money::text(*minor, *exponent)) " " (currency)
                            }
                        }
                    }
                }
                @if arms.is_empty() { tr { td colspan="9" { "No clicks yet." } } }
            }
        } }
    }
}

fn split_section(result: &AbResult, split: &SplitResult, names: &ArmNames) -> Markup {
    let arms: Vec<&ArmResult> = (result.arms.iter())
        .filter(|a| a.rule_index == Some(split.rule_index) && a.variant.is_some())
        .collect();
    html! {
        section {
            @let control = names.get(Some(split.rule_index), Some(split.control));
            h2 { "Split of rule " (split.rule_index)
                @if let Some(condition) = &control.condition {
                    " (when " (condition) ")"
                }
                ": variant " (split.control)
                @if let Some(url) = &control.url { " (" (url) ")" }
                " is the control" }
            (split_chart(&arms, names))
            @for variant in &split.variants {
                p.verdict { (variant.verdict) }
                @if let Some((control, other)) = variant.more_clicks {
                    @if control + other > 0 && !variant.significant {
                        p.hint { "About " (control) " more clicks on the control and " (other)
                            " on variant " (variant.variant) " to settle it (80% power, level "
                            (format!("{:.3}", split.alpha)) ")." }
                    }
                }
            }
        }
    }
}

fn result_body(
    title: &str,
    result: &AbResult,
    names: &ArmNames,
    name: Option<&str>,
    action: &str,
    hidden: Option<(&str, &str)>,
) -> Markup {
    html! {
        h1 { (title) }
        form.inline method="get" action=(action) {
            @if let Some((field, value)) = hidden { input type="hidden" name=(field) value=(value); }
            label { "Conversion name " input type="text" name="name" value=(name.unwrap_or("")) placeholder="all"; }
            button type="submit" { "Show" }
        }
        @if result.splits.is_empty() {
            p.hint { "No split rule has had clicks yet: the arms below are the link's own target and its rules." }
        }
        @for split in &result.splits { (split_section(result, split, names)) }
        section {
            h2 { "Every arm, all time" }
            (arms_table(&result.arms, names))
            p.hint { "Per visitor: distinct visitors who converted, of distinct human visitors; \
                the test compares these (docs/CONVERSIONS.md)." }
        }
    }
}

pub async fn link(
    State(state): State<AppState>,
    operator: Operator,
    Path(code): Path<String>,
    Query(query): Query<AbQuery>,
) -> PageResult {
    let link = state.links.get(operator.workspace, &code).await?;
    let store = state.analytics.store.conversions();
    let arms = store
        .arm_counts(
            operator.workspace,
            &Scope::Link(link.code.clone()),
            query.name.as_deref(),
        )
        .await?;
    let names = ArmNames::of_link(&link);
    let title = format!("A/B results of link {}", link.code);
    let action = format!("/console/links/{}/ab", link.code);
    let body = result_body(
        &title,
        &ab_result(arms),
        &names,
        query.name.as_deref(),
        &action,
        None,
    );
    Ok(layout::page(&operator, &title, body).into_response())
}

pub async fn campaign(
    State(state): State<AppState>,
    operator: Operator,
    Query(query): Query<AbQuery>,
) -> PageResult {
    let campaign = query.campaign.clone().unwrap_or_default();
    // Not found unless a link of the workspace has it.
    state.links.campaign(operator.workspace, &campaign).await?;
    let store = state.analytics.store.conversions();
    let arms = store
        .arm_counts(
            operator.workspace,
            &Scope::Campaign(campaign.clone()),
            query.name.as_deref(),
        )
        .await?;
    let scope = Scope::Campaign(campaign.clone());
    let names = arm_names(&state, operator.workspace, &scope).await?;
    let title = format!("A/B results of campaign {campaign}");
    let body = result_body(
        &title,
        &ab_result(arms),
        &names,
        query.name.as_deref(),
        "/console/campaigns/ab",
        Some(("campaign", &campaign)),
    );
    Ok(layout::page(&operator, &title, body).into_response())
}
