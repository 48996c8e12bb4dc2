//! The A/B result pages of a link and of a campaign: per variant clicks, conversions and the
//! conversion rate with its confidence interval drawn as a bar with whiskers (SVG drawn on the
//! server, like `chart.rs`), each split's verdict in words and how many more clicks would settle
//! it. The figures are `shortlink_visits::conversions::results` (docs/CONVERSIONS.md).

use super::layout;
use super::operator::Operator;
use super::page::PageResult;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use maud::{html, Markup};
use serde::Deserialize;
use shortlink_api::conversions::arms::{arm_names, ArmNames};
use shortlink_api::AppState;
use shortlink_visits::conversions::results::{ArmResult, SplitResult};
use shortlink_visits::conversions::{ab_result, AbResult, Money, Scope};

#[derive(Debug, Default, Deserialize)]
pub struct AbQuery {
    /// The campaign (campaign page).
    campaign: Option<String>,
    /// Only conversions of this name.
    name: Option<String>,
}

fn percent(rate: f64) -> String {
    format!("{:.2}%", rate * 100.0)
}

/// Where an arm sits in the link's rules: what names it when its URL is unknown (its rule has
/// gone since, or a campaign's links differ), else a hint under the URL.
fn position(arm: &ArmResult) -> String {
    match (arm.rule_index, arm.variant) {
        (None, _) => "the link's own target".to_owned(),
        (Some(rule), None) => format!("rule {}", u16::from(rule) + 1),
        (Some(rule), Some(variant)) => {
            format!("rule {}, arm {}", u16::from(rule) + 1, arm_letter(variant))
        }
    }
}

/// A split's arms as people name them: A, B, C… (the API's `variant` 0, 1, 2…).
fn arm_letter(variant: u8) -> String {
    match variant {
        0..=25 => char::from(b'A' + variant).to_string(),
        _ => (u16::from(variant) + 1).to_string(),
    }
}

/// An arm's name: the URL it sends a click to (its landing page), else its position.
fn arm_label(arm: &ArmResult, names: &ArmNames) -> String {
    (names.get(arm.rule_index, arm.variant).url).unwrap_or_else(|| position(arm))
}

/// Under an arm's name: its rule's condition and its position.
fn arm_hint(arm: &ArmResult, names: &ArmNames) -> String {
    match names.get(arm.rule_index, arm.variant).condition {
        Some(condition) => format!("when {condition} · {}", position(arm)),
        None => position(arm),
    }
}

/// One split's arms as bars of their per-visitor rate, with the interval as whiskers: one row
/// per arm, named in full by its landing page (two URLs sharing their first characters are
/// two names) and its variant, the numbers in text beside the bar.
fn split_chart(arms: &[&ArmResult], names: &ArmNames) -> Markup {
    let top = arms
        .iter()
        .map(|a| a.interval.1)
        .fold(0.0_f64, f64::max)
        .max(0.0001);
    let scale = |rate: f64| 100.0 * rate / top;
    html! {
        figure.chart {
            div.bar-chart.ab role="list" {
                @for arm in arms {
                    @let rate = arm.rate_per_visitor.unwrap_or(0.0);
                    @let (low, high) = (scale(arm.interval.0), scale(arm.interval.1));
                    div.row role="listitem" {
                        div.value {
                            strong.arm-name { (arm_label(arm, names)) } br;
                            span.hint { (position(arm)) } br;
                            (arm.rate_per_visitor.map_or("no visitors".into(), percent))
                            " (interval " (percent(arm.interval.0)) " – " (percent(arm.interval.1)) ")"
                        }
                        svg.track xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 10"
                            preserveAspectRatio="none" aria-hidden="true" {
                            rect.human x="0" y="2" height="6" width=(fmt(scale(rate).max(0.3))) {}
                            line.whisker x1=(fmt(low)) x2=(fmt(high)) y1="5" y2="5" vector-effect="non-scaling-stroke" {}
                            line.whisker x1=(fmt(low)) x2=(fmt(low)) y1="1" y2="9" vector-effect="non-scaling-stroke" {}
                            line.whisker x1=(fmt(high)) x2=(fmt(high)) y1="1" y2="9" vector-effect="non-scaling-stroke" {}
                        }
                    }
                }
            }
            figcaption.legend {
                span.human { "■ converting visitors per visitor" }
                span.hint { "(whiskers: the confidence interval at the split's level; the bars' scale ends at the highest interval's end, "
                    (percent(top)) ")" }
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
            h2 { "Split of rule " (u16::from(split.rule_index) + 1)
                @if let Some(condition) = &control.condition {
                    " (when " (condition) ")"
                }
                ": arm " (arm_letter(split.control))
                @if let Some(url) = &control.url { " (" (url) ")" }
                " is the control" }
            (split_chart(&arms, names))
            @for variant in &split.variants {
                p.verdict { (variant.verdict) }
                @if let Some((control, other)) = variant.more_clicks {
                    @if control + other > 0 && !variant.significant {
                        p.hint { "About " (control) " more clicks on the control and " (other)
                            " on arm " (arm_letter(variant.variant)) " to settle it (80% power, level "
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
