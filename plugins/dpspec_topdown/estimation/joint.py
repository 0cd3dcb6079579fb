"""Two histograms solved jointly at a node, tied by cross constraints (production's stacked
histograms: DHC households and housing units, optimizer.py:395-400 and 920-927).

Why jointly: the households histogram and the units histogram are estimated from separate
noisy measurements, but a cross constraint (the DHCH `h1` tie: households = occupied units)
must hold exactly at every geounit. Fitting them apart and reconciling later would move one
side away from its own measurements for no reason; one least-squares problem per node lets
both measurements pull on the shared total.

The least squares is one QP: the two tables' problems side by side (each built by
``postprocess.build_node_qp``, so sparsity is unchanged: only active cells of each table are
variables) plus one row per (child, group) of every cross constraint,
``sum(left cells) - sum(right cells) = 0``. The rounding is one problem too, as production
rounds the stacked histograms (joint_round.py).
"""

from __future__ import annotations

import time
from typing import Sequence

import attrs
import numpy as np

from dpspec.api import MechanismError

from . import node_solve, postprocess
from .joint_passes import solve_joint_interleaved
from .joint_problem import CrossConstraint, joint_qp
from .joint_round import round_jointly
from .postprocess import NodeTask, _node_variables


def solve_joint_node(
    task_a: NodeTask, queries_a, task_b: NodeTask, queries_b, cross: Sequence[CrossConstraint], plan=None
) -> tuple:
    """(result_a, result_b): both tables' integer children histograms (NodeResult each), every
    constraint of each table and every cross constraint exact. MechanismError if none exists.
    ``plan`` (joint_passes.JointOuter, in order): interleaved outer passes instead of one pass."""
    if task_a.n_children != task_b.n_children:
        raise MechanismError(f"joint node {task_a.key}: the two tables have different children")
    t0 = time.perf_counter()
    var_a, var_b = _node_variables(task_a), _node_variables(task_b)
    for task, (cells, vc, va, vcell) in ((task_a, var_a), (task_b, var_b)):
        if task.parent is not None:
            postprocess._check_cells_coverable(task, cells, va)
    if plan:
        counts_a, counts_b, qp_seconds, sec_a, milp_a, n_var = solve_joint_interleaved(
            task_a, queries_a, task_b, queries_b, cross, plan, var_a, var_b
        )
        return _results(task_a, task_b, var_a, var_b, counts_a, counts_b, qp_seconds, sec_a, t0, n_var, milp_a, True)
    problem, offset = joint_qp(task_a, queries_a, task_b, queries_b, cross, var_a, var_b)
    x, optimal, qp_seconds, used, status = postprocess.solve_qp(problem)
    if x is None:
        raise MechanismError(
            f"joint node {task_a.key}: no split of the parents' histograms meets the constraints "
            f"and the cross constraints ({', '.join(c.name for c in cross)}): {status}"
        )
    xa = np.maximum(x[: var_a[1].size], 0.0)
    xb = np.maximum(x[offset : offset + var_b[1].size], 0.0)
    counts_a, counts_b, seconds, milp = round_jointly(task_a, xa, var_a, task_b, xb, var_b, cross)
    return _results(
        task_a,
        task_b,
        var_a,
        var_b,
        counts_a,
        counts_b,
        qp_seconds,
        seconds,
        t0,
        int(problem.n_var),
        milp,
        optimal,
        used,
    )


def _results(
    task_a,
    task_b,
    var_a,
    var_b,
    counts_a,
    counts_b,
    qp_seconds,
    round_seconds,
    t0,
    n_var,
    milp,
    optimal,
    used="clarabel",
) -> tuple:
    """Both tables' NodeResults from their integer counts over their variables."""
    wall = time.perf_counter() - t0
    out = []
    for task, (cells, vc, va, vcell), counts in ((task_a, var_a, counts_a), (task_b, var_b, counts_b)):
        keep = counts > 0
        out.append(
            postprocess.NodeResult(
                task.key,
                vc[keep].astype(np.int64),
                vcell[keep].astype(np.int64),
                counts[keep].astype(np.int64),
                qp_seconds,
                round_seconds,
                wall,
                n_var,
                milp,
                optimal,
                postprocess._peak_rss_mb(),
                used,
            )
        )
    return tuple(out)


def solve_joint_pair(task_a: NodeTask, task_b: NodeTask, queries_a, queries_b, cross, plan=None) -> tuple:
    """Both tables' node solved jointly, as `node_solve.solve_node` solves one: each task draws
    its noise first (its own keyed stream), a failure is a NodeError naming the parent unit, and
    a bypassed single child (optimized spine) is its parent in both tables."""
    try:
        ta, pos_a, sec_a = postprocess.node_inputs(task_a, queries_a)
        tb, pos_b, sec_b = postprocess.node_inputs(task_b, queries_b)
        if ta.n_children == 1 and ta.parent is not None and ta.child_scale is not None:
            ra, rb = node_solve.solve_node(ta, queries_a), node_solve.solve_node(tb, queries_b)
        else:
            ra, rb = solve_joint_node(ta, queries_a, tb, queries_b, cross, plan)
    except postprocess.NodeError:
        raise
    except MechanismError as exc:
        raise postprocess.NodeError(task_a.key, str(exc)) from None
    if pos_a is not None:
        ra = attrs.evolve(ra, noise_positions=pos_a, noise_seconds=sec_a)
    if pos_b is not None:
        rb = attrs.evolve(rb, noise_positions=pos_b, noise_seconds=sec_b)
    return ra, rb
