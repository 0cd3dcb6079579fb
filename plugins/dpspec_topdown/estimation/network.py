"""The rounding LP as a min-cost flow when its rows are a network matrix, and the capture of
rounding LPs to .npz for the rounding benchmark.

Why: a node's rounding LP (rounding.py) has +1 coefficients only, and its rows are, as TopDown
states them, two laminar families of sets of variables: on the cell side the parent sums (one
row per parent cell: a partition of the variables), on the child side each child's total, the
constraint targets per (child, group), the multipass rounder's margins and the bounds, all
nested within a child. Two laminar families of +1 rows make a network matrix, so the LP is a
min-cost flow, which a network algorithm solves without the simplex's linear algebra (the LP
came out integral on every node for the same reason: a network matrix is totally unimodular).

How: within each family every set's parent is the smallest set of the family strictly
containing it (``forest``; equal sets are chained by row order), so each family is a forest.
One node per row and one node Z for every root. A cell-side row R is the arc parent(R) -> R (Z
-> R at a root), a child-side row S the arc S -> parent(S) (S -> Z), each between the row's
bounds; a variable is the arc from the smallest cell-side row holding it to the smallest
child-side row holding it (Z where there is none), between 0 and its upper bound, at its cost.
Conservation at a row's node makes its arc carry the row's sum, so a flow is a point of the LP
and back. Lower bounds move to the nodes' supplies (an arc's lower bound sent ahead), a row
bound beyond what its variables can reach is cut to it, and the costs (reals in [-1, 1]) are
scaled by a power of two to the integers the flow solver takes: as fine as its 63-bit range
allows for the network's size, so the flow's optimum is the LP's up to that rounding of the
costs (the rounding benchmark checks it against HiGHS's, relative 1e-9).

Anything else is not a network here and stays with HiGHS: a coefficient other than 1, a
family that is not laminar, a row bound or upper bound that is not a whole number. The solver
is OR-Tools' SimpleMinCostFlow; without it (or when it reports anything but optimal) the caller
solves the LP with HiGHS as before.

Why OR-Tools, a required dependency: benchmarks/bench_topdown_rounding.py times HiGHS as it was
called, HiGHS tuned and the flow on every rounding LP of a P.L. 94 and a DHC persons run. HiGHS's
presolve took almost all of its time on the larger LPs (switched off, HiGHS was many times
faster), and the flow was the fastest of all, with the least memory, and the only one whose
objective met HiGHS's optimum at tight tolerances to 1e-9 every time (HiGHS at its default
tolerances stops up to some 1e-7 short). Any solver change picks other optimal vertices where
the LP has ties (costs equal to the fit's last digits), so some releases move either way; a
release must not depend on what happens to be installed, hence required, not optional.

Capture: with ``DPSPEC_TOPDOWN_ROUND_CAPTURE`` naming a directory, every rounding LP a process
hands to a solver is also written there as ``round-PID-N.npz`` (the merged LP as solved, with the
side of each row). It is for the benchmark only: nothing in a release reads or writes it.
"""

from __future__ import annotations

import itertools
import os
import time

import numpy as np
import scipy.sparse as sp

from dpspec.api import LazyModule

# heavy libraries, imported on first use
min_cost_flow = LazyModule("ortools.graph.python.min_cost_flow", "min_cost_flow", globals())

CAPTURE_ENV = "DPSPEC_TOPDOWN_ROUND_CAPTURE"
_COUNTER = itertools.count()

# the flow solver's integers: costs times (nodes + 1) and every cost times a flow within int64,
# with room to spare (its own check refused 2^51 on 876 nodes: a bound some 4x below 2^61 / n)
_INT_RANGE = 2.0**57
_MAX_SCALE_BITS = 48  # the costs' last bits are the fit's noise; a finer scale adds nothing
_RETRIES = 3  # a cost range the solver still refuses: the scale halved 16-fold, this many times


def forest(a: sp.csr_matrix, rows: np.ndarray):
    """(parent, smallest) if the rows ``rows`` of ``a`` (sets of columns, none empty) are a
    laminar family, else None: ``parent[i]`` the position in ``rows`` of the smallest row
    strictly containing row ``rows[i]`` (-1 for none; of equal rows the later one's parent is the
    earlier), ``smallest[j]`` the position of the smallest row holding column j (-1 for none).

    The test: with the rows ordered by size (largest first, then by index), each column's rows
    in that order; the family is laminar exactly when every row has the same predecessor in the
    lists of all its columns (that predecessor then contains it, and each column's rows form a
    chain), which one sort of the entries shows."""
    sub = a[rows]
    m, n = sub.shape
    size = np.diff(sub.indptr)
    pos = np.empty(m, dtype=np.int64)
    pos[np.lexsort((np.arange(m), -size))] = np.arange(m)
    entry_row = np.repeat(np.arange(m, dtype=np.int64), size)
    entry_col = sub.indices.astype(np.int64)
    order = np.lexsort((pos[entry_row], entry_col))  # by column, then largest row first
    col_s, row_s = entry_col[order], entry_row[order]
    first = np.r_[True, col_s[1:] != col_s[:-1]]
    pred = np.where(first, -1, np.r_[-1, row_s[:-1]])
    pred_entry = np.empty_like(pred)
    pred_entry[order] = pred  # back in row order (the CSR's)
    starts = sub.indptr[:-1]
    low, high = np.minimum.reduceat(pred_entry, starts), np.maximum.reduceat(pred_entry, starts)
    if not np.array_equal(low, high):
        return None
    last = np.r_[col_s[1:] != col_s[:-1], True]
    smallest = np.full(n, -1, dtype=np.int64)
    smallest[col_s[last]] = row_s[last]
    return low.astype(np.int64), smallest


class Network:
    """A rounding LP stated as a min-cost flow on ``n_nodes`` nodes (node 0 is Z): arcs
    (tail, head, capacity, cost) after the lower bounds moved to ``supply``; the first
    ``n_var`` arcs are the variables' (``loops``: variables in no row at all, solved by their
    cost's sign, have arcs Z -> Z here and are left out of the flow)."""

    def __init__(self, tail, head, capacity, cost, supply, n_var, loops):
        self.tail, self.head, self.capacity, self.cost = tail, head, capacity, cost
        self.supply, self.n_var, self.loops = supply, n_var, loops

    @property
    def n_nodes(self) -> int:
        return self.supply.size


def _whole(values: np.ndarray) -> bool:
    finite = values[np.isfinite(values)]
    return bool(np.all(finite == np.rint(finite)))


def network_form(cost, upper, a, lo, hi, cell_side) -> Network | None:
    """The LP min cost @ d, 0 <= d <= upper, lo <= a d <= hi as a network (see the module doc),
    with ``cell_side`` saying which rows are on the cell side; None if it is not one. Bounds
    that no d meets (a lower bound above what the row's variables reach) still give a network:
    the flow then reports it infeasible."""
    a = sp.csr_matrix(a)
    a.sum_duplicates()
    m, n = a.shape
    cost, upper = np.asarray(cost, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if a.nnz and not np.all(a.data == 1.0):
        return None
    if not (np.all(np.isfinite(upper)) and _whole(upper) and _whole(lo) and _whole(hi)):
        return None
    if np.any(np.diff(a.indptr) == 0):  # an empty row: 0 within its bounds or no solution
        keep = np.diff(a.indptr) > 0
        if np.any((lo[~keep] > 0) | (hi[~keep] < 0)):
            return None
        a, lo, hi, cell_side = a[keep], lo[keep], hi[keep], np.asarray(cell_side)[keep]
        m = a.shape[0]
    cell_side = np.asarray(cell_side, dtype=bool)
    tail_var, head_var = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    row_tail, row_head = np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    for side in (True, False):
        rows = np.flatnonzero(cell_side == side)
        if rows.size == 0:
            continue
        found = forest(a, rows)
        if found is None:
            return None
        parent, smallest = found
        node = rows + 1  # node of row rows[i]; Z (0) for no row
        parent_node = np.where(parent >= 0, node[np.maximum(parent, 0)], 0)
        var_node = np.where(smallest >= 0, node[np.maximum(smallest, 0)], 0)
        if side:  # parent(R) -> R; a variable leaves its smallest cell-side row
            row_tail[rows], row_head[rows], tail_var = parent_node, node, var_node
        else:  # S -> parent(S); a variable enters its smallest child-side row
            row_tail[rows], row_head[rows], head_var = node, parent_node, var_node
    reach = a @ upper  # the most a row's variables can sum to
    low = np.maximum(np.where(np.isfinite(lo), lo, 0.0), 0.0)
    high = np.minimum(np.where(np.isfinite(hi), hi, reach), reach)
    loops = (tail_var == 0) & (head_var == 0)
    tail = np.concatenate([tail_var, row_tail])
    head = np.concatenate([head_var, row_head])
    lower = np.concatenate([np.zeros(n), low])
    capacity = np.concatenate([np.where(loops, 0.0, upper), high]) - lower
    supply = np.bincount(head, weights=lower, minlength=m + 1) - np.bincount(tail, weights=lower, minlength=m + 1)
    arc_cost = np.concatenate([np.where(loops, 0.0, cost), np.zeros(m)])
    return Network(tail, head, capacity, arc_cost, supply, n, loops)


def scale_bits(net: Network) -> int:
    """The power of two the costs are scaled by: the finest that keeps max|cost| x (nodes + 1)
    and max|cost| x the total capacity within the solver's integers."""
    biggest = float(np.max(np.abs(net.cost), initial=0.0))
    if biggest == 0.0:
        return 0
    room = _INT_RANGE / (biggest * max(net.n_nodes + 1.0, float(np.sum(np.maximum(net.capacity, 0.0))) + 1.0))
    return int(min(_MAX_SCALE_BITS, np.floor(np.log2(room))))


def solve_flow(cost, upper, a, lo, hi, cell_side, net: Network | None = None):
    """(status, d, seconds): the LP solved as a min-cost flow. ``status`` is "optimal" (``d``
    the solution), "not a network", "not installed" or the flow solver's own word for anything
    else; ``d`` is None unless optimal."""
    t0 = time.perf_counter()
    net = network_form(cost, upper, a, lo, hi, cell_side) if net is None else net
    if net is None:
        return "not a network", None, time.perf_counter() - t0
    try:
        solver = min_cost_flow.SimpleMinCostFlow  # imports OR-Tools on the first solve
    except ImportError:
        return "not installed", None, time.perf_counter() - t0
    if np.any(net.capacity < 0):  # a row's lower bound above its upper bound or its reach
        return "infeasible", None, time.perf_counter() - t0
    bits = scale_bits(net)
    capacity, supply = np.rint(net.capacity).astype(np.int64), np.rint(net.supply).astype(np.int64)
    for _ in range(_RETRIES + 1):
        flow = solver()
        arcs = flow.add_arcs_with_capacity_and_unit_cost(
            net.tail, net.head, capacity, np.rint(np.ldexp(net.cost, bits)).astype(np.int64)
        )
        flow.set_nodes_supplies(np.arange(net.n_nodes, dtype=np.int64), supply)
        status = flow.solve()
        if status != flow.BAD_COST_RANGE or bits < 24:
            break
        bits -= 4
    if status != flow.OPTIMAL:
        return str(getattr(status, "name", status)).lower(), None, time.perf_counter() - t0
    d = flow.flows(arcs[: net.n_var]).astype(np.float64)
    loops = net.loops
    if loops.any():
        d[loops] = np.where(np.asarray(cost)[loops] < 0, np.asarray(upper)[loops], 0.0)
    return "optimal", d, time.perf_counter() - t0


# --- capture (the benchmark's) -------------------------------------------------------------


def capture(cost, upper, a: sp.csc_matrix, lo, hi, cell_side, where: str | None = None) -> str | None:
    """Write a rounding LP to the capture directory (if one is named); the file's path."""
    where = os.environ.get(CAPTURE_ENV) if where is None else where
    if not where:
        return None
    os.makedirs(where, exist_ok=True)
    path = os.path.join(where, f"round-{os.getpid()}-{next(_COUNTER)}.npz")
    a = sp.csc_matrix(a)
    tmp = path + ".tmp.npz"
    np.savez_compressed(
        tmp,
        cost=cost,
        upper=upper,
        lo=lo,
        hi=hi,
        cell_side=np.asarray(cell_side, dtype=bool),
        a_data=a.data,
        a_indices=a.indices,
        a_indptr=a.indptr,
        a_shape=a.shape,
    )
    os.replace(tmp, path)
    return path


def load(path: str) -> dict:
    """A captured rounding LP: cost, upper, a (CSC), lo, hi, cell_side."""
    with np.load(path) as z:
        a = sp.csc_matrix((z["a_data"], z["a_indices"], z["a_indptr"]), shape=tuple(z["a_shape"]))
        return {
            "cost": z["cost"],
            "upper": z["upper"],
            "a": a,
            "lo": z["lo"],
            "hi": z["hi"],
            "cell_side": z["cell_side"],
        }
