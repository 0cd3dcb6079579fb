"""The naive-base release's likelihood for `dpspec infer`.

With the counting measure on the nonnegative integers, each released count y is drawn from
P(y | c) = exp(-r |y - c|) / Z_r(c), Z_r(c) = sum_{k >= 0} exp(-r |k - c|) = (1 - e^{-r(c+1)}) / (1 - e^{-r})
+ e^{-r} / (1 - e^{-r}), independently across cells given the counts. The outcome counts (deaths)
are drawn on 0..y (y the released count), so given y their likelihood is the same law truncated
above at y; cases >= deaths thus ties the two statistics through the released cases only.
"""
from __future__ import annotations

import math

import numpy as np

from dpspec.api import CountLikelihood, ir

BOOL_TRUE = "True"  # how a bool cell is written in a target's cells (the domain's value text)


def _log_norm(c: np.ndarray, r: float, upper=None) -> np.ndarray:
    """log sum_{k=0}^{upper} exp(-r |k - c|) for integer c >= 0 (upper None: infinity)."""
    c = np.asarray(c, dtype=float)
    q = math.exp(-r)
    below = (1 - np.exp(-r * (np.minimum(c, upper if upper is not None else c) + 1))) / (1 - q)
    if upper is None:
        above = q / (1 - q)
        return np.log(below + above)
    upper = np.asarray(upper, dtype=float)
    low_part = np.where(c <= upper, (1 - np.exp(-r * (c + 1))) / (1 - q), np.exp(-r * (c - upper)) * (1 - np.exp(-r * (upper + 1))) / (1 - q))
    high_part = np.where(c < upper, q * (1 - np.exp(-r * (upper - c))) / (1 - q), 0.0)
    return np.log(low_part + high_part)


def _one(query, cells, value, r: float, upper, what: str) -> CountLikelihood:
    value = np.asarray(value, dtype=np.int64)

    def logpmf(truth):
        t = np.asarray(truth, dtype=np.int64)
        out = -r * np.abs(value - t) - _log_norm(t, r, upper)
        return np.where(t >= 0, out, -np.inf)

    scale = 1 / r
    log_max = -_log_norm(np.zeros(len(value)), r, upper)  # the mass at y = c is largest at c = 0
    return CountLikelihood(query, cells, value, logpmf, log_max,
                           value.astype(float), np.full(len(value), 2 * scale * scale), what)


def naive_likelihoods(params, outputs, r_c, r_o, total_z=None):
    frame = outputs.get("counts")
    if frame is None:
        return None
    cell = params["cell"]
    cells = frame[[cell]].astype(str).reset_index(drop=True)
    y = frame[params["table"]].to_numpy(dtype=np.int64)
    out = [_one(ir.CountQuery(params["table"], (cell,)), cells, y, float(r_c), None,
                f"Wasserstein exponential mechanism, naive base, rate {float(r_c):g}")]
    if r_o is not None and params.get("outcome") in frame.columns:
        z = frame[params["outcome"]].to_numpy(dtype=np.int64)
        died = cells.assign(**{params["outcome"]: BOOL_TRUE})
        out.append(_one(ir.CountQuery(params["table"], (cell, params["outcome"])), died, z, float(r_o), y,
                        f"outcome counts on 0..released count, rate {float(r_o):g}"))
    total = outputs.get("total")
    if total_z is not None and total is not None:
        columns = list(total_z.query.columns)
        out.append(CountLikelihood.exact(total_z.query, total[columns].astype(str).reset_index(drop=True),
                                         total["count"].to_numpy(), "the public total the release conditions on (Z)"))
    return out
