"""From two event counts to a lower bound on the privacy loss, with exact binomial intervals.

If a mechanism M satisfies a guarantee, every event E obeys an inequality between
p = P[M(x) in E] and q = P[M(x') in E] for neighbours x, x'. Bounding p from below and q from
above with one-sided Clopper–Pearson intervals (each at level 1 - a/2, so both hold with
probability at least 1 - a) and solving the inequality for the budget gives a lower bound that
is valid with confidence 1 - a:

- pure:        p <= e^eps q                       eps >= ln(p/q)             (Ding et al. 2018)
- approximate: p <= e^eps q + delta               eps >= ln((p - delta)/q)   (Jagielski et al. 2020)
- Rényi:       p <= (e^eps q)^((alpha-1)/alpha)   eps >= alpha/(alpha-1) ln p - ln q  (Mironov 2017, Prop. 10)
- zCDP:        Rényi at every order with eps = alpha rho:
               rho >= sup over alpha > 1 of ln(p)/(alpha-1) - ln(q)/alpha
- Gaussian DP: the type II error 1-p of the test "reject x' on E" is at least
               Phi(Phi^-1(1-q) - mu):             mu >= Phi^-1(p) - Phi^-1(q)  (Dong, Roth & Su 2019)
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta, norm

CITATIONS = {
    "test": (
        "Ding, Wang, Wang, Zhang & Kifer 2018, 'Detecting violations of differential privacy' (CCS): "
        "choose the event on one half of the runs, test it on the other"
    ),
    "intervals": "Clopper & Pearson 1934: exact one-sided binomial confidence bounds",
    "pure": "Ding et al. 2018: eps >= ln(p/q)",
    "approx": "Jagielski, Ullman & Oprea 2020, 'Auditing differentially private machine learning' (NeurIPS): eps >= ln((p - delta)/q)",
    "renyi": "Mironov 2017, 'Rényi differential privacy', Proposition 10 (probability preservation)",
    "zcdp": "Bun & Steinke 2016 (zCDP is Rényi DP at every order, eps = alpha rho) with Mironov 2017, Proposition 10",
    "gdp": "Dong, Roth & Su 2019, 'Gaussian differential privacy': the trade-off function Phi(Phi^-1(1-q) - mu)",
}

# Orders alpha > 1 over which the zCDP bound takes its supremum (log-spaced, 1.001 .. 1e4).
_ALPHAS = np.exp(np.linspace(math.log(1.001), math.log(1e4), 400))


def cp_lower(k, n, a: float):
    """Exact one-sided lower confidence bound (level 1 - a) on a binomial proportion."""
    k = np.asarray(k, dtype=float)
    out = beta.ppf(a, np.maximum(k, 1e-300), n - k + 1)
    return np.where(k <= 0, 0.0, out)


def cp_upper(k, n, a: float):
    """Exact one-sided upper confidence bound (level 1 - a) on a binomial proportion."""
    k = np.asarray(k, dtype=float)
    out = beta.ppf(1 - a, k + 1, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, out)


def loss_bound(kind: str, p, q, *, delta: float = 0.0, alpha: float | None = None):
    """The smallest budget of premetric `kind` that p <= P[M(x) in E], q >= P[M(x') in E]
    allow (vectorized over p, q; 0 when the pair shows nothing)."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    q = np.clip(np.asarray(q, dtype=float), 1e-300, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "pure":
            out = np.log(p / q)
        elif kind == "approx":
            out = np.log((p - delta) / q)
        elif kind == "renyi":
            out = alpha / (alpha - 1) * np.log(p) - np.log(q)
        elif kind == "zcdp":
            lp, lq = np.log(p)[..., None], np.log(q)[..., None]
            out = np.max(lp / (_ALPHAS - 1) - lq / _ALPHAS, axis=-1)
        elif kind == "gdp":
            out = norm.ppf(p) - norm.ppf(q)
        else:
            raise ValueError(f"no lower bound for premetric '{kind}'")
    out = np.where(np.isnan(out), 0.0, out)
    return np.maximum(out, 0.0)


def event_bound(kind: str, k_left, k_right, n: int, a: float, **options):
    """Lower bound from counts: k_left of n runs on x fell in E, k_right of n runs on x'."""
    return loss_bound(kind, cp_lower(k_left, n, a / 2), cp_upper(k_right, n, a / 2), **options)


def largest_detectable(kind: str, n: int, a: float, **options) -> float:
    """The largest lower bound n test runs per side can show at all (every run on x in E, none
    on x'): claims above it can be neither refuted nor supported by so few runs."""
    return float(event_bound(kind, n, 0, n, a, **options))


def runs_needed(kind: str, claim: float, a: float, limit: int = 1 << 40, **options) -> int | None:
    """The fewest test runs per side whose largest detectable bound exceeds `claim` (None if
    more than `limit`)."""
    if largest_detectable(kind, limit, a, **options) <= claim:
        return None
    lo, hi = 1, 2
    while largest_detectable(kind, hi, a, **options) <= claim:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if largest_detectable(kind, mid, a, **options) <= claim:
            lo = mid
        else:
            hi = mid
    return hi
