"""Assembling the released table: exact statistics per declared cell, noise, intervals, post-processing."""
from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec.api import DataError, project_to_total, typed_keys

from . import algorithm
from .accuracy import half_width, scale_of


def release(spec, design, parts, frame: pd.DataFrame, keys: pd.DataFrame, rng) -> tuple[pd.DataFrame, dict]:
    n_cells = len(keys)
    out = typed_keys(spec, design.table, keys)
    cell, row = algorithm.cell_index(frame, out, design.by)
    if row is not None:
        raise DataError(f"table '{design.table}', row {row + 1}: its keys are not among the declared values")
    internal: dict = {"truth": {}, "clipped": {}, "observed_ranges": {}, "records": len(frame)}
    count = algorithm.counts(cell, n_cells)
    noisy_parts: dict = {}
    clipped: dict = {}  # (column, low, high) -> clipped values: a mean and a median of one column clip it once
    for p in parts:
        q = p.query
        values = None
        if q.clipped and p.role != "count":  # a mean's count part needs no values
            key = (q.column, q.low, q.high)
            if key not in clipped:
                clipped[key] = algorithm.clipped_values(frame, q.column, q.low, q.high)
            values, internal["clipped"][q.name], extremes = clipped[key]
            internal["observed_ranges"][f"{design.table}.{q.column}"] = extremes
        if p.role == "score":
            grid = np.array(q.grid, dtype=np.int64)
            rank = algorithm.ranks(cell, values, n_cells, grid, q.low, q.high)
            pick = algorithm.exponential_quantiles(rank, count, q.q, p.parameter, rng)
            noisy_parts[(q.name, "score")] = (grid[pick], p)
            internal["truth"][f"{q.name}:score"] = algorithm.grid_quantiles(rank, count, q.q, grid)
            continue
        exact = count if "count" in (p.role, q.statistic) else algorithm.sums(cell, values, n_cells, max(abs(q.low), abs(q.high)))
        noisy, _, _ = algorithm.add_noise(exact, design.noise, p.sensitivity.l1, p.sensitivity.l2_squared,
                                          design.budget_of(q) / (2 if q.statistic == "mean" else 1), rng)
        internal["truth"][f"{q.name}:{p.role}"] = exact
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
    group = (keys.groupby(list(total_by), sort=False, observed=True).ngroup().to_numpy()
             if total_by else np.zeros(len(keys), dtype=np.int64))
    totals = np.bincount(group, weights=exact, minlength=int(group.max(initial=-1)) + 1).round().astype(np.int64)
    out = np.empty(len(noisy), dtype=np.int64)
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(totals) + 1))
    for g in range(len(totals)):
        cells = order[bounds[g]:bounds[g + 1]]
        out[cells] = project_to_total(noisy[cells], int(totals[g]))
    return out
