"""Assembling the released table: exact statistics per declared cell, noise, intervals, post-processing."""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd

from dpspec.api import DataError, project_to_total

from . import algorithm
from .accuracy import half_width, scale_of


@attrs.define
class Exact:
    """The confidential statistics per declared cell, wherever they were computed (this process,
    or an engine's group-by): what the noise is added to. Keyed by (column, low, high) for what
    depends only on a clipped column; ranks by query name."""

    count: np.ndarray
    records: int
    sums: dict = attrs.Factory(dict)
    clipped: dict = attrs.Factory(dict)
    extremes: dict = attrs.Factory(dict)
    ranks: dict = attrs.Factory(dict)


def clip_key(q) -> tuple:
    return (q.column, q.low, q.high)


def exact_here(design, frame: pd.DataFrame, keys: pd.DataFrame) -> Exact:
    """Records to cells by integer codes, then `bincount`: no per-record Python, one clip per column."""
    n_cells = len(keys)
    cell, row = algorithm.cell_index(frame, keys, design.by)
    if row is not None:
        raise DataError(f"table '{design.table}', row {row + 1}: its keys are not among the declared values")
    exact = Exact(algorithm.counts(cell, n_cells), len(frame))
    for q in design.queries:
        if not q.clipped:
            continue
        key = clip_key(q)
        if key not in exact.clipped:
            values, exact.clipped[key], exact.extremes[key] = algorithm.clipped_values(frame, q.column, q.low, q.high)
            if any(o.statistic in ("sum", "mean") and clip_key(o) == key for o in design.queries):
                exact.sums[key] = algorithm.sums(cell, values, n_cells, max(abs(q.low), abs(q.high)))
            quantiles = [o for o in design.queries if o.statistic == "quantile" and clip_key(o) == key]
            for o in quantiles:
                exact.ranks[o.name] = algorithm.ranks(
                    cell, values, n_cells, np.array(o.grid, dtype=np.int64), o.low, o.high
                )
    return exact


def release(spec, design, parts, exact: Exact, out: pd.DataFrame, rng) -> tuple[pd.DataFrame, dict]:
    """Noise on every measurement (in `parts` order, so a release is the same wherever its exact
    statistics were computed), intervals and post-processing; `out` holds the typed keys."""
    count = exact.count
    internal: dict = {"truth": {}, "clipped": {}, "observed_ranges": {}, "records": exact.records}
    noisy_parts: dict = {}
    for p in parts:
        q = p.query
        if q.clipped:
            internal["clipped"][q.name] = exact.clipped[clip_key(q)]
            internal["observed_ranges"][f"{design.table}.{q.column}"] = exact.extremes[clip_key(q)]
        if p.role == "score":
            grid = np.array(q.grid, dtype=np.int64)
            rank = exact.ranks[q.name]
            pick = algorithm.exponential_quantiles(rank, count, q.q, p.parameter, rng)
            noisy_parts[(q.name, "score")] = (grid[pick], p)
            internal["truth"][f"{q.name}:score"] = algorithm.grid_quantiles(rank, count, q.q, grid)
            continue
        value = count if "count" in (p.role, q.statistic) else exact.sums[clip_key(q)]
        noisy, _, _ = algorithm.add_noise(
            value,
            design.noise,
            p.sensitivity.l1,
            p.sensitivity.l2_squared,
            design.budget_of(q) / (2 if q.statistic == "mean" else 1),
            rng,
        )
        internal["truth"][f"{q.name}:{p.role}"] = value
        noisy_parts[(q.name, p.role)] = (noisy, p)
    for q in design.queries:
        if q.statistic == "quantile":  # a draw on the grid: no interval from a noise law
            out[q.name] = noisy_parts[(q.name, "score")][0]
            out[f"{q.name}_lower"] = np.nan
            out[f"{q.name}_upper"] = np.nan
            continue
        if q.statistic == "mean":
            s, ps = noisy_parts[(q.name, "sum")]
            c, pc = noisy_parts[(q.name, "count")]
            # post-processing: a mean of clipped values lies within the bounds, so the ratio is kept there
            out[q.name] = np.clip(s / np.maximum(c, 1), q.low, q.high)
            out[f"{q.name}_sum"], out[f"{q.name}_count"] = s, c
            out[f"{q.name}_sum_scale"] = scale_of(design.noise, ps.parameter)
            out[f"{q.name}_count_scale"] = scale_of(design.noise, pc.parameter)
            out[f"{q.name}_lower"] = np.nan  # a ratio of two noisy answers: no exact interval
            out[f"{q.name}_upper"] = np.nan
            continue
        noisy, p = noisy_parts[(q.name, "value")]
        k, _ = half_width(design.noise, p.parameter)
        lower, upper = noisy - k, noisy + k
        if design.postprocess == "total" and q.statistic == "count":
            # consistency with the public total: biased, and no longer value + symmetric noise, so no interval
            noisy = to_public_totals(out, design.total_by, noisy, internal["truth"][f"{q.name}:value"])
            lower = upper = np.full(len(noisy), np.nan)
        elif design.nonnegative:  # a monotone map: the interval still covers whenever it covered
            noisy, lower, upper = np.maximum(noisy, 0), np.maximum(lower, 0), np.maximum(upper, 0)
        out[q.name] = noisy
        out[f"{q.name}_scale"] = scale_of(design.noise, p.parameter)
        out[f"{q.name}_lower"], out[f"{q.name}_upper"] = lower, upper
    return out, internal


def to_public_totals(keys: pd.DataFrame, total_by: tuple, noisy: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Each group of cells (by the public total's columns; one group for a grand total) projected
    onto the nonnegative whole numbers adding up to the group's total (the public statistic, an
    exact count of the same records). One projection per group, never per record."""
    group = (
        keys.groupby(list(total_by), sort=False, observed=True).ngroup().to_numpy()
        if total_by
        else np.zeros(len(keys), dtype=np.int64)
    )
    totals = np.bincount(group, weights=exact, minlength=int(group.max(initial=-1)) + 1).round().astype(np.int64)
    out = np.empty(len(noisy), dtype=np.int64)
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(totals) + 1))
    for g in range(len(totals)):
        cells = order[bounds[g] : bounds[g + 1]]
        out[cells] = project_to_total(noisy[cells], int(totals[g]))
    return out
