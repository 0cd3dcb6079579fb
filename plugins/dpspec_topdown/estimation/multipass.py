"""Multipass estimation and rounding, as the 2020 production run did them.

Why passes: one least-squares fit over all queries lets the many fine queries (detailed,
votingage * hispanic * cenrace) pull a unit's total away from its own, far more precise,
measurement. Production therefore fitted the total first and then everything else, keeping the
first pass's answers within a tolerance (DAS_2020_Redistricting_Production_Code:
source/programs/optimization/l2_dataIndep_npass_optimizer.py, "opt_tol": the smallest feasible
tolerance plus opt_tol_slack = 0.1 from person_default.ini; the smallest feasible tolerance is
0 up to solver noise because the constraints do not change between passes).
Its rounder likewise fixed the rounded totals before rounding the finer margins.

Constrain-to lists (production's L2_Constrain_to_Ordering, sequential_optimizers.py:262-264):
which answers of a pass the later passes hold may differ from the queries it fits, and a pass
may name a query the level does not measure (its answer in the pass's solution is then held).

Failsafe: when a later pass has no solution (numerically, since the earlier answer is always
feasible) the node is fitted or rounded again in one pass over everything, and the run reports
how many nodes needed it. Invariants are never relaxed; parent sums only by production's
backup feasibility, when the spec asks for it (postprocess.solve_relaxed).

Pass tolerance: fixed (`tolerance`), or production's opt_tol (`optimal_tolerance`: the
LP-optimal tolerance of the pass's model plus `tolerance` as the slack).

Every function is a pure function of the node's inputs.
"""

from __future__ import annotations

from typing import Sequence

import attrs
import scipy.sparse as sp

from dpspec.api import LazyModule, MechanismError

from .pass_plans import PassPlan, pass_plan  # noqa: F401 (served here too: the run and the tests name them here)
from . import rounding
from .rows import _sum_rows, _INF
from .highs import _highs
from .decompose import solve_pass
from .redundant import drop_implied

np = LazyModule("numpy", "np", globals())  # imported by a run, not by `dpspec check`'s pass plans
# imported on first use: at import they would load pandas, pyarrow with this module
postprocess = LazyModule("dpspec_topdown.estimation.postprocess", "postprocess", globals())

_INT_TOL = 1e-6


def _margin_key(vc, vcell, groups, n_groups, n_children):
    """(key of every variable, number of keys) of a margin per child. A margin finer than the
    variables (the DHC detailed histogram: children x 1.2M groups) numbers only the keys present,
    in the same order, so no array spans children x groups."""
    key, n_keys = vc * n_groups + groups[vcell], n_children * n_groups
    if n_keys > 8 * max(key.size, 1):
        present, key = np.unique(key, return_inverse=True)
        return key.astype(np.int64), int(present.size)
    return key, n_keys


def _with_rows(problem, rows, tolerance: float, offset: int = 0):
    """``problem`` plus rows est - tol <= (sum of x sharing a key) <= est + tol; the keys are of
    the variables from ``offset`` on (a joint problem's second table, joint_passes.py)."""
    if not rows:
        return problem
    blocks, lo, hi = [problem.a], [problem.lo], [problem.hi]
    for key, n_keys, est in rows:
        local, present = _sum_rows(key, n_keys)
        blocks.append(
            sp.csc_matrix(
                (np.ones(key.size), (local, offset + np.arange(key.size))), shape=(present.size, problem.n_var)
            )
        )
        lo.append(est[present] - tolerance)
        hi.append(est[present] + tolerance)
    return attrs.evolve(problem, a=sp.vstack(blocks).tocsc(), lo=np.concatenate(lo), hi=np.concatenate(hi))


def optimal_tolerance(problem, rows) -> float | None:
    """The smallest t such that some x meeting every row and bound of ``problem`` keeps each
    held answer (``rows``: (key, n_keys, est)) within t of ``est``: production's findOptimalTol
    (l2_dataIndep_npass_optimizer.py:104-160), an LP here solved by HiGHS. None: infeasible."""
    n = problem.n_var
    blocks, lo, hi = [sp.hstack([problem.a, sp.csc_matrix((problem.a.shape[0], 1))])], [problem.lo], [problem.hi]
    for key, n_keys, est in rows:
        local, present = _sum_rows(key, n_keys)
        s = sp.csc_matrix((np.ones(key.size), (local, np.arange(key.size))), shape=(present.size, n))
        for sign in (-1.0, 1.0):  # sum - t <= est  and  sum + t >= est
            blocks.append(sp.hstack([s, sp.csc_matrix(np.full((present.size, 1), sign))]))
            lo.append(np.full(present.size, -_INF) if sign < 0 else est[present])
            hi.append(est[present] if sign < 0 else np.full(present.size, _INF))
    cost = np.zeros(n + 1)
    cost[-1] = 1.0
    _, x, _ = _highs(
        cost,
        np.append(problem.lower, 0.0),
        np.append(problem.upper, _INF),
        sp.vstack(blocks).tocsc(),
        np.concatenate(lo),
        np.concatenate(hi),
    )
    return None if x is None else max(float(x[-1]), 0.0)


def fit_in_passes(
    task, queries: Sequence, plan: PassPlan, variables, fixed: Sequence = (), tolerances: list | None = None
):
    """(x, optimal, seconds, solver, problem, failsafe): the fit pass by pass (see module doc).

    fixed: (key, n_keys, value) margins every pass keeps exactly (earlier outer passes').
    tolerances: if a list, each later pass's tolerance is appended to it (with opt_tol, the
    LP-optimal value plus the slack)."""
    cells, vc, va, vcell = variables
    n_x = vc.size
    kept, seconds, solvers, kept_passes = [], 0.0, set(), []
    held_tol: list = []  # (rows, tolerance) of the passes already held
    x = optimal = problem = None

    for idx in plan.estimation:
        sub = attrs.evolve(task, measurements=tuple(task.measurements[i] for i in idx))
        problem = _with_rows(postprocess.build_node_qp(sub, [queries[i] for i in idx], variables), fixed, 0.0)
        for rows, tol in held_tol:
            problem = _with_rows(problem, rows, tol)
        if kept:  # the previous pass's answers, held from this pass on
            tol = plan.tolerance
            if plan.opt_tol:
                best = optimal_tolerance(problem, kept)
                if best is None:
                    x = None
                    break
                tol += best
            if tolerances is not None:
                tolerances.append(tol)
            held_tol.append((kept, tol))
            problem = _with_rows(problem, kept, tol)
            kept = []
        x, optimal, sec, used, _ = solve_pass(problem, bool(fixed))  # by parts in later outer passes
        seconds += sec
        solvers.add(used)
        if x is None:
            break
        if plan.constrain is None:
            held = [(queries[i].groups, queries[i].n_groups) for i in idx]
        else:
            held = plan.constrain[len(kept_passes)] if len(kept_passes) < len(plan.constrain) else ()
        kept_passes.append(idx)
        for groups, n_groups in held:
            key, n_keys = _margin_key(vc, vcell, groups, n_groups, task.n_children)
            kept.append((key, n_keys, np.bincount(key, weights=x[:n_x], minlength=n_keys)))
    if x is not None:
        return x, optimal, seconds, "highs" if "highs" in solvers else "clarabel", problem, False
    if fixed:
        return None, False, seconds, "highs" if "highs" in solvers else "clarabel", problem, True
    problem = postprocess.build_node_qp(task, queries, variables)  # failsafe: one pass
    x, optimal, sec, used, status = postprocess.solve_qp(problem)
    return x, optimal, seconds + sec, used, problem, True


def round_in_passes(task, xstar, variables, plan: PassPlan, fixed: Sequence = ()):
    """(counts, seconds, used_milp, failsafe): each pass keeps its margins within floor/ceil of
    the fitted ones and fixes them at their rounded values for the later passes.

    fixed: (key, n_keys, value) margins kept exactly throughout (earlier outer passes'); with
    them a pass without a solution returns counts None (no failsafe: production's interleaved
    optimizer has none either)."""

    cells, vc, va, vcell = variables
    interleaved = bool(fixed)
    fixed, seconds, milp = [(k, n, v, v) for k, n, v in fixed], 0.0, False
    counts = None
    for margins in plan.rounding:
        ranges = []
        for _, groups, n_groups in margins:
            key, n_keys = _margin_key(vc, vcell, groups, n_groups, task.n_children)
            m = np.bincount(key, weights=xstar, minlength=n_keys)
            ranges.append((key, n_keys, np.floor(m + _INT_TOL), np.ceil(m - _INT_TOL)))
        counts, sec, used = rounding._round(task, xstar, va, vc, vcell, cells, margins=fixed + ranges, fail=False)
        seconds += sec
        milp |= used
        if counts is None:
            if interleaved:
                return None, seconds, milp, True
            counts, sec, used = rounding._round(task, xstar, va, vc, vcell, cells)
            return counts, seconds + sec, milp or used, True
        for key, n_keys, _, _ in ranges:
            got = np.bincount(key, weights=counts, minlength=n_keys)
            fixed.append((key, n_keys, got, got))
    return counts, seconds, milp, False


def solve_interleaved(task, queries: Sequence, plan: PassPlan, variables):
    """(counts, qp_seconds, round_seconds, used_milp): the outer passes in turn (production's
    L2PlusRounderWithBackup_interleaved, sequential_optimizers.py:249-374): each fits its
    queries (its estimation passes, holding every earlier outer pass's fixed answers exactly),
    rounds them (its rounding passes), and its last rounding pass's answers are then fixed
    exactly for the outer passes after it. A pass without a solution is a MechanismError (no
    failsafe: production raises there too)."""

    cells, vc, va, vcell = variables
    n_x = vc.size
    fixed, qp_seconds, round_seconds, milp, counts = [], 0.0, 0.0, False, None
    for n, sub in enumerate(plan.outer):
        if fixed:  # what the fixed margins imply is not stated again (redundant.py)
            task = drop_implied(task, vc, vcell, fixed)
        x, _, sec, _, _, failed = fit_in_passes(task, queries, sub, variables, fixed)
        qp_seconds += sec
        if x is None or failed:
            raise MechanismError(
                f"outer pass {n + 1}: the least-squares fit has no solution that keeps the "
                "earlier outer passes' answers (no failsafe in interleaved passes)"
            )
        xstar = np.maximum(x[:n_x], 0.0)
        counts, sec, used, failed = round_in_passes(task, xstar, variables, sub, fixed)
        round_seconds += sec
        milp |= used
        if counts is None:
            raise MechanismError(
                f"outer pass {n + 1}: rounding has no solution that keeps the earlier outer "
                "passes' answers (no failsafe in interleaved passes)"
            )
        for _, groups, n_groups in sub.rounding[-1] if sub.rounding else ():
            key, n_keys = _margin_key(vc, vcell, groups, n_groups, task.n_children)
            fixed.append((key, n_keys, np.bincount(key, weights=counts, minlength=n_keys)))
    return counts, qp_seconds, round_seconds, milp
