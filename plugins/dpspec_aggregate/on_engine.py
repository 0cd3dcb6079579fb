"""The aggregate's exact statistics computed where an engine holds the table (Spark): a group-by
by the release's keys, whose units clip and add up their own rows, so only one row of totals per
observed cell (and, for a quantile, one per grid point) reaches the driver; the noise is then
added here, in the same order as for a local table, so the release does not depend on the engine.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec.api import DataError

from .release import Exact, clip_key


def _clip_keys(design) -> list[tuple]:
    return list(dict.fromkeys(clip_key(q) for q in design.queries if q.clipped))


def _unit(design, clips: list[tuple]):
    """Per group of rows (one observed cell): its count, and per clipped column its clipped sum,
    how many values were clipped, and its smallest and largest raw value."""
    by = list(design.by)

    def totals(key, rows, rng):
        out = {c: [v] for c, v in zip(by, key)}
        out["n"] = [len(rows)]
        for i, (column, low, high) in enumerate(clips):
            values = rows[column].to_numpy(dtype=np.int64)
            clipped = np.clip(values, low, high)
            out[f"s{i}"], out[f"c{i}"] = [int(clipped.sum())], [int(np.count_nonzero(clipped != values))]
            out[f"lo{i}"], out[f"hi{i}"] = [int(values.min())], [int(values.max())]
        return pd.DataFrame(out)

    return totals


def _rank_unit(design, query):
    """Per observed cell: how many of its clipped values are at most each grid point."""
    by, grid = list(design.by), np.array(query.grid, dtype=np.int64)

    def ranks(key, rows, rng):
        values = np.sort(np.clip(rows[query.column].to_numpy(dtype=np.int64), query.low, query.high))
        out = {c: [v] * len(grid) for c, v in zip(by, key)}
        out["g"], out["rank"] = np.arange(len(grid), dtype=np.int64), np.searchsorted(values, grid, side="right")
        return pd.DataFrame(out)

    return ranks


def _collect(engine, held, order_by) -> pd.DataFrame:
    try:
        chunks = list(engine.stream(held, order_by=order_by))
    finally:
        engine.drop(held)
    return pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame()


def _cells(design, keys: pd.DataFrame, found: pd.DataFrame) -> np.ndarray:
    """The declared cell of each observed group (a DataError for a group outside them)."""
    if not design.by:
        return np.zeros(len(found), dtype=np.intp)
    index = pd.MultiIndex.from_frame(keys[list(design.by)].astype(str))
    at = index.get_indexer(pd.MultiIndex.from_frame(found[list(design.by)].astype(str)))
    if (at < 0).any():
        bad = found.iloc[int(np.flatnonzero(at < 0)[0])]
        raise DataError(f"table '{design.table}': records with {', '.join(f'{c} = {bad[c]}' for c in design.by)} are "
                        "not among the declared values")
    return at


def exact_on_engine(design, table, keys: pd.DataFrame, engine) -> Exact:
    """The same `Exact` as `release.exact_here`, from the engine's group-by of `table`."""
    clips = _clip_keys(design)
    columns = sorted({c for c, _, _ in clips})
    schema = {**{c: table.kinds[c] for c in design.by}, "n": "int64",
              **{f"{k}{i}": "int64" for i in range(len(clips)) for k in ("s", "c", "lo", "hi")}}
    held = engine.map_groups(table, design.by, _unit(design, clips), stage="aggregate", schema=schema,
                             collect=False, columns=columns, ordered=False)
    found = _collect(engine, held, list(design.by) or None)
    n_cells = len(keys)
    at = _cells(design, keys, found)
    count = np.zeros(n_cells, dtype=np.int64)
    np.add.at(count, at, found["n"].to_numpy(dtype=np.int64) if len(found) else np.zeros(0, np.int64))
    exact = Exact(count, int(count.sum()))
    for i, key in enumerate(clips):
        sums = np.zeros(n_cells, dtype=np.int64)
        if len(found):
            np.add.at(sums, at, found[f"s{i}"].to_numpy(dtype=np.int64))
        exact.sums[key] = sums
        exact.clipped[key] = int(found[f"c{i}"].sum()) if len(found) else 0
        exact.extremes[key] = ((int(found[f"lo{i}"].min()), int(found[f"hi{i}"].max())) if len(found)
                               else (key[1], key[2]))
    for q in design.queries:
        if q.statistic != "quantile":
            continue
        grid = len(q.grid)
        rank_schema = {**{c: table.kinds[c] for c in design.by}, "g": "int64", "rank": "int64"}
        held = engine.map_groups(table, design.by, _rank_unit(design, q), stage=f"aggregate ranks {q.name}",
                                 schema=rank_schema, collect=False, columns=[q.column], ordered=False)
        rows = _collect(engine, held, [*design.by, "g"])
        ranks = np.zeros((n_cells, grid), dtype=np.int64)
        if len(rows):
            ranks[_cells(design, keys, rows), rows["g"].to_numpy(dtype=np.intp)] = rows["rank"].to_numpy(dtype=np.int64)
        exact.ranks[q.name] = ranks
    return exact
