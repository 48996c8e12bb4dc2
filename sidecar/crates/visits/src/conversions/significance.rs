//! The A/B statistics of a split: each variant's conversion rate against the first (control)
//! variant's, with a pooled two-proportion z-test, Newcombe's hybrid score interval (method 10 of
//! Newcombe 1998, from Wilson intervals) for the difference, and the visitors each arm would need
//! for 80% power. docs/CONVERSIONS.md says why these and not a Bayesian probability to be best.
//! Checked against statsmodels on fixed data (`significance_reference.py`, whose output is
//! `significance_reference.json`).

/// Successes (converting visitors) out of trials (visitors) of one arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    pub successes: i64,
    pub trials: i64,
}

impl Arm {
    pub fn rate(self) -> Option<f64> {
        (self.trials > 0).then(|| self.successes as f64 / self.trials as f64)
    }
}

/// A variant against the control: `difference` is the variant's rate minus the control's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub difference: f64,
    /// The pooled z statistic and its two-sided p-value; `None` while either arm has no trials or
    /// both rates are 0 or both 1 (no variance: nothing to test).
    pub z: Option<f64>,
    pub p_value: Option<f64>,
    /// Newcombe's interval for the difference at the confidence asked.
    pub interval: (f64, f64),
}

/// Standard normal upper tail, P(Z > z), to double precision (libm's erfc).
pub fn normal_sf(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

/// The standard normal quantile: Acklam's rational approximation (relative error 1.15e-9)
/// refined by one Halley step on erfc, which brings it to double precision.
pub fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let low = 0.02425;
    let x = if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    // Halley's step on Φ(x) - p.
    let e = 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// Wilson's score interval of one proportion at the quantile `z`.
pub fn wilson(arm: Arm, z: f64) -> (f64, f64) {
    if arm.trials <= 0 {
        return (0.0, 1.0);
    }
    let n = arm.trials as f64;
    let p = arm.successes as f64 / n;
    let z2 = z * z;
    let center = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((center - half).max(0.0), (center + half).min(1.0))
}

/// `variant` against `control` at confidence `1 - alpha` (two-sided).
pub fn compare(control: Arm, variant: Arm, alpha: f64) -> Comparison {
    let z_crit = normal_quantile(1.0 - alpha / 2.0);
    let (p1, p2) = (variant.rate().unwrap_or(0.0), control.rate().unwrap_or(0.0));
    let difference = p1 - p2;
    let (l1, u1) = wilson(variant, z_crit);
    let (l2, u2) = wilson(control, z_crit);
    let interval = (
        difference - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(),
        difference + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt(),
    );
    let (n1, n2) = (variant.trials as f64, control.trials as f64);
    let pooled = (variant.successes + control.successes) as f64 / (n1 + n2);
    let variance = pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2);
    let z = (variant.trials > 0 && control.trials > 0 && variance > 0.0)
        .then(|| difference / variance.sqrt());
    Comparison {
        difference,
        z,
        p_value: z.map(|z| 2.0 * normal_sf(z.abs())),
        interval,
    }
}

/// Visitors each arm needs (equal arms) for a two-sided test at `alpha` to detect the difference
/// between `control_rate` and `variant_rate` with probability `power`, by the normal
/// approximation (Fleiss' formula without continuity correction; statsmodels'
/// `samplesize_proportions_2indep_onetail`). `None` when the rates are equal (no number of visitors
/// settles a difference of zero) or outside (0, 1).
pub fn visitors_needed(
    control_rate: f64,
    variant_rate: f64,
    alpha: f64,
    power: f64,
) -> Option<f64> {
    let difference = variant_rate - control_rate;
    let inside = |p: f64| p > 0.0 && p < 1.0;
    if difference == 0.0 || !inside(control_rate) || !inside(variant_rate) {
        return None;
    }
    let mean = (control_rate + variant_rate) / 2.0;
    let null_sd = (2.0 * mean * (1.0 - mean)).sqrt();
    let alt_sd = (control_rate * (1.0 - control_rate) + variant_rate * (1.0 - variant_rate)).sqrt();
    let z_alpha = normal_quantile(1.0 - alpha / 2.0);
    let z_beta = normal_quantile(power);
    Some(((z_alpha * null_sd + z_beta * alt_sd) / difference).powi(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, what: &str) {
        let tolerance = 1e-9 * want.abs().max(1.0);
        assert!(
            (got - want).abs() <= tolerance,
            "{what}: got {got}, want {want}"
        );
    }

    /// Every case of `significance_reference.json` (statsmodels' answers on fixed data).
    #[test]
    fn matches_statsmodels() {
        let cases: serde_json::Value =
            serde_json::from_str(include_str!("significance_reference.json")).unwrap();
        let cases = cases["cases"].as_array().unwrap();
        assert!(cases.len() >= 5);
        for case in cases {
            let int = |k: &str| case[k].as_i64().unwrap();
            let num = |k: &str| case[k].as_f64();
            let control = Arm {
                successes: int("control_successes"),
                trials: int("control_trials"),
            };
            let variant = Arm {
                successes: int("variant_successes"),
                trials: int("variant_trials"),
            };
            let alpha = num("alpha").unwrap();
            let got = compare(control, variant, alpha);
            let name = case["name"].as_str().unwrap();
            close(got.z.unwrap(), num("z").unwrap(), &format!("{name} z"));
            close(
                got.p_value.unwrap(),
                num("p_value").unwrap(),
                &format!("{name} p"),
            );
            close(
                got.interval.0,
                num("ci_low").unwrap(),
                &format!("{name} ci low"),
            );
            close(
                got.interval.1,
                num("ci_high").unwrap(),
                &format!("{name} ci high"),
            );
            let needed =
                visitors_needed(control.rate().unwrap(), variant.rate().unwrap(), alpha, 0.8);
            match num("needed_per_arm") {
                Some(want) => close(needed.unwrap(), want, &format!("{name} needed")),
                None => assert_eq!(needed, None, "{name} needed"),
            }
        }
    }

    #[test]
    fn quantiles_invert_the_tail() {
        for p in [1e-12, 1e-6, 0.001, 0.02, 0.2, 0.5, 0.8, 0.975, 0.999_999] {
            close(1.0 - normal_sf(normal_quantile(p)), p, "quantile");
        }
        close(normal_quantile(0.975), 1.959_963_984_540_054, "z 0.975");
    }

    #[test]
    fn nothing_to_test_without_variance() {
        let zero = Arm {
            successes: 0,
            trials: 100,
        };
        let got = compare(zero, zero, 0.05);
        assert_eq!((got.z, got.p_value), (None, None));
        let empty = Arm {
            successes: 0,
            trials: 0,
        };
        assert_eq!(compare(empty, zero, 0.05).z, None);
        assert_eq!(visitors_needed(0.1, 0.1, 0.05, 0.8), None);
        assert_eq!(visitors_needed(0.0, 0.1, 0.05, 0.8), None);
    }
}
