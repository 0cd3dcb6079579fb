"""TopDown end to end: measure every unit with discrete Gaussian noise, then estimate top-down.

Why the final checks: the release is only as good as its guarantees (children add up to their
parent at every level, counts are nonnegative integers, invariants equal their confidential
values). They are cheap to re-verify from the output, so every run does, and a violation is a
MechanismError rather than a quietly inconsistent release.

Least-squares weights are 1/sigma² (the noise parameter). The noise variance itself is below
sigma² when sigma² is small (it tends to 0), and weighting by it would make the fit's weights
differ by many orders of magnitude for no gain in accuracy.

Levels without a budget share are not measured: the implicit root typically (the first
measured level is then fitted jointly with no parent), or an intermediate level (its units are
then estimated as sums of their children). The finest level must be measured.
"""

from __future__ import annotations

import functools
import time
import warnings
from typing import Sequence

import attrs
import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpspec.api import MechanismError, SpecError, shown

from ..measurement.allocation import JOINT_MARK, allocate, query_name, split_allocation
from ..estimation import equality, postprocess_only as pp_only
from ..geography.hierarchy import Hierarchy, build_hierarchy
from ..measurement.histogram import Schema, aggregate, marginal, unit_histograms
from .joint_table import JointSide
from ..estimation.pass_plans import pass_plan
from ..measurement.node_noise import run_key_from
from ..geography.spine import split_by_signature, split_geography
from ..estimation.node_solve import solve_level, solve_node
from ..estimation.postprocess import (
    BoundConstraint,
    Failsafe,
    GroupConstraint,
    MeasuredQuery,
    NodeError,
    NodeTask,
    default_workers,
    make_pool,
    task_size,
)
from ..broken import Broken
from ..release.parts import PartWriter
from ..measurement.shipping import pack, unpack
from ..wording import counted
from ..design import Design
from .context import Records, RunContext
from ..measurement.counts import person_counts
from .steps import (
    TopDownResult,
    _assemble,
    _budget_classes,
    _canonical_invariants,
    _check_split_invariants,
    _code,
    _finest_units,
    _level_tasks,
    _noise_plan,
    _spans,
    _structural_zeros,
    _verify,
    node_failure,
)
from ..estimation.joint_passes import joint_pass_plan

_PARALLEL_MIN_SIZE = 20_000  # children x active cells in a level below which a pool costs more


def run_topdown(records, design: Design, ctx: RunContext) -> TopDownResult:
    """Run TopDown on person records (`records`: a `Records`, or the person table alone) as
    `design` says, with `ctx`'s random source, engine, progress and workers; see the module
    docstring for the semantics and the three classes' for their fields.

    Long (about 160 lines): one pass down the levels, whose state (the hierarchy, the histograms,
    the protected levels) every step reads and extends; the steps are the functions below and
    those of run/steps.py.
    """
    if not isinstance(records, Records):
        records = Records(records)
    joint, bounds, equalities = records.joint, records.bounds, records.equalities
    strategy, invariants, passes = design.strategy, design.invariants, design.passes
    structural_zeros, bypass, postprocess_feasible = design.structural_zeros, design.bypass, design.postprocess_feasible
    rng, engine, progress, workers = ctx.rng, ctx.engine, ctx.progress, ctx.workers
    t_run = time.perf_counter()
    schema = Schema.from_variables(design.variables).with_recodes(design.recodes)
    hier, tallies, schema_j, tallies_j = _run_geography(records, design, schema, engine)
    names = hier.names
    finest_unit = _finest_units(hier, tallies)
    weights = tallies["count"].to_numpy(dtype=np.int64)
    cells = schema.cell_index(tallies, weights)
    for lv in list(design.level_shares) + list(strategy):
        hier.index(lv)  # SpecError for unknown levels
    canon = {lv: [(schema.canonical(q), s) for q, s in entries] for lv, entries in strategy.items()}
    if joint is not None:  # one allocation: both tables' queries share each level's budget
        for lv, entries in joint.strategy.items():
            canon.setdefault(lv, [])
            canon[lv] = canon[lv] + [((JOINT_MARK + joint.name, *schema_j.canonical(q)), s) for q, s in entries]
    alloc_all = allocate(design.rho, design.level_shares, canon, design.relation)
    alloc, alloc_j = split_allocation(alloc_all, joint.name if joint is not None else None)
    measured = [k for k, lv in enumerate(names) if lv in alloc.level_shares]
    if measured[-1] != len(names) - 1:
        raise SpecError(f"the finest level {names[-1]!r} must be measured (give it a budget share)")
    inv = _canonical_invariants(invariants, schema, hier)
    _check_split_invariants(inv, hier)
    classes = _budget_classes(hier, alloc, bypass)
    zero_cells = _structural_zeros(structural_zeros or {}, schema, cells, weights, tallies, hier)
    joint_plans = {}
    if joint is not None:  # outer passes over both tables (joint_passes.py)
        joint_plans = {
            lv: joint_pass_plan(lv, spec_, schema, alloc, schema_j, alloc_j, joint.name)
            for lv, spec_ in (passes or {}).items()
        }
    plans = (
        {} if joint is not None else {lv: pass_plan(lv, spec_, schema, alloc) for lv, spec_ in (passes or {}).items()}
    )
    backup = _failsafe(design.failsafe, schema)

    n_cells = schema.n_cells
    last = len(hier.levels) - 1
    conf = [
        unit_histograms(hier.ancestor(last, k)[finest_unit], cells, lv.n_units, n_cells, weights)
        for k, lv in enumerate(hier.levels)
    ]
    del tallies, cells, weights, finest_unit  # the histograms hold what the run needs
    side = None
    if joint is not None:
        side = JointSide.build(joint, schema_j, tallies_j, hier, alloc_j, bypass, schema, conf[last])
        del tallies_j
    level_bounds = _level_bounds(bounds, schema, hier, conf[last])

    level_bounds, pp_bounds = pp_only.split_bounds(level_bounds, design.postprocess_only)
    pp_secondary = pp_only.secondary_axis(schema, structural_zeros, [q[0] for _, _, _, q, _ in pp_bounds])
    pp_report: dict = {"moves": {}, "seconds": {}, "unrepaired": []}
    equal = []
    for name, query, counts in equalities:
        q = schema.canonical(query)
        targets = equality.per_level(equality.released_targets(name, counts, names[last], q, schema, hier), hier)
        equality.check_against(name, q, targets, schema, hier, conf, inv, zero_cells)
        equality.check_bounds(name, q, targets[last], schema, level_bounds + pp_bounds, hier)
        equal.append((name, q, targets, schema.groups(q), schema.marginal_size(q)))
    timings: dict = {"levels": {names[k]: {"noise_seconds": 0.0, "units": hier.levels[k].n_units} for k in measured}}
    noisy: dict = {}  # no level is drawn whole: each node draws its children's noise itself (node_noise)
    run_key = engine.run_key if engine is not None else run_key_from(rng)
    noise_plans: dict = {}

    workers = default_workers() if workers is None else max(1, int(workers))
    protected: dict[int, sp.csr_matrix] = {}
    pool = None
    try:
        prev = None
        for k in measured:
            tasks = _level_tasks(
                k, prev, hier, schema, alloc, noisy, conf, inv, protected, run_key, classes.get(names[k])
            )
            if prev is None and zero_cells is not None:  # children of a zero parent cell stay 0
                tasks = [attrs.evolve(t, zero_cells=zero_cells) for t in tasks]
            if level_bounds:
                tasks = _with_bounds(tasks, k, prev, hier, level_bounds)
            if equal:
                tasks = _with_equalities(tasks, k, prev, hier, schema, equal)
            if pp_bounds:
                tasks = pp_only.with_postprocess(
                    tasks,
                    _spans(k, prev, hier),
                    k,
                    names[k],
                    pp_bounds,
                    schema,
                    zero_cells,
                    pp_secondary,
                    postprocess_feasible,
                )
            if backup is not None and prev is not None:  # the top node has no parent sums to relax
                tasks = [attrs.evolve(t, failsafe=backup) for t in tasks]
            queries = [
                MeasuredQuery(qb.name, schema.groups(qb.query), schema.marginal_size(qb.query), 1.0 / float(qb.sigma2))
                for qb in alloc.for_level(names[k])
            ]
            if side is not None:
                t0 = time.perf_counter()
                results = side.solve_level(k, prev, tasks, queries, run_key, engine, joint_plans.get(names[k]))
                _joint_timings(
                    timings["levels"][names[k]], results, time.perf_counter() - t0, len(joint_plans.get(names[k], ()))
                )
                protected[k] = _assemble(tasks, results, hier.levels[k].n_units, n_cells, k, prev, hier)
                if any(t.noise is not None for t in tasks):
                    noise_plans[names[k]] = _noise_plan(tasks, results, k, prev, hier)
                prev = k
                continue
            size = sum(task_size(t) for t in tasks)
            on_engine = engine is not None and engine.name != "local"  # the engine runs the nodes
            use_pool = not on_engine and workers > 1 and len(tasks) >= 2 * workers and size >= _PARALLEL_MIN_SIZE
            if use_pool and pool is None:
                pool = make_pool(workers)
            t0 = time.perf_counter()
            results = _solve_nodes(
                tasks,
                queries,
                k,
                prev,
                hier,
                engine if on_engine else None,
                workers,
                pool if use_pool else None,
                progress,
                plans.get(names[k]),
            )
            wall = time.perf_counter() - t0
            protected[k] = _assemble(tasks, results, hier.levels[k].n_units, n_cells, k, prev, hier)
            if pp_bounds:
                _postprocess_report(
                    pp_report, results, tasks, k, prev, hier, schema, pp_bounds, names[k] in postprocess_feasible
                )
            # the failsafe ran or the heuristic moved records: the levels above are re-added
            if any(r.relaxed or r.moves for r in results):
                for j in list(protected):
                    if j < k:
                        protected[j] = aggregate(protected[k], hier.ancestor(k, j), hier.levels[j].n_units)
            if any(t.noise is not None for t in tasks):  # the nodes drew the level's noise
                noise_plans[names[k]] = _noise_plan(tasks, results, k, prev, hier)
                timings["levels"][names[k]]["noise_seconds"] = sum(r.noise_seconds for r in results)
            timings["levels"][names[k]].update(_level_timings(results, len(tasks), wall, plans.get(names[k]), use_pool))
            prev = k
    finally:
        if pool is not None:
            pool.shutdown()
    for k in range(len(names) - 1, -1, -1):  # unmeasured levels are sums of their children
        if k not in protected:
            protected[k] = aggregate(protected[k + 1], hier.levels[k + 1].parent, hier.levels[k].n_units)
    _verify(hier, schema, protected, conf, inv)
    joint_results = {}
    if side is not None:
        joint_results[joint.name] = side.finish(protected, run_key)
    for name, q, targets, _, _ in equal:
        if ((protected[last] @ schema.indicator(q)) != targets[last]).nnz:
            raise MechanismError(f"the release does not reproduce the released product {name!r}")
    _verify_bounds(hier, schema, protected, level_bounds)
    if pp_bounds:
        pp_report["violations"] = pp_only.release_violations(hier, schema, protected, pp_bounds)
        timings["postprocess"] = pp_report
    if zero_cells is not None:
        for k, h in protected.items():
            if h[:, np.flatnonzero(zero_cells)].sum() != 0:
                raise MechanismError(f"level {names[k]}: a structural zero cell holds persons")
    node = sum(t.get("node_seconds", 0.0) for t in timings["levels"].values())
    solver = sum(t.get("qp_seconds", 0.0) + t.get("rounding_seconds", 0.0) for t in timings["levels"].values())
    timings["total_seconds"] = time.perf_counter() - t_run
    timings["solver_seconds"] = solver
    timings["solver_share"] = solver / node if node > 0 else 0.0
    timings["workers"] = workers
    # the release's files are written in parts where more than this process can write them
    on_engine = engine is not None and engine.name != "local"
    writer = PartWriter(engine if on_engine else None, workers) if on_engine or workers > 1 else None
    joint_results = {name: attrs.evolve(r, writer=writer) for name, r in joint_results.items()}
    return TopDownResult(
        schema,
        hier,
        alloc,
        noisy,
        {names[k]: protected[k] for k in range(len(names))},
        timings,
        alloc_all.total_rho,
        alloc_all.rho_spent,
        confidential={names[k]: conf[k] for k in range(len(names))},
        noise_plans=noise_plans,
        run_key=run_key,
        budget_classes=classes,
        joint=joint_results,
        writer=writer,
    )


def _with_reference(geography: pd.DataFrame, reference: pd.DataFrame, flags: Sequence[str] = ()) -> pd.DataFrame:
    """The data's geography and every unit of the reference geography (the spine's tree); a
    finest unit of the data missing from the reference is a DataError naming it."""
    columns = [c for c in geography.columns if c != "count"]
    missing = [c for c in columns if c not in reference.columns]
    if missing:
        raise Broken(f"the reference geography lacks the columns {', '.join(missing)}", ("spine", "geography"))
    ref = reference[columns]
    geo_columns = [c for c in columns if c not in flags]
    if geo_columns:
        finest = geo_columns[-1]
        absent = ~geography[finest].astype(str).isin(ref[finest].astype(str))
        if absent.any():
            raise Broken(
                f"the reference geography has no {finest} {geography[finest][absent].iloc[0]!s} "
                f"({int(absent.sum())} units of the data are not in it)",
                ("spine", "geography"),
            )
    return _union_geography(geography, ref)


def within_declared(found: pd.DataFrame, declared: pd.DataFrame, levels: Sequence[str]) -> None:
    """A DataError naming the first combination of geography codes in ``found`` (rows of a
    table, or its counts) that is not a declared unit: each code may be declared, and the
    combination not (a block declared in one tract, recorded in another)."""
    columns = [c for c in levels if c in found.columns and c in declared.columns]
    if not columns or found.empty:
        return
    rows = found[columns].astype(str).drop_duplicates()
    known = pd.MultiIndex.from_frame(declared[columns].astype(str))
    absent = ~pd.MultiIndex.from_frame(rows).isin(known)
    if absent.any():
        first = rows[absent].iloc[0]
        where = ", ".join(f"{c} {shown(first[c])}" for c in columns)
        raise Broken(
            f"records lie in {where}, which is not a unit of the declared geography "
            f"({int(absent.sum())} such combinations): every record's codes must be a row of the "
            "geography file",
            ("geography",),
        )


def _union_geography(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The distinct geography rows (with flags) of two tables' geographies (counts dropped)."""
    columns = [c for c in a.columns if c != "count"]
    return (
        pd.concat([a[columns].astype(object), b[columns].astype(object)], ignore_index=True)
        .drop_duplicates()
        .reset_index(drop=True)
    )


def _joint_timings(entry: dict, results, wall: float, outer: int = 0) -> None:
    entry.update(
        {
            "solve_seconds": wall,
            "nodes": len(results),
            "joint_nodes": len(results),
            "node_seconds": sum(r.total_seconds for r in results),
            "noise_seconds": sum(r.noise_seconds for r in results),
            "qp_seconds": sum(r.qp_seconds for r in results),
            "rounding_seconds": sum(r.round_seconds for r in results),
            "milp_nodes": sum(r.used_milp for r in results),
            "max_variables": max((r.n_variables for r in results), default=0),
            "estimation_passes": max(outer, 1),
            "rounding_passes": max(outer, 1),
            "outer_passes": outer,
            "solver_peak_mb": max((r.peak_rss_mb for r in results), default=0.0),
        }
    )


def _failsafe(variables: Sequence[str] | None, schema: Schema) -> Failsafe | None:
    """The failsafe's kept marginal: the one adding over the minimal schema's variables."""
    if not variables:
        return None
    bad = [v for v in variables if v not in schema.names]
    if bad:
        raise SpecError(
            f"failsafe: minimal_schema names {', '.join(map(repr, bad))}, not histogram variables "
            f"(known: {', '.join(schema.names)})"
        )
    kept = schema.canonical(tuple(v for v in schema.names if v not in variables))
    return Failsafe(schema.groups(kept), schema.marginal_size(kept))


def _solve_item(key, task: NodeTask, rng, queries, plan):
    """One parent node as a unit of work on an engine (its noise comes from the task's own keyed
    stream, "topdown noise", not from `rng`: the stream the driver drew it from before)."""
    return solve_node(task, queries, plan=plan)


def _shipped_item(key, task, rng, shipped):
    """`_solve_item` from inputs packed for the trip to a worker (shipping.py)."""
    return _solve_item(key, unpack(task), rng, **unpack(shipped))


def _level_bounds(bounds, schema: Schema, hier: Hierarchy, conf) -> list:
    """[(name, query, [(lower, upper) per level])]: the finest units' bounds summed up the tree.

    conf: the finest level's confidential histogram. The confidential data must lie within
    the bounds (DataError naming the block and group)."""
    out = []
    last = len(hier.levels) - 1
    finest = hier.levels[last]
    for name, query, lower, upper in bounds:
        q = schema.canonical(query)
        n_groups = schema.marginal_size(q)
        for frame in (lower, upper):
            if frame.shape[1] != n_groups:
                raise SpecError(
                    f"constraint {name!r}: {frame.shape[1]} bound columns for the "
                    f"{n_groups} groups of {query_name(q)!r}"
                )
        # finest units without persons: their lower bounds must be 0
        codes = pd.Index(finest.codes).astype(str)
        lower, upper = lower.set_axis(lower.index.astype(str)), upper.set_axis(upper.index.astype(str))
        empty = lower.index.difference(codes)
        low_empty = lower.loc[empty].to_numpy() > 0 if len(empty) else np.zeros((0, n_groups), bool)
        if low_empty.any():
            r, g = np.argwhere(low_empty)[0]
            raise Broken(
                f"the data break the constraint {name!r}: {hier.names[last]} {empty[r]!s}, "
                f"{query_name(q)} = {lower.columns[g]!s}: no persons, at least "
                f"{int(lower.loc[empty].to_numpy()[r, g])} required",
                ("constraints", name),
            )
        lo = lower.reindex(codes).fillna(0).to_numpy(dtype=np.int64)
        hi = upper.reindex(codes).fillna(0).to_numpy(dtype=np.float64)
        truth = marginal(conf, schema, q)
        bad = (truth < lo) | (truth > hi)
        if bad.any():
            u, g = np.argwhere(bad)[0]
            raise Broken(
                f"the data break the constraint {name!r}: {int(bad.sum())} cells, e.g. "
                f"{hier.names[last]} {finest.codes[u]!s}, {query_name(q)} = {lower.columns[g]!s}: "
                f"{counted(truth[u, g], 'person')}, bounds [{int(lo[u, g])}, {hi[u, g]:g}]",
                ("constraints", name),
            )
        per_level = [None] * len(hier.levels)
        for k in range(len(hier.levels)):
            anc = hier.ancestor(last, k) if k < last else np.arange(finest.n_units)
            n_k = hier.levels[k].n_units
            lk = np.zeros((n_k, n_groups), dtype=np.int64)
            hk = np.zeros((n_k, n_groups), dtype=np.float64)
            np.add.at(lk, anc, lo)
            np.add.at(hk, anc, hi)
            per_level[k] = (lk, hk)
        out.append((name, schema.groups(q), n_groups, q, per_level))
    return out


def _with_bounds(tasks, k, prev, hier, level_bounds) -> list[NodeTask]:
    """Each node's children's bounds (a slice of level k's, children are contiguous per parent)."""
    spans = _spans(k, prev, hier)
    starts = {t.key: spans[t.key][0] for t in tasks}
    out = []
    for t in tasks:
        a, b = starts[t.key], starts[t.key] + t.n_children
        out.append(
            attrs.evolve(
                t,
                bounds=tuple(
                    BoundConstraint(name, groups, ng, per_level[k][0][a:b], per_level[k][1][a:b])
                    for name, groups, ng, _, per_level in level_bounds
                ),
            )
        )
    return out


def _with_equalities(tasks, k, prev, hier, schema, equal) -> list[NodeTask]:
    """Each node's children held to the released product (their rows of its level's targets)."""
    spans = _spans(k, prev, hier)
    out = []
    for t in tasks:
        a = spans[t.key][0]
        b = a + t.n_children
        cons = tuple(
            GroupConstraint(
                f"equal_to {name}",
                groups,
                n_groups,
                np.arange(t.n_children, dtype=np.int64),
                np.asarray(targets[k][a:b].toarray(), dtype=np.int64),
            )
            for name, _, targets, groups, n_groups in equal
        )
        out.append(attrs.evolve(t, constraints=t.constraints + cons))
    return out


_WARN_MAX = 20  # warnings per level; the facts list every row


def _postprocess_report(report: dict, results, tasks, k, prev, hier, schema, pp_bounds, feasible: bool) -> None:
    """Count the heuristic's moves and report the rows it left broken: a warning each (the
    run log) and an entry in the run's facts; at a level where production requires them
    repaired (require_feasible_postproc_dim), a DataError naming the level, unit and group."""
    level = hier.names[k]
    report["moves"][level] = report["moves"].get(level, 0) + sum(r.moves for r in results)
    report["seconds"][level] = report["seconds"].get(level, 0.0) + sum(r.postprocess_seconds for r in results)
    level_codes = None if hier.levels[k].implicit else hier.levels[k].codes
    broken = pp_only.level_report(results, tasks, _spans(k, prev, hier), level_codes, level, schema, pp_bounds)
    if broken and feasible:
        raise Broken(
            pp_only.describe(broken[0]) + f" ({len(broken)} rows at this level; the level is listed "
            "in postprocess_require_feasible, where production's constraint check stops the run)",
            ("constraints", broken[0]["constraint"]),
            ("setting", "postprocess_require_feasible"),
        )
    for entry in broken[:_WARN_MAX]:
        warnings.warn(pp_only.describe(entry), RuntimeWarning, stacklevel=2)
    if len(broken) > _WARN_MAX:
        warnings.warn(
            f"post-processing left {len(broken)} rows broken at the {level} level's nodes "
            f"({len(broken) - _WARN_MAX} more than shown; all in the facts' postprocess_only.unrepaired)",
            RuntimeWarning,
            stacklevel=2,
        )
    report["unrepaired"].extend(broken)


def _verify_bounds(hier, schema, protected, level_bounds) -> None:
    for name, _, _, q, per_level in level_bounds:
        for k, h in protected.items():
            got = marginal(h, schema, q)
            lo, hi = per_level[k]
            if np.any(got < lo) or np.any(got > hi):
                raise MechanismError(f"constraint {name} broken at level {hier.names[k]}")


def _run_geography(records: Records, design: Design, schema: Schema, engine):
    """The hierarchy the run measures on, and the person (and joint) table's counts by finest
    unit and cell: built from the declared geography when there is one (else the records'),
    with the reference geography's units, then split as the spine says."""
    persons, joint, levels, aian = records.persons, records.joint, design.levels, design.aian
    declared_geography, reference_geography = records.declared_geography, records.reference_geography
    schema_j = tallies_j = None
    flags = [aian[1]] if aian and declared_geography is None else []  # declared: the flag is the file's
    geography, tallies = person_counts(persons, levels, schema, engine, flags=flags)
    geo_tables = [geography]
    if joint is not None:
        if design.failsafe or design.postprocess_only:
            raise SpecError(
                "the failsafe and post-processing-only constraints are not available with a joint table "
                "(production's interleaved optimizer has no failsafe)"
            )
        schema_j = Schema.from_variables(joint.variables).with_recodes(joint.recodes)
        geo_j, tallies_j = person_counts(joint.records, levels, schema_j, engine, flags=flags)
        geo_tables.append(geo_j)
        geography = _union_geography(geography, geo_j)
    if declared_geography is not None:
        for found in geo_tables:
            within_declared(found, declared_geography, levels)
        geography = declared_geography.reset_index(drop=True)
    if reference_geography is not None:
        if declared_geography is not None:
            within_declared(reference_geography, declared_geography, levels)
        geography = _with_reference(geography, reference_geography, [aian[1]] if aian else [])
    labels = {}
    if aian is not None:
        geography, labels = split_geography(geography, levels, *aian)
    if records.gq_signature is not None:
        geography, labels = split_by_signature(geography, levels, records.gq_signature, labels)
    hier = build_hierarchy(geography, levels, counted=True).with_labels(labels)
    return hier, tallies, schema_j, tallies_j


def _level_timings(results, n_tasks: int, wall: float, plan, use_pool) -> dict:
    """A level's entry in the run's timings: its nodes' seconds, solver counts and passes."""
    return {
        "solve_seconds": wall,
        "nodes": n_tasks,
        "node_seconds": sum(r.total_seconds for r in results),
        "qp_seconds": sum(r.qp_seconds for r in results),
        "rounding_seconds": sum(r.round_seconds for r in results),
        "milp_nodes": sum(r.used_milp for r in results),
        "qp_capped_nodes": sum(not r.qp_optimal for r in results),
        "qp_highs_fallback_nodes": sum(r.qp_solver == "highs" for r in results),
        "failsafe_nodes": sum(r.failsafe for r in results),
        "relaxed_nodes": sum(r.relaxed for r in results),
        "estimation_passes": plan.n_estimation if plan is not None else 1,
        "rounding_passes": plan.n_rounding if plan is not None else 1,
        "outer_passes": len(plan.outer) if plan is not None else 0,
        "max_variables": max((r.n_variables for r in results), default=0),
        "parallel": bool(use_pool),
        "solver_peak_mb": max((r.peak_rss_mb for r in results), default=0.0),
    }


def _solve_nodes(tasks, queries, k, prev, hier, engine, workers, pool, progress, plan) -> list:
    """A level's nodes solved: on `engine` as units of work (each packed for the trip), else in
    this process or `pool`; a node without a solution is a DataError naming its parent unit."""
    names = hier.names
    on_engine = engine is not None
    cb = (lambda d, n, _lv=names[k]: progress(_lv, d, n)) if progress else None
    try:
        if not on_engine:
            results = solve_level(tasks, queries, workers, cb, pool, plan=plan)
        else:
            parent_codes = hier.levels[prev].codes if prev is not None else None
            # the group maps travel as recipes (shipping.py)
            items = [((names[k], _code(parent_codes, t.key)), pack(t)) for t in tasks]
            shipped = pack({"queries": queries, "plan": plan})
            results = engine.map_items(
                items, functools.partial(_shipped_item, shipped=shipped), stage=f"{names[k]} level"
            )
    except NodeError as exc:
        raise node_failure(exc, hier, prev, names[k]) from None
    return results
