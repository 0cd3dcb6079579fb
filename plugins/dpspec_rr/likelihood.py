"""Randomized response's likelihood for `dpspec infer`.

Given k true 'yes' among N units, the number R of reported 'yes' is Binomial(k, p) plus
Binomial(N - k, 1 - p), independent; R is sufficient (the responses are exchangeable given k),
so P(R | k) is the whole likelihood. It is computed exactly as a convolution, for every k within
12 standard deviations of the unbiased estimate (farther values have relative likelihood below
e^-70 and are given probability 0). N itself is published exactly (the invariant `count TABLE`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from scipy.stats import binom

from dpspec.api import CountLikelihood, MechanismError, ir

MAX_UNITS = 200_000
_CHUNK_ELEMENTS = 4_000_000


def log_likelihood_table(n: int, reported: int, p: float) -> tuple[int, np.ndarray]:
    """(k0, table): table[i] = log P(R = reported | k = k0 + i) over the window of plausible k."""
    q = 1.0 - p
    scale = 2 * p - 1
    if abs(scale) < 1e-12:  # p = 1/2: the answers carry no information
        return 0, np.full(n + 1, float(binom.logpmf(reported, n, 0.5)))
    est = (reported - q * n) / scale
    sd = math.sqrt(n * p * q) / abs(scale)
    k0 = max(0, int(math.floor(est - 12 * sd - 10)))
    k1 = min(n, int(math.ceil(est + 12 * sd + 10)))
    ks = np.arange(k0, k1 + 1)
    js = np.arange(0, reported + 1)
    out = np.empty(ks.size)
    step = max(1, _CHUNK_ELEMENTS // max(js.size, 1))
    for a in range(0, ks.size, step):
        k = ks[a : a + step, None]
        terms = binom.logpmf(js[None, :], k, p) + binom.logpmf(reported - js[None, :], n - k, q)
        out[a : a + step] = logsumexp(terms, axis=1)
    return k0, out


def responses_likelihood(table: str, column: str, positive: str, p, outputs: dict) -> list[CountLikelihood] | None:
    frame = outputs.get("responses")
    if frame is None or column not in frame.columns:
        return None
    n = len(frame)
    if n > MAX_UNITS:
        raise MechanismError(
            f"randomized response likelihood: {n:,} units is beyond the exact convolution's "
            f"reach here (at most {MAX_UNITS:,})"
        )
    reported = int((frame[column].astype(str) == str(positive)).sum())
    p = float(p)
    k0, table_ll = log_likelihood_table(n, reported, p)

    def logpmf(truth):
        idx = np.asarray(truth, dtype=np.int64) - k0
        inside = (idx >= 0) & (idx < table_ll.size)
        return np.where(inside, table_ll[np.clip(idx, 0, table_ll.size - 1)], -np.inf)

    scale = 2 * p - 1
    est = (reported - (1 - p) * n) / scale if scale else n / 2
    var = n * p * (1 - p) / scale**2 if scale else float(n) ** 2
    noisy = CountLikelihood(
        query=ir.CountQuery(table, (column,)),
        cells=pd.DataFrame({column: [str(positive)]}),
        value=np.array([reported]),
        logpmf=logpmf,
        log_max=np.array([float(table_ll.max())]),
        estimate=np.array([est]),
        variance=np.array([var]),
        description=f"{reported:,} of {n:,} reported '{positive}'; each answer true with probability {p:g}",
    )
    total = CountLikelihood.exact(
        ir.CountQuery(table), pd.DataFrame(index=pd.RangeIndex(1)), [n], "the number of responses, published exactly"
    )
    return [noisy, total]
