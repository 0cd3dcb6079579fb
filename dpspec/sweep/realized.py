"""Realized error of one run against the confidential data (internal figures only).

Which tables are compared: a mechanism's own `compared_counts`, or else, for every table whose
microdata the run released, the spec's released count queries on it and, at each geography
level the table holds, the count by that level alone ("total") and by the level crossed with
every column that has a declared value set ("detailed"). A table's level is the finest
geography level among its columns.

The measures, per table and per size class of the true count (docs/guides/sweep.md):
  MAE        mean |released - true| over the cells either side has units in;
  MAPE       mean |released - true| / true, in percent, over the cells whose true count is > 0;
  share off  the fraction of those cells (either side nonzero) with |released - true| > off_by.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec import ir
from dpspec.contract.results import ComparedCounts, compared_counts_result
from dpspec.run.compiler import counted

SIZE_CLASSES = (
    (0, 1, "0"),
    (1, 10, "1-9"),
    (10, 100, "10-99"),
    (100, 1000, "100-999"),
    (1000, 10_000, "1,000-9,999"),
    (10_000, None, "10,000+"),
)
MAX_DETAIL_CELLS = 1_000_000  # the "detailed" table is skipped when its value sets multiply beyond this


def _finite_size(col: ir.Column) -> int | None:
    t = col.type
    if t.kind == "enum":
        return len(t.values)
    if t.kind == "bool":
        return 2
    if t.kind == "int" and t.low is not None and t.high is not None:
        return t.high - t.low + 1
    return None


def default_queries(spec: ir.Spec, table: ir.Table) -> list[tuple[str, str | None, tuple]]:
    """(name, level, columns) compared for one table whose microdata were released."""
    geo = spec.domain.geography
    levels = [lv for lv in (geo.levels if geo else ()) if lv in table.column_names]
    out = []
    for item in spec.releases:
        if item.kind == "count" and item.query is not None and item.query.table == table.name:
            cols = item.query.columns
            level = next((lv for lv in reversed(levels) if lv in cols), None)
            out.append((item.query.describe(), level, cols))
    detail = [c.name for c in table.columns if c.name not in levels and _finite_size(c) is not None]
    cells = int(np.prod([_finite_size(table.column(c)) for c in detail])) if detail else 1
    for level in levels:
        out.append((f"{level}: total", level, (level,)))
        if detail and cells <= MAX_DETAIL_CELLS:
            out.append((f"{level}: " + " x ".join(detail), level, (level, *detail)))
    return list({name: (name, level, cols) for name, level, cols in out}.values())


def _keyed(counts: pd.DataFrame, cols) -> pd.Series:
    """A count table as a Series keyed by its cells written as text (types differ across engines)."""
    if not cols:
        return pd.Series([int(counts["count"].sum())], index=pd.Index(["total"]))
    keys = counts[list(cols)].astype(str)
    index = pd.MultiIndex.from_frame(keys) if len(cols) > 1 else pd.Index(keys[cols[0]])
    return pd.Series(counts["count"].to_numpy(dtype=float), index=index).groupby(level=list(range(len(cols)))).sum()


def _marginal(base: pd.DataFrame, cols) -> pd.DataFrame:
    """A count table by `cols` summed from a finer one (already small: one row per cell)."""
    if not cols:
        return pd.DataFrame({"count": [int(base["count"].sum())]})
    return base.groupby(list(cols), observed=True, dropna=False, sort=False)["count"].sum().reset_index()


def _tables(table, queries) -> dict:
    """{name: Series} for queries over one table: counted once where its rows live, by every column
    any query uses, then summed down here (one pass over a million rows instead of one per query)."""
    union = list(dict.fromkeys(c for _, _, cols in queries for c in cols))
    base = counted(table, union)
    return {name: _keyed(_marginal(base, cols), tuple(cols)) for name, _, cols in queries}


class TruthCache:
    """The confidential counts, tabulated once per table for the whole sweep."""

    def __init__(self, data: dict):
        self.data = data
        self.seen: dict = {}

    def get(self, spec: ir.Spec, table: str) -> dict:
        if table not in self.seen:
            self.seen[table] = _tables(self.data[table], default_queries(spec, spec.domain.table(table)))
        return self.seen[table]


def comparisons(spec: ir.Spec, mech, params: dict, data: dict, release, truth: TruthCache) -> list[ComparedCounts]:
    """The tables compared in one run: the mechanism's own, or the default ones."""
    own = compared_counts_result(mech.compared_counts(spec, params, data, release), mech)
    if own is not None:
        return own
    out = []
    for table in spec.domain.tables:
        if table.name not in release.outputs or table.name not in data:
            continue
        queries = default_queries(spec, table)
        released = _tables(release.outputs[table.name], queries)
        confidential = truth.get(spec, table.name)
        for name, level, _ in queries:
            out.append(ComparedCounts(name, level, confidential[name], released[name]))
    return out


def _class_of(truth: np.ndarray) -> np.ndarray:
    labels = np.empty(truth.shape, dtype=object)
    for low, high, label in SIZE_CLASSES:
        labels[(truth >= low) & ((truth < high) if high is not None else True)] = label
    return labels


def _measures(truth: np.ndarray, released: np.ndarray, off_by: float) -> dict:
    err = np.abs(released - truth)
    either = (truth != 0) | (released != 0)
    positive = truth > 0
    return {
        "cells": int(either.sum()),
        "mae": float(err[either].mean()) if either.any() else 0.0,
        "mape_percent": float(100 * (err[positive] / truth[positive]).mean()) if positive.any() else None,
        "share_off": float((err[either] > off_by).mean()) if either.any() else 0.0,
    }


def measure(compared: list[ComparedCounts], off_by: float) -> list[dict]:
    """Rows {table, level, size, cells, mae, mape_percent, share_off}: size "all" and each class."""
    rows = []
    for c in compared:
        truth, released = c.truth.align(c.released, join="outer", fill_value=0)
        t, r = truth.to_numpy(dtype=float), released.to_numpy(dtype=float)
        base = {"table": c.table, "level": c.level}
        rows.append({**base, "size": "all", **_measures(t, r, off_by)})
        classes = _class_of(t)
        for _, _, label in SIZE_CLASSES:
            mask = classes == label
            if mask.any():
                m = _measures(t[mask], r[mask], off_by)
                if m["cells"]:
                    rows.append({**base, "size": label, **m})
    return rows
