"""The projection of noisy counts onto nonnegative integers with a given total (post-processing).

Shared by the mechanisms that make noisy counts consistent with a public total (seed 2's
two-stage post-processing, the aggregate's `postprocess: total`): Euclidean projection onto the
scaled simplex, then integers by largest remainders, which keeps the total.
"""

from __future__ import annotations

import numpy as np


def project_to_total(noisy: np.ndarray, total: int) -> np.ndarray:
    """Row-wise nearest (Euclidean) nonnegative integer vector summing to `total`."""
    return project_with_threshold(noisy, total)[0]


def project_with_threshold(noisy: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """The projection and each row's threshold theta: the real projection is max(v - theta, 0), so
    every noisy value at or below theta (the zero region) is released as 0 (for a row whose total
    is 0, theta is +inf: everything is)."""
    v = np.atleast_2d(np.asarray(noisy, dtype=float))
    n = v.shape[1]
    if total <= 0 or n == 0:  # the only nonnegative vector summing to 0 (an empty group's total)
        zeros = np.zeros(np.shape(noisy), dtype=np.int64)
        theta = np.full(len(v), np.inf)
        return (zeros, theta) if np.ndim(noisy) == 2 else (zeros, theta[:1])
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
    return (out.reshape(np.shape(noisy)), theta) if np.ndim(noisy) == 2 else (out[0], theta)
