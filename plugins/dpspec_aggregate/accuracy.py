"""Accuracy with every number: each noisy answer's 95% interval from its exact noise law.

Why from the exact law: the discrete Laplace and discrete Gaussian are integer laws, so the
interval is value ± k with k the smallest integer whose two-sided mass reaches 95%; its exact
coverage (a little above 95%) is stated beside it. Post-processing by clamping at zero keeps the
coverage (a monotone map of an interval that covers still covers); a mean (a ratio of two noisy
answers) and a quantile (a draw on a grid) have no such interval, and say so.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpspec.api import discrete_gaussian_pmf, discrete_gaussian_variance
from .a_priori import expected_error

LEVEL = 0.95


def laplace_pmf(t: Fraction, support: np.ndarray) -> np.ndarray:
    """P(X = k) for the discrete Laplace with scale t: (1 - e^(-1/t)) / (1 + e^(-1/t)) · e^(-|k|/t)."""
    a = math.exp(-1 / float(t))
    return (1 - a) / (1 + a) * np.exp(-np.abs(support) / float(t))


def half_width(noise: str, parameter: Fraction) -> tuple[int, float]:
    """(k, P(|X| <= k)): the smallest k with at least LEVEL of the noise's mass within ±k."""
    if parameter == 0:
        return 0, 1.0
    spread = math.sqrt(float(parameter)) if noise == "gaussian" else float(parameter)
    if spread > 10**5:  # a support of 40 spreads would not fit in memory: the closed forms (a_priori)
        return expected_error(noise, parameter)[1:]
    limit = int(40 * spread) + 10
    support = np.arange(-limit, limit + 1)
    pmf = laplace_pmf(parameter, support) if noise == "laplace" else discrete_gaussian_pmf(parameter, support)
    centre = pmf[limit] + 2 * np.cumsum(pmf[limit + 1 :])  # P(|X| <= k) for k = 1, 2, ...
    mass = np.concatenate([[pmf[limit]], centre])
    k = int(np.searchsorted(mass, LEVEL))
    return k, float(mass[k])


def variance(noise: str, parameter: Fraction) -> float:
    """The noise's exact variance: 2a/(1-a)² with a = e^(-1/t) (Laplace), or the discrete Gaussian's."""
    if parameter == 0:
        return 0.0
    if noise == "gaussian":
        return discrete_gaussian_variance(parameter)
    a = math.exp(-1 / float(parameter))
    if parameter < 10**6:
        return 2 * a / (1 - a) ** 2
    return 2 * a / math.expm1(-1 / float(parameter)) ** 2  # a scale near the samplers' limit keeps its digits


def scale_of(noise: str, parameter: Fraction) -> float:
    """The number printed as the noise scale: t for the Laplace, sigma for the Gaussian."""
    return float(parameter) if noise == "laplace" else math.sqrt(float(parameter))


# ---- realized error (internal only: computed against the confidential data) ----------------

CELL_ROWS = 200  # the internal report lists the first cells one by one; the summary covers all


def true_values(query, truth: dict) -> np.ndarray:
    """A query's confidential value per cell, as floats; NaN where it has none (a mean or a
    quantile of an empty cell)."""
    if query.statistic == "mean":
        s, c = truth[f"{query.name}:sum"].astype(float), truth[f"{query.name}:count"].astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(c > 0, np.clip(s / np.where(c > 0, c, 1), query.low, query.high), np.nan)
    if query.statistic == "quantile":
        return truth[f"{query.name}:score"]
    return truth[f"{query.name}:value"].astype(float)


def realized_error(design, releases, key_columns: tuple, unclipped: dict | None = None) -> dict:
    """Per query: the released value against the confidential one, cell by cell, over the runs
    (mean absolute error, RMSE, mean signed error, largest error), how many values were clipped
    and what clipping alone moved; and the first CELL_ROWS cells one by one (first run).

    unclipped: {query: per-cell value of the raw, unclipped column} for sums and means whose
    clipping changed something; the truth is then the unclipped aggregate, so the error includes
    the clipping's bias, stated apart. A quantile's truth is on the grid (clipping a column and
    taking its quantile is the clipped quantile)."""
    unclipped = unclipped or {}
    first = releases[0]
    truth, clipped = first.internal["truth"], first.internal.get("clipped", {})
    records = int(first.internal.get("records", 0))
    frame = first.outputs["statistics"]
    queries, per_cell = [], {c: frame[c].astype(str).tolist()[:CELL_ROWS] for c in key_columns}
    for q in design.queries:
        clipped_truth = true_values(q, truth)
        exact = unclipped.get(q.name, clipped_truth)
        released = np.stack([r.outputs["statistics"][q.name].to_numpy(dtype=float) for r in releases])
        defined = ~np.isnan(exact)
        err = (released - exact[None, :])[:, defined]
        row = {
            "query": q.name,
            "statistic": q.statistic,
            "cells": int(defined.sum()),
            "cells_without_a_value": int((~defined).sum()),
            "mean_absolute_error": float(np.abs(err).mean()) if err.size else None,
            "rmse": float(np.sqrt((err**2).mean())) if err.size else None,
            "mean_error": float(err.mean()) if err.size else None,
            "largest_absolute_error": float(np.abs(err).max()) if err.size else None,
        }
        if q.clipped:
            n = int(clipped.get(q.name, 0))
            moved = (clipped_truth - exact)[defined]
            row.update(
                {
                    "column": q.column,
                    "bounds": [q.low, q.high],
                    "clipped_values": n,
                    "clipped_share": n / records if records else 0.0,
                    "clipping_bias": (float(moved.mean()) if moved.size else 0.0)
                    if q.name in unclipped or not n
                    else None,
                }
            )  # None: the unclipped truth was not computed (the table stayed on an engine)
        queries.append(row)
        per_cell[f"{q.name} (true)"] = [None if math.isnan(v) else float(v) for v in exact[:CELL_ROWS]]
        per_cell[f"{q.name} (released)"] = [float(v) for v in released[0, :CELL_ROWS]]
    return {
        "runs": len(releases),
        "records": records,
        "cells": int(len(frame)),
        "queries": queries,
        "per_cell": per_cell,
        "cells_listed": min(CELL_ROWS, int(len(frame))),
    }
