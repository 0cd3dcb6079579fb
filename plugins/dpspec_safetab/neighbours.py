"""Neighbouring miniature datasets for `dpspec verify`: SafeTab on a one-tract geography.

The miniature universe: three persons in one state, county, tract, place and AIAN/NH area, each
with one race code and one ethnicity code. Its parameters are the spec's design (levels,
thresholds, ladders, stage-1 fraction) with two changes the verifier needs: `max_race_codes` is
1, so the fan-out k = 2 h_r + h_e is what one such person actually reaches (the production bound
for 8 codes is not attained by any small record, which would make the test loose), and every
rho is scaled down so that the claim is small enough for a feasible number of runs to test.

The pair: under add/remove (the native relation) person 0 is removed; under change-one, person
0's codes, sex and age change to those of a person in other groups. Codes are chosen from the
public code -> iteration mapping to reach as many groups as one code can.

What is tested is the measurement transcript the accounting covers: for every (table, geography
level, iteration level) and every group whose counts differ between the two datasets, the noisy
stage-1 total, the rung of the ladder it chooses and the noisy stage-2 cells of that rung (the
single measurement of detailed-only groups; in one-stage designs, whose detail comes from
public totals, the finest rung). Every published count is post-processing of it (suppression,
sums of cells). Groups and cells whose counts agree have the same distribution on both sides
and are left out (an event on part of the output is an event on the output). The statistic is
the exact log-likelihood ratio of that transcript (the discrete Gaussian's normaliser cancels),
then one part per block. Noise comes from the mechanism's own `noise_sigma2` and the project's
discrete Gaussian sampler; the choice of rung from the mechanism's own `choose_detail`.
"""

from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np
import pandas as pd

from dpspec.api import NeighbourPair, discrete_gaussian, ir, miniature_record as record, miniature_rows, typed_frame

from .design import ROOT, variable_values
from .engine import cell_codes, choose_detail
from .iterations import encode_records, flatten
from .tabulate import fanout_of

TARGET_RHO = {"symdiff": Fraction(1, 2), "hamming": Fraction(1, 4)}  # native rho of the miniature design
MAX_BLOCK_COLUMNS = 31


def scaled_params(params: dict, factor: Fraction) -> dict:
    """The parameters with every rho of the `tables` block (and `total_rho`) times `factor`."""
    tables = {
        name: {
            **table,
            "rho": {geo: {lv: rho * factor for lv, rho in per.items()} for geo, per in table["rho"].items()},
        }
        for name, table in params["tables"].items()
    }
    out = {**params, "tables": tables, "max_race_codes": 1}
    if out.get("total_rho") is not None:
        out["total_rho"] = out["total_rho"] * factor
    out.pop("max_groups", None)
    return out


def _best_codes(table) -> tuple[tuple[str, str], tuple[str, str]]:
    """(race code, ethnicity code) of person 0 and of their changed version: the codes in most
    iterations, the second with iterations disjoint from the first where the mapping allows."""
    m = table.mapping.merge(table.iterations[["iteration", "kind"]], on="iteration")
    picks = []
    for kind in ("race", "ethnicity"):
        sets = m[m["kind"] == kind].groupby("code")["iteration"].agg(frozenset)
        sets = sets[sorted(sets.index, key=lambda c: (-len(sets[c]), c))]
        first = sets.index[0]
        disjoint = [c for c in sets.index[1:] if not (sets[c] & sets[first])]
        picks.append((first, disjoint[0] if disjoint else sets.index[1]))
    (race_a, race_b), (eth_a, eth_b) = picks
    return (race_a, eth_a), (race_b, eth_b)


def _people(spec, params, codes, changed) -> list[dict]:
    table = spec.domain.table(params["table"])
    base = miniature_rows(spec)[table.name]
    race_cols, eth = list(params["race_codes"]), params["ethnicity_code"]
    out = []
    for i, r in enumerate(base):
        row = dict(record(table, {c: 1 for c in _detail_columns(table, params)}) if (i == 0 and changed) else r)
        race, ethnicity = codes[1] if (i == 0 and changed) else codes[0]
        for c in race_cols:
            row[c] = None
        row[race_cols[0]], row[eth] = race, ethnicity
        out.append(row)
    return out


def _detail_columns(table, params) -> list[str]:
    skip = set(params["race_codes"]) | {params["ethnicity_code"]}
    return [c.name for c in table.columns if c.name not in skip and c.type.kind in ("enum", "int", "bool")]


@attrs.frozen
class _Block:
    """One (table, geography, iteration level): the differing groups' true counts on each side."""

    label: str
    thresholds: tuple | None  # None: the rung is fixed (detailed-only, one-stage)
    s2_total: Fraction | None
    totals: tuple | None  # (left, right) stage-1 totals, shape (groups,)
    s2_cells: Fraction
    rungs: tuple  # per rung: (left, right) counts of its differing cells, shape (groups, cells)


def _counts(params, design, table, frame, td, cell, variables):
    """{rung: (groups, cells) counts} and the detailed-only mask for one dataset and block."""
    gran = design.granularity(cell.geo)
    sel = table.selection(cell.level, gran)
    k, _ = fanout_of(design, table, cell.level, gran)
    records = encode_records(frame, params["race_codes"], params["ethnicity_code"], table, design.max_race_codes)
    rows, its = flatten(records, table, sel, k)
    inside = np.ones(len(frame), dtype=bool) if cell.geo == ROOT else frame[cell.geo].notna().to_numpy()
    rows_in, its_in = rows[inside[rows]], its[inside[rows]]
    out = []
    for detail in td.details:
        sizes = [len(variables[v]) for v in detail.variables]
        n_cells = int(np.prod(sizes)) if sizes else 1
        codes = [
            pd.Categorical(frame[v].astype("string"), categories=variables[v]).codes.astype(np.int64)[rows_in]
            for v in detail.variables
        ]
        cells = cell_codes(codes, sizes) if codes else np.zeros(len(rows_in), dtype=np.int64)
        out.append(np.bincount(its_in * n_cells + cells, minlength=len(sel) * n_cells).reshape(len(sel), n_cells))
    return out, sel["detailed_only"].to_numpy(), k


def _blocks(mech, spec, params, left, right) -> list[_Block]:
    design = mech.design(spec, params)
    table = mech._iteration_table(spec, params)
    variables = variable_values(spec, params, design)
    frames = (left[params["table"]], right[params["table"]])
    blocks = []
    for td in design.tables:
        for cell in sorted(td.cells, key=lambda c: (design.geo_levels.index(c.geo), c.level)):
            if cell.rho == 0:
                continue
            (a, only, k), (b, _, _) = (_counts(params, design, table, f, td, cell, variables) for f in frames)
            differ = np.zeros(len(only), dtype=bool)
            for x, y in zip(a, b):
                differ |= (x != y).any(axis=1)
            stages = dict(design.stages(cell))
            label = f"{td.name} {cell.geo} level{cell.level}"

            def rung(r, groups):
                cols = np.flatnonzero((a[r][groups] != b[r][groups]).any(axis=0))
                return a[r][groups][:, cols], b[r][groups][:, cols]

            if design.two_stage:
                adaptive = np.flatnonzero(differ & ~only)
                if adaptive.size:
                    blocks.append(
                        _Block(
                            label,
                            cell.thresholds,
                            mech.noise_sigma2(k, stages["stage 1"]),
                            (a[0][adaptive, 0], b[0][adaptive, 0]),
                            mech.noise_sigma2(k, stages["stage 2"]),
                            tuple(rung(r, adaptive) for r in range(len(td.details))),
                        )
                    )
                detailed = np.flatnonzero(differ & only)
                if detailed.size:
                    blocks.append(
                        _Block(
                            label + " detailed-only",
                            None,
                            None,
                            None,
                            mech.noise_sigma2(k, cell.rho),
                            (rung(0, detailed),),
                        )
                    )
            else:
                groups = np.flatnonzero(differ)
                if groups.size:
                    blocks.append(
                        _Block(
                            label,
                            None,
                            None,
                            None,
                            mech.noise_sigma2(k, stages["stage 2"]),
                            (rung(len(td.details) - 1, groups),),
                        )
                    )
    return blocks


def _llr(values, a, b, s2) -> np.ndarray:
    """log P(values | right) - log P(values | left), summed over the last axis."""
    s2 = float(s2)
    return (((values - a) ** 2 - (values - b) ** 2) / (2.0 * s2)).sum(axis=-1)


def _draw(block: _Block, side: int, n: int, rng) -> np.ndarray:
    """The transcript's log-likelihood ratio of one block, for n runs on one side."""
    groups = (block.totals or block.rungs[0])[0].shape[0]
    out = np.zeros(n)
    if block.thresholds is None:
        a, b = block.rungs[0]
        truth = (a, b)[side]
        values = truth[None] + discrete_gaussian(block.s2_cells, (n, *truth.shape), rng)
        return _llr(values, a[None], b[None], block.s2_cells).sum(axis=1)
    ta, tb = block.totals
    total = (ta, tb)[side][None, :] + discrete_gaussian(block.s2_total, (n, groups), rng)
    out += _llr(total[..., None], ta[None, :, None], tb[None, :, None], block.s2_total).sum(axis=1)
    chosen = choose_detail(total, block.thresholds)
    for r, (a, b) in enumerate(block.rungs):
        if not a.shape[1]:
            continue
        truth = (a, b)[side]
        values = truth[None] + discrete_gaussian(block.s2_cells, (n, *truth.shape), rng)
        out += np.where(chosen == r, _llr(values, a[None], b[None], block.s2_cells), 0.0).sum(axis=1)
    return out


def safetab_pairs(mechanism, spec, params) -> list[NeighbourPair]:
    relation = spec.unit.relation if spec.unit is not None else "symdiff"
    factor = TARGET_RHO.get(relation, TARGET_RHO["symdiff"]) / mechanism.design(spec, params).total_rho()
    mini = scaled_params(params, factor)
    table = spec.domain.table(params["table"])
    codes = _best_codes(mechanism._iteration_table(spec, mini))
    frames = {t.name: typed_frame(t, miniature_rows(spec)[t.name]) for t in spec.domain.tables}
    left = {**frames, table.name: typed_frame(table, _people(spec, params, codes, changed=False))}
    if relation == "hamming":
        right = {**frames, table.name: typed_frame(table, _people(spec, params, codes, changed=True))}
        label = f"one {table.name} record's race and ethnicity codes (and detail variables) change"
    else:
        right = {**frames, table.name: left[table.name].iloc[1:].reset_index(drop=True)}
        label = f"one {table.name} record is removed"
    blocks = _blocks(mechanism, spec, mini, left, right)
    if not blocks:
        return []

    def batch(data, n, rng):
        mine = data[table.name]
        side = 0 if (mine is left[table.name] or mine.equals(left[table.name])) else 1
        parts = np.column_stack([_draw(b, side, n, rng) for b in blocks])
        shown = parts[:, :MAX_BLOCK_COLUMNS]
        return np.column_stack([parts.sum(axis=1), shown])

    return [
        NeighbourPair(
            f"{label}; miniature design at rho x {ir.format_number(factor)}, one race code per record",
            left,
            right,
            params=mini,
            batch=batch,
        )
    ]
