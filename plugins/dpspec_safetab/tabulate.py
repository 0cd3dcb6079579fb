"""Run a SafeTab design on records: every (table, geography level, iteration level) block.

`run` checks the records (`validate`), has them counted per (block, geography unit, group,
stage-2 cell) where they live (`truths`), summed by the engine, and measured in batches of
geography units (`measured`, where one block's measurement is). Figures computed against the
confidential counts (the realized error) are returned separately for the internal report.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from functools import partial

import attrs
import numpy as np
import pandas as pd

from dpspec.api import EngineTable, MechanismError, local_engine_run

from .design import ROOT, Design, sigma2
from .iterations import IterationTable
from .measured import MEASURED_SCHEMA, compared_frame, measure_bucket, rebuild_facts, release_table, released_rows
from .plan import Plan, bucket_count, declared_units, measured_blocks, partition_column
from .records import Inputs
from .truths import TRUTH_SCHEMA, partition_truths
from .validate import check_records

ALL = "*"


@attrs.frozen
class Outcome:
    rows: object  # the release: a StreamedTable read from the engine, or a frame (a run without an engine)
    facts: list  # per (table, geo, level): public parameters and the published choice
    errors: list  # per (table, geo, level, detail): realized error (internal)
    fanouts: dict
    compared: object = None  # keep_truths: each released count beside its truth (internal; `measured.compared_frame`)


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


def run(
    design: Design,
    inputs: Inputs,
    table: IterationTable,
    rng: np.random.Generator,
    units: dict,
    public_totals: pd.DataFrame | None = None,
    noise=sigma2,
    engine=None,
    keep_truths: bool = False,
) -> Outcome:
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
    plan = Plan(
        design,
        table,
        tuple(inputs.race_columns),
        inputs.eth_column,
        dict(inputs.variables),
        inputs.source,
        tuple(read_columns(design, inputs)),
        blocks,
        fanouts,
        buckets,
        run_key,
        declared_units({g: units[g] for g, _ in blocks}, buckets),
        marker_owner(data, by),
        public_totals,
        noise,
        keep_truths,
    )
    if isinstance(held, pd.DataFrame):  # the records are in this process already: one pass over them,
        summed = partition_truths((), held[list(plan.columns)], None, plan)  # whose counts are the sums
    else:  # counted where they live, a partition (a county) per unit of work, then summed there
        truths = engine.map_groups(
            data,
            by,
            partial(partition_truths, plan=plan),
            stage="safetab tabulation",
            schema=TRUTH_SCHEMA,
            collect=False,
            columns=list(plan.columns),
            ordered=False,
        )
        summed = engine.total(
            truths, ["block", "bucket", "geocode", "group", "cell"], stage="safetab sums", collect=False
        )
        engine.drop(truths)
    measured = engine.map_groups(
        summed,
        ["block", "bucket"],
        partial(measure_bucket, plan=plan),
        stage="safetab cells",
        schema=MEASURED_SCHEMA,
        collect=False,
        ordered=False,
    )
    engine.drop(summed)
    totals = engine.total(
        measured, ["kind", "table", "geography", "level", "rung", "role", "cell"], stage="safetab figures"
    )
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
    for fact in facts:
        want = len(plan.units[fact["geography"]][0])
        if fact["units"] != want:
            raise MechanismError(
                f"safetab measured {fact['units']} units of {fact['geography']} for table "
                f"{fact['table']}, iteration level {fact['level']}, but {want} are declared: every "
                "declared unit is measured, an empty one with its noisy values"
            )


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
        out.append(
            {
                "table": t,
                "geography": g,
                "level": lv,
                "detail": d,
                "role": role,
                "cells": n,
                "mean_absolute_error": s1 / n if n else 0.0,
                "rmse": (s2 / n) ** 0.5 if n else 0.0,
                "suppressed": sup,
                "suppressed_true_zero": supz,
                "true_zero": zeros,
            }
        )
    return out


def as_float(x):
    return float(x) if isinstance(x, Fraction) else x
