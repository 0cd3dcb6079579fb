"""The second units of a SafeTab run: a bucket of one block's geography units measured from
their summed counts, and the release read back from what those units left on the engine.

Why: every count SafeTab releases depends only on its own (geography unit, group) cell (its
truth, its keyed noise, its stage-1 choice), so any batching of units gives the same release;
buckets keep each unit of work a bounded size at any scale. A unit returns compact integer
rows, release rows (kind 0) and the run's internal figures (kind 1: errors, units, details
chosen), summed by the engine; the driver turns the few figure rows into the facts and the
error summaries, and streams the release, decoding each chunk into its long-form text.

When a sweep measures realized error (`Plan.keep_truths`), a unit also emits one compared row
(kind 2) per released count: its confidential count in `group`, the released one in `count`
(as figure rows reuse `cell` for the metric). Summed with the figures they collapse to one row
per block (group is not a key there); `compared_frame` reads them back, one per released cell.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpspec.api import ComparedCounts, DataError, KeyColumns, StreamedTable, record_measurement

from .combinations import text_codes, through
from .design import Design, sigma2
from .engine import add_keyed_noise, cell_codes, choose_detail, detail_counts, group_counts, suppression_threshold
from .plan import Plan, empty_frame

ROLES = ("detailed-only total", "total", "sum of cells", "margin", "cell")  # a group's totals before its cells
EMITTED = ("detailed-only total", "total", "cell", "sum of cells", "margin")  # the order the report lists them
METRICS = (
    "n",
    "sum_abs_error",
    "sum_sq_error",
    "suppressed",
    "suppressed_true_zero",
    "true_zero",
    "units",
    "chosen",
    "rows",
)  # rows: release rows kept, so the release's size needs no pass over the table
MEASURED_SCHEMA = {
    "kind": "int64",
    "table": "int64",
    "geography": "int64",
    "level": "int64",
    "geocode": "str",
    "group": "int64",
    "rung": "int64",
    "role": "int64",
    "cell": "int64",
    "count": "int64",
}
ORDER = ["kind", "table", "geography", "level", "geocode", "group", "rung", "role", "cell"]
ALL = "*"
RELEASE, FIGURE, COMPARED = 0, 1, 2
NOISE_STREAM = "safetab cell noise"  # first part of every cell's stream key


class Emitted:
    """What one cell of the design measured over a bucket: release rows and figure rows."""

    def __init__(self, plan: Plan, t: int, g: int, level: int, codes, n_groups: int):
        self.plan, self.t, self.g, self.level = plan, t, g, level
        self.codes, self.n_groups = np.asarray(codes, dtype=object), n_groups
        self.parts, self.figures = [], []

    def add(self, keys, rung: int, role: str, per_cell: dict, noisy, true, threshold) -> None:
        """One measured block: flat (unit, group) keys, its cells' variables, noisy and true
        counts; a total at or below `threshold` is suppressed (dropped, and counted)."""
        noisy, true = np.asarray(noisy, dtype=np.int64), np.asarray(true, dtype=np.int64)
        keep = noisy > threshold if threshold is not None else np.ones(len(noisy), dtype=bool)
        err = np.abs(noisy - true)
        r = ROLES.index(role)
        for name, value in (
            ("n", len(noisy)),
            ("sum_abs_error", err.sum()),
            ("sum_sq_error", (err * err).sum()),
            ("suppressed", (~keep).sum()),
            ("suppressed_true_zero", ((~keep) & (true == 0)).sum()),
            ("true_zero", (true == 0).sum()),
        ):
            self.figures.append((rung, r, METRICS.index(name), int(value)))
        keys = keys[keep]
        n = len(keys)
        self.metric(-1, "rows", n)
        if self.plan.keep_truths:  # the released counts beside their truths: internal, for the sweep only
            self.parts.append(
                pd.DataFrame(
                    {
                        "kind": np.full(n, COMPARED, dtype=np.int64),
                        "table": np.full(n, self.t, dtype=np.int64),
                        "geography": np.full(n, self.g, dtype=np.int64),
                        "level": np.full(n, self.level, dtype=np.int64),
                        "geocode": np.full(n, None, dtype=object),
                        "group": true[keep],
                        "rung": np.full(n, rung, dtype=np.int64),
                        "role": np.full(n, r, dtype=np.int64),
                        "cell": np.zeros(n, dtype=np.int64),
                        "count": noisy[keep],
                    }
                )
            )
        self.parts.append(
            pd.DataFrame(
                {
                    "kind": np.full(n, RELEASE, dtype=np.int64),
                    "table": np.full(n, self.t, dtype=np.int64),
                    "geography": np.full(n, self.g, dtype=np.int64),
                    "level": np.full(n, self.level, dtype=np.int64),
                    "geocode": self.codes[keys // self.n_groups],
                    "group": (keys % self.n_groups).astype(np.int64),
                    "rung": np.full(n, rung, dtype=np.int64),
                    "role": np.full(n, r, dtype=np.int64),
                    "cell": self._cells(per_cell, keep),
                    "count": noisy[keep],
                }
            )
        )

    def metric(self, rung: int, name: str, value: int) -> None:
        self.figures.append((rung, -1, METRICS.index(name), int(value)))

    def _cells(self, per_cell: dict, keep) -> np.ndarray:
        """Each row's stage-2 cell over every variable: code + 1 per variable, 0 for '*'."""
        out = np.zeros(int(keep.sum()), dtype=np.int64)
        for var, values in self.plan.variables.items():
            digit = per_cell[var][keep].astype(np.int64) + 1 if var in per_cell else 0
            out = out * (len(values) + 1) + digit
        return out

    def frame(self) -> pd.DataFrame:
        fig = np.array(self.figures, dtype=np.int64).reshape(-1, 4)
        n = len(fig)
        figures = pd.DataFrame(
            {
                "kind": np.full(n, FIGURE, dtype=np.int64),
                "table": np.full(n, self.t, dtype=np.int64),
                "geography": np.full(n, self.g, dtype=np.int64),
                "level": np.full(n, self.level, dtype=np.int64),
                "geocode": np.full(n, None, dtype=object),
                "group": np.full(n, -1, dtype=np.int64),
                "rung": fig[:, 0],
                "role": fig[:, 1],
                "cell": fig[:, 2],
                "count": fig[:, 3],
            }
        )
        return pd.concat([*self.parts, figures], ignore_index=True)


def measure_bucket(key, rows: pd.DataFrame, rng, plan: Plan) -> pd.DataFrame:
    """One (block, bucket) unit: every table measuring the block, over the bucket's geography
    units, from their summed counts (`truths`); noise comes from each cell's keyed stream, not
    from `rng`. The result depends on the rows' multiset only."""
    geo, level = plan.blocks[int(key[0])]
    codes = plan.bucket_units(geo, int(key[1]))  # declared: every one is measured, with records or not
    group = rows["group"].to_numpy(dtype=np.int64)
    marker = group < 0  # the bucket's marker row: it makes the bucket a unit of work, and counts nothing
    found, labels = text_codes(rows["geocode"])
    region = through(pd.Index(codes).get_indexer(labels), found)
    if (stray := ~marker & (region < 0)).any():
        raise DataError(
            f"{plan.source}: records in {geo} '{rows['geocode'].to_numpy()[stray][0]}', which is not a "
            f"declared unit of '{geo}': the release has the declared units only"
        )
    region = np.where(marker, -1, region)
    group = np.where(marker, 0, group)
    cell = np.where(marker, 0, rows["cell"].to_numpy(dtype=np.int64))
    var_codes = dict(zip(plan.variables, np.unravel_index(cell, plan.sizes))) if plan.variables else {}
    weight = rows["count"].to_numpy(dtype=np.int64)
    parts = [
        _measure(plan, t, td, c, geo, region, group, weight, codes, var_codes).frame()
        for t, td in enumerate(plan.design.tables)
        if (c := td.cell(geo, level)) is not None and c.rho != 0
    ]
    if not parts:
        return empty_frame(MEASURED_SCHEMA)
    return pd.concat(parts, ignore_index=True)


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
    fact = {
        "table": td.name,
        "geography": geo,
        "level": cell.level,
        "granularity": design.granularity(geo),
        "rho": cell.rho,
        "fanout": k,
        "units": 0,
        "groups": len(sel),
        "thresholds": list(cell.thresholds),
        "sigma2": {"stage 2": s2_second},
    }
    if design.two_stage:
        s2_full = noise(k, cell.rho)
        fact["sigma2"] = {"stage 1": noise(k, stages["stage 1"]), "stage 2": s2_second, "detailed-only total": s2_full}
        if sel["detailed_only"].to_numpy().any():
            fact["suppression_threshold_detailed_only"] = (
                suppression_threshold(s2_full, design.suppression) if suppress else None
            )
    fact["suppression_threshold"] = suppression_threshold(s2_second, design.suppression) if suppress else None
    fact["chosen"] = {d.name: 0 for d in td.details}
    return fact


def _measure(plan, t: int, td, cell, geo: str, region, group, weight, codes, var_codes):
    """Measure one cell of the design over some geography units (a bucket of them): `codes`
    their codes, sorted; (region, group, weight, var_codes) the summed counts, a region of -1
    for none. Returns an `Emitted` with the release rows and the run's figures."""
    design, variables, run_key = plan.design, plan.variables, plan.run_key
    sel, k = plan.selection(cell.level, geo), plan.fanout(cell.level, geo)
    n_regions, n_groups = len(codes), len(sel)
    geocode_type, group_type = pd.CategoricalDtype(codes), pd.CategoricalDtype(sel["iteration"].to_numpy())

    def with_noise(true, flat, s2, stage):
        """true + noise, row i (cell flat[i] = region * n_groups + group) from that cell's stream,
        keyed (NOISE_STREAM, table, geography, level, geocode, group, stage)."""
        keys = KeyColumns(
            (NOISE_STREAM, td.name, geo, cell.level),
            (
                pd.Categorical.from_codes(flat // n_groups, dtype=geocode_type),
                pd.Categorical.from_codes(flat % n_groups, dtype=group_type),
            ),
            (stage,),
        )
        record_measurement(
            f"{td.name}/{geo}/level {cell.level}/{stage}",
            true,
            "discrete_gaussian",
            s2,
            sensitivity=k**0.5,
            adaptive=stage == "stage 1",
            keys=lambda: _cell_keys(codes, flat, n_groups, np.shape(true), sel["iteration"]),
        )
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
        stage1 = with_noise(truth[:, adaptive].reshape(-1), stage1_cells, fact["sigma2"]["stage 1"], "stage 1").reshape(
            n_regions, adaptive.size
        )
        rung = np.full((n_regions, n_groups), -1, dtype=np.int8)
        rung[:, adaptive] = choose_detail(stage1, cell.thresholds)
        del stage1  # used only through the choice
        if only.size:
            s2_full, t_only = fact["sigma2"]["detailed-only total"], fact["suppression_threshold_detailed_only"]
            keys = (np.arange(n_regions)[:, None] * n_groups + only[None, :]).ravel()
            true = truth.reshape(-1)[keys]
            out.add(
                keys,
                -1,
                "detailed-only total",
                {},
                with_noise(true, keys, s2_full, "detailed-only total"),
                true,
                t_only,
            )
    else:
        published = _public_choice(plan.public_totals, geo, codes, sel)
        rung = np.where(
            np.isnan(published), -1, choose_detail(np.nan_to_num(published, nan=-np.inf), cell.thresholds)
        ).astype(np.int8)
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
            out.add(
                np.repeat(keys, sizes[0]),
                r,
                "margin",
                margin,
                noisy.reshape(len(keys), sizes[0], -1).sum(axis=2).reshape(-1),
                true.reshape(len(keys), sizes[0], -1).sum(axis=2).reshape(-1),
                None,
            )
    return out


def _cell_keys(codes, flat, n_groups: int, shape, groups) -> tuple:
    """(geocode, group code[, cell]) of each measured count, for `dpspec verify --replay`: the
    release's own (geocode, group), so a row of it names the measurements that decide it."""
    cells = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    flat = np.repeat(np.asarray(flat), cells)
    columns = (np.asarray(codes, dtype=object)[flat // n_groups], np.asarray(groups, dtype=object)[flat % n_groups])
    return (*columns, np.tile(np.arange(cells), len(flat) // cells)) if len(shape) > 1 else columns


def rebuild_facts(plan: Plan, totals: pd.DataFrame) -> tuple[list, list]:
    """(facts, errors) of the run, in the order of its cells, from the summed figure rows."""
    design = plan.design
    fig = totals[totals["kind"] == FIGURE]
    per_cell: dict = {}  # (table, geography, level) -> {(rung, role, metric): sum}
    for t, g, lv, r, ro, m, c in zip(
        fig["table"], fig["geography"], fig["level"], fig["rung"], fig["role"], fig["cell"], fig["count"]
    ):
        per_cell.setdefault((int(t), int(g), int(lv)), {})[(int(r), int(ro), int(m))] = int(c)
    facts, errors = [], []
    for t, td in enumerate(design.tables):
        for g, geo in enumerate(design.geo_levels):
            for cell in sorted((c for c in td.cells if c.geo == geo), key=lambda c: c.level):
                if cell.rho == 0:
                    continue
                sel = plan.selection(cell.level, geo)
                fact = cell_fact(design, td, cell, geo, plan.fanout(cell.level, geo), sel, plan.noise)
                here = per_cell.get((t, g, cell.level), {})
                fact["units"] = here.get((-1, -1, METRICS.index("units")), 0)
                for r, detail in enumerate(td.details):
                    fact["chosen"][detail.name] = here.get((r, -1, METRICS.index("chosen")), 0)
                facts.append(fact)
                blocks = sorted(
                    {(r, ro) for r, ro, _ in here if ro >= 0}, key=lambda b: (b[0], EMITTED.index(ROLES[b[1]]))
                )
                only = (-1, ROLES.index("detailed-only total"))
                if design.two_stage and sel["detailed_only"].to_numpy().any() and only not in blocks:
                    blocks.insert(0, only)  # measured over no unit: a block of no cells
                for r, ro in blocks:
                    errors.append(
                        _error(
                            td, geo, cell.level, r, ro, {m: here.get((r, ro, i), 0) for i, m in enumerate(METRICS[:6])}
                        )
                    )
    return facts, errors


def _error(td, geo, level, rung, role, sums) -> dict:
    """One block's realized error, as the internal report reads it."""
    name = ROLES[role]
    detail = "total" if rung < 0 else td.details[rung].name
    if name == "margin":
        name = f"margin of {td.details[rung].variables[0]}"
    return {
        "table": td.name,
        "geography": geo,
        "level": level,
        "detail": detail,
        "cells": "cell" if ROLES[role] in ("cell", "margin") else "total",
        "role": name,
        "n": sums["n"],
        "sum_abs_error": float(sums["sum_abs_error"]),
        "sum_sq_error": float(sums["sum_sq_error"]),
        "suppressed": sums["suppressed"],
        "suppressed_true_zero": sums["suppressed_true_zero"],
        "true_zero": sums["true_zero"],
    }


def release_columns(plan: Plan) -> list[str]:
    return ["table", "geography", "geocode", "group", "group_level", "detail", *plan.variables, "count"]


def released_rows(totals: pd.DataFrame) -> int:
    """The release's number of rows, from the summed figures (each unit counts the rows it kept)."""
    rows = (totals["kind"] == FIGURE) & (totals["cell"] == METRICS.index("rows"))
    return int(totals.loc[rows, "count"].sum())


def release_table(engine, measured, plan: Plan, rows: int) -> StreamedTable:
    """The release as it streams from the engine (`rows` of them): sorted by table, geography
    level, iteration level, geography unit, group, detail, role and cell, decoded a chunk at a time."""
    columns = release_columns(plan)
    dtypes = {c: object for c in columns} | {"group_level": np.int8, "count": np.int64}

    def chunks():
        for chunk in engine.stream(measured, order_by=ORDER):
            chunk = chunk[chunk["kind"] == RELEASE]
            if len(chunk):
                yield decode(chunk, plan)

    return StreamedTable(columns, rows, chunks, dtypes=dtypes, engine_bound=True, release=lambda: engine.drop(measured))


def decode(chunk: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """Integer release rows as the published long form (names, group codes, '*' for totals)."""
    design = plan.design
    t = chunk["table"].to_numpy()
    g = chunk["geography"].to_numpy()
    level = chunk["level"].to_numpy()
    rung = chunk["rung"].to_numpy()
    group = np.empty(len(chunk), dtype=object)
    detail = np.empty(len(chunk), dtype=object)
    for gi, lv in set(zip(g.tolist(), level.tolist())):
        here = (g == gi) & (level == lv)
        group[here] = plan.selection(lv, design.geo_levels[gi])["iteration"].to_numpy(dtype=object)[
            chunk["group"].to_numpy()[here]
        ]
    for ti, td in enumerate(design.tables):
        names = np.array([*(d.name for d in td.details), "total"], dtype=object)  # rung -1: detailed-only
        here = t == ti
        detail[here] = names[rung[here]]
    out = {
        "table": np.array([td.name for td in design.tables], dtype=object)[t],
        "geography": np.array(design.geo_levels, dtype=object)[g],
        "geocode": chunk["geocode"].to_numpy(dtype=object),
        "group": group,
        "group_level": level.astype(np.int8),
        "detail": detail,
    }
    cell = chunk["cell"].to_numpy()
    digits = {}
    for var, values in reversed(list(plan.variables.items())):
        cell, digit = np.divmod(cell, len(values) + 1)
        digits[var] = np.array([ALL, *values], dtype=object)[digit]
    out.update({var: digits[var] for var in plan.variables})
    out["count"] = chunk["count"].to_numpy(dtype=np.int64)
    return pd.DataFrame(out)


COMPARED_COLUMNS = ["kind", "table", "geography", "level", "rung", "role", "group", "count"]


def compared_frame(engine, measured, plan: Plan) -> pd.DataFrame:
    """Every released count beside its confidential count, one row per released cell (internal):
    table, geography, level, role (as the release names them), truth, released. Streamed from
    the engine ordered by kind alone (nothing else depends on the order; a sort by one integer)."""
    parts = []
    for chunk in engine.stream(measured, order_by=["kind"], columns=COMPARED_COLUMNS):
        chunk = chunk[chunk["kind"].to_numpy() == COMPARED]
        if len(chunk):
            parts.append(chunk[COMPARED_COLUMNS[1:]].astype(np.int64))
    frame = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame({c: np.array([], dtype=np.int64) for c in COMPARED_COLUMNS[1:]})
    )
    return frame.rename(columns={"group": "truth", "count": "released"})


def compared_counts(design, frame: pd.DataFrame) -> list[ComparedCounts]:
    """The sweep's comparisons: one per (table, geography level, iteration level, role), named
    as the expected error names its noisy counts ("t1: county, iteration level 1, cell"; totals
    and cells carry stage 2's noise, sums of cells and margins are sums of it). Cells are indexed
    by position: each row holds both sides of one released count."""
    if not len(frame):
        return []
    block = ["table", "geography", "level", "role"]
    frame = frame.sort_values(block, kind="stable")
    keys = frame[block].to_numpy()
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
    ends = np.r_[starts[1:], len(frame)]
    truth, released = frame["truth"].to_numpy(), frame["released"].to_numpy()
    out = []
    for a, b in zip(starts, ends):
        t, g, lv, ro = (int(v) for v in keys[a])
        geo = design.geo_levels[g]
        index = pd.RangeIndex(b - a)
        out.append(
            ComparedCounts(
                f"{design.tables[t].name}: {geo}, iteration level {lv}, {ROLES[ro]}",
                geo,
                pd.Series(truth[a:b], index=index),
                pd.Series(released[a:b], index=index),
            )
        )
    return out
