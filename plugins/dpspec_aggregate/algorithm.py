"""The aggregate's exact statistics per declared cell, and their noisy answers.

Records are mapped to cells through integer codes per key column against the declared values,
then counted and summed with `bincount`: no per-record Python. Cells nobody is in get zeros, and
then their noise like every other cell.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd

from dpspec.api import bernoulli_exp, discrete_gaussian, discrete_laplace, effective_sigma2

EXACT_FLOAT_SUM = 2**53


def cell_index(frame: pd.DataFrame, keys: pd.DataFrame, by: tuple) -> np.ndarray:
    """The declared cell (row of `keys`) of every record; -1 for a record outside them."""
    n = len(frame)
    if not by:
        return np.zeros(n, dtype=np.int64)
    record_codes, key_codes, dims = [], [], []
    for c in by:
        values = pd.unique(keys[c].to_numpy())
        lookup = pd.Index(values)
        record_codes.append(_codes(frame[c], lookup))
        key_codes.append(lookup.get_indexer(keys[c].to_numpy()))
        dims.append(len(values))
    bad = np.zeros(n, dtype=bool)
    for codes in record_codes:
        bad |= codes < 0
    rec = record_codes[0] if len(by) == 1 else np.ravel_multi_index(record_codes, dims, mode="clip")
    key = np.ravel_multi_index(key_codes, dims)
    if key.size == int(np.prod(dims)) and np.array_equal(key, np.arange(key.size)):
        return np.where(bad, -1, rec).astype(np.int64)  # the keys are the full product, in order: no lookup
    order = np.argsort(key, kind="stable")
    pos = np.searchsorted(key[order], rec)
    pos = np.minimum(pos, len(key) - 1)
    found = key[order][pos] == rec
    out = np.where(found & ~bad, order[pos], -1)
    return out.astype(np.int64)


def _codes(series: pd.Series, lookup: pd.Index) -> np.ndarray:
    """Codes of a column's values against the declared values (as text), without a per-record loop."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = lookup.get_indexer(series.cat.categories.astype(str))
        codes = series.cat.codes.to_numpy()
        return np.where(codes >= 0, cats[np.maximum(codes, 0)], -1)
    if pd.api.types.is_bool_dtype(series.dtype):
        table = lookup.get_indexer(["False", "True"])
        return table[series.to_numpy().astype(np.int64)]
    values = series.to_numpy()
    if pd.api.types.is_integer_dtype(series.dtype):  # declared integers, consecutive: an offset, no hashing
        try:
            ints = lookup.astype(np.int64).to_numpy()
        except (TypeError, ValueError):
            ints = None
        if ints is not None and ints.size and np.array_equal(ints, np.arange(ints[0], ints[0] + ints.size)):
            codes = values.astype(np.int64) - ints[0]
            return np.where((codes >= 0) & (codes < ints.size), codes, -1)
    uniq, inverse = np.unique(values, return_inverse=True)
    return lookup.get_indexer(pd.Index(uniq).astype(str))[inverse]


def clipped_values(frame: pd.DataFrame, column: str, low: int, high: int) -> tuple[np.ndarray, int]:
    """The column clipped to its declared bounds, and how many values were clipped (internal only)."""
    values = np.asarray(frame[column].to_numpy(), dtype=np.int64)
    outside = int(np.count_nonzero((values < low) | (values > high)))
    return (np.clip(values, low, high) if outside else values), outside


def counts(cell: np.ndarray, n_cells: int) -> np.ndarray:
    return np.bincount(cell, minlength=n_cells).astype(np.int64)


def sums(cell: np.ndarray, values: np.ndarray, n_cells: int, bound: int) -> np.ndarray:
    """Exact integer sums per cell: float bincount while every partial sum is exact in a double."""
    if len(values) * max(bound, 1) < EXACT_FLOAT_SUM:
        return np.rint(np.bincount(cell, weights=values, minlength=n_cells)).astype(np.int64)
    out = np.zeros(n_cells, dtype=np.int64)
    np.add.at(out, cell, values)
    return out


def add_noise(exact: np.ndarray, noise: str, l1: Fraction, l2_squared: Fraction, budget: Fraction, rng):
    """(noisy answers, the noise parameter, the budget it really spends). Laplace: scale t = l1 / eps;
    Gaussian: sigma² = l2² / (2 rho), as the exact sampler rounds it (so rho spent <= the share)."""
    if (l1 if noise == "laplace" else l2_squared) == 0:
        return exact.copy(), Fraction(0), Fraction(0)  # the statistic does not move: exact (an invariant)
    if noise == "laplace":
        t = l1 / budget
        return exact + discrete_laplace(t, exact.size, rng), t, budget
    sigma2 = effective_sigma2(l2_squared / (2 * budget))
    return exact + discrete_gaussian(sigma2, exact.size, rng), sigma2, l2_squared / (2 * sigma2)


def ranks(cell: np.ndarray, values: np.ndarray, n_cells: int, grid: np.ndarray, low: int, high: int) -> np.ndarray:
    """(n_cells, len(grid)): how many of each cell's clipped values are at most each grid point."""
    width = high - low + 1
    combined = np.sort(cell.astype(np.int64) * width + (values - low))
    starts = np.searchsorted(combined, np.arange(n_cells, dtype=np.int64) * width)
    points = np.arange(n_cells, dtype=np.int64)[:, None] * width + (grid - low)[None, :]
    return np.searchsorted(combined, points, side="right") - starts[:, None]


def exponential_quantiles(rank: np.ndarray, n: np.ndarray, q: Fraction, epsilon: Fraction, rng) -> np.ndarray:
    """Per cell, the index of a grid point drawn with probability proportional to
    exp(-epsilon·|rank - q·n| / 2) (score sensitivity 1), exactly: a uniform proposal accepted
    with probability exp(-epsilon·(score gap)/2), an exact Bernoulli of a rational exponent."""
    a, b = q.numerator, q.denominator
    gap = np.abs(b * rank - a * n[:, None])  # b·|rank - q n|, integers
    gap = gap - gap.min(axis=1, keepdims=True)
    cells, m = gap.shape
    out = np.full(cells, -1, dtype=np.int64)
    pending = np.arange(cells)
    num_scale, den = epsilon.numerator, 2 * b * epsilon.denominator
    while pending.size:
        j = rng.integers(0, m, size=pending.size)
        accept = bernoulli_exp(gap[pending, j] * num_scale, den, rng)
        out[pending[accept]] = j[accept]
        pending = pending[~accept]
    return out
