"""Tabulation, noise and the adaptive choice as vectorized pure functions.

Everything works on integer arrays over (geography unit, group) cells: a record's groups come
flattened as (row, group) pairs, counts are one `bincount` over the dense cell index, and
every (table, geography level, iteration level, stage) draws all its noise in one call to the
project's exact discrete Gaussian sampler. The functions take and return arrays only, so an
execution engine can map them over partitions of geography units.

Stage 1's noisy totals enter only `choose_detail`, which returns the rung of the ladder for
each group; the stage-2 measurement receives those rungs and never the totals.

Which rows a group has (its total, or the cells of a finer table) depends on the data, and that
is allowed: it is chosen from the group's noisy stage-1 total, noise the budget pays for (as a
suppressed total is dropped by its noisy value). Which units and groups are measured does not:
every declared geography unit and every group of the public iteration table is measured, an
empty one with its noisy totals (`geography`, `tabulate.check_units`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpspec.api import discrete_gaussian, discrete_gaussian_pmf, effective_sigma2, keyed_discrete_gaussian


def tally(index: np.ndarray, weight: np.ndarray | None, size: int) -> np.ndarray:
    """int64 counts of each index in 0..size-1, every occurrence counting `weight` (default 1).

    A weighted bincount sums in float64, exact for whole numbers below 2**53 (far above any
    population), and is cast back, so weighted and unweighted counts are the same integers."""
    if weight is None:
        return np.bincount(index, minlength=size)
    return np.bincount(index, weights=weight, minlength=size).astype(np.int64)


def group_counts(
    region: np.ndarray, group: np.ndarray, n_regions: int, n_groups: int, weight: np.ndarray | None = None
) -> np.ndarray:
    """Dense (n_regions, n_groups) counts of flattened (region, group) pairs; region -1 is none.

    weight: how many records each pair stands for (a distinct combination's count)."""
    ok = region >= 0
    flat = region[ok].astype(np.int64) * n_groups + group[ok]
    return tally(flat, None if weight is None else weight[ok], n_regions * n_groups).reshape(n_regions, n_groups)


def add_noise(counts: np.ndarray, sigma2: Fraction, rng: np.random.Generator) -> np.ndarray:
    """counts + exact discrete Gaussian noise of parameter sigma2, one draw per cell."""
    return counts + discrete_gaussian(sigma2, counts.shape, rng) if counts.size else counts.copy()


def add_keyed_noise(counts: np.ndarray, sigma2: Fraction, run_key: int, keys) -> np.ndarray:
    """counts + exact discrete Gaussian noise, row i's cells drawn from the stream of ``keys[i]``.

    counts: one row per key (a (geography, group) cell), any number of cells per row; keys: a
    sequence of unit keys or a `dpspec.api.KeyColumns`. Each cell's noise depends on the run
    key and its own key only, so any batching of cells, on any engine, gives the same counts.
    """
    if not counts.size:
        return counts.copy()
    per_key = counts.size // len(keys)
    return counts + keyed_discrete_gaussian(sigma2, run_key, keys, per_key).reshape(counts.shape)


def choose_detail(noisy_totals: np.ndarray, thresholds) -> np.ndarray:
    """The rung per group: 0 below the first threshold, k when T_k <= total < T_{k+1}."""
    return np.digitize(noisy_totals, np.asarray(thresholds, dtype=np.float64), right=False).astype(np.int8)


def detail_counts(
    region: np.ndarray,
    group: np.ndarray,
    cell: np.ndarray,
    selected: np.ndarray,
    n_groups: int,
    n_cells: int,
    n_regions: int | None = None,
    weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Counts of the stage-2 table for the selected (region, group) keys.

    selected: sorted flat keys region * n_groups + group. cell: each flattened pair's cell in
    the detail table (0..n_cells-1); weight: how many records each pair stands for (default 1).
    Returns (keys, counts of shape (len(keys), n_cells)).
    A dense key -> position map makes this one gather and one bincount (no search)."""
    ok = region >= 0
    key = region[ok].astype(np.int64) * n_groups + group[ok]
    size = (n_regions * n_groups) if n_regions is not None else (int(key.max()) + 1 if key.size else 1)
    size = max(size, int(selected.max()) + 1 if len(selected) else 0)
    position = np.full(size, -1, dtype=np.int64)
    position[selected] = np.arange(len(selected))
    pos = position[key]
    hit = pos >= 0
    flat = pos[hit] * n_cells + cell[ok][hit]
    counts = tally(flat, None if weight is None else weight[ok][hit], len(selected) * n_cells)
    return selected, counts.reshape(len(selected), n_cells)


def suppression_threshold(sigma2: Fraction, chance) -> int | None:
    """Smallest integer t with P(noise <= t) >= chance: a zero count is dropped (kept only if
    its noisy value exceeds t) with probability at least `chance`. A public function of the
    noise parameter, as in production; None when suppression is off."""
    if chance is None or chance == 0:
        return None
    s2 = effective_sigma2(sigma2)
    bound = int(math.ceil(40 * math.sqrt(float(s2)))) + 2
    support = np.arange(-bound, bound + 1)
    cdf = np.cumsum(discrete_gaussian_pmf(s2, support))
    cdf /= cdf[-1]
    return int(support[np.searchsorted(cdf, float(chance), side="left")])


def cell_codes(values: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """Mixed-radix index of a record's cell in a crossed table (variables' codes, their sizes)."""
    out = np.zeros(len(values[0]) if values else 0, dtype=np.int64)
    for v, s in zip(values, sizes):
        out = out * s + v
    return out
