"""One node of TopDown's estimation solved, and a level's nodes (in a pool when asked): the fit
in one pass or in passes (multipass.py), the rounding, production's failsafe and its
post-processing repair (postprocess_only.py), over the problems and solvers of postprocess.py.

The solver steps are called through the `postprocess` module (postprocess.solve_qp, ...), as
multipass.py calls them, so each is one function wherever a node is solved."""

from __future__ import annotations

import concurrent.futures as cf
import time
from typing import Callable, Sequence

import attrs
import highspy
import numpy as np

from dpspec.api import MechanismError

from . import postprocess, rounding
from .multipass import fit_in_passes, round_in_passes, solve_interleaved
from ..measurement.node_noise import KeyedAnswers
from .postprocess import (
    MeasuredQuery,
    NodeError,
    NodeResult,
    NodeTask,
    _check_bounds_coverable,
    _check_cells_coverable,
    _check_targets_coverable,
    _node_variables,
    _peak_rss_mb,
    node_inputs,
    task_size,
)
from .postprocess_only import repair


def solve_node(task: NodeTask, queries: Sequence[MeasuredQuery], solver: str = "clarabel", plan=None) -> NodeResult:
    """Nonnegative integer children histograms: WLS fit to the noisy answers, then rounding.

    ``plan`` (multipass.PassPlan) fits and rounds in passes. A node without a solution is a
    NodeError (never a silently relaxed constraint). A task with `noise` draws its children's
    noisy answers first (node_noise), so they exist only while this node is solved."""
    try:
        task, positions, seconds = node_inputs(task, queries)
        try:
            result = _solve_node(task, queries, solver, plan)
        except MechanismError as exc:
            # production's failsafe: not at the top node (it has no parent to relax) and not in
            # interleaved passes (sequential_optimizers.py:198-200, 343-344)
            if task.failsafe is None or task.parent is None or (plan is not None and plan.outer):
                raise
            result = postprocess.solve_relaxed(task, queries, str(exc))
        if task.postprocess is not None:  # production's post-processing-only constraints
            result = _postprocess(task, queries, result)
        if positions is None:
            return result
        seconds += sum(y.seconds for y in task.measurements if isinstance(y, KeyedAnswers))  # drawn on demand
        return attrs.evolve(result, noise_positions=positions, noise_seconds=seconds)
    except NodeError:
        raise
    except MechanismError as exc:
        raise NodeError(task.key, str(exc)) from None


def _postprocess(task: NodeTask, queries, result: NodeResult) -> NodeResult:
    """The node's children after production's repair heuristic (postprocess_only.repair)."""
    t0 = time.perf_counter()
    child, cell, count, moves, unrepaired = repair(task, queries, result.child, result.cell, result.count)
    seconds = time.perf_counter() - t0
    timed = attrs.evolve(
        result,
        postprocess_seconds=seconds,
        round_seconds=result.round_seconds + seconds,
        total_seconds=result.total_seconds + seconds,
    )
    if not moves and not unrepaired:
        return timed
    return attrs.evolve(timed, child=child, cell=cell, count=count, moves=moves, unrepaired=unrepaired)


def _solve_node(task, queries, solver, plan) -> NodeResult:
    t_start = time.perf_counter()
    nc = task.n_children
    cells, vc, va, vcell = _node_variables(task)
    n_x = vc.size
    if task.parent is not None:
        _check_cells_coverable(task, cells, va)
    for con in task.constraints:
        _check_targets_coverable(con, vc, vcell)
    for b in task.bounds:
        _check_bounds_coverable(task, b, vc, vcell)
    if n_x == 0:
        return NodeResult(
            task.key, *(np.zeros(0, dtype=np.int64),) * 3, 0.0, 0.0, time.perf_counter() - t_start, 0, False, True
        )
    if nc == 1 and task.parent is not None and task.child_scale is not None:
        # a bypassed geounit's only child (optimized spine): it is its parent, nothing to fit
        counts = task.parent[vcell]
        keep = counts > 0
        return NodeResult(
            task.key,
            vc[keep].astype(np.int64),
            vcell[keep].astype(np.int64),
            counts[keep].astype(np.int64),
            0.0,
            0.0,
            time.perf_counter() - t_start,
            0,
            False,
            True,
            _peak_rss_mb(),
        )
    variables = (cells, vc, va, vcell)
    failsafe = False
    if plan is not None and plan.outer:
        counts, qp_seconds, round_seconds, used_milp = solve_interleaved(task, queries, plan, variables)
        keep = counts > 0
        return NodeResult(
            task.key,
            vc[keep].astype(np.int64),
            vcell[keep].astype(np.int64),
            counts[keep].astype(np.int64),
            qp_seconds,
            round_seconds,
            time.perf_counter() - t_start,
            int(n_x),
            used_milp,
            True,
            _peak_rss_mb(),
        )
    if plan is not None and plan.multipass_fit:
        sol, qp_optimal, qp_seconds, used, problem, failsafe = fit_in_passes(task, queries, plan, variables)
        status = None if sol is not None else highspy.HighsModelStatus.kInfeasible
    else:
        problem = postprocess.build_node_qp(task, queries, variables)
        sol, qp_optimal, qp_seconds, used, status = postprocess.solve_qp(problem, solver)
    if sol is None:
        if status == highspy.HighsModelStatus.kInfeasible:
            raise MechanismError(
                f"TopDown node {task.key}: no nonnegative split of the parent's histogram among its "
                f"{nc} children meets the invariants ({', '.join(c.name for c in task.constraints)})"
            )
        raise MechanismError(f"TopDown least-squares step failed at node {task.key}: HiGHS says {status}")
    xstar = np.maximum(sol[:n_x], 0.0)
    if plan is not None and plan.rounding:
        counts, round_seconds, used_milp, round_failsafe = round_in_passes(task, xstar, variables, plan)
        failsafe |= round_failsafe
    else:
        counts, round_seconds, used_milp = rounding._round(task, xstar, va, vc, vcell, cells)
    keep = counts > 0
    return NodeResult(
        task.key,
        vc[keep].astype(np.int64),
        vcell[keep].astype(np.int64),
        counts[keep].astype(np.int64),
        qp_seconds,
        round_seconds,
        time.perf_counter() - t_start,
        int(problem.n_var),
        used_milp,
        qp_optimal,
        _peak_rss_mb(),
        used,
        failsafe,
    )


def _solve_chunk(tasks, queries, plan=None):
    return [solve_node(t, queries, plan=plan) for t in tasks]


def solve_level(
    tasks: Sequence[NodeTask],
    queries: Sequence[MeasuredQuery],
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    pool: cf.Executor | None = None,
    plan=None,
) -> list[NodeResult]:
    """Solve every node of a level, in parallel when ``pool`` is given; results in task order."""
    n = len(tasks)
    results: list[NodeResult | None] = [None] * n
    done = 0
    if pool is None or n < 2:
        for i, t in enumerate(tasks):
            results[i] = solve_node(t, queries, plan=plan)
            done += 1
            if progress:
                progress(done, n)
        return results  # type: ignore[return-value]
    # largest nodes first, in chunks small enough to balance and large enough to amortize IPC
    size = np.array([task_size(t) for t in tasks])
    order = np.argsort(-size, kind="stable")
    n_chunks = min(n, max(4 * workers, n // 8))
    chunks = [order[i::n_chunks] for i in range(n_chunks)]
    futures = {pool.submit(_solve_chunk, [tasks[i] for i in c], list(queries), plan): c for c in chunks}
    for fut in cf.as_completed(futures):
        idx = futures[fut]
        for i, r in zip(idx, fut.result()):
            results[i] = r
        done += len(idx)
        if progress:
            progress(done, n)
    return results  # type: ignore[return-value]
