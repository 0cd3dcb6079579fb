"""Top-down estimation of one node's children: weighted least squares, then integer rounding.

Why two solver calls: the least-squares fit (a convex QP, solved by interior point with Clarabel,
HiGHS's active-set QP as the fallback; see qp.py) uses every noisy measurement with weight 1/variance but returns fractions; the rounding step (an LP, also
HiGHS) picks, for each fractional cell, floor or ceiling so that every constraint still holds
exactly. The rounding LP's rows are per-cell sums over children (one partition), per-child totals
and invariant groups (a laminar family as long as the invariant queries are nested): two laminar
families make a totally unimodular matrix, so the simplex vertex is integral. If invariants are
not nested the LP may be fractional, and the same problem is re-solved as a MILP.

Sparsity: a cell that is 0 in the (already fixed) parent is 0 in every child, and a group whose
invariant target is 0 fixes its cells to 0, so those variables never enter the solver. A
measured marginal group that holds a single free variable is put on that variable's diagonal
instead of getting an auxiliary variable.

Nodes of a level are independent: ``solve_level`` runs them in worker processes.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import resource
import time
from typing import Sequence

import attrs
import highspy
import numpy as np
import scipy.sparse as sp

from dpspec.api import MechanismError

from ..measurement.node_noise import answers_at, sorted_lookup, draw_node_noise
from . import highs
from .highs import _QP_ATTEMPTS
from .qp import NodeQP
from .rounding import _round
from .rows import _INF, _Rows, _bound_rows, _sum_rows
from .qp_choice import solve as solve_interior
from ..wording import counted


@attrs.frozen
class MeasuredQuery:
    """A measured marginal at the children's level: cell -> group map and weight 1/variance."""

    name: str
    groups: np.ndarray  # (n_cells,) group of every cell
    n_groups: int
    weight: float


@attrs.frozen
class GroupConstraint:
    """Exact marginal targets for sets of children (an invariant, aggregated as needed)."""

    name: str
    groups: np.ndarray  # (n_cells,) group of every cell
    n_groups: int
    child_set: np.ndarray  # (n_children,) which target row each child belongs to
    target: np.ndarray  # (n_sets, n_groups) int64


@attrs.frozen
class BoundConstraint:
    """Lower and upper bounds on marginal groups of each child (production's hhgq_total_lb/ub).

    ``upper`` may be +inf; a group whose upper bound is 0 fixes its cells to 0."""

    name: str
    groups: np.ndarray  # (n_cells,) group of every cell
    n_groups: int
    lower: np.ndarray  # (n_children, n_groups) int64
    upper: np.ndarray  # (n_children, n_groups) float64, +inf when unbounded


@attrs.frozen
class Failsafe:
    """Production's backup feasibility (optimizer.py:827-910): the marginal that adds over the
    minimal schema's variables, whose parent sums the relaxed solve still keeps exactly."""

    groups: np.ndarray  # (n_cells,) group of every cell in that marginal
    n_groups: int
    obj_slack: float = 1.0  # the total slack may exceed its minimum by this (optimizer.py:899)


@attrs.frozen
class NodeTask:
    """Everything one node's solve needs (picklable, no shared state)."""

    key: int
    n_children: int
    n_cells: int
    parent: np.ndarray | None  # (n_cells,) int64 fixed parent histogram (or a 1 x n_cells csr row,
    # a ParentRow when the node is solved: never dense), None at the top
    measurements: tuple  # per MeasuredQuery: (n_children, n_groups) int64 noisy answers
    constraints: tuple  # of GroupConstraint
    zero_cells: np.ndarray | None = None  # (n_cells,) bool: structural zeros, 0 in every child
    bounds: tuple = ()  # of BoundConstraint: per-child bounds on marginal groups
    noise: object = None  # node_noise.NodeNoise: draw `measurements` in the node (then left empty)
    # the optimized spine (spine.py): each child's weight relative to the level's (its budget over
    # the level's share; 0 for a bypassed child, which is not measured); None: all 1
    child_scale: np.ndarray | None = None
    failsafe: Failsafe | None = None  # relax the children sums when the node has no solution
    postprocess: object = None  # postprocess_only.PostprocessOnly: bounds repaired after rounding


@attrs.frozen
class NodeResult:
    key: int
    child: np.ndarray  # COO triplets of the integer children histograms (count > 0 only)
    cell: np.ndarray
    count: np.ndarray
    qp_seconds: float
    round_seconds: float
    total_seconds: float
    n_variables: int
    used_milp: bool
    qp_optimal: bool  # False: the fit stopped at its iteration cap (feasible, not optimal)
    peak_rss_mb: float = 0.0  # peak memory of the process that solved the node
    qp_solver: str = "clarabel"  # "highs" when the interior-point solve failed and HiGHS took over
    failsafe: bool = False  # a later pass had no solution: the node was redone in one pass
    noise_positions: np.ndarray | None = None  # (n_queries,) uint64: where each query's draws began
    noise_seconds: float = 0.0  # drawing the node's noise (when the node drew it)
    relaxed: bool = False  # production's failsafe ran: the children need not add up to the parent
    moves: int = 0  # records the post-processing heuristic moved (postprocess_only.py)
    unrepaired: tuple = ()  # (child, constraint, group, count, lower, upper) rows it left broken
    postprocess_seconds: float = 0.0  # the heuristic's time (also counted in round_seconds)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# --- HiGHS plumbing ---------------------------------------------------------------------------


class ParentRow:
    """A node's fixed parent histogram, sparse: its positive cells (sorted) and their counts.

    Why: a dense row is n_cells values per node (1,227,744 for the DHC), though the solve reads
    only the positive cells. Indexing it (``parent[cells]``) gives the counts, 0 elsewhere."""

    def __init__(self, cells: np.ndarray, counts: np.ndarray, n_cells: int):
        self.cells, self.counts, self.n_cells = cells, counts, n_cells

    @classmethod
    def of(cls, row) -> "ParentRow":
        """From a 1 x n_cells sparse row or a dense array."""
        if sp.issparse(row):
            row = sp.csr_matrix(row)
            row.sum_duplicates()
            cells, counts, n = row.indices.astype(np.int64), row.data.astype(np.int64), row.shape[1]
        else:
            dense = np.asarray(row, dtype=np.int64).ravel()
            cells, n = np.flatnonzero(dense), dense.size
            counts = dense[cells]
        keep = counts > 0
        order = np.argsort(cells[keep], kind="stable")
        return cls(cells[keep][order], counts[keep][order], n)

    def positive(self) -> np.ndarray:
        return self.cells

    def __getitem__(self, idx) -> np.ndarray:
        return sorted_lookup(self.cells, self.counts, np.asarray(idx, dtype=np.int64))

    def sum(self) -> int:
        return int(self.counts.sum())

    def group_sums(self, groups: np.ndarray, n_groups: int) -> np.ndarray:
        return np.bincount(groups[self.cells], weights=self.counts, minlength=n_groups)


def _positive_cells(parent) -> np.ndarray:
    return parent.positive() if isinstance(parent, ParentRow) else np.flatnonzero(np.asarray(parent) > 0)


# --- one node ---------------------------------------------------------------------------------


def _node_variables(task: NodeTask, cells: np.ndarray | None = None):
    """(cells, vc, va, vcell): the active parent cells (or ``cells``) and every free variable's
    child and cell."""
    nc, ncell = task.n_children, task.n_cells
    if cells is None:
        cells = _positive_cells(task.parent) if task.parent is not None else np.arange(ncell)
    free = np.ones((nc, cells.size), dtype=bool)
    for con in task.constraints:
        zero = con.target[:, con.groups[cells]] == 0  # (n_sets, n_active)
        free &= ~zero[con.child_set]
    if task.zero_cells is not None:
        free &= ~task.zero_cells[cells][None, :]
    for b in task.bounds:
        free &= b.upper[:, b.groups[cells]] > 0
    vc, va = np.nonzero(free)  # variable -> child, active position
    return cells, vc, va, cells[va]


class _Margin:
    """One measured query over a node's variables: each variable's group, numbered 0..n-1 in
    the order of the keys (child * n_groups + group) they stand for."""

    def __init__(self, key: np.ndarray, n_keys: int):
        local, self.keys = _sum_rows(key, n_keys)
        self.local = local
        self.n = self.keys.size
        self.count = np.bincount(local, minlength=self.n)
        self.first = np.full(self.n, -1, dtype=np.int64)  # a variable of each group
        self.first[local[::-1]] = np.arange(local.size)[::-1]
        self.column = np.full(self.n, -1, dtype=np.int64)  # the group's sum variable (multi only)

    def refines(self, other: "_Margin") -> bool:
        """Whether every group of self lies inside one group of ``other``."""
        return bool(np.array_equal(other.local[self.first][self.local], other.local))

    def terms(self) -> np.ndarray:
        """The columns that add up to each group: its sum variable, or its one cell."""
        return np.where(self.column >= 0, self.column, self.first)


def _bases(margins: list) -> list:
    """For each query: (index of a query with the same groups that comes first, or None; index
    of the strictly finer query with the fewest groups whose groups its sums add up, or None)."""
    out = []
    for i, m in enumerate(margins):
        same = next((j for j in range(i) if margins[j].n == m.n and margins[j].refines(m)), None)
        finer = [j for j, b in enumerate(margins) if m.n < b.n < b.local.size and b.refines(m)]
        out.append((same, min(finer, key=lambda j: margins[j].n) if finer else None))
    return out


def build_node_qp(task: NodeTask, queries: Sequence[MeasuredQuery], variables=None) -> NodeQP:
    """The node's weighted least-squares fit as a QP (see qp.NodeQP); no solver involved.

    A measured group of one variable goes on that variable's diagonal; a larger group gets a
    sum variable z and a row defining it. The row adds the cells, or, when another query's
    groups are finer and lie inside it, that query's sums (the sums nest, and a coarse margin
    is a row over a few dozen sums instead of every cell: a far sparser system to factor). A
    query whose groups are another's over these variables shares its sum variables (its
    weights are added). Same objective and constraints in x either way."""
    cells, vc, va, vcell = variables if variables is not None else _node_variables(task)
    nc = task.n_children
    n_x = vc.size
    # Objective: sum_q w_q sum_{child, group} (answer - y)^2, weights scaled to max 1.
    wmax = max(q.weight for q in queries) if queries else 1.0
    hess_x, cost_x = np.zeros(n_x), np.zeros(n_x)
    scale = task.child_scale
    margins = [_Margin(vc * q.n_groups + q.groups[vcell], nc * q.n_groups) for q in queries]
    bases = _bases(margins)
    z_hess, z_cost, shared = [], [], []
    zrows = _Rows()
    n_z = 0
    # finest first, so that a coarse query's sums are made of sums that already have columns
    for i in sorted(range(len(queries)), key=lambda i: -margins[i].n):
        q, y, m = queries[i], task.measurements[i], margins[i]
        w = q.weight / wmax if scale is None else (q.weight / wmax) * scale[vc[m.first]]  # per group
        w = np.broadcast_to(np.asarray(w, dtype=np.float64), (m.n,))
        yy = answers_at(y, m.keys)
        single = m.count == 1  # one variable per group of a query: no repeats in the index
        hess_x[m.first[single]] += 2.0 * w[single]
        cost_x[m.first[single]] -= 2.0 * w[single] * yy[single]
        multi = np.flatnonzero(~single)
        if not multi.size:
            continue
        same, finer = bases[i]
        if same is not None:  # the same sums as an earlier query: add to its objective terms
            s_m = margins[same]
            m.column[multi] = s_m.column[s_m.local[m.first[multi]]]
            shared.append((m.column[multi] - n_x, 2.0 * w[multi], -2.0 * w[multi] * yy[multi]))
            continue
        m.column[multi] = n_x + n_z + np.arange(multi.size)
        local = np.full(m.n, -1, dtype=np.int64)
        local[multi] = np.arange(multi.size)
        if finer is None:  # rows: sum of the cells - z = 0
            use = np.flatnonzero(m.count[m.local] > 1)
            t_row, t_col = local[m.local[use]], use
        else:  # rows: sum of the finer query's sums (or single cells) inside the group - z = 0
            b = margins[finer]
            parent = m.local[b.first]  # the group of each of b's groups
            use = np.flatnonzero(m.count[parent] > 1)
            t_row, t_col = local[parent[use]], b.terms()[use]
        zrows.add(
            np.concatenate([t_row, np.arange(multi.size)]),
            np.concatenate([t_col, m.column[multi]]),
            np.concatenate([np.ones(t_row.size), -np.ones(multi.size)]),
            np.zeros(multi.size),
            np.zeros(multi.size),
        )
        z_hess.append(2.0 * w[multi].copy())
        z_cost.append(-2.0 * w[multi] * yy[multi])
        n_z += multi.size
    z_hess, z_cost = np.concatenate([np.zeros(0)] + z_hess), np.concatenate([np.zeros(0)] + z_cost)
    for col, h, c in shared:  # a query's sums are distinct columns: no repeats in the index
        z_hess[col] += h
        z_cost[col] += c
    n_var = n_x + n_z
    rows = _Rows()
    if zrows.n:
        a_z, lo_z, hi_z = zrows.matrix(n_var)
    _add_structural_rows(rows, task, cells, va, vc, vcell, n_x)
    a_s, lo_s, hi_s = rows.matrix(n_var)
    if zrows.n:
        a = sp.vstack([a_z, a_s]).tocsc()
        lo, hi = np.concatenate([lo_z, lo_s]), np.concatenate([hi_z, hi_s])
    else:
        a, lo, hi = a_s.tocsc(), lo_s, hi_s
    return NodeQP(
        hess=np.concatenate([hess_x, z_hess]),
        cost=np.concatenate([cost_x, z_cost]),
        lower=np.zeros(n_var),
        upper=np.full(n_var, _INF),
        a=a,
        lo=lo,
        hi=hi,
        n_x=n_x,
    )


def solve_qp(problem: NodeQP, solver: str = "clarabel"):
    """(x, optimal, seconds, solver used, status): the fit by interior point, HiGHS as fallback.

    ``solver="highs"`` skips Clarabel (for comparisons). x is None if no solver found one.
    """
    seconds = 0.0
    if solver == "clarabel":  # the interior point chosen for the node, Clarabel as fallback
        ok, x, sec, status, used = solve_interior(problem)
        seconds += sec
        if ok:
            return x, True, seconds, used, status
    sol, qp_optimal, status = None, False, None
    for options in _QP_ATTEMPTS:
        status, x, sec = highs._highs(
            problem.cost,
            problem.lower,
            problem.upper,
            problem.a,
            problem.lo,
            problem.hi,
            hess=problem.hess,
            options=options,
        )
        seconds += sec
        if x is not None:
            sol, qp_optimal = x, status == highspy.HighsModelStatus.kOptimal
        if qp_optimal:
            break
    return sol, qp_optimal, seconds, "highs", status


class NodeError(MechanismError):
    """A node that has no solution; ``key`` is its parent unit, so the engine can name it.

    The key travels in ``args`` so the error survives the trip back from a worker process."""

    def __init__(self, key: int, message: str):
        super().__init__(message)
        self.key = key
        self.args = (key, message)

    def __str__(self) -> str:
        return str(self.args[1])


class FailsafeError(NodeError):
    """A node without a solution even after production's failsafe: the data (or a released
    product they are held to) contradict the constraints there."""


def solve_relaxed(task: NodeTask, queries: Sequence[MeasuredQuery], why: str = "") -> NodeResult:
    """Production's backup feasibility (optimizer.py:407-458, 586-640, 827-910): the node again
    with the children-sum constraints relaxed. Cells are in play wherever the parent's marginal
    over the non-minimal-schema variables is positive; a linear program finds the smallest total
    slack sum |parent cell - sum of children| while that marginal's sums stay exact and every
    invariant, bound and equality target holds; the least squares then keeps the total slack
    within that minimum plus ``obj_slack``; the rounding keeps the marginal's sums exactly and
    each child's total within floor/ceil of its fit. FailsafeError if it has no solution either."""
    t_start = time.perf_counter()
    fs = task.failsafe
    parent = task.parent if isinstance(task.parent, ParentRow) else ParentRow.of(task.parent)
    target = parent.group_sums(fs.groups, fs.n_groups)
    cells = np.flatnonzero(target[fs.groups] > 0)
    loose = attrs.evolve(task, parent=None)
    cells, vc, va, vcell = variables = _node_variables(loose, cells)
    n_x = vc.size

    def fail(what):
        return FailsafeError(
            task.key,
            f"no solution even with the children sums relaxed over the minimal schema "
            f"({what}; the exact solve said: {why})",
        )

    if n_x == 0:
        raise fail("every cell in play is forced to 0")
    base = build_node_qp(loose, queries, variables)
    n_s = 2 * cells.size  # slack above and below each parent cell in play
    n_var = base.n_var + n_s
    sp_cols = base.n_var + np.arange(cells.size)
    sm_cols = sp_cols + cells.size
    rows = _Rows()
    # sum of children + s+ - s- = parent cell
    rows.add(
        np.concatenate([va, np.arange(cells.size), np.arange(cells.size)]),
        np.concatenate([np.arange(n_x), sp_cols, sm_cols]),
        np.concatenate([np.ones(n_x), np.ones(cells.size), -np.ones(cells.size)]),
        parent[cells],
        parent[cells],
    )
    local, present = _sum_rows(fs.groups[vcell], fs.n_groups)  # the minimal schema's sums stay exact
    rows.add(local, np.arange(n_x), 1.0, target[present], target[present])
    extra, lo_e, hi_e = rows.matrix(n_var)
    a = sp.vstack([sp.hstack([base.a, sp.csc_matrix((base.a.shape[0], n_s))]), extra]).tocsc()
    lo, hi = np.concatenate([base.lo, lo_e]), np.concatenate([base.hi, hi_e])
    lower, upper = np.zeros(n_var), np.full(n_var, _INF)
    slack_cost = np.zeros(n_var)
    slack_cost[base.n_var :] = 1.0
    status, sol, lp_seconds = highs._highs(slack_cost, lower, upper, a, lo, hi)
    if sol is None:
        raise fail(f"the least-slack linear program says {status}")
    least = float(sol[base.n_var :].sum())
    a = sp.vstack([a, sp.csc_matrix(slack_cost[None, :])]).tocsc()
    problem = NodeQP(
        hess=np.concatenate([base.hess, np.zeros(n_s)]),
        cost=np.concatenate([base.cost, np.zeros(n_s)]),
        lower=lower,
        upper=upper,
        a=a,
        lo=np.append(lo, -_INF),
        hi=np.append(hi, least + fs.obj_slack),
        n_x=n_x,
    )
    x, optimal, qp_seconds, used, status = solve_qp(problem)
    if x is None:
        raise fail(f"the least squares says {status}")
    xstar = np.maximum(x[:n_x], 0.0)
    margin = (fs.groups[vcell], fs.n_groups, target.astype(np.float64), target.astype(np.float64))
    counts, round_seconds, used_milp = _round(loose, xstar, va, vc, vcell, cells, margins=(margin,), fail=False)
    if counts is None:
        raise fail("the rounding has no integer solution")
    keep = counts > 0
    return NodeResult(
        task.key,
        vc[keep].astype(np.int64),
        vcell[keep].astype(np.int64),
        counts[keep].astype(np.int64),
        qp_seconds + lp_seconds,
        round_seconds,
        time.perf_counter() - t_start,
        int(problem.n_var),
        used_milp,
        optimal,
        _peak_rss_mb(),
        used,
        True,
        relaxed=True,
    )


def node_inputs(task: NodeTask, queries: Sequence[MeasuredQuery]) -> tuple[NodeTask, np.ndarray | None, float]:
    """(task, noise positions, noise seconds): the task as the solve reads it, made in the node.

    A parent histogram sent as a sparse row becomes a ParentRow (never dense); a task sent with `noise` draws its
    children's noisy answers (node_noise), and the positions say where each query's draws began
    (None when the measurements came with the task)."""
    if task.parent is not None and sp.issparse(task.parent):
        task = attrs.evolve(task, parent=ParentRow.of(task.parent))
    if task.noise is None:
        return task, None, 0.0

    measurements, positions, seconds = draw_node_noise(task.noise, queries)
    return attrs.evolve(task, measurements=measurements, noise=None), positions, seconds


def _check_cells_coverable(task, cells, va):
    covered = np.bincount(va, minlength=cells.size) > 0
    if not covered.all():
        raise MechanismError(
            f"TopDown node {task.key}: parent cell {int(cells[~covered][0])} is positive but every "
            "child is forced to 0 there by an invariant; the invariants contradict each other"
        )


def _check_targets_coverable(con, vc, vcell):
    key = con.child_set[vc] * con.n_groups + con.groups[vcell]
    has = np.bincount(key, minlength=con.target.size).reshape(con.target.shape) > 0
    bad = (con.target > 0) & ~has
    if bad.any():
        s, g = np.argwhere(bad)[0]
        raise MechanismError(
            f"invariant {con.name}: target {int(con.target[s, g])} for group {int(g)} cannot be met "
            "because the parent histogram has no persons in any of its cells"
        )


def _check_bounds_coverable(task, b, vc, vcell):
    has = np.bincount(vc * b.n_groups + b.groups[vcell], minlength=b.lower.size).reshape(b.lower.shape) > 0
    bad = (b.lower > 0) & ~has
    if bad.any():
        c, g = np.argwhere(bad)[0]
        raise MechanismError(
            f"TopDown node {task.key}: constraint {b.name} needs at least {counted(b.lower[c, g], 'person')} in "
            f"group {int(g)} of child {int(c)}, but the parent histogram has none in any of its cells"
        )


def _add_structural_rows(rows: _Rows, task, cells, va, vc, vcell, n_x, base=None, lo_hi=None):
    """Parent-sum rows (per active cell) and invariant rows (per child set and group)."""
    if task.parent is not None:
        rows.add(va, np.arange(n_x), 1.0, task.parent[cells], task.parent[cells])
    for con in task.constraints:
        key = con.child_set[vc] * con.n_groups + con.groups[vcell]
        local, present = _sum_rows(key, con.target.size)
        t = con.target.ravel()[present].astype(np.float64)
        rows.add(local, np.arange(n_x), 1.0, t, t)
    for b in task.bounds:
        use, local, present, lo, hi = _bound_rows(b, vc, vcell)
        if present.size:
            rows.add(local, np.flatnonzero(use), 1.0, lo, hi)


# --- a whole level ----------------------------------------------------------------------------


def task_size(task: NodeTask) -> int:
    """Children times the parent's active cells: how large the node's problem is."""
    if task.parent is None:
        return task.n_children * task.n_cells
    if isinstance(task.parent, ParentRow):
        active = task.parent.cells.size
    else:
        active = task.parent.count_nonzero() if sp.issparse(task.parent) else np.count_nonzero(task.parent)
    return task.n_children * int(active)


def make_pool(workers: int) -> cf.Executor:
    """A process pool that does not inherit solver state (forkserver where available)."""
    methods = mp.get_all_start_methods()
    ctx = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
