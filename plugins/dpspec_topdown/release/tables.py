"""TopDown's two release tables as `StreamedTable`s: written a piece at a time, never held whole.

Why: at national size neither the protected microdata (a row per person) nor the noisy
measurements (every cell of every query at every unit) fit one process, yet both follow from
small things a run keeps anyway. The microdata are the protected finest histogram (sparse),
expanded a range of finest units at a time; their counts, which invariant checks and release
queries need, come from the protected histograms without a pass over persons. The measurements
are the confidential histograms (sparse) plus noise re-drawn one query of one node at a time
from the node's keyed stream, resumed where the node's own draws for that query began
(`node_noise.LevelNoise`). Rows come in the order the whole frames always had, so the files
written chunk by chunk hold the same bytes. A keyed query (node_noise.keyed, the DHC detailed
histogram) lists every group of every unit too, each answer re-drawn from its own stream, a few
units at a time: the values the nodes' fits read, and the same distribution for the others.
"""

from __future__ import annotations

from typing import Mapping

import attrs
import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpspec.api import StreamedTable, discrete_gaussian, discrete_gaussian_variance, keyed_rng

from ..measurement.node_noise import (
    STAGE,
    LevelNoise,
    add_class_noise,
    group_sums,
    keyed,
    keyed_answers,
    sparse_group_sums,
)

CHUNK_ROWS = 1 << 20  # rows per chunk (whole finest units, whole nodes): ~50 MB of frame at most


@attrs.frozen
class _Microdata:
    """The microdata's rows for any range of finest units, and its counts from the histograms."""

    hier: object
    schema: object
    histograms: Mapping  # level name -> protected (units x cells) csr, canonical
    categories: Mapping  # column -> CategoricalDtype given to the column (the input's codes)
    per_unit: Mapping  # explicit level name -> its code for every finest unit
    derived: tuple = ()  # recodes the input carried as columns of their name (an invariant's factor)

    @classmethod
    def build(cls, hier, schema, histograms: Mapping, categories: Mapping | None, recode_columns=()) -> "_Microdata":
        last = len(hier.levels) - 1
        canonical = {}
        for name, h in histograms.items():
            if not h.has_canonical_format:
                h = h.copy()
                h.sum_duplicates()
            canonical[name] = h
        per_unit = {
            lv.name: _published(lv).take(hier.ancestor(last, k)).to_numpy()
            for k, lv in enumerate(hier.levels)
            if not lv.implicit
        }
        derived = tuple(next(r for r in schema.recodes if r.name == name) for name in recode_columns)
        return cls(hier, schema, canonical, dict(categories or {}), per_unit, derived)

    def with_derived(self, cols: dict) -> dict:
        """`cols` (decoded variables) plus each derived column: the recode label of its variable."""
        for r in self.derived:
            categories = self.schema.categories[self.schema.names.index(r.variable)]
            at = pd.Index(list(categories)).get_indexer(cols[r.variable])
            cols[r.name] = np.asarray(r.labels, dtype=object)[np.asarray(r.group_of, dtype=np.int64)[at]]
        return cols

    @property
    def finest(self) -> sp.csr_matrix:
        return self.histograms[self.hier.names[-1]]

    def typed(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Columns the input held as categoricals get the input's categories (codes compare exactly)."""
        for col, dtype in self.categories.items():
            if col in frame.columns:
                frame[col] = pd.Categorical(frame[col].astype(str), categories=dtype.categories)
        return frame

    def rows(self, start: int, stop: int) -> pd.DataFrame:
        """Persons of finest units [start, stop): sorted by unit, then cell (a canonical CSR's order).

        Each column is built per nonzero (unit, cell) entry and then repeated by its count, so no
        per-person index array is made on the way."""
        sub = self.finest[start:stop]
        counts = sub.data.astype(np.int64)
        entry_unit = np.repeat(np.arange(start, stop, dtype=np.int64), np.diff(sub.indptr))
        cols = {name: np.repeat(codes[entry_unit], counts) for name, codes in self.per_unit.items()}
        for name, values in self.with_derived(self.schema.decode(sub.indices)).items():
            cols[name] = np.repeat(values, counts)
        return self.typed(pd.DataFrame(cols))

    def count(self, by: list) -> pd.DataFrame:
        """Persons per observed combination of `by`, sorted, as `count`: from the protected
        histogram of the finest level `by` names (the levels above it follow from the tree)."""
        hier, schema = self.hier, self.schema
        geo = [c for c in by if c in self.per_unit]
        derived = {r.name: r.variable for r in self.derived}
        variables = list(dict.fromkeys(derived.get(c, c) for c in by if c not in self.per_unit))
        deepest = max((hier.index(c) for c in geo), default=0)
        query = schema.canonical(variables)
        h = sp.coo_matrix(self.histograms[hier.names[deepest]] @ schema.indicator(query))
        keep = h.data != 0
        unit, group, count = h.row[keep], h.col[keep], h.data[keep].astype(np.int64)
        cols = {}
        for c in geo:
            k = hier.index(c)
            cols[c] = _published(hier.levels[k]).take(hier.ancestor(deepest, k)[unit]).to_numpy()
        if variables:  # a representative cell of each group: the other variables' first category
            coords = np.unravel_index(group, [len(schema.categories[schema.names.index(v)]) for v in query])
            cell = np.ravel_multi_index(
                [coords[query.index(v)] if v in query else np.zeros(group.size, np.int64) for v in schema.names],
                schema.shape,
            )
            decoded = self.with_derived(schema.decode(cell)) if self.derived else schema.decode(cell)
            cols.update({v: decoded[v] for v in [*variables, *(c for c in by if c in derived)]})
        frame = self.typed(pd.DataFrame({c: cols[c] for c in by}))
        frame["count"] = count
        out = frame.groupby(list(by), observed=True, sort=True, dropna=False)["count"].sum().reset_index()
        return out.astype({"count": "int64"})

    def chunk_bounds(self, chunk_rows: int) -> list[tuple[int, int]]:
        """Ranges of whole finest units of about `chunk_rows` persons each."""
        return batches(np.asarray(self.finest.sum(axis=1), dtype=np.int64).ravel(), chunk_rows)


def microdata_table(
    hier,
    schema,
    histograms: Mapping,
    categories: Mapping | None = None,
    chunk_rows: int = CHUNK_ROWS,
    recode_columns=(),
) -> StreamedTable:
    """One row per protected person: every explicit level's code and the histogram variables.

    histograms: level name -> protected (units x cells) csr (the finest gives the rows, the
    others the counts). categories: column -> CategoricalDtype (the input's, when it had one).
    recode_columns: recodes of the schema released as columns of their name (their labels)."""
    micro = _Microdata.build(hier, schema, histograms, categories, recode_columns)
    bounds = micro.chunk_bounds(max(1, int(chunk_rows)))

    def chunks():
        for start, stop in bounds:
            yield micro.rows(start, stop)

    empty = micro.rows(0, 0)
    return StreamedTable(
        columns=list(empty.columns),
        rows=int(micro.finest.sum()),
        chunks=chunks,
        dtypes=empty.dtypes.to_dict(),
        counter=micro.count,
    )


def measurements_table(
    hier,
    schema,
    alloc,
    confidential: Mapping,
    noisy: Mapping,
    plans: Mapping,
    run_key: int | None,
    chunk_rows: int = CHUNK_ROWS,
    classes: Mapping | None = None,
) -> StreamedTable:
    """Tidy noisy measurements: level, geocode, query, cell, value, variance (one row each).

    Level by level and query by query in the allocation's order, then unit and cell. A (level,
    query) is taken from `noisy` when the run drew it whole ((units x groups) arrays, runs without
    an engine), else re-drawn node by node: confidential answers (from `confidential`, level ->
    csr) plus the node's noise for that query, resumed at the position `plans[level]` recorded.
    classes: level -> (class of every unit, per query {class: sigma²}, ...) under the optimized
    spine (spine.py): each unit's variance is its class's, and a bypassed unit has no rows.

    Long (about 100 lines): its three short closures (a frame of rows, the chunks, a keyed
    query's chunks) share the table's categories and the run's noise plans."""
    classes = dict(classes or {})
    columns = ["level", "geocode", "query", "cell", "value", "variance"]
    queries = list(alloc.queries)
    level_codes = {qb.level: _codes(hier.level(qb.level)).astype(str) for qb in queries}
    dtypes = {
        "level": pd.CategoricalDtype(_concat_categories([pd.Index([qb.level]) for qb in queries])),
        "geocode": pd.CategoricalDtype(_concat_categories([level_codes[qb.level] for qb in queries])),
        "query": pd.CategoricalDtype(_concat_categories([pd.Index([qb.name]) for qb in queries])),
        "cell": np.dtype(np.int32),
        "value": np.dtype(np.int64),
        "variance": np.dtype(np.float64),
    }
    geo_index = {lv: dtypes["geocode"].categories.get_indexer(codes) for lv, codes in level_codes.items()}
    chunk_rows = max(1, int(chunk_rows))

    def frame(qb, start: int, y: np.ndarray) -> pd.DataFrame:
        units, groups = y.shape
        n = y.size
        variance = np.full(n, discrete_gaussian_variance(qb.sigma2))
        keep = None
        if qb.level in classes:
            cls = classes[qb.level][0][start : start + units]
            j = [q.query for q in alloc.for_level(qb.level)].index(qb.query)
            per_class = classes[qb.level][1][j]
            by_class = np.array(
                [
                    discrete_gaussian_variance(per_class[c]) if c in per_class else np.nan
                    for c in range(max(per_class, default=0) + 1)
                ]
            )
            unit_var = np.where(cls >= 0, by_class[np.maximum(cls, 0)], np.nan)
            variance = np.repeat(unit_var, groups)
            keep = np.repeat(cls >= 0, groups)
        out = pd.DataFrame(
            {
                "level": pd.Categorical.from_codes(
                    np.full(n, dtypes["level"].categories.get_loc(qb.level)), dtype=dtypes["level"]
                ),
                "geocode": pd.Categorical.from_codes(
                    np.repeat(geo_index[qb.level][start : start + units], groups), dtype=dtypes["geocode"]
                ),
                "query": pd.Categorical.from_codes(
                    np.full(n, dtypes["query"].categories.get_loc(qb.name)), dtype=dtypes["query"]
                ),
                "cell": np.tile(np.arange(groups, dtype=np.int32), units),
                "value": y.ravel(),
                "variance": variance,
            }
        )
        return out if keep is None else out[keep].reset_index(drop=True)

    def chunks():
        for qb in queries:
            groups = schema.marginal_size(qb.query)
            if (qb.level, qb.query) in noisy:
                y_all = noisy[(qb.level, qb.query)]
                step = max(1, chunk_rows // groups)
                for start in range(0, y_all.shape[0], step):
                    yield frame(qb, start, y_all[start : start + step])
                continue
            plan: LevelNoise = plans[qb.level]
            j = [q.query for q in alloc.for_level(qb.level)].index(qb.query)
            cell_groups = schema.groups(qb.query)
            conf = confidential[qb.level]
            if keyed(groups):  # each answer from its own stream: any range of units, no node's stream
                yield from keyed_chunks(qb, j, groups, cell_groups, conf, plan)
                continue
            for first, last in batches((plan.stops - plan.starts) * groups, chunk_rows):
                start, stop = int(plan.starts[first]), int(plan.stops[last - 1])
                y = group_sums(conf[start:stop], cell_groups, groups)
                for i in range(first, last):
                    a, b = int(plan.starts[i]) - start, int(plan.stops[i]) - start
                    rng = keyed_rng(run_key, STAGE, plan.keys[i], position=int(plan.positions[i, j]))
                    if qb.level in classes:
                        first_unit = int(plan.starts[i])
                        add_class_noise(
                            y[a:b], classes[qb.level][0][first_unit : first_unit + b - a], classes[qb.level][1][j], rng
                        )
                    else:
                        y[a:b] += discrete_gaussian(qb.sigma2, (b - a, groups), rng)
                yield frame(qb, start, y)

    def keyed_chunks(qb, j, groups, cell_groups, conf, plan):
        """A keyed query's rows (node_noise.keyed): the very answers the nodes drew, re-drawn
        from their own streams a few units at a time, every group of every unit listed."""
        step = max(1, chunk_rows // groups)
        per_class = classes[qb.level] if qb.level in classes else None
        for i in range(len(plan.keys)):
            first, last = int(plan.starts[i]), int(plan.stops[i])
            cls = None if per_class is None else per_class[0][first:last]
            for start in range(first, last, step):
                stop = min(start + step, last)
                flat = np.arange((start - first) * groups, (stop - first) * groups, dtype=np.int64)
                keys, truth = sparse_group_sums(conf[start:stop], cell_groups, groups)
                y = keyed_answers(
                    run_key,
                    plan.keys[i],
                    qb.name,
                    groups,
                    flat,
                    (keys + (start - first) * groups, truth),
                    qb.sigma2,
                    cls,
                    None if per_class is None else per_class[1][j],
                )
                yield frame(qb, start, y.reshape(stop - start, groups))

    rows = sum(_measured_units(hier, classes, qb.level) * schema.marginal_size(qb.query) for qb in queries)
    return StreamedTable(columns=columns, rows=int(rows), chunks=chunks, dtypes=dtypes)


def batches(sizes: np.ndarray, rows: int) -> list[tuple[int, int]]:
    """Consecutive ranges [first, last) of items (finest units, nodes) holding about `rows` rows
    each, given each item's rows; an item is never split."""
    cum = np.cumsum(np.asarray(sizes, dtype=np.int64))
    if not cum.size:
        return []
    cuts = np.searchsorted(cum, np.arange(rows, int(cum[-1]), rows), side="left") + 1
    bounds = np.unique(np.concatenate([[0], np.minimum(cuts, cum.size), [cum.size]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def _codes(level) -> pd.Index:
    """A level's unit codes as an Index (whole numbers as int64, names as objects)."""
    return pd.Index(list(level.codes))


def _measured_units(hier, classes: Mapping, level: str) -> int:
    """Units of a level with measurements: all but those the optimized spine bypassed."""
    if level not in classes:
        return hier.level(level).n_units
    return int((classes[level][0] >= 0).sum())


def _published(level) -> pd.Index:
    """A level's codes as the release names them: a unit the spine split (spine.py) under the
    code of the unit it is a part of; the measurements keep the parts' own codes (`_codes`)."""
    return _codes(level) if level.labels is None else pd.Index(list(level.labels))


def _concat_categories(per_frame: list) -> pd.Index:
    """The categories a column gets when frames whose column had these categories are
    concatenated and then made categorical: the shared ones when every frame has the same, else
    the sorted union (pandas falls back to objects, and `astype("category")` sorts them)."""
    first = per_frame[0]
    if all(idx.equals(first) for idx in per_frame[1:]):
        return first
    return pd.Index(sorted(set().union(*(set(idx) for idx in per_frame))))
