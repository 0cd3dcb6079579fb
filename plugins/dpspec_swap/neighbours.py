"""Neighbouring miniature datasets for `dpspec verify`: one stratum of two records.

Two datasets in one universe of the swap's invariants (counts by match x hold and by match x
swap) differ in at least two records: record 0 holds (A, h0) and record 1 (B, h1) on the left,
(A, h1) and (B, h0) on the right, so the pair is at Hamming distance 2 and the claim is the
theorem's eps_D for b = 2, doubled. The statistic is the stratum's records as an unordered
multiset (the theorem's data are multisets of records); the swapped table's row order is not
tested here.

Runs are batched: the stratum repeated n times under n distinct values of a categorical match
column is one call to `run`, and strata are swapped independently.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec.api import NeighbourPair, RunContext, id_columns, miniature_rows, typed_frame, miniature_record as record
from dpspec_swap.roles import roles, swap_table

STRATUM = 2


def _can_vary(col) -> bool:
    ty = col.type
    return not ((ty.kind == "enum" and len(ty.values) < 2) or (ty.kind == "int" and ty.high <= ty.low))


def swap_pairs(mechanism, spec, params) -> list[NeighbourPair] | None:
    table = swap_table(spec, params)
    match, swap, hold = roles(spec, params)
    ids = {id_columns(spec).get(table.name), table.link} - {None}
    varying_hold = [c for c in hold if c not in ids and _can_vary(table.column(c))]
    if not varying_hold or not all(_can_vary(table.column(c)) for c in swap):
        return None  # no two records of a stratum can differ in a held column: the generic path says so
    rows = miniature_rows(spec)

    def stratum(hold_variants):
        out = []
        for i, h in enumerate(hold_variants):
            variants = {c: i for c in swap}
            variants.update({c: h for c in varying_hold})
            variants.update({c: i for c in ids})
            out.append(record(table, variants))
        return out

    left_rows, right_rows = stratum([0, 1]), stratum([1, 0])
    kept = {r[next(iter(ids))] for r in left_rows} if ids else None
    frames = []
    for records in (left_rows, right_rows):
        data = {table.name: typed_frame(table, records)}
        for t in spec.domain.tables:
            if t.name == table.name:
                continue
            child_rows = rows[t.name]
            if t.parent == table.name and t.link and kept is not None:
                child_rows = [r for r in child_rows if r.get(t.link) in kept]
            data[t.name] = typed_frame(t, child_rows)
        frames.append(data)
    columns = swap + varying_hold
    values = {c: np.unique(frames[0][table.name][c].astype(str).to_numpy()) for c in columns}
    replicate = next((c for c in match if table.column(c).type.kind == "category"), None)

    def multiset(frame: pd.DataFrame, n: int) -> np.ndarray:
        code = np.zeros(len(frame), dtype=np.int64)
        for c in columns:
            code = code * len(values[c]) + np.searchsorted(values[c], frame[c].astype(str).to_numpy())
        return np.sort(code.reshape(n, STRATUM), axis=1)

    def batch(data, n, rng):
        frame = data[table.name]
        big = frame.iloc[np.tile(np.arange(len(frame)), n)].reset_index(drop=True)
        big[replicate] = pd.Categorical(np.repeat(np.arange(n).astype(str), len(frame)))
        release = mechanism.run(spec, params, {**data, table.name: big}, RunContext(rng=rng))
        return multiset(release.outputs[table.name], n)

    def statistic(release):
        return multiset(release.outputs[table.name], 1)[0]

    label = f"a stratum of {STRATUM} {table.name} records exchanging their {', '.join(varying_hold)}"
    return [
        NeighbourPair(
            label, frames[0], frames[1], distance=2, statistic=statistic, batch=batch if replicate is not None else None
        )
    ]
