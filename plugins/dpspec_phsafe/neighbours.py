"""Neighbouring miniature datasets for `dpspec verify`: PHSafe on one household.

The pair is production's protected change: one person added, with their unit's record changed
as the addition implies. Left: a woman living alone (HHT 6, HHT2 5). Right: the same with her
biological child aged 5, so the household becomes a family with own children (HHT 3, HHT2 6).
That moves PH1_num, PH3, PH4, PH6 and PH7 up, PH2 from cell 12 to 13 and PH5_denom up by one.

What is tested is the measurement transcript the accounting covers: every measured (table,
geography, iteration level) cell whose true counts differ between the two datasets, with noise
from the project's discrete Gaussian sampler at the mechanism's own sigma^2 = D^2 / (2 rho).
Cells whose counts agree have the same distribution on both sides and are left out; PH5_num
and PH8_num are post-processing. The statistic is the exact log-likelihood ratio of that
transcript (the discrete Gaussian's normaliser cancels), then one part per measurement.
"""

from __future__ import annotations

import numpy as np

from dpspec.api import NeighbourPair, discrete_gaussian, typed_frame

from .cells import released_states
from .tabulate import Records, truths

HOUSEHOLDER = dict(RTYPE=3, RELSHIP=20, QAGE=40, CENRACE=1, CENHISP=1)
CHILD = dict(RTYPE=3, RELSHIP=25, QAGE=5, CENRACE=1, CENHISP=1)


def _unit(state: str, mafid: int, hht: int, hht2: int) -> dict:
    return dict(MAFID=mafid, state=state, RTYPE=2, HHT=hht, HHT2=hht2, CPLT=5, TEN=3, HHRACE=1, HHSPAN=1)


def _frame(table, rows: list[dict]):
    """The rows typed as the loader types them: an enum column holds its declared values."""

    def declared(col, value):
        if col.type.kind != "enum":
            return value
        return next(v for v in col.type.values if str(v) == str(value))

    return typed_frame(table, [{c.name: declared(c, r[c.name]) for c in table.columns} for r in rows])


def phsafe_pairs(mechanism, spec, params) -> list[NeighbourPair]:
    design = mechanism.design(spec, params)
    persons_t, units_t = spec.domain.table(params["persons"]), spec.domain.table(params["units"])
    states = released_states(spec, params, design)
    state = states[0]
    mafid = 1
    left = {
        units_t.name: _frame(units_t, [_unit(state, mafid, 6, 5)]),
        persons_t.name: _frame(persons_t, [dict(MAFID=mafid, **HOUSEHOLDER)]),
    }
    right = {
        units_t.name: _frame(units_t, [_unit(state, mafid, 3, 6)]),
        persons_t.name: _frame(persons_t, [dict(MAFID=mafid, **HOUSEHOLDER), dict(MAFID=mafid, **CHILD)]),
    }
    blocks = []
    for (m, a, *_), (_, b, *_) in zip(
        truths(design, _records(left, params, states)), truths(design, _records(right, params, states))
    ):
        differ = np.flatnonzero(a != b)
        if differ.size:
            blocks.append((m.table, a[differ].astype(float), b[differ].astype(float), design.sigma2(m)))
    if not blocks:
        return []

    def batch(data, n, rng):
        mine = data[persons_t.name]
        side = 0 if len(mine) == len(left[persons_t.name]) else 1
        parts = []
        for _, a, b, s2 in blocks:
            truth = (a, b)[side]
            values = truth[None] + discrete_gaussian(s2, (n, truth.size), rng)
            parts.append((((values - a) ** 2 - (values - b) ** 2) / (2.0 * float(s2))).sum(axis=1))
        parts = np.column_stack(parts)
        return np.column_stack([parts.sum(axis=1), parts])

    return [
        NeighbourPair(
            "one person added (her child aged 5), her unit's record changed from a woman living alone "
            "to a family with own children (production's protected change)",
            left,
            right,
            batch=batch,
        )
    ]


def _records(frames: dict, params: dict, states) -> Records:
    return Records(frames[params["persons"]], frames[params["units"]], states, "miniature")
