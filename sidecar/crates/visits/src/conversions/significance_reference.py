#!/usr/bin/env python3
"""The reference answers `significance.rs` is tested against: statsmodels on fixed data.
Writes significance_reference.json beside this file.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install statsmodels scipy && /tmp/v/bin/python significance_reference.py
"""
import json, pathlib
import scipy, statsmodels
from statsmodels.stats.proportion import (
    proportions_ztest, confint_proportions_2indep, samplesize_proportions_2indep_onetail)

# (name, control successes, control trials, variant successes, variant trials, alpha)
CASES = [
    ("clear_winner", 120, 2400, 180, 2380, 0.05),
    ("no_difference_yet", 31, 1000, 36, 1010, 0.05),
    ("variant_worse", 95, 1500, 61, 1490, 0.05),
    ("small_arms", 2, 40, 7, 38, 0.05),
    ("unequal_arms", 400, 10000, 60, 1200, 0.05),
    ("bonferroni_two_variants", 50, 800, 66, 790, 0.025),
    ("rare_events", 3, 20000, 9, 20000, 0.05),
]

out = []
for name, x2, n2, x1, n1, alpha in CASES:
    z, p = proportions_ztest([x1, x2], [n1, n2])  # pooled; variant minus control
    low, high = confint_proportions_2indep(x1, n1, x2, n2, method="newcomb", compare="diff", alpha=alpha)
    p1, p2 = x1 / n1, x2 / n2
    needed = samplesize_proportions_2indep_onetail(
        p1 - p2, p2, power=0.8, ratio=1, alpha=alpha, alternative="two-sided")
    out.append(dict(name=name, control_successes=x2, control_trials=n2, variant_successes=x1,
                    variant_trials=n1, alpha=alpha, z=float(z), p_value=float(p),
                    ci_low=float(low), ci_high=float(high), needed_per_arm=float(needed)))

doc = {"generator": f"significance_reference.py with statsmodels {statsmodels.__version__}, scipy {scipy.__version__}",
       "cases": out}
pathlib.Path(__file__).with_name("significance_reference.json").write_text(json.dumps(doc, indent=1) + "\n")
