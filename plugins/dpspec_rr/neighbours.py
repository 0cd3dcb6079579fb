"""Randomized response's neighbouring datasets for `dpspec verify`: one unit's answer flips."""

from __future__ import annotations

import dpspec
from dpspec.api import NeighbourPair, LazyModule

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())  # lazily, as everywhere in the plugin: `dpspec --help` must not load numpy


def pairs(spec, design, run) -> list:
    """One unit's answer flips (the worst case: the ratio is p/(1-p) for its report).

    `run(data, rng)` is the mechanism's own `run` (not `algorithm.release`), so what verify
    tests is what compile runs, a subclass's too. Runs are batched: the miniature table repeated
    n times is one call, whose units answer independently, so row r of the batch is run
    r // units of the miniature."""
    table = spec.domain.table(design.table)
    values = (True, False) if design.kind == "bool" else (design.positive, design.negative)
    rows = dpspec.api.miniature_rows(spec)
    frames = []
    for value in values:
        records = [dict(r) for r in rows[table.name]]
        records[0][design.column] = value
        frames.append(
            {
                **{t.name: dpspec.api.typed_frame(t, rows[t.name]) for t in spec.domain.tables},
                table.name: dpspec.api.typed_frame(table, records),
            }
        )

    def batch(data, n, rng):
        frame = data[table.name]
        units = len(frame)
        repeated = frame.iloc[np.tile(np.arange(units), n)].reset_index(drop=True)
        answers = run({**data, table.name: repeated}, rng).outputs["responses"][design.column].to_numpy()
        yes = answers.astype(bool) if design.kind == "bool" else answers == design.positive
        return yes.reshape(n, units)

    return [
        NeighbourPair(
            f"one {table.name} unit's {design.column} is {values[0]} or {values[1]}", frames[0], frames[1], batch=batch
        )
    ]
