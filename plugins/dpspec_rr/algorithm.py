"""Randomized response's release: the exact sampler, its budget and the unbiased estimate."""

from __future__ import annotations

import math
from fractions import Fraction

from dpspec.api import Release, interval, bernoulli, record_measurement, LazyModule

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())  # lazily: `dpspec check` and `--help` must not pay for numpy or pandas
pd = LazyModule("pandas", "pd", globals())


def epsilon(p: Fraction):
    """Pure DP budget of randomized response with truth probability p: |ln(p/(1-p))|, irrational,
    so stated as a certified upper bound (an exact Fraction, the smallest float at or above it)."""

    p = Fraction(p)
    if p in (0, 1):
        return math.inf
    log_odds = interval(p / (1 - p)).ln()
    return max(log_odds.upper(), (-log_odds).upper())


def estimate(reported_yes, p: Fraction) -> dict:
    """Unbiased estimate of the true proportion, with its estimated standard error."""
    n = int(reported_yes.size)
    q = float(reported_yes.mean()) if n else math.nan
    scale = 2 * float(p) - 1
    if n == 0 or scale == 0:
        return {"n": n, "reported_proportion": q, "estimate": math.nan, "standard_error": math.inf}
    est = (q - (1 - float(p))) / scale
    se = math.sqrt(q * (1 - q) / n) / abs(scale)
    return {"n": n, "reported_proportion": q, "estimate": est, "standard_error": se}


def release(design, data, rng) -> Release:
    """Each unit keeps its answer with probability p (one exact Bernoulli draw per unit, for the
    whole column at once) and flips it otherwise."""
    values = data[design.table][design.column]
    truth = (values == design.positive).to_numpy(dtype=bool)
    record_measurement("units", len(truth), "none")  # the invariant `count TABLE`: one answer per unit
    record_measurement("answers", truth, "randomized_response", design.p, sensitivity=1, norm="l1")
    keep = bernoulli(design.p, len(truth), rng)
    reported = np.where(keep, truth, ~truth)
    if design.kind == "bool":
        answers = pd.Series(reported, name=design.column)
    else:
        answers = pd.Series(np.where(reported, design.positive, design.negative), name=design.column)
    est = estimate(reported, design.p)
    internal = {"true_proportion": float(truth.mean()) if len(truth) else math.nan}
    return Release(
        outputs={"responses": answers.to_frame(), "estimate": pd.DataFrame([est])},
        facts={"n": int(len(truth))},
        internal=internal,
    )
