"""The aggregate's exact statistics computed where an engine holds the table (Spark): the engine's
group-by by the release's keys clips and adds up the rows where they live, so only one row of
totals per observed cell (and, for a quantile, one per cell and grid bucket) reaches the driver;
the noise is then added here, in the same order as for a local table, so the release does not
depend on the engine.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec.api import DataError

from .release import Exact, clip_key


def _clip_keys(design) -> list[tuple]:
    return list(dict.fromkeys(clip_key(q) for q in design.queries if q.clipped))


def _cells(design, keys: pd.DataFrame, found: pd.DataFrame) -> np.ndarray:
    """The declared cell of each observed group (a DataError for a group outside them)."""
    if not design.by:
        return np.zeros(len(found), dtype=np.intp)
    index = pd.MultiIndex.from_frame(keys[list(design.by)].astype(str))
    at = index.get_indexer(pd.MultiIndex.from_frame(found[list(design.by)].astype(str)))
    if (at < 0).any():
        bad = found.iloc[int(np.flatnonzero(at < 0)[0])]
        raise DataError(
            f"table '{design.table}': records with {', '.join(f'{c} = {bad[c]}' for c in design.by)} are "
            "not among the declared values"
        )
    return at


def exact_on_engine(design, table, keys: pd.DataFrame, engine) -> Exact:
    """The same `Exact` as `release.exact_here`, from the engine's own aggregates of `table`
    (`clipped_totals`, and `bucket_counts` for a quantile): one row per observed cell, or per
    cell and grid bucket, reaches the driver."""
    clips = _clip_keys(design)
    found = engine.clipped_totals(table, design.by, clips)
    n_cells = len(keys)
    at = _cells(design, keys, found)
    count = np.zeros(n_cells, dtype=np.int64)
    np.add.at(count, at, found["count"].to_numpy(dtype=np.int64))
    exact = Exact(count, int(count.sum()))
    for i, key in enumerate(clips):
        sums = np.zeros(n_cells, dtype=np.int64)
        np.add.at(sums, at, found[f"sum{i}"].to_numpy(dtype=np.int64))
        exact.sums[key] = sums
        exact.clipped[key] = int(found[f"clipped{i}"].sum())
        exact.extremes[key] = (
            (int(found[f"min{i}"].min()), int(found[f"max{i}"].max())) if len(found) else (key[1], key[2])
        )
    for q in design.queries:
        if q.statistic != "quantile":
            continue
        grid = len(q.grid)
        rows = engine.bucket_counts(table, design.by, q.column, q.low, q.grid_step, q.high)
        per_bucket = np.zeros((n_cells, grid + 1), dtype=np.int64)  # the last: above the grid's last point
        np.add.at(
            per_bucket,
            (_cells(design, keys, rows), np.minimum(rows["bucket"].to_numpy(dtype=np.intp), grid)),
            rows["count"].to_numpy(dtype=np.int64),
        )
        exact.ranks[q.name] = np.cumsum(per_bucket, axis=1)[:, :grid]
    return exact
