"""Neighbouring miniature datasets for `dpspec verify`: three persons in two finest geounits.

One person changes every histogram variable and moves to the other finest geounit of the same
parent (or only changes variables, when moving would break an invariant); both datasets have
the same geounits, whose list TopDown treats as public. What is tested is the set of noisy
measurements, of which every TopDown output is post-processing: the cells whose true answers
differ between the two datasets, plus their log-likelihood-ratio direction (sum of
difference / variance times value, the Neyman–Pearson statistic for Gaussian shifts). They are
drawn n at a time with the mechanism's own allocation (`TopDown._allocation`) and the
project's discrete Gaussian sampler; the post-processing is not rerun (one run takes seconds,
and it cannot add privacy loss).
"""

from __future__ import annotations

import itertools

import numpy as np

from dpspec.api import (
    NeighbourPair,
    discrete_gaussian,
    miniature_rows,
    same_universe,
    typed_frame,
    universe_queries,
    miniature_record as record,
)

from .measurement.allocation import JOINT_MARK


def _answers(frame, level: str | None, query: tuple, variables: dict, units: list) -> np.ndarray:
    """Counts of every (unit, cell) of a marginal, in a fixed order."""
    cells = list(itertools.product(*[[str(v) for v in variables[q]] for q in query]))
    index = {(u, c): i for i, (u, c) in enumerate(itertools.product(units, cells))}
    out = np.zeros(len(index), dtype=np.int64)
    geo = frame[level].astype(str) if level else None
    values = [frame[q].astype(str) for q in query]
    for r in range(len(frame)):
        unit = geo.iloc[r] if level else ""
        out[index[(unit, tuple(v.iloc[r] for v in values))]] += 1
    return out


def _recoded(frame, recodes, variables: dict):
    """The frame with one column per recode (its group label for each record's category), so
    that queries over recodes such as production's hhinstlevels are counted like variables."""
    out = frame.copy()
    for r in recodes:
        label_of = {str(c): r.labels[g] for c, g in zip(variables[r.variable], r.group_of)}
        out[r.name] = out[r.variable].astype(str).map(label_of)
    return out


def topdown_pairs(mechanism, spec, params, variables_of, root: str, recodes=()) -> list[NeighbourPair]:
    table = spec.domain.table(params["table"])
    levels = list(spec.domain.geography.levels)
    finest = levels[-1]
    variables = variables_of(spec, params)
    factors = {**variables, **{r.name: list(r.labels) for r in recodes}}  # what queries count by
    alloc = mechanism._allocation(spec, params)
    rows = miniature_rows(spec)
    base = [dict(r) for r in rows[table.name]]
    base[-1] = record(table, {finest: 1})  # a second finest geounit under the same parent
    queries = universe_queries(spec, mechanism.induced_invariants(spec, params))
    pair = None
    for moves in ([finest, *variables], list(variables)):
        changed = [dict(r) for r in base]
        changed[0] = record(table, {c: 1 for c in moves})
        left = {
            **{t.name: typed_frame(t, rows[t.name]) for t in spec.domain.tables},
            table.name: typed_frame(table, base),
        }
        right = {**left, table.name: typed_frame(table, changed)}
        if same_universe(spec, queries, left, right) is None:
            pair = (moves, left, right)
            break
    if pair is None:
        return []
    moves, left, right = pair
    parts = []  # (sigma², answers on the left, answers on the right) of the cells that differ
    counted = {
        side: _recoded(frames[table.name], recodes, variables) for side, frames in (("left", left), ("right", right))
    }
    for qb in alloc.queries:
        if qb.query[:1] and str(qb.query[0]).startswith(JOINT_MARK):
            continue  # a joint table's query: it does not read the changed record's table
        level = None if qb.level == root else qb.level
        units = (
            sorted(set(left[table.name][level].astype(str)) | set(right[table.name][level].astype(str)))
            if level
            else [""]
        )
        a = _answers(counted["left"], level, qb.query, factors, units)
        b = _answers(counted["right"], level, qb.query, factors, units)
        differ = np.flatnonzero(a != b)
        if differ.size:
            parts.append((qb.sigma2, a[differ], b[differ]))
    weights = np.concatenate([(b - a) / float(s2) for s2, a, b in parts])

    def batch(data, n, rng):
        mine = data[table.name]
        is_left = mine is left[table.name] or mine.equals(left[table.name])
        cols = [np.tile(a if is_left else b, (n, 1)) + discrete_gaussian(s2, (n, a.size), rng) for s2, a, b in parts]
        values = np.concatenate(cols, axis=1).astype(float)
        return np.column_stack([values @ weights, values])

    label = f"one {table.name} record changes {', '.join(moves)}"
    return [NeighbourPair(label, left, right, batch=batch)]
