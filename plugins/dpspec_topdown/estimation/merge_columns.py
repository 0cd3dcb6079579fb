"""Identical columns merged into one: cells a joint outer pass cannot tell apart, in its fit and its rounding.

Why: in a joint node's outer pass that fits only one table, the other table's cells have no
objective. The fitted table's cells have none of their own either when the pass fits only
margins: their objective is on the margins' sums. At the Puerto Rico households root, the first
outer pass holds 2.2 million household cells tied only by 16 cross-constraint rows, and one
interior-point solve over them took 10 s. Columns that are identical, have no objective and are
bounded only below by 0 can stand in for each other. So their sum is one variable, and the
problem is the same problem. The sum is then split evenly among them. An interior point's central
path treats identical columns symmetrically, so the even split is the point it would have
reached, up to its tolerance.

The rounding LP has its own such columns (`merge_parallel`): cells alike in every row and in
the cost of rounding up (the same fraction), 1.48 million of them in that pass's rounding at the
same root. They are one column between 0 and their number; its total goes to its first members.
The same optimum: any member may take another's unit. Which members take it is a tie, which
the LP over every cell broke by its pivoting order and the merged one breaks by the members'
order. (At that root the tie only ever touched cells no later pass keeps: it fixes margins, and
those came out the same, as did every release in reports/.)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .qp import NodeQP


def merge_free_duplicates(problem: NodeQP):
    """(reduced problem, expand): ``problem`` with each set of identical free columns (no
    objective, bounds [0, inf)) as one column, and ``expand(x)`` mapping the reduced solution
    back (each merged column's value split evenly). ``(problem, identity)`` if nothing merges."""
    a = sp.csc_matrix(problem.a)
    a.sort_indices()
    n = problem.n_var
    free = (problem.hess == 0) & (problem.cost == 0) & (problem.lower == 0) & ~np.isfinite(problem.upper)
    cand = np.flatnonzero(free & (np.diff(a.indptr) > 0))
    if cand.size < 2:
        return problem, _identity
    rep = _representatives(a, cand)
    merged = cand[rep != cand]
    if merged.size == 0:
        return problem, _identity
    keep = np.ones(n, dtype=bool)
    keep[merged] = False
    cols = np.flatnonzero(keep)
    position = np.full(n, -1, dtype=np.int64)
    position[cols] = np.arange(cols.size)
    owner = np.arange(n)
    owner[cand] = rep
    size = np.bincount(owner, minlength=n).astype(np.float64)
    reduced = NodeQP(
        hess=problem.hess[cols],
        cost=problem.cost[cols],
        lower=problem.lower[cols],
        upper=problem.upper[cols],
        a=a[:, cols].tocsc(),
        lo=problem.lo,
        hi=problem.hi,
        n_x=int(np.count_nonzero(cols < problem.n_x)),
    )

    def expand(x):
        if x is None:
            return None
        return x[position[owner]] / size[owner]

    return reduced, expand


def _identity(x):
    return x


def _representatives(a: sp.csc_matrix, cand: np.ndarray) -> np.ndarray:
    """For each candidate column, the first candidate column identical to it (itself if none):
    grouped by two random hashes of (row, value), then checked entry by entry, so a hash
    collision only leaves two columns unmerged, never merges different ones."""
    rng = np.random.default_rng(0)
    weights = rng.random((2, a.shape[0]))
    start, nnz = a.indptr[cand], np.diff(a.indptr)[cand]
    entry_col = np.repeat(np.arange(cand.size), nnz)
    k = np.arange(entry_col.size) - np.repeat(np.cumsum(np.r_[0, nnz[:-1]]), nnz)  # entry's place in its column
    entries = (np.repeat(start, nnz) + k).astype(np.int64)
    rows, vals = a.indices[entries], a.data[entries]
    h = [np.bincount(entry_col, weights=w[rows] * (vals + np.pi), minlength=cand.size) for w in weights]
    order = np.lexsort((h[1], h[0], nnz))
    new = np.r_[True, (np.diff(nnz[order]) != 0) | (np.diff(h[0][order]) != 0) | (np.diff(h[1][order]) != 0)]
    first = order[np.maximum.accumulate(np.where(new, np.arange(order.size), 0))]
    rep_local = np.empty(cand.size, dtype=np.int64)
    rep_local[order] = first
    # check entry by entry against the representative (the same k-th entry, row and value)
    theirs = a.indptr[cand[rep_local[entry_col]]] + k
    same = (a.indices[theirs] == rows) & (a.data[theirs] == vals)
    ok = np.bincount(entry_col, weights=~same, minlength=cand.size) == 0
    rep_local = np.where(ok, rep_local, np.arange(cand.size))
    return cand[rep_local]


def merge_parallel(a: sp.csc_matrix, cost: np.ndarray):
    """(a, cost, upper, split): a rounding LP's columns (each between 0 and 1) that are identical
    in the matrix and in cost as one column between 0 and their number, and ``split(d)`` giving
    each column its value back (a merged column's total to its first columns, 1 each). The same
    optimum: the members of such a column are interchangeable. ``split`` is None if none merge."""
    n = a.shape[1]
    with_cost = sp.vstack([a, sp.csr_matrix(np.asarray(cost, dtype=np.float64)[None, :])]).tocsc()
    with_cost.sort_indices()
    rep = _representatives(with_cost, np.arange(n))
    cols = np.flatnonzero(rep == np.arange(n))
    if cols.size == n:
        return a, cost, np.ones(n), None
    position = np.full(n, -1, dtype=np.int64)
    position[cols] = np.arange(cols.size)
    merged = position[rep]  # each column's merged column
    members = np.bincount(merged, minlength=cols.size)
    order = np.argsort(merged, kind="stable")  # members in index order, merged column by merged column
    rank = np.empty(n, dtype=np.int64)  # each column's place among its merged column's members
    rank[order] = np.arange(n) - np.repeat(np.cumsum(members) - members, members)
    upper = members.astype(np.float64)

    def split(d):
        return (rank < np.rint(d)[merged]).astype(np.float64)

    return a[:, cols], np.asarray(cost)[cols], upper, split
