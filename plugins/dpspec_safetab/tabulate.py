"""Run a SafeTab design on records: every (table, geography level, iteration level) block.

`run` checks the records, has them counted per (block, geography unit, group, stage-2 cell)
where they live (`truths`), summed by the engine, and measured in batches of geography units
(`measured`). `_measure` is one block's measurement over such a batch: pick each group's
stage-2 detail (from a noisy stage-1 total, or from published totals), measure the chosen
tables with exact discrete Gaussian noise keyed per cell, suppress small totals where declared,
and emit the release rows. Figures computed against the confidential counts (the realized
error) are returned separately for the internal report.
"""
from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import attrs
import numpy as np
import pandas as pd

from dpspec.api import DataError, KeyColumns, record_measurement

from .combinations import Origin, combinations, rows_text, text_codes, through
from .design import NATION_CODE, ROOT, Design, sigma2
from .engine import add_keyed_noise, cell_codes, choose_detail, detail_counts, group_counts, suppression_threshold
from .iterations import IterationTable, RecordCodes, encode_records

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
    rows: object  # the release: a StreamedTable read from the engine, or a frame (a run without an engine)
    facts: list  # per (table, geo, level): public parameters and the published choice
    errors: list  # per (table, geo, level, detail): realized error (internal)
    fanouts: dict
    compared: object = None  # keep_truths: each released count beside its truth (internal; `measured.compared_frame`)


def _regions(frame: pd.DataFrame, geo: str) -> tuple[np.ndarray, np.ndarray]:
    if geo == ROOT:
        return np.zeros(len(frame), dtype=np.int64), np.array([NATION_CODE], dtype=object)
    return sorted_codes(frame[geo])


def sorted_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(each value's position among the distinct values sorted as text, -1 where missing; those
    values): hashing the rows and sorting only the distinct values (geocodes: a few thousand)."""
    codes, labels = text_codes(values)
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
        units: dict, public_totals: pd.DataFrame | None = None, noise=sigma2, engine=None,
        keep_truths: bool = False) -> Outcome:
    """Measure every (table, geography level, iteration level) cell of the design.

    units: {geography level: its declared units} (`geography.declared_units`); every one is
    measured, with records or not, and no other (a record elsewhere is a DataError).

    noise(fanout, rho) -> sigma²: the mechanism's calibration (`SafeTab.noise_sigma2`).
    engine (a `dpspec.engine.EngineRun`): where the units of work run. The records are checked
    on the driver from the counts of their code combinations (`validate`), then counted by
    partitions where they live (`truths`), the shares summed by the engine, and the sums
    measured in batches of geography units (`measured`); the release stays on the engine and
    is streamed. Noise is keyed per (geography, group) cell and stage, from the engine's run key
    (without an engine, from a run key drawn from `rng`, on a local engine of the run's own, and
    the release is then returned as one frame), so every engine, partitioning and batching of
    cells releases the same counts. keep_truths: also return every released count beside its
    confidential count (`Outcome.compared`, for `dpspec sweep --runs`; internal).
    """
    from functools import partial

    from dpspec.api import EngineTable, local_engine_run

    from .measured import MEASURED_SCHEMA, compared_frame, measure_bucket, rebuild_facts, release_table, released_rows
    from .plan import Plan, bucket_count, declared_units, measured_blocks, partition_column
    from .truths import TRUTH_SCHEMA, partition_truths
    from .validate import check_records

    own = engine is None
    run_key = int.from_bytes(rng.bytes(32), "little") if own else engine.run_key
    engine = local_engine_run(run_key) if own else engine
    blocks = measured_blocks(design)
    fanouts, fanout_facts = {}, {}
    for geo, level in blocks:
        gran = design.granularity(geo)
        if (level, gran) not in fanouts:
            k, bound = fanout_of(design, table, level, gran)
            fanouts[(level, gran)] = k
            fanout_facts[f"level{level} {gran}"] = {**bound, "fanout_used": k}
    check_records(inputs, table, design.max_race_codes, fanouts, engine)
    data = inputs.frame
    held = data.handle if isinstance(data, EngineTable) else data
    by = []
    if not isinstance(held, pd.DataFrame):
        distinct = {g: len(data.categories[g]) for g in design.geo_levels if g in data.categories}
        by = partition_column(design, distinct, len(data))
    buckets = bucket_count(len(data))
    plan = Plan(design, table, tuple(inputs.race_columns), inputs.eth_column, dict(inputs.variables), inputs.source,
                tuple(read_columns(design, inputs)), blocks, fanouts, buckets, run_key,
                declared_units({g: units[g] for g, _ in blocks}, buckets), marker_owner(data, by),
                public_totals, noise, keep_truths)
    if isinstance(held, pd.DataFrame):  # the records are in this process already: one pass over them,
        summed = partition_truths((), held[list(plan.columns)], None, plan)  # whose counts are the sums
    else:  # counted where they live, a partition (a county) per unit of work, then summed there
        truths = engine.map_groups(data, by,
                                   partial(partition_truths, plan=plan), stage="safetab tabulation",
                                   schema=TRUTH_SCHEMA, collect=False, columns=list(plan.columns), ordered=False)
        summed = engine.total(truths, ["block", "bucket", "geocode", "group", "cell"], stage="safetab sums",
                              collect=False)
        engine.drop(truths)
    measured = engine.map_groups(summed, ["block", "bucket"], partial(measure_bucket, plan=plan), stage="safetab cells",
                                 schema=MEASURED_SCHEMA, collect=False, ordered=False)
    engine.drop(summed)
    totals = engine.total(measured, ["kind", "table", "geography", "level", "rung", "role", "cell"],
                          stage="safetab figures")
    facts, errors = rebuild_facts(plan, totals)
    check_units(plan, facts)
    compared = compared_frame(engine, measured, plan) if keep_truths else None
    rows = release_table(engine, measured, plan, released_rows(totals))
    if own:
        frame = rows.to_pandas()
        rows.release()
        rows = frame
    return Outcome(rows, facts, errors, fanout_facts, compared)


def marker_owner(data, by: list) -> tuple:
    """The key of the tabulating unit that emits the buckets' markers: the one unit when the
    records are not split, else the first partition that holds records (which one it is decides
    only where the markers are made, never what the release holds)."""
    if not by:
        return ()
    held = data.count(by)
    return tuple(held.iloc[0][c] for c in by) if len(held) else None  # no records: no unit, `check_units` stops


def check_units(plan, facts: list) -> None:
    """Every (table, geography level, iteration level) measured every declared unit, or the run
    stops: a unit left out because nobody lives in it would reveal that it is empty."""
    from dpspec.api import MechanismError

    for fact in facts:
        want = len(plan.units[fact["geography"]][0])
        if fact["units"] != want:
            raise MechanismError(f"safetab measured {fact['units']} units of {fact['geography']} for table "
                                 f"{fact['table']}, iteration level {fact['level']}, but {want} are declared: every "
                                 "declared unit is measured, an empty one with its noisy values")


def _public_choice(public_totals, geo, codes, sel) -> np.ndarray:
    """Published totals as a dense (regions, groups) array; NaN where nothing was published."""
    dense = np.full((len(codes), len(sel)), np.nan)
    pub = public_totals[public_totals["geography"] == geo]
    r = pd.Index(codes).get_indexer(pub["geocode"].astype(str))
    g = pd.Index(sel["iteration"]).get_indexer(pub["group"].astype(str))
    ok = (r >= 0) & (g >= 0)
    dense[r[ok], g[ok]] = pub["count"].to_numpy(dtype=np.float64)[ok]
    return dense


def cell_fact(design: Design, td, cell, geo: str, k: int, sel: pd.DataFrame, noise=sigma2) -> dict:
    """The public figures of one (table, geography, level) cell: its budget, fan-out, noise
    parameters and suppression thresholds (the units measured and the details chosen come from
    the run: `measured.rebuild_facts`)."""
    stages = dict(design.stages(cell))
    s2_second = noise(k, stages["stage 2"])
    suppress = geo in design.suppress_at
    fact = {"table": td.name, "geography": geo, "level": cell.level, "granularity": design.granularity(geo),
            "rho": cell.rho, "fanout": k, "units": 0, "groups": len(sel), "thresholds": list(cell.thresholds),
            "sigma2": {"stage 2": s2_second}}
    if design.two_stage:
        s2_full = noise(k, cell.rho)
        fact["sigma2"] = {"stage 1": noise(k, stages["stage 1"]), "stage 2": s2_second, "detailed-only total": s2_full}
        if sel["detailed_only"].to_numpy().any():
            fact["suppression_threshold_detailed_only"] = (suppression_threshold(s2_full, design.suppression)
                                                           if suppress else None)
    fact["suppression_threshold"] = suppression_threshold(s2_second, design.suppression) if suppress else None
    fact["chosen"] = {d.name: 0 for d in td.details}
    return fact


def _measure(plan, t: int, td, cell, geo: str, region, group, weight, codes, var_codes):
    """Measure one cell of the design over some geography units (a bucket of them): `codes`
    their codes, sorted; (region, group, weight, var_codes) the summed counts, a region of -1
    for none. Returns a `measured.Emitted` with the release rows and the run's figures."""
    from .measured import Emitted

    design, variables, run_key = plan.design, plan.variables, plan.run_key
    sel, k = plan.selection(cell.level, geo), plan.fanout(cell.level, geo)
    n_regions, n_groups = len(codes), len(sel)
    geocode_type, group_type = pd.CategoricalDtype(codes), pd.CategoricalDtype(sel["iteration"].to_numpy())

    def with_noise(true, flat, s2, stage):
        """true + noise, row i (cell flat[i] = region * n_groups + group) from that cell's stream,
        keyed (NOISE_STREAM, table, geography, level, geocode, group, stage)."""
        keys = KeyColumns((NOISE_STREAM, td.name, geo, cell.level),
                          (pd.Categorical.from_codes(flat // n_groups, dtype=geocode_type),
                           pd.Categorical.from_codes(flat % n_groups, dtype=group_type)), (stage,))
        record_measurement(f"{td.name}/{geo}/level {cell.level}/{stage}", true, "discrete_gaussian", s2, sensitivity=k ** 0.5,
                           adaptive=stage == "stage 1", keys=lambda: _cell_keys(codes, flat, n_groups, np.shape(true), sel["iteration"]))
        return add_keyed_noise(true, s2, run_key, keys)

    truth = group_counts(region, group, n_regions, n_groups, weight)
    detailed_only = sel["detailed_only"].to_numpy()
    fact = cell_fact(design, td, cell, geo, k, sel, plan.noise)
    s2_second, t_zero = fact["sigma2"]["stage 2"], fact["suppression_threshold"]
    out = Emitted(plan, t, design.geo_levels.index(geo), cell.level, codes, n_groups)
    if design.two_stage:
        adaptive = np.flatnonzero(~detailed_only)
        only = np.flatnonzero(detailed_only)
        stage1_cells = (np.arange(n_regions)[:, None] * n_groups + adaptive[None, :]).ravel()
        stage1 = with_noise(truth[:, adaptive].reshape(-1), stage1_cells, fact["sigma2"]["stage 1"],
                            "stage 1").reshape(n_regions, adaptive.size)
        rung = np.full((n_regions, n_groups), -1, dtype=np.int8)
        rung[:, adaptive] = choose_detail(stage1, cell.thresholds)
        del stage1  # used only through the choice
        if only.size:
            s2_full, t_only = fact["sigma2"]["detailed-only total"], fact["suppression_threshold_detailed_only"]
            keys = (np.arange(n_regions)[:, None] * n_groups + only[None, :]).ravel()
            true = truth.reshape(-1)[keys]
            out.add(keys, -1, "detailed-only total", {}, with_noise(true, keys, s2_full, "detailed-only total"), true,
                    t_only)
    else:
        published = _public_choice(plan.public_totals, geo, codes, sel)
        rung = np.where(np.isnan(published), -1, choose_detail(np.nan_to_num(published, nan=-np.inf), cell.thresholds)).astype(np.int8)
    out.metric(-1, "units", n_regions)
    for r, detail in enumerate(td.details):
        keys = np.flatnonzero(rung.reshape(-1) == r)
        out.metric(r, "chosen", keys.size)
        if not keys.size:
            continue
        if not detail.variables:
            true = truth.reshape(-1)[keys]
            out.add(keys, r, "total", {}, with_noise(true, keys, s2_second, "stage 2"), true, t_zero)
            continue
        sizes = [len(variables[v]) for v in detail.variables]
        cells = cell_codes([var_codes[v] for v in detail.variables], sizes)
        n_cells = int(np.prod(sizes))
        _, true = detail_counts(region, group, cells, keys, n_groups, n_cells, n_regions, weight)
        noisy = with_noise(true, keys, s2_second, "stage 2")
        parts = np.unravel_index(np.arange(n_cells), sizes)
        per_cell = {v: np.tile(p, len(keys)) for v, p in zip(detail.variables, parts)}
        out.add(np.repeat(keys, n_cells), r, "cell", per_cell, noisy.reshape(-1), true.reshape(-1), None)
        # the group's total is the sum of its published cells (post-processing, as production)
        out.add(keys, r, "sum of cells", {}, noisy.sum(axis=1), true.sum(axis=1), None)
        if len(sizes) > 1:  # and, as production's T2, the margin of the first variable (sex)
            first = detail.variables[0]
            margin = {first: np.tile(np.arange(sizes[0]), len(keys))}
            out.add(np.repeat(keys, sizes[0]), r, "margin", margin,
                    noisy.reshape(len(keys), sizes[0], -1).sum(axis=2).reshape(-1),
                    true.reshape(len(keys), sizes[0], -1).sum(axis=2).reshape(-1), None)
    return out


def _cell_keys(codes, flat, n_groups: int, shape, groups) -> tuple:
    """(geocode, group code[, cell]) of each measured count, for `dpspec verify --replay`: the
    release's own (geocode, group), so a row of it names the measurements that decide it."""
    cells = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    flat = np.repeat(np.asarray(flat), cells)
    columns = (np.asarray(codes, dtype=object)[flat // n_groups], np.asarray(groups, dtype=object)[flat % n_groups])
    return (*columns, np.tile(np.arange(cells), len(flat) // cells)) if len(shape) > 1 else columns


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
