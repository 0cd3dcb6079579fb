"""The post-processing alternative of seed 2's case study (Section 4.2, method 1): noisy counts made
congenial with the public information by a deterministic two-stage post-processing.

Stage 1 projects the noisy case counts onto {y >= 0, sum y = public total} (Euclidean projection
onto the scaled simplex, then integers by largest remainders, which keeps the total); stage 2
clips the noisy death counts to [0, cases]. Both stages map many noisy values to one output,
which is what Section 4.3 counts, each as the region of noisy values the map sends to one output:
ContractedCaseZeros (a noisy case count at or below the projection's threshold, positive ones
included, released as 0), ContractedDeathZeros (a noisy death count at or below 0, or a county
whose released cases are 0) and ContractedRates (a noisy death count at or above the county's
released cases, which are positive: a survival rate contracted to 0). The earlier, narrower
tally (a negative noisy count made 0; deaths strictly above the cases) is kept beside it under
the same names with the suffix `_strict`.
"""
from __future__ import annotations

import numpy as np


def project_to_total(noisy: np.ndarray, total: int) -> np.ndarray:
    """Row-wise nearest (Euclidean) nonnegative integer vector summing to `total`."""
    return project_with_threshold(noisy, total)[0]


def project_with_threshold(noisy: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """The projection and each row's threshold theta: the real projection is max(v - theta, 0), so
    every noisy value at or below theta (the zero region) is released as 0."""
    v = np.atleast_2d(np.asarray(noisy, dtype=float))
    n = v.shape[1]
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1) - total
    ind = np.arange(1, n + 1)
    rho = (u - css / ind > 0).sum(axis=1) - 1
    theta = css[np.arange(len(v)), rho] / (rho + 1)
    x = np.maximum(v - theta[:, None], 0.0)
    floor = np.floor(x + 1e-9).astype(np.int64)
    short = total - floor.sum(axis=1)
    frac = x - floor
    order = np.argsort(-frac, axis=1, kind="stable")  # ties by position: deterministic
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(n)[None, :].repeat(len(v), 0), axis=1)
    out = floor + (rank < short[:, None])
    return (out, theta) if np.ndim(noisy) == 2 else (out[0], theta)


def two_stage(noisy_cases: np.ndarray, noisy_deaths: np.ndarray | None, total: int):
    """(cases, deaths, contractions): stage 1 and 2 above, with per-cell contraction flags."""
    cases, theta = project_with_threshold(noisy_cases, total)
    nc = np.asarray(noisy_cases)
    zero_region = nc <= (theta[:, None] if nc.ndim == 2 else theta[0])
    flags = {"ContractedCaseZeros": zero_region, "ContractedCaseZeros_strict": (cases == 0) & (nc < 0)}
    deaths = None
    if noisy_deaths is not None:
        nd = np.asarray(noisy_deaths)
        deaths = np.clip(nd, 0, cases)
        flags["ContractedDeathZeros"] = (nd <= 0) | (cases == 0)
        flags["ContractedDeathZeros_strict"] = nd < 0
        flags["ContractedRates"] = (nd >= cases) & (cases > 0)
        flags["ContractedRates_strict"] = (nd > cases) & (cases > 0)
    return cases, deaths, flags
