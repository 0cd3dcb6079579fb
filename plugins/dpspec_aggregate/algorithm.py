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


def cell_index(frame: pd.DataFrame, keys: pd.DataFrame, by: tuple) -> tuple[np.ndarray, int | None]:
    """(the declared cell (row of `keys`, typed as the domain types the data) of every record,
    -1 for a record outside them; the first such record's position, or None). Why the position
    too: the caller must refuse such a record, and checking every record is in a cell is a pass
    over them it need not make twice."""
    n = len(frame)
    if not by:
        return np.zeros(n, dtype=np.intp), None
    record_codes, key_codes, dims, all_in = [], [], [], True
    for c in by:
        column = keys[c].to_numpy()
        lookup = pd.Index(pd.unique(column))
        codes, inside = _codes(frame[c], lookup)
        record_codes.append(codes)
        all_in &= inside
        key_codes.append(lookup.get_indexer(column))
        dims.append(len(lookup))
    if all_in:
        rec = record_codes[0] if len(by) == 1 else np.ravel_multi_index(record_codes, dims)
    else:
        bad = np.zeros(n, dtype=bool)
        for codes in record_codes:
            bad |= codes < 0
        rec = record_codes[0] if len(by) == 1 else np.ravel_multi_index(record_codes, dims, mode="clip")
    key = np.ravel_multi_index(key_codes, dims)
    if key.size == int(np.prod(dims)) and np.array_equal(key, np.arange(key.size)):
        if all_in:  # the keys are the full product, in order, and every record is in one: no lookup, no copy
            return rec, None
        out = np.where(bad, -1, rec)
    else:
        order = np.argsort(key, kind="stable")
        pos = np.minimum(np.searchsorted(key[order], rec), len(key) - 1)
        found = key[order][pos] == rec
        out = np.where(found if all_in else found & ~bad, order[pos], -1)
    outside = np.flatnonzero(out < 0)
    return out, (int(outside[0]) if outside.size else None)


def _codes(series: pd.Series, lookup: pd.Index) -> tuple[np.ndarray, bool]:
    """(codes of a column's values against the declared values, -1 for a value outside them;
    whether every value is inside), without a per-record loop. Categories compare as text."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        cats = pd.Index(lookup.astype(str)).get_indexer(series.cat.categories.astype(str))
        codes = series.cat.codes.to_numpy()
        if codes.size and codes.min() >= 0 and cats.min(initial=0) >= 0:
            return cats[codes], True
        out = np.where(codes >= 0, cats[np.maximum(codes, 0)], -1) if cats.size else np.full(codes.size, -1)
        return out, not (out < 0).any()
    if pd.api.types.is_bool_dtype(series.dtype):
        table = lookup.get_indexer([False, True])
        out = table[series.to_numpy().astype(np.intp)]
        return out, not (out < 0).any()
    values = series.to_numpy()
    if pd.api.types.is_integer_dtype(series.dtype) and pd.api.types.is_integer_dtype(lookup.dtype):
        ints = lookup.to_numpy()
        if ints.size and np.array_equal(ints, np.arange(ints[0], ints[0] + ints.size)):  # consecutive: an offset
            codes = np.subtract(values, ints[0], dtype=np.intp)
            if not codes.size or (codes.min() >= 0 and codes.max() < ints.size):  # two reductions, no copy
                return codes, True
            return np.where((codes >= 0) & (codes < ints.size), codes, -1), False
    uniq, inverse = np.unique(values, return_inverse=True)
    same_kind = pd.api.types.is_numeric_dtype(lookup.dtype) and pd.api.types.is_numeric_dtype(uniq.dtype)
    found = (
        lookup.get_indexer(uniq) if same_kind else pd.Index(lookup.astype(str)).get_indexer(pd.Index(uniq).astype(str))
    )
    out = found[inverse.reshape(-1)]
    return out, not (out < 0).any()


def clipped_values(frame: pd.DataFrame, column: str, low: int, high: int) -> tuple[np.ndarray, int, tuple[int, int]]:
    """The column clipped to its declared bounds, how many values were clipped, and the column's
    (min, max) before clipping (the last two internal only: the audit compares the bounds with them)."""
    values = np.asarray(frame[column].to_numpy(), dtype=np.int64)
    if not values.size:
        return values, 0, (low, high)
    extremes = (int(values.min()), int(values.max()))
    if extremes[0] >= low and extremes[1] <= high:
        return values, 0, extremes  # nothing outside: no copy
    clipped = np.clip(values, low, high)
    return clipped, int(values.size - np.count_nonzero(clipped == values)), extremes


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


def grid_quantiles(rank: np.ndarray, n: np.ndarray, q: Fraction, grid: np.ndarray) -> np.ndarray:
    """Per cell, the confidential q-quantile on the grid (the first grid point with at least q·n of
    the cell's clipped values at or below it; NaN for an empty cell): the internal report's truth."""
    reached = q.denominator * rank >= q.numerator * n[:, None]
    idx = np.where(reached.any(axis=1), reached.argmax(axis=1), len(grid) - 1)
    return np.where(n > 0, grid[idx].astype(float), np.nan)


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


def unclipped_values(frame: pd.DataFrame, keys: pd.DataFrame, design, queries) -> dict:
    """{query: per-cell sum or mean of the raw column, unclipped}, for the internal report only
    (the truth a clipped answer is compared with); one pass over the records per column."""
    cell, _ = cell_index(frame, keys, design.by)
    n_cells = len(keys)
    count = np.bincount(cell, minlength=n_cells).astype(float)
    out = {}
    for q in queries:
        total = np.bincount(cell, weights=frame[q.column].to_numpy(dtype=float), minlength=n_cells)
        if q.statistic == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                total = np.where(count > 0, total / np.where(count > 0, count, 1), np.nan)
        out[q.name] = total
    return out
