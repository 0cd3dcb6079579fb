"""Posterior summaries per cell, and the post-processing contractions of the seed's case study.

Seeman et al. (2022, §4.3) count where post-processing "contracted" several plausible values of
a confidential statistic into one: a count published as 0 although the posterior gives positive
counts real probability (ContractedCaseZeros), and a rate pushed to a bound by a constraint
(ContractedRates). Here a cell is contracted when its post-processed value sits at a bound of
what it could be (0, or its public group total; for rates 0 or 1) while the 95% credible
interval holds more than that one value.
"""

from __future__ import annotations

import numpy as np

LEVELS = {"q025": 0.025, "q05": 0.05, "median": 0.5, "q95": 0.95, "q975": 0.975}


def weighted_quantiles(x: np.ndarray, w: np.ndarray, probs) -> np.ndarray:
    """Quantiles per column of x (n x K) under row weights w (sum 1): shape (len(probs), K).

    The smallest value whose cumulative weight reaches p (the inverse CDF); NaN rows are skipped.
    """
    x = np.asarray(x, dtype=float)
    out = np.full((len(probs), x.shape[1]), np.nan)
    order = np.argsort(x, axis=0, kind="stable")
    xs = np.take_along_axis(x, order, axis=0)
    ws = np.where(np.isnan(xs), 0.0, w[order])
    cum = np.cumsum(ws, axis=0)
    total = cum[-1]
    for i, p in enumerate(probs):
        idx = np.argmax(cum >= p * total - 1e-12, axis=0)
        out[i] = np.where(total > 0, xs[idx, np.arange(x.shape[1])], np.nan)
    return out


def summarize(x: np.ndarray, w: np.ndarray) -> dict:
    """mean, median, 90% and 95% credible bounds per column (weighted)."""
    x = np.asarray(x, dtype=float)
    valid = ~np.isnan(x)
    ww = np.where(valid, w[:, None], 0.0)
    mean = np.where(
        ww.sum(0) > 0, np.nansum(np.where(valid, x, 0.0) * ww, axis=0) / np.maximum(ww.sum(0), 1e-300), np.nan
    )
    q = weighted_quantiles(x, w, list(LEVELS.values()))
    out = {"mean": mean}
    for i, name in enumerate(LEVELS):
        out[name] = q[i]
    return out


def contractions(post: np.ndarray, lower: np.ndarray, upper: np.ndarray, low_bound, high_bound) -> dict:
    """Cells whose post-processed value sits at a bound that the 95% interval [lower, upper] exceeds.

    Returns {"zeros": indices contracted to the lower bound, "bounds": indices contracted to the
    upper bound}; low_bound/high_bound are per cell (0 and the group total for counts; 0 and 1
    for rates)."""
    post = np.asarray(post, dtype=float)
    low_bound = np.broadcast_to(np.asarray(low_bound, dtype=float), post.shape)
    high_bound = np.broadcast_to(np.asarray(high_bound, dtype=float), post.shape)
    ok = ~np.isnan(post) & ~np.isnan(lower) & ~np.isnan(upper)
    zeros = ok & (post == low_bound) & (upper > low_bound)
    bounds = ok & (post == high_bound) & (lower < high_bound) & ~zeros
    return {"zeros": np.flatnonzero(zeros), "bounds": np.flatnonzero(bounds)}
