//! `GET /api/v1/links/{code}/ab` and `GET /api/v1/campaigns/{campaign}/ab`: every arm's clicks,
//! conversions and rates, and each split's variants against its control with the test's figures
//! and a verdict in words (`shortlink_visits::conversions::results`).

use super::arms::{arm_names, ArmNames};
use crate::{AppState, ErrorBody, InWorkspace, Json, Path, Query, Result};
use axum::extract::State;
use serde::{Deserialize, Serialize};
use shortlink_visits::conversions::results::{ArmResult, SplitResult, ALPHA, POWER};
use shortlink_visits::conversions::{ab_result, AbResult, Money, Scope};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AbParams {
    /// Count only conversions of this name (`purchase`); all of them without it.
    pub name: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AbView {
    /// The link's code (link results) or `null`.
    pub code: Option<String>,
    /// The campaign (campaign results) or `null`.
    pub campaign: Option<String>,
    /// The conversion name counted, or `null` for all.
    pub name: Option<String>,
    /// Significance level of each split as a whole, and the power `more_visitors` aims at.
    pub alpha: f64,
    pub power: f64,
    /// Every answering rule, variant and the own target (`rule` `null`), all time.
    pub arms: Vec<ArmView>,
    /// Each split rule's variants against its first variant (the control).
    pub splits: Vec<SplitView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ValueView {
    pub currency: String,
    /// Exact decimal text.
    pub total: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ArmView {
    /// `<rule>` or `<rule>.<variant>`; `null`: the link's own target.
    pub rule: Option<String>,
    pub rule_index: Option<u8>,
    pub variant: Option<u8>,
    /// Where the arm sends a click: the variant's or rule's URL, or the link's own target.
    /// `null` when the link's rules no longer have this arm, or, for a campaign, when its links
    /// (the newest 1000) do not all send it to one URL.
    pub url: Option<String>,
    /// The rule's condition in words (`device ios and country PT or BR`, `always`); `null` for
    /// the own target, and as `url` when unknown.
    pub condition: Option<String>,
    /// Human clicks and their distinct visitors.
    pub clicks: i64,
    pub unique_visitors: i64,
    pub conversions: i64,
    /// Distinct visitors with a conversion.
    pub converting_visitors: i64,
    /// Conversions per human click.
    pub rate_per_click: Option<f64>,
    /// Converting visitors per unique visitor: what the test compares.
    pub rate_per_visitor: Option<f64>,
    /// Wilson interval of `rate_per_visitor` at the split's level: [low, high].
    pub rate_interval: [f64; 2],
    /// Summed value per currency.
    pub values: Vec<ValueView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VariantView {
    pub variant: u8,
    /// This variant's `rate_per_visitor` minus the control's.
    pub difference: f64,
    /// Newcombe's interval of the difference at the split's level: [low, high].
    pub difference_interval: [f64; 2],
    /// Pooled two-proportion z statistic and its two-sided p-value (`null`: nothing to test yet).
    pub z: Option<f64>,
    pub p_value: Option<f64>,
    /// `p_value` below the split's `alpha`.
    pub significant: bool,
    /// Visitors each arm needs to tell the rates seen so far apart at 80% power.
    pub visitors_needed: Option<i64>,
    /// What is missing of that: [control, variant].
    pub more_visitors: Option<[i64; 2]>,
    /// The same in clicks, at each arm's clicks per visitor: [control, variant].
    pub more_clicks: Option<[i64; 2]>,
    /// The result in words.
    pub verdict: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SplitView {
    pub rule_index: u8,
    /// The control's variant index (the split's first).
    pub control: u8,
    /// 0.05 divided by the number of comparisons (Bonferroni).
    pub alpha: f64,
    pub variants: Vec<VariantView>,
}

fn arm(arm: ArmResult, names: &ArmNames) -> ArmView {
    let counts = arm.counts;
    let name = names.get(arm.rule_index, arm.variant);
    ArmView {
        url: name.url,
        condition: name.condition,
        rule: counts.rule,
        rule_index: arm.rule_index,
        variant: arm.variant,
        clicks: counts.clicks,
        unique_visitors: counts.visitors,
        conversions: counts.conversions,
        converting_visitors: counts.converting_visitors,
        rate_per_click: arm.rate_per_click,
        rate_per_visitor: arm.rate_per_visitor,
        rate_interval: [arm.interval.0, arm.interval.1],
        values: (counts.values.into_iter())
            .map(|(currency, exponent, minor)| ValueView {
                total: Money::text(minor, exponent),
                currency,
            })
            .collect(),
    }
}

fn split(split: SplitResult) -> SplitView {
    SplitView {
        rule_index: split.rule_index,
        control: split.control,
        alpha: split.alpha,
        variants: (split.variants.into_iter())
            .map(|v| VariantView {
                variant: v.variant,
                difference: v.comparison.difference,
                difference_interval: [v.comparison.interval.0, v.comparison.interval.1],
                z: v.comparison.z,
                p_value: v.comparison.p_value,
                significant: v.significant,
                visitors_needed: v.visitors_needed,
                more_visitors: v.more_visitors.map(|(a, b)| [a, b]),
                more_clicks: v.more_clicks.map(|(a, b)| [a, b]),
                verdict: v.verdict,
            })
            .collect(),
    }
}

fn view(
    code: Option<String>,
    campaign: Option<String>,
    name: Option<String>,
    r: AbResult,
    names: &ArmNames,
) -> AbView {
    AbView {
        code,
        campaign,
        name,
        alpha: ALPHA,
        power: POWER,
        arms: (r.arms.into_iter()).map(|a| arm(a, names)).collect(),
        splits: r.splits.into_iter().map(split).collect(),
    }
}

/// The A/B result of one link: per arm clicks, conversions, rates, values; per split the
/// variants against the control.
#[utoipa::path(get, path = "/api/v1/links/{code}/ab", tag = "conversions",
    params(("code" = String, Path), AbParams),
    responses(
        (status = 200, body = AbView),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ))]
pub async fn link_ab(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(code): Path<String>,
    Query(params): Query<AbParams>,
) -> Result<Json<AbView>> {
    let link = state.links.get(workspace, &code).await?;
    let scope = Scope::Link(link.code.clone());
    let store = state.analytics.store.conversions();
    let arms = store
        .arm_counts(workspace, &scope, params.name.as_deref())
        .await?;
    let names = ArmNames::of_link(&link);
    Ok(Json(view(
        Some(link.code),
        None,
        params.name,
        ab_result(arms),
        &names,
    )))
}

/// The A/B result of a campaign: its links' clicks and conversions summed per rule and variant.
#[utoipa::path(get, path = "/api/v1/campaigns/{campaign}/ab", tag = "conversions",
    params(("campaign" = String, Path), AbParams),
    responses(
        (status = 200, body = AbView),
        (status = 400, body = ErrorBody),
        (status = 404, description = "no link of this workspace has this campaign", body = ErrorBody),
    ))]
pub async fn campaign_ab(
    State(state): State<AppState>,
    InWorkspace(workspace): InWorkspace,
    Path(campaign): Path<String>,
    Query(params): Query<AbParams>,
) -> Result<Json<AbView>> {
    // 404 unless the workspace has a link in it.
    state.links.campaign(workspace, &campaign).await?;
    let scope = Scope::Campaign(campaign.clone());
    let store = state.analytics.store.conversions();
    let arms = store
        .arm_counts(workspace, &scope, params.name.as_deref())
        .await?;
    let names = arm_names(&state, workspace, &scope).await?;
    Ok(Json(view(
        None,
        Some(campaign),
        params.name,
        ab_result(arms),
        &names,
    )))
}
