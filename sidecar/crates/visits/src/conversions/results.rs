//! A link's or campaign's A/B result from its per-rule counts ([`ArmCounts`]): every arm's rates
//! with a Wilson interval, and for each split the variants against its first variant (the
//! control) with [`significance`], judged at a Bonferroni-corrected level (docs/CONVERSIONS.md).

use super::significance::{self, Arm, Comparison};
use super::store::ArmCounts;

/// Significance level of one split as a whole, and the power the "more visitors" figure aims at.
pub const ALPHA: f64 = 0.05;
pub const POWER: f64 = 0.8;

/// One arm with its rates.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmResult {
    pub counts: ArmCounts,
    /// (rule index, variant index) parsed from `counts.rule`; `None` for the own target.
    pub rule_index: Option<u8>,
    pub variant: Option<u8>,
    /// Conversions per human click.
    pub rate_per_click: Option<f64>,
    /// Converting visitors per visitor: the proportion the test compares.
    pub rate_per_visitor: Option<f64>,
    /// Wilson interval of `rate_per_visitor` at the split's level.
    pub interval: (f64, f64),
}

/// A variant against its split's control.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantResult {
    pub variant: u8,
    pub comparison: Comparison,
    /// Below the split's corrected level.
    pub significant: bool,
    /// Visitors each arm needs for [`POWER`] at the observed rates; `None` when it cannot be
    /// said (equal rates, a rate of 0 or 1).
    pub visitors_needed: Option<i64>,
    /// What is missing of it: (control, variant), never negative.
    pub more_visitors: Option<(i64, i64)>,
    /// The same in clicks, at each arm's clicks per visitor so far.
    pub more_clicks: Option<(i64, i64)>,
    pub verdict: String,
}

/// One split rule: its control and the other variants compared with it.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitResult {
    pub rule_index: u8,
    pub control: u8,
    /// ALPHA divided by the number of comparisons (Bonferroni).
    pub alpha: f64,
    pub variants: Vec<VariantResult>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct AbResult {
    pub arms: Vec<ArmResult>,
    pub splits: Vec<SplitResult>,
}

fn arm(counts: &ArmCounts) -> Arm {
    // A converting visitor whose click was not a human one (a bot's id reused) is not a trial.
    Arm {
        successes: counts.converting_visitors.min(counts.visitors),
        trials: counts.visitors,
    }
}

fn ratio(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

fn percent(rate: f64) -> String {
    format!("{:.2}%", rate * 100.0)
}

/// The result of the arms, in the order given.
pub fn ab_result(arms: Vec<ArmCounts>) -> AbResult {
    let chosen = |counts: &ArmCounts| {
        (counts.rule.as_deref())
            .and_then(|text| shortlink_wire::event::parse_chosen(text.as_bytes()))
    };
    // The splits: rules with variants, each with its variants in order.
    let mut splits: std::collections::BTreeMap<u8, Vec<(u8, &ArmCounts)>> = Default::default();
    for counts in &arms {
        if let Some(c) = chosen(counts) {
            if let Some(variant) = c.variant {
                splits.entry(c.rule).or_default().push((variant, counts));
            }
        }
    }
    let mut results = AbResult::default();
    for (rule_index, mut variants) in splits {
        variants.sort_by_key(|(variant, _)| *variant);
        let Some(&(control, control_counts)) = variants.first() else {
            continue;
        };
        let alpha = ALPHA / (variants.len().saturating_sub(1).max(1)) as f64;
        let compared = variants[1..]
            .iter()
            .map(|&(variant, counts)| compare(control, control_counts, variant, counts, alpha))
            .collect();
        results.splits.push(SplitResult {
            rule_index,
            control,
            alpha,
            variants: compared,
        });
    }
    let level = |counts: &ArmCounts| -> f64 {
        let c = chosen(counts);
        (c.and_then(|c| c.variant.map(|_| c.rule)))
            .and_then(|rule| results.splits.iter().find(|s| s.rule_index == rule))
            .map_or(ALPHA, |split| split.alpha)
    };
    let arm_results = arms
        .iter()
        .map(|counts| {
            let c = chosen(counts);
            let z = significance::normal_quantile(1.0 - level(counts) / 2.0);
            ArmResult {
                rule_index: c.map(|c| c.rule),
                variant: c.and_then(|c| c.variant),
                rate_per_click: ratio(counts.conversions, counts.clicks),
                rate_per_visitor: arm(counts).rate(),
                interval: significance::wilson(arm(counts), z),
                counts: counts.clone(),
            }
        })
        .collect();
    results.arms = arm_results;
    results
}

fn compare(
    control: u8,
    control_counts: &ArmCounts,
    variant: u8,
    counts: &ArmCounts,
    alpha: f64,
) -> VariantResult {
    let (a, b) = (arm(control_counts), arm(counts));
    let comparison = significance::compare(a, b, alpha);
    let significant = comparison.p_value.is_some_and(|p| p < alpha);
    let needed = match (a.rate(), b.rate()) {
        (Some(ra), Some(rb)) => significance::visitors_needed(ra, rb, alpha, POWER),
        _ => None,
    }
    .filter(|n| n.is_finite() && *n < i64::MAX as f64)
    .map(|n| n.ceil() as i64);
    let more_visitors = needed.map(|n| ((n - a.trials).max(0), (n - b.trials).max(0)));
    let clicks_per_visitor = |c: &ArmCounts| ratio(c.clicks, c.visitors).unwrap_or(1.0);
    let more_clicks = more_visitors.map(|(ma, mb)| {
        (
            (ma as f64 * clicks_per_visitor(control_counts)).ceil() as i64,
            (mb as f64 * clicks_per_visitor(counts)).ceil() as i64,
        )
    });
    let verdict = verdict(
        control,
        variant,
        &comparison,
        significant,
        alpha,
        a,
        b,
        more_visitors,
    );
    VariantResult {
        variant,
        comparison,
        significant,
        visitors_needed: needed,
        more_visitors,
        more_clicks,
        verdict,
    }
}

#[allow(clippy::too_many_arguments)]
fn verdict(
    control: u8,
    variant: u8,
    comparison: &Comparison,
    significant: bool,
    alpha: f64,
    a: Arm,
    b: Arm,
    more: Option<(i64, i64)>,
) -> String {
    let (Some(ra), Some(rb), Some(p)) = (a.rate(), b.rate(), comparison.p_value) else {
        return format!(
            "Not enough data yet: variant {variant} and the control (variant {control}) need \
             visitors and at least one conversion between them."
        );
    };
    if significant {
        let which = if rb > ra { "better" } else { "worse" };
        return format!(
            "Variant {variant} converts {which} than the control (variant {control}): {} against \
             {} of visitors (p = {p:.4}, below {alpha}).",
            percent(rb),
            percent(ra)
        );
    }
    let settle = match more {
        Some((0, 0)) => {
            "There are already enough visitors to detect a difference this size: the variants \
             perform alike."
                .to_owned()
        }
        Some((ma, mb)) => format!(
            "About {} more visitors to the control and {} to variant {variant} would settle it \
             at the rates seen so far.",
            ma, mb
        ),
        None => "The rates are equal so far.".to_owned(),
    };
    format!(
        "No significant difference yet between variant {variant} ({}) and the control, variant \
         {control} ({}) (p = {p:.4}). {settle}",
        percent(rb),
        percent(ra)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(rule: Option<&str>, clicks: i64, visitors: i64, converting: i64) -> ArmCounts {
        ArmCounts {
            rule: rule.map(str::to_owned),
            clicks,
            visitors,
            conversions: converting + 1,
            converting_visitors: converting,
            values: Vec::new(),
        }
    }

    #[test]
    fn splits_compare_with_their_first_variant() {
        let result = ab_result(vec![
            counts(None, 10, 9, 1),
            counts(Some("0"), 5, 5, 0),
            counts(Some("1.0"), 2500, 2400, 120),
            counts(Some("1.1"), 2380, 2380, 180),
            counts(Some("1.2"), 1010, 1000, 52),
        ]);
        assert_eq!(result.arms.len(), 5);
        assert_eq!(result.splits.len(), 1);
        let split = &result.splits[0];
        assert_eq!((split.rule_index, split.control), (1, 0));
        assert!(
            (split.alpha - 0.025).abs() < 1e-12,
            "two comparisons: Bonferroni"
        );
        let winner = &split.variants[0];
        assert_eq!(winner.variant, 1);
        assert!(winner.significant, "{winner:?}");
        assert!(
            winner.verdict.starts_with("Variant 1 converts better"),
            "{}",
            winner.verdict
        );
        let alike = &split.variants[1];
        assert!(!alike.significant);
        let (more_a, more_b) = alike.more_visitors.unwrap();
        let needed = alike.visitors_needed.unwrap();
        assert_eq!((more_a, more_b), (needed - 2400, needed - 1000));
        // Clicks at each arm's clicks per visitor.
        let (clicks_a, _) = alike.more_clicks.unwrap();
        assert_eq!(clicks_a, (more_a as f64 * (2500.0 / 2400.0)).ceil() as i64);
        assert!(alike.verdict.contains("more visitors"), "{}", alike.verdict);
        let control = &result.arms[2];
        assert_eq!((control.rule_index, control.variant), (Some(1), Some(0)));
        assert_eq!(control.rate_per_visitor, Some(0.05));
        assert_eq!(control.rate_per_click, Some(121.0 / 2500.0));
    }

    #[test]
    fn no_split_no_comparison() {
        let result = ab_result(vec![counts(None, 0, 0, 0)]);
        assert!(result.splits.is_empty());
        assert_eq!(result.arms[0].rate_per_visitor, None);
    }
}
