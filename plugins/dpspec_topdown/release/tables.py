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

Both tables are lists of pieces (a chunk each) and a small common part that turns pieces into
frames given the rows they are made from (`_MicroPieces`, `_MeasurementPieces`): the driver's
chunks read those rows from the whole histograms, and a part file (parts.py, written where the
run's units run) from a copy of its own rows only.
"""

from __future__ import annotations

from typing import Mapping

import attrs
import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpspec.api import StreamedTable, discrete_gaussian, discrete_gaussian_variance, keyed_rng

from .parts import PartWriter
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
class _Coder:
    """How a range of finest units becomes person rows: the schema's decoding, the recodes
    released as columns, the input's categories (small: what every part of the file takes)."""

    schema: object
    categories: Mapping  # column -> CategoricalDtype given to the column (the input's codes)
    derived: tuple = ()  # recodes the input carried as columns of their name (an invariant's factor)

    def with_derived(self, cols: dict) -> dict:
        """`cols` (decoded variables) plus each derived column: the recode label of its variable."""
        for r in self.derived:
            categories = self.schema.categories[self.schema.names.index(r.variable)]
            at = pd.Index(list(categories)).get_indexer(cols[r.variable])
            cols[r.name] = np.asarray(r.labels, dtype=object)[np.asarray(r.group_of, dtype=np.int64)[at]]
        return cols

    def typed(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Columns the input held as categoricals get the input's categories (codes compare exactly)."""
        for col, dtype in self.categories.items():
            if col in frame.columns:
                frame[col] = pd.Categorical(frame[col].astype(str), categories=dtype.categories)
        return frame


@attrs.frozen
class _UnitRange:
    """The protected finest histogram and the explicit levels' codes of finest units [first,
    first + rows): all a range of the microdata is made from (a part file ships one)."""

    first: int
    finest: sp.csr_matrix  # its rows, canonical
    per_unit: Mapping  # explicit level name -> its code for each of the range's units

    @property
    def nbytes(self) -> int:
        return _nbytes(self.finest) + sum(_nbytes(c) for c in self.per_unit.values())

    def rows(self, coder: _Coder, start: int, stop: int) -> pd.DataFrame:
        """Persons of finest units [start, stop): sorted by unit, then cell (a canonical CSR's order).

        Each column is built per nonzero (unit, cell) entry and then repeated by its count, so no
        per-person index array is made on the way."""
        a, b = start - self.first, stop - self.first
        sub = self.finest if (a, b) == (0, self.finest.shape[0]) else self.finest[a:b]
        counts = sub.data.astype(np.int64)
        entry_unit = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(sub.indptr))
        cols = {name: np.repeat(codes[entry_unit], counts) for name, codes in self.per_unit.items()}
        for name, values in coder.with_derived(coder.schema.decode(sub.indices)).items():
            cols[name] = np.repeat(values, counts)
        return coder.typed(pd.DataFrame(cols))


@attrs.frozen
class _MicroPieces:
    """The microdata's rows as pieces (ranges of whole finest units), for the chunks and the parts."""

    coder: _Coder

    def frames(self, pieces, source: _UnitRange):
        for start, stop in pieces:
            yield source.rows(self.coder, start, stop)


@attrs.frozen
class _Microdata:
    """The microdata's rows for any range of finest units, and its counts from the histograms."""

    hier: object
    schema: object
    histograms: Mapping  # level name -> protected (units x cells) csr, canonical
    coder: _Coder
    per_unit: Mapping  # explicit level name -> its code for every finest unit

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
        return cls(hier, schema, canonical, _Coder(schema, dict(categories or {}), derived), per_unit)

    @property
    def derived(self) -> tuple:
        return self.coder.derived

    @property
    def finest(self) -> sp.csr_matrix:
        return self.histograms[self.hier.names[-1]]

    def units(self, start: int, stop: int) -> _UnitRange:
        """What finest units [start, stop) are made from (a copy of their rows: a part ships it)."""
        return _UnitRange(start, self.finest[start:stop], {n: c[start:stop] for n, c in self.per_unit.items()})

    def whole(self) -> _UnitRange:
        return _UnitRange(0, self.finest, self.per_unit)

    def rows(self, start: int, stop: int) -> pd.DataFrame:
        """Persons of finest units [start, stop) (`_UnitRange.rows`)."""
        return self.whole().rows(self.coder, start, stop)

    def count(self, by: list) -> pd.DataFrame:
        """Persons per observed combination of `by`, sorted, as `count`: from the protected
        histogram of the finest level `by` names (the levels above it follow from the tree)."""
        hier, schema, coder = self.hier, self.schema, self.coder
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
            decoded = coder.with_derived(schema.decode(cell)) if self.derived else schema.decode(cell)
            cols.update({v: decoded[v] for v in [*variables, *(c for c in by if c in derived)]})
        frame = coder.typed(pd.DataFrame({c: cols[c] for c in by}))
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
    writer: PartWriter | None = None,
) -> StreamedTable:
    """One row per protected person: every explicit level's code and the histogram variables.

    histograms: level name -> protected (units x cells) csr (the finest gives the rows, the
    others the counts). categories: column -> CategoricalDtype (the input's, when it had one).
    recode_columns: recodes of the schema released as columns of their name (their labels).
    writer: where the file's parts are written (parts.py); without it, the chunks only."""
    micro = _Microdata.build(hier, schema, histograms, categories, recode_columns)
    bounds = micro.chunk_bounds(max(1, int(chunk_rows)))
    maker = _MicroPieces(micro.coder)

    def chunks():
        yield from maker.frames(bounds, micro.whole())

    def write_parts(folder: str, filename: str) -> list[str]:
        def source(pieces):
            return micro.units(pieces[0][0], pieces[-1][1])

        persons = np.concatenate([[0], np.cumsum(np.asarray(micro.finest.sum(axis=1), dtype=np.int64).ravel())])
        sizes = [int(persons[b] - persons[a]) for a, b in bounds]
        return writer.write(maker, bounds, sizes, source, folder, filename, int(micro.finest.sum()))

    empty = micro.rows(0, 0)
    return StreamedTable(
        columns=list(empty.columns),
        rows=int(micro.finest.sum()),
        chunks=chunks,
        dtypes=empty.dtypes.to_dict(),
        counter=micro.count,
        write_parts=write_parts if writer is not None else None,
    )


@attrs.frozen
class _Piece:
    """One chunk of the measurements: query `q` (its index in the allocation) for units
    [start, stop) of its level; `nodes` are the noise plan's nodes [first, last) whose streams
    give the noise (one node for a keyed query; none for answers the run drew whole)."""

    q: int
    start: int
    stop: int
    nodes: tuple = ()

    def rows(self, groups: int) -> int:
        return (self.stop - self.start) * groups


class _Rows:
    """Row ranges of matrices by name (a level's confidential histogram, a drawn query's
    answers): the whole ones on the driver, a part's own ranges in a part (`only`)."""

    def __init__(self, ranges: Mapping):
        self.ranges = dict(ranges)  # name -> [(lo, hi, rows lo..hi)]

    @classmethod
    def whole(cls, matrices: Mapping) -> "_Rows":
        return cls({name: [(0, m.shape[0], m)] for name, m in matrices.items()})

    @property
    def nbytes(self) -> int:
        return sum(_nbytes(m) for spans in self.ranges.values() for _, _, m in spans)

    def take(self, name, start: int, stop: int):
        for lo, hi, m in self.ranges[name]:
            if lo <= start and stop <= hi:
                return m[start - lo : stop - lo]
        raise KeyError((name, start, stop))

    def only(self, needs) -> "_Rows":
        """The rows `needs` ((name, start, stop) triples) name, each range copied once."""
        spans: dict = {}
        for name, start, stop in needs:
            spans.setdefault(name, []).append((start, stop))
        out = {}
        for name, pairs in spans.items():
            merged = []
            for start, stop in sorted(pairs):
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], stop)
                else:
                    merged.append([start, stop])
            out[name] = [(lo, hi, self.take(name, lo, hi)) for lo, hi in merged]  # a csr slice is a copy
        return _Rows(out)


@attrs.frozen
class _MeasurementPieces:
    """How the measurements' rows are made, all but the confidential answers (which a part
    ships only for its own units): the queries, the columns' categories, each level's geocodes,
    budget classes and noise plans, and the run key (small next to the histograms)."""

    queries: tuple  # the allocation's QueryBudgets, in its order
    js: tuple  # each query's index among its level's queries
    groups: tuple  # each query's number of groups
    schema: object
    dtypes: Mapping
    geo_index: Mapping  # level -> each unit's code in the geocode categories
    classes: Mapping  # level -> (class of every unit, per query {class: sigma²}, ...) under the optimized spine
    plans: Mapping  # level -> LevelNoise
    run_key: int | None

    def source_name(self, piece: _Piece):
        """Where a piece's answers come from: its level's confidential histogram (re-drawn from
        the nodes' streams), or the query's answers the run drew whole (a piece without nodes)."""
        qb = self.queries[piece.q]
        return qb.level if piece.nodes else ("drawn", qb.level, qb.query)

    def pieces(self, drawn: Mapping, chunk_rows: int) -> list[_Piece]:
        """Every chunk of the table, in its row order: level by level and query by query in the
        allocation's order, then unit (a node is never split, nor a keyed query's unit)."""
        out = []
        for q, qb in enumerate(self.queries):
            groups = self.groups[q]
            if (qb.level, qb.query) in drawn:
                step = max(1, chunk_rows // groups)
                n = drawn[(qb.level, qb.query)].shape[0]
                out += [_Piece(q, start, min(start + step, n)) for start in range(0, n, step)]
                continue
            plan: LevelNoise = self.plans[qb.level]
            if keyed(groups):  # each answer from its own stream: any range of units, no node's stream
                step = max(1, chunk_rows // groups)
                for i in range(len(plan.keys)):
                    first, last = int(plan.starts[i]), int(plan.stops[i])
                    out += [_Piece(q, start, min(start + step, last), (i, i + 1)) for start in range(first, last, step)]
                continue
            for first, last in batches((plan.stops - plan.starts) * groups, chunk_rows):
                out.append(_Piece(q, int(plan.starts[first]), int(plan.stops[last - 1]), (first, last)))
        return out

    def frames(self, pieces, source: _Rows):
        """The rows of `pieces`, a frame each, their answers from `source`."""
        for piece in pieces:
            qb = self.queries[piece.q]
            rows = source.take(self.source_name(piece), piece.start, piece.stop)
            if self.source_name(piece) != qb.level:
                yield self.frame(piece.q, piece.start, rows)
            elif keyed(self.groups[piece.q]):
                yield self.frame(piece.q, piece.start, self.keyed_answers(piece, rows))
            else:
                yield self.frame(piece.q, piece.start, self.node_answers(piece, rows))

    def node_answers(self, piece: _Piece, conf) -> np.ndarray:
        """Confidential answers of the piece's units plus each node's noise for the query,
        re-drawn from the node's stream where the node's own draws for it began."""
        qb, j, plan = self.queries[piece.q], self.js[piece.q], self.plans[self.queries[piece.q].level]
        y = group_sums(conf, self.schema.groups(qb.query), self.groups[piece.q])
        for i in range(*piece.nodes):
            a, b = int(plan.starts[i]) - piece.start, int(plan.stops[i]) - piece.start
            rng = keyed_rng(self.run_key, STAGE, plan.keys[i], position=int(plan.positions[i, j]))
            if qb.level in self.classes:
                first_unit = int(plan.starts[i])
                add_class_noise(
                    y[a:b],
                    self.classes[qb.level][0][first_unit : first_unit + b - a],
                    self.classes[qb.level][1][j],
                    rng,
                )
            else:
                y[a:b] += discrete_gaussian(qb.sigma2, (b - a, y.shape[1]), rng)
        return y

    def keyed_answers(self, piece: _Piece, conf) -> np.ndarray:
        """A keyed query's answers (node_noise.keyed) at the piece's units: the very answers the
        node drew, re-drawn from their own streams, every group of every unit listed."""
        qb, j, groups = self.queries[piece.q], self.js[piece.q], self.groups[piece.q]
        plan = self.plans[qb.level]
        (i,) = range(*piece.nodes)
        first, last = int(plan.starts[i]), int(plan.stops[i])
        per_class = self.classes.get(qb.level)
        cls = None if per_class is None else per_class[0][first:last]
        start, stop = piece.start, piece.stop
        flat = np.arange((start - first) * groups, (stop - first) * groups, dtype=np.int64)
        keys, truth = sparse_group_sums(conf, self.schema.groups(qb.query), groups)
        y = keyed_answers(
            self.run_key,
            plan.keys[i],
            qb.name,
            groups,
            flat,
            (keys + (start - first) * groups, truth),
            qb.sigma2,
            cls,
            None if per_class is None else per_class[1][j],
        )
        return y.reshape(stop - start, groups)

    def frame(self, q: int, start: int, y: np.ndarray) -> pd.DataFrame:
        """The rows of query `q`'s answers `y` (units x groups) of the units from `start` on."""
        qb, dtypes = self.queries[q], self.dtypes
        units, groups = y.shape
        n = y.size
        variance = np.full(n, discrete_gaussian_variance(qb.sigma2))
        keep = None
        if qb.level in self.classes:
            cls = self.classes[qb.level][0][start : start + units]
            per_class = self.classes[qb.level][1][self.js[q]]
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
                    np.repeat(self.geo_index[qb.level][start : start + units], groups), dtype=dtypes["geocode"]
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
    writer: PartWriter | None = None,
) -> StreamedTable:
    """Tidy noisy measurements: level, geocode, query, cell, value, variance (one row each).

    Level by level and query by query in the allocation's order, then unit and cell. A (level,
    query) is taken from `noisy` when the run drew it whole ((units x groups) arrays, runs without
    an engine), else re-drawn node by node: confidential answers (from `confidential`, level ->
    csr) plus the node's noise for that query, resumed at the position `plans[level]` recorded.
    classes: level -> (class of every unit, per query {class: sigma²}, ...) under the optimized
    spine (spine.py): each unit's variance is its class's, and a bypassed unit has no rows.
    writer: where the file's parts are written (parts.py); without it, the chunks only."""
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
    maker = _MeasurementPieces(
        tuple(queries),
        tuple([q.query for q in alloc.for_level(qb.level)].index(qb.query) for qb in queries),
        tuple(schema.marginal_size(qb.query) for qb in queries),
        schema,
        dtypes,
        {lv: dtypes["geocode"].categories.get_indexer(codes) for lv, codes in level_codes.items()},
        classes,
        {lv: plan for lv, plan in plans.items() if lv in level_codes},
        run_key,
    )
    drawn = {key: y for key, y in noisy.items() if key in {(qb.level, qb.query) for qb in queries}}
    pieces = maker.pieces(drawn, max(1, int(chunk_rows)))
    answers = _Rows.whole(
        {
            **{lv: confidential[lv] for lv in level_codes if lv in maker.plans},
            **{("drawn", lv, q): y for (lv, q), y in drawn.items()},
        }
    )
    rows = sum(_measured_units(hier, classes, qb.level) * schema.marginal_size(qb.query) for qb in queries)

    def chunks():
        yield from maker.frames(pieces, answers)

    def write_parts(folder: str, filename: str) -> list[str]:
        def source(part):
            return answers.only((maker.source_name(p), p.start, p.stop) for p in part)

        sizes = [p.rows(maker.groups[p.q]) for p in pieces]
        return writer.write(maker, pieces, sizes, source, folder, filename, int(rows))

    return StreamedTable(
        columns=columns,
        rows=int(rows),
        chunks=chunks,
        dtypes=dtypes,
        write_parts=write_parts if writer is not None else None,
    )


def batches(sizes: np.ndarray, rows: int) -> list[tuple[int, int]]:
    """Consecutive ranges [first, last) of items (finest units, nodes) holding about `rows` rows
    each, given each item's rows; an item is never split."""
    cum = np.cumsum(np.asarray(sizes, dtype=np.int64))
    if not cum.size:
        return []
    cuts = np.searchsorted(cum, np.arange(rows, int(cum[-1]), rows), side="left") + 1
    bounds = np.unique(np.concatenate([[0], np.minimum(cuts, cum.size), [cum.size]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def _nbytes(matrix) -> int:
    """The bytes of an array or a sparse matrix's arrays (what shipping it costs, about)."""
    if sp.issparse(matrix):
        return sum(int(getattr(matrix, a).nbytes) for a in ("data", "indices", "indptr") if hasattr(matrix, a))
    return int(getattr(matrix, "nbytes", 0))


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
