"""Run a SafeTab design on records: every (table, geography level, iteration level) in turn.

For each one: flatten records into their groups, count (geography unit, group) totals, pick
each group's stage-2 detail (from a noisy stage-1 total, or from published totals), measure
the chosen tables with exact discrete Gaussian noise, suppress small totals where declared,
and emit long-form rows. Figures computed against the confidential counts (the realized
error) are returned separately for the internal report.
"""
from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import attrs
import numpy as np
import pandas as pd

from dpspec.api import DataError, KeyColumns

from .combinations import Origin, combinations, rows_text, text_codes, through
from .design import ROOT, Design, sigma2
from .engine import add_keyed_noise, cell_codes, choose_detail, detail_counts, group_counts, suppression_threshold
from .iterations import IterationTable, RecordCodes, encode_records, flatten

NATION_CODE = "US"
ALL = "*"
NOISE_STREAM = "safetab cell noise"  # first part of every cell's stream key


@attrs.frozen
class Inputs:
    frame: object  # the records: a pandas frame, or an EngineTable (dpspec.api) the engine holds
    race_columns: tuple[str, ...]
    eth_column: str
    variables: dict  # detail variable -> list of its values (as text)
    source: str = "data"


@attrs.frozen
class Outcome:
    rows: pd.DataFrame
    facts: list  # per (table, geo, level): public parameters and the published choice
    errors: list  # per (table, geo, level, detail): realized error (internal)
    fanouts: dict


def _regions(frame: pd.DataFrame, geo: str) -> tuple[np.ndarray, np.ndarray]:
    if geo == ROOT:
        return np.zeros(len(frame), dtype=np.int64), np.array([NATION_CODE], dtype=object)
    codes, labels = text_codes(frame[geo])  # units sorted by their codes as text
    order = np.argsort(labels, kind="stable")
    rank = np.empty(len(labels), dtype=np.int64)
    rank[order] = np.arange(len(labels))
    return through(rank, codes), labels[order]


def _variable_codes(frame: pd.DataFrame, inputs: Inputs, origin: Origin) -> dict:
    out = {}
    for var, values in inputs.variables.items():
        found, labels = text_codes(frame[var])
        codes = through(pd.Index(values).get_indexer(labels), found)
        if (codes < 0).any():
            row = int(np.flatnonzero(codes < 0)[0])
            value = frame[var].iloc[row]
            if origin.numbered:
                raise DataError(f"{inputs.source}: row {origin.row(row)}: column '{var}' holds '{value}', "
                                f"not one of {', '.join(values)}")
            same = found == found[row]  # the rows holding that value (or missing, as it is)
            raise DataError(f"{inputs.source}: column '{var}' holds '{value}' in {rows_text(origin.count(same))}, "
                            f"not one of {', '.join(values)}")
        out[var] = codes.astype(np.min_scalar_type(max(len(values) - 1, 0)))  # small: gathered per flattened pair
    return out


@attrs.frozen
class Records:
    """The records as SafeTab counts them: their distinct combinations of the columns it reads
    (`frame`), what each stands for (`origin`), their codes and their stage-2 variables' codes."""

    frame: pd.DataFrame
    origin: Origin
    codes: RecordCodes
    variables: dict  # variable -> each row's position among the variable's values


def read_records(inputs: Inputs, columns: list[str], table: IterationTable, max_race_codes: int,
                 engine=None) -> Records:
    """The records of `inputs` counted per distinct combination of `columns` (by the engine when
    it holds them), checked and encoded; a bad record is a DataError naming its row, or on an
    engine table the value and how many rows hold it."""
    frame, origin = combinations(inputs.frame, columns, engine)
    codes = encode_records(frame, inputs.race_columns, inputs.eth_column, table, max_race_codes, inputs.source, origin)
    return Records(frame, origin, codes, _variable_codes(frame, inputs, origin))


def read_columns(design: Design, inputs: Inputs) -> list[str]:
    """The columns a run reads: every measured geography, the race and ethnicity codes and
    every stage-2 variable; records are counted per distinct combination of them."""
    measured = {c.geo for td in design.tables for c in td.cells if c.rho != 0}
    geos = [g for g in design.geo_levels if g != ROOT and g in measured]
    return list(dict.fromkeys([*geos, *inputs.race_columns, inputs.eth_column, *inputs.variables]))


def fanout_of(design: Design, table: IterationTable, level: int, granularity: str) -> tuple[int, dict]:
    bound = table.fanout_bound(level, granularity, design.max_race_codes)
    k = design.max_groups if design.max_groups is not None else bound["fanout"]
    return int(k), bound


def run(design: Design, inputs: Inputs, table: IterationTable, rng: np.random.Generator,
        public_totals: pd.DataFrame | None = None, noise=sigma2, engine=None) -> Outcome:
    """Measure every (table, geography level, iteration level) cell of the design.

    noise(fanout, rho) -> sigma²: the mechanism's calibration (`SafeTab.noise_sigma2`).
    engine (a `dpspec.engine.EngineRun`): each (table, geography, level) block is a unit of
    work run on that engine. Noise is keyed finer, per (geography, group) cell and stage, from
    the engine's run key (without an engine, from a run key drawn from `rng`), so every engine
    and every batching of cells releases the same counts. The records are read as their
    distinct combinations with counts (`combinations`: counted by the engine when it holds
    them), and every count is a weighted sum over those.
    """
    run_key = engine.run_key if engine is not None else int.from_bytes(rng.bytes(32), "little")
    read = read_records(inputs, read_columns(design, inputs), table, design.max_race_codes, engine)
    frame, origin, records, var_codes = read.frame, read.origin, read.codes, read.variables
    flat_cache: dict = {}
    region_cache: dict = {}
    blocks, facts, errors, fanouts = [], [], [], {}
    units, items = [], []  # each cell's (blocks, fact, errors); or the cells as units of work
    for td in design.tables:
        for geo in design.geo_levels:
            for cell in sorted((c for c in td.cells if c.geo == geo), key=lambda c: c.level):
                if cell.rho == 0:
                    continue
                gran = design.granularity(geo)
                key = (cell.level, gran)
                if key not in flat_cache:
                    sel = table.selection(cell.level, gran)
                    k, bound = fanout_of(design, table, cell.level, gran)
                    rows, its = flatten(records, table, sel, k, inputs.source)
                    # what each flattened (row, group) pair carries, gathered once per selection
                    carried = (origin.weight[rows], {v: c[rows] for v, c in var_codes.items()})
                    flat_cache[key] = (sel, k, rows, its, *carried)
                    fanouts[f"level{cell.level} {gran}"] = {**bound, "fanout_used": k}
                sel, k, rows, its, weight, pair_vars = flat_cache[key]
                if geo not in region_cache:
                    region_cache[geo] = _regions(frame, geo)
                region_of_row, codes = region_cache[geo]
                args = (design, td, cell, geo, sel, k, region_of_row[rows], its, weight, codes, pair_vars,
                        inputs.variables)
                if engine is None:
                    units.append(_measure(*args, run_key, public_totals, noise))
                else:
                    pub = public_totals[public_totals["geography"] == geo] if public_totals is not None else None
                    items.append(((td.name, geo, cell.level), (*args, run_key, pub, noise)))
    if engine is not None:
        units = engine.map_items(items, _measure_unit, stage="safetab cells")
    for out in units:
        blocks.extend(out[0])
        facts.append(out[1])
        errors.extend(out[2])
    variables = list(inputs.variables)
    columns = ["table", "geography", "geocode", "group", "group_level", "detail", *variables, "count"]
    rows = pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(columns=columns)
    return Outcome(rows[columns], facts, errors, fanouts)


def _measure_unit(key, payload, rng):
    """One (table, geography, level) block as a unit of work; its cells draw from their own
    keyed streams (the run key travels in the payload), not from the unit's ``rng``."""
    *args, run_key, public_totals, noise = payload
    return _measure(*args, run_key, public_totals, noise)


def _public_choice(public_totals, geo, codes, sel) -> np.ndarray:
    """Published totals as a dense (regions, groups) array; NaN where nothing was published."""
    dense = np.full((len(codes), len(sel)), np.nan)
    pub = public_totals[public_totals["geography"] == geo]
    r = pd.Index(codes).get_indexer(pub["geocode"].astype(str))
    g = pd.Index(sel["iteration"]).get_indexer(pub["group"].astype(str))
    ok = (r >= 0) & (g >= 0)
    dense[r[ok], g[ok]] = pub["count"].to_numpy(dtype=np.float64)[ok]
    return dense


def _measure(design, td, cell, geo, sel, k, region, group, weight, codes, var_codes, variables, run_key, public_totals,
             noise=sigma2):
    n_regions, n_groups = len(codes), len(sel)
    geocode_type, group_type = pd.CategoricalDtype(codes), pd.CategoricalDtype(sel["iteration"].to_numpy())

    def with_noise(true, flat, s2, stage):
        """true + noise, row i (cell flat[i] = region * n_groups + group) from that cell's stream,
        keyed (NOISE_STREAM, table, geography, level, geocode, group, stage)."""
        keys = KeyColumns((NOISE_STREAM, td.name, geo, cell.level),
                          (pd.Categorical.from_codes(flat // n_groups, dtype=geocode_type),
                           pd.Categorical.from_codes(flat % n_groups, dtype=group_type)), (stage,))
        return add_keyed_noise(true, s2, run_key, keys)

    truth = group_counts(region, group, n_regions, n_groups, weight)
    detailed_only = sel["detailed_only"].to_numpy()
    stages = dict(design.stages(cell))
    s2_second = noise(k, stages["stage 2"])
    suppress = geo in design.suppress_at
    t_zero = suppression_threshold(s2_second, design.suppression) if suppress else None
    blocks, errors = [], []
    fact = {"table": td.name, "geography": geo, "level": cell.level, "granularity": design.granularity(geo),
            "rho": cell.rho, "fanout": k, "units": n_regions, "groups": n_groups,
            "thresholds": list(cell.thresholds), "sigma2": {"stage 2": s2_second}}
    if design.two_stage:
        s2_first = noise(k, stages["stage 1"])
        s2_full = noise(k, cell.rho)
        fact["sigma2"] = {"stage 1": s2_first, "stage 2": s2_second, "detailed-only total": s2_full}
        adaptive = np.flatnonzero(~detailed_only)
        only = np.flatnonzero(detailed_only)
        stage1_cells = (np.arange(n_regions)[:, None] * n_groups + adaptive[None, :]).ravel()
        stage1 = with_noise(truth[:, adaptive].reshape(-1), stage1_cells, s2_first, "stage 1").reshape(n_regions, adaptive.size)
        rung = np.full((n_regions, n_groups), -1, dtype=np.int8)
        rung[:, adaptive] = choose_detail(stage1, cell.thresholds)
        del stage1  # used only through the choice
        if only.size:
            t_only = suppression_threshold(s2_full, design.suppression) if suppress else None
            fact["suppression_threshold_detailed_only"] = t_only
            keys = (np.arange(n_regions)[:, None] * n_groups + only[None, :]).ravel()
            true = truth.reshape(-1)[keys]
            measured = with_noise(true, keys, s2_full, "detailed-only total")
            blocks.append(_emit(td, cell, geo, codes, sel, keys, n_groups, "total", {}, measured, true, t_only, errors, variables,
                                role="detailed-only total"))
    else:
        published = _public_choice(public_totals, geo, codes, sel)
        rung = np.where(np.isnan(published), -1, choose_detail(np.nan_to_num(published, nan=-np.inf), cell.thresholds)).astype(np.int8)
    fact["suppression_threshold"] = t_zero
    fact["chosen"] = {}
    for r, detail in enumerate(td.details):
        keys = np.flatnonzero(rung.reshape(-1) == r)
        fact["chosen"][detail.name] = int(keys.size)
        if not keys.size:
            continue
        if not detail.variables:
            true = truth.reshape(-1)[keys]
            noisy = with_noise(true, keys, s2_second, "stage 2")
            blocks.append(_emit(td, cell, geo, codes, sel, keys, n_groups, detail.name, {}, noisy, true, t_zero, errors, variables))
            continue
        sizes = [len(variables[v]) for v in detail.variables]
        cells = cell_codes([var_codes[v] for v in detail.variables], sizes)
        n_cells = int(np.prod(sizes))
        _, true = detail_counts(region, group, cells, keys, n_groups, n_cells, n_regions, weight)
        noisy = with_noise(true, keys, s2_second, "stage 2")
        parts = np.unravel_index(np.arange(n_cells), sizes)
        per_cell = {v: np.tile(p, len(keys)) for v, p in zip(detail.variables, parts)}
        rep = np.repeat(keys, n_cells)
        blocks.append(_emit(td, cell, geo, codes, sel, rep, n_groups, detail.name, per_cell,
                            noisy.reshape(-1), true.reshape(-1), None, errors, variables))
        # the group's total is the sum of its published cells (post-processing, as production)
        blocks.append(_emit(td, cell, geo, codes, sel, keys, n_groups, detail.name, {}, noisy.sum(axis=1),
                            true.sum(axis=1), None, errors, variables, role="sum of cells"))
        if len(sizes) > 1:  # and, as production's T2, the margin of the first variable (sex)
            first = detail.variables[0]
            margin = {first: np.tile(np.arange(sizes[0]), len(keys))}
            blocks.append(_emit(td, cell, geo, codes, sel, np.repeat(keys, sizes[0]), n_groups, detail.name, margin,
                                noisy.reshape(len(keys), sizes[0], -1).sum(axis=2).reshape(-1),
                                true.reshape(len(keys), sizes[0], -1).sum(axis=2).reshape(-1), None, errors,
                                variables, role=f"margin of {first}"))
    return blocks, fact, errors


def _emit(td, cell, geo, codes, sel, keys, n_groups, detail, per_cell, noisy, true, threshold, errors, variables, role=None):
    """Long-form rows for one measured block; suppressed totals are dropped."""
    keep = noisy > threshold if threshold is not None else np.ones(len(noisy), dtype=bool)
    err = np.abs(noisy.astype(np.float64) - true)
    errors.append({"table": td.name, "geography": geo, "level": cell.level, "detail": detail,
                   "cells": "total" if not per_cell else "cell", "role": role or ("total" if not per_cell else "cell"),
                   "n": int(len(noisy)), "sum_abs_error": float(err.sum()), "sum_sq_error": float((err ** 2).sum()),
                   "suppressed": int((~keep).sum()), "suppressed_true_zero": int(((~keep) & (true == 0)).sum()),
                   "true_zero": int((true == 0).sum())})
    keys = keys[keep]
    frame = {
        "table": np.full(len(keys), td.name, dtype=object),
        "geography": np.full(len(keys), geo, dtype=object),
        "geocode": codes[keys // n_groups],
        "group": sel["iteration"].to_numpy()[keys % n_groups],
        "group_level": np.full(len(keys), cell.level, dtype=np.int8),
        "detail": np.full(len(keys), detail, dtype=object),
    }
    for v, values in variables.items():
        if v in per_cell:
            frame[v] = np.asarray(values, dtype=object)[per_cell[v][keep]]
        else:
            frame[v] = np.full(len(keys), ALL, dtype=object)
    frame["count"] = noisy[keep].astype(np.int64)
    return pd.DataFrame(frame)


def summarize_errors(errors_over_runs: list[list[dict]]) -> list[dict]:
    """Mean absolute error and RMSE per (table, geography, level, detail, role) over runs."""
    acc: dict = defaultdict(lambda: [0, 0.0, 0.0, 0, 0, 0])
    for run_errors in errors_over_runs:
        for e in run_errors:
            a = acc[(e["table"], e["geography"], e["level"], e["detail"], e["role"])]
            a[0] += e["n"]
            a[1] += e["sum_abs_error"]
            a[2] += e["sum_sq_error"]
            a[3] += e["suppressed"]
            a[4] += e["suppressed_true_zero"]
            a[5] += e["true_zero"]
    out = []
    for (t, g, lv, d, role), (n, s1, s2, sup, supz, zeros) in acc.items():
        out.append({"table": t, "geography": g, "level": lv, "detail": d, "role": role, "cells": n,
                    "mean_absolute_error": s1 / n if n else 0.0, "rmse": (s2 / n) ** 0.5 if n else 0.0,
                    "suppressed": sup, "suppressed_true_zero": supz, "true_zero": zeros})
    return out


def as_float(x):
    return float(x) if isinstance(x, Fraction) else x
