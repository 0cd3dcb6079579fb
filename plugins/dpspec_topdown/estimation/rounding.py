"""A node's fit rounded to whole counts: floor or ceiling per cell, chosen by a small LP (a MILP
only when the LP is fractional) so every row the node keeps still holds. The LP is solved as a
min-cost flow where its rows are a network matrix (network.py: as TopDown states them, always),
by HiGHS otherwise or when the flow does not report an optimum."""

from __future__ import annotations

import os
import time

import numpy as np
import scipy.sparse as sp

from dpspec.api import MechanismError

from . import highs, network
from .highs import _INT_TOL
from .rows import _INF, _Rows, _sum_rows, bound_margin
from .merge_columns import merge_parallel


# "flow" (default): the LP as a min-cost flow where it is a network (network.py), HiGHS elsewhere;
# "highs": HiGHS for every LP, as before (the rounding benchmark's comparison)
SOLVER_ENV = "DPSPEC_TOPDOWN_ROUNDING"


def _round(task, xstar, va, vc, vcell, cells, margins=(), fail=True):
    """Integer children histograms keeping every row of the QP exactly (LP, MILP if needed).

    ``margins``: extra ``(key, n_keys, lo, hi)`` rows (the multipass rounder's margins: sums of
    the variables sharing a key kept within [lo, hi]), or ``(key, n_keys, lo, hi, coef)`` for a
    weighted sum (a cross constraint's +1/-1 across two stacked tables, joint_round.py). With ``fail=False`` an infeasible
    rounding returns None instead of raising (the caller has a failsafe)."""
    near = np.rint(xstar)
    fixed = np.abs(xstar - near) <= _INT_TOL
    base = np.where(fixed, near, np.floor(xstar))
    fi = np.flatnonzero(~fixed)
    if fi.size == 0:
        counts = base.astype(np.int64)
        if _rows_hold(task, counts, va, vc, vcell, cells, margins):
            return counts, 0.0, False
    t0 = time.perf_counter()
    for attempt in ("lp", "milp", "wide"):
        if fi.size == 0 and attempt != "wide":
            continue
        if attempt == "wide":  # numerical trouble: let every variable move by one more unit
            base = np.maximum(np.floor(xstar) - 1.0, 0.0)
            fi = np.arange(xstar.size)
            width = np.ceil(xstar) + 1.0 - base
        else:
            width = np.ones(fi.size)
        counts = _round_once(
            task, xstar, base, fi, width, va, vc, vcell, cells, integer=attempt != "lp", margins=margins
        )
        if counts is not None and _rows_hold(task, counts, va, vc, vcell, cells, margins):
            return counts, time.perf_counter() - t0, attempt != "lp"
    if not fail:
        return None, time.perf_counter() - t0, True
    raise MechanismError(
        f"TopDown rounding failed at node {task.key}: no integer solution keeps the parent sums and invariants"
    )


def _round_once(task, xstar, base, fi, width, va, vc, vcell, cells, integer, margins=()):
    """Solve for the increments delta on variables ``fi`` (others stay at ``base``)."""
    n_x, nf = xstar.size, fi.size
    col = np.full(n_x, -1, dtype=np.int64)
    col[fi] = np.arange(nf)
    rows = _Rows()
    sel = fi  # only free variables appear in the rows; fixed ones move to the bounds

    def add_sum(keys_all, n_keys, target, cell_side=False):
        """sum over free vars with key k of delta = target[k] - sum over all vars with key k of base."""
        basesum = np.bincount(keys_all, weights=base, minlength=n_keys)
        local, present = _sum_rows(keys_all[sel], n_keys)
        rhs = np.asarray(target, dtype=np.float64)[present] - basesum[present]
        rows.add(local, np.arange(nf), 1.0, rhs, rhs, cell_side)
        others = _keys_without(keys_all, n_keys, present)
        return bool(np.all(np.abs(np.asarray(target, dtype=np.float64)[others] - basesum[others]) < 0.5))

    ok = True
    if task.parent is not None:
        ok &= add_sum(va, cells.size, task.parent[cells], cell_side=True)
    for con in task.constraints:
        key = con.child_set[vc] * con.n_groups + con.groups[vcell]
        # one set of children for the whole node: each row a union of parent cells
        ok &= add_sum(key, con.target.size, con.target.ravel(), cell_side=bool(np.all(con.child_set == 0)))
    margins = (*margins, *(bound_margin(b, vc, vcell) for b in task.bounds))
    # keep each child's total within floor/ceil of its least-squares total
    tot = np.bincount(vc, weights=xstar, minlength=task.n_children)
    bsum = np.bincount(vc, weights=base, minlength=task.n_children)
    local, present = _sum_rows(vc[sel], task.n_children)
    t_lo = np.floor(tot[present] + _INT_TOL) - bsum[present]
    t_hi = np.ceil(tot[present] - _INT_TOL) - bsum[present]
    t_lo, t_hi = np.minimum(t_lo, t_hi), np.maximum(t_lo, t_hi)
    rows.add(local, np.arange(nf), 1.0, t_lo, t_hi)
    for key, n_keys, m_lo, m_hi, *coef in margins:  # the multipass rounder's margins
        coef = coef[0] if coef else None
        msum = np.bincount(key, weights=base if coef is None else base * coef, minlength=n_keys)
        local, present = _sum_rows(key[sel], n_keys)
        others = _keys_without(key, n_keys, present)
        ok &= bool(np.all((m_lo[others] <= msum[others] + 0.5) & (msum[others] <= m_hi[others] + 0.5)))
        # a key without bounds (a stacked table's spare key, joint_round.py) is no row at all
        bounded = np.isfinite(m_lo[present]) | np.isfinite(m_hi[present])
        vals = np.broadcast_to(1.0 if coef is None else coef[sel], (nf,))
        cols = np.arange(nf)
        if not bounded.all():
            keep = bounded[local]
            local, cols, vals = (np.cumsum(bounded) - 1)[local[keep]], cols[keep], vals[keep]
            present = present[bounded]
        rows.add(local, cols, vals, m_lo[present] - msum[present], m_hi[present] - msum[present])
    if not ok:
        return None
    a, lo, hi = rows.matrix(nf)
    frac = xstar[fi] - base[fi]
    if np.all(width == 1.0):
        cost = 1.0 - 2.0 * frac  # |base + d - x| = frac + d (1 - 2 frac) for d in {0, 1}
        # columns alike in every row and in cost as one (merge_columns.merge_parallel)
        a_lp, cost_lp, upper_lp, split = merge_parallel(a.tocsc(), cost)
        d = None
        if not integer:
            network.capture(cost_lp, upper_lp, a_lp, lo, hi, rows.cell_side())
            if os.environ.get(SOLVER_ENV, "flow") == "flow":
                _, d, _ = network.solve_flow(cost_lp, upper_lp, a_lp, lo, hi, rows.cell_side())
        if d is None:
            status, d, _ = highs._highs(
                cost_lp, np.zeros(cost_lp.size), upper_lp, a_lp.tocsc(), lo, hi, integer=integer
            )
        if d is not None and split is not None:
            if np.any(np.abs(d - np.rint(d)) > _INT_TOL):
                return None
            d = split(d)
    else:  # L1 distance with auxiliary variables e >= |base + d - x|
        status, d = _round_wide(frac, width, a, lo, hi)
    if d is None:
        return None
    d = d[:nf]
    if np.any(np.abs(d - np.rint(d)) > _INT_TOL):
        return None
    counts = base.copy()
    counts[fi] += np.rint(d)
    return counts.astype(np.int64)


def _keys_without(keys: np.ndarray, n_keys: int, present: np.ndarray) -> np.ndarray:
    """The keys (sorted) that some variable has but ``present`` (a subset of them) lacks: the
    rows left with no free variable, checked on their fixed part alone."""
    has = np.bincount(keys, minlength=n_keys) > 0
    has[present] = False
    return np.flatnonzero(has)


def _round_wide(frac, width, a, lo, hi):
    nf = frac.size
    eye = sp.identity(nf, format="csc")
    # rows: a d = rhs ; d - e <= frac ; -d - e <= -frac
    big = sp.vstack(
        [sp.hstack([a, sp.csc_matrix((a.shape[0], nf))]), sp.hstack([eye, -eye]), sp.hstack([-eye, -eye])]
    ).tocsc()
    row_lo = np.concatenate([lo, np.full(2 * nf, -_INF)])
    row_hi = np.concatenate([hi, frac, -frac])
    cost = np.concatenate([np.zeros(nf), np.ones(nf)])
    lower = np.zeros(2 * nf)
    upper = np.concatenate([width, np.full(nf, _INF)])
    status, d, _ = highs._highs(cost, lower, upper, big, row_lo, row_hi, integer=True)
    return status, d


def _rows_hold(task, counts, va, vc, vcell, cells, margins=()) -> bool:
    """Exact integer check of parent sums, invariant targets and rounder margins."""
    if np.any(counts < 0):
        return False
    for b in task.bounds:
        got = np.bincount(vc * b.n_groups + b.groups[vcell], weights=counts, minlength=b.lower.size)
        if np.any(got < b.lower.ravel() - 0.5) or np.any(got > b.upper.ravel() + 0.5):
            return False
    for key, n_keys, m_lo, m_hi, *coef in margins:
        got = np.bincount(key, weights=counts * coef[0] if coef else counts, minlength=n_keys)
        if np.any(got < m_lo - 0.5) or np.any(got > m_hi + 0.5):
            return False
    if task.parent is not None:
        if not np.array_equal(
            np.bincount(va, weights=counts, minlength=cells.size).astype(np.int64), task.parent[cells]
        ):
            return False
    for con in task.constraints:
        key = con.child_set[vc] * con.n_groups + con.groups[vcell]
        got = np.bincount(key, weights=counts, minlength=con.target.size).astype(np.int64)
        if not np.array_equal(got, con.target.ravel()):
            return False
    return True
