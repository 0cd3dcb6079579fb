"""Variables a fit's rows force to 0, taken out before the solve: the same problem, smaller.

Why: once an outer pass has fixed a margin exactly, every cell in one of its groups whose fixed
total is 0 must be 0 (the cells are nonnegative and add up to 0). At the Puerto Rico households
root the last outer pass holds 2,453,123 variables, 2,215,380 of them in such groups: the
interior point carried them all (each with its bound row), to bring them to 1e-10. Production's
solver takes them out in its presolve (Gurobi fixes the columns of a row whose activity can only
be 0).

Which: a row whose every entry is positive on a variable bounded below by exactly 0, with upper
side 0, forces those variables to 0; so does one whose every entry is negative with lower side 0
(an auxiliary sum -z = 0 once its terms are gone). Rows are read again without the forced
variables until nothing more is forced. The rest of the problem is the same problem: a forced
variable adds 0 to the objective and to every row. A row left with no variable must admit 0,
else the problem has no solution and is handed over as stated (the solver then says so).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .qp import NodeQP


def drop_forced_zeros(problem: NodeQP):
    """(reduced problem, expand): ``problem`` without the variables its rows force to 0 (see the
    module doc), and ``expand(x)`` giving the full solution (those variables exactly 0).
    ``(problem, identity)`` if none is forced."""
    a = sp.csr_matrix(problem.a)
    m, n = a.shape
    if a.nnz == 0:
        return problem, _identity
    row = np.repeat(np.arange(m), np.diff(a.indptr))
    col, val = a.indices, a.data
    entry = val != 0
    row, col, val = row[entry], col[entry], val[entry]
    bounded_at_zero = problem.lower == 0
    zero_hi, zero_lo = problem.hi == 0, problem.lo == 0
    forced = np.zeros(n, dtype=bool)
    while True:  # the entries left are those of variables not (yet) forced
        pos = np.bincount(row[val > 0], minlength=m)
        neg = np.bincount(row[val < 0], minlength=m)
        other = np.bincount(row[~bounded_at_zero[col]], minlength=m)
        forcing = (other == 0) & (((neg == 0) & (pos > 0) & zero_hi) | ((pos == 0) & (neg > 0) & zero_lo))
        new = forcing[row]
        if not new.any():
            break
        forced[col[new]] = True
        live = ~forced[col]
        row, col, val = row[live], col[live], val[live]
    if not forced.any():
        return problem, _identity
    kept_rows = np.bincount(row, minlength=m) > 0
    empty = ~kept_rows
    if np.any(problem.lo[empty] > 0) or np.any(problem.hi[empty] < 0):
        return problem, _identity  # a row no variable can meet: the solver reports it
    live = ~forced
    cols, rows = np.flatnonzero(live), np.flatnonzero(kept_rows)
    reduced = NodeQP(
        hess=problem.hess[cols],
        cost=problem.cost[cols],
        lower=problem.lower[cols],
        upper=problem.upper[cols],
        a=a[rows][:, cols].tocsc(),
        lo=problem.lo[rows],
        hi=problem.hi[rows],
        n_x=int(np.count_nonzero(cols < problem.n_x)),
    )

    return reduced, lambda x: None if x is None else spread(x, live)


def _identity(x):
    return x


def spread(x, live):
    """A solution over the kept variables (``live``: mask of them; None: every one) as one over
    all of them, the forced ones exactly 0."""
    if live is None:
        return x
    out = np.zeros(live.size)
    out[live] = x
    return out


def unforced(variables, fixed) -> tuple:
    """(variables, fixed, live): a node's variables ``(cells, vc, va, vcell)`` and an outer pass's
    fixed margins ``(key, n_keys, value)`` without the variables those margins force to 0 (a
    group whose fixed total is 0), and the mask of the variables kept (None: every one).

    Why before the problem is built: a keyed query's answers are then drawn only for the groups
    of variables in play (node_noise), and the problem is built at its size. Every constraint
    still holds on the kept variables: the fixed margins are sums of integer counts that met
    every row, and a forced variable's count is 0."""
    cells, vc, va, vcell = variables
    live = np.ones(vc.size, dtype=bool)
    for key, _, value in fixed:
        live &= np.asarray(value)[key] != 0
    if live.all():
        return variables, fixed, None
    kept = (cells, vc[live], va[live], vcell[live])
    return kept, [(key[live], n_keys, value) for key, n_keys, value in fixed], live
