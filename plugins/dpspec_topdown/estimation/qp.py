"""A node's weighted least-squares problem and its interior-point solve (Clarabel).

Why interior point: the fit is a sparse convex QP with a diagonal Hessian and many equality
rows (parent sums, invariants, auxiliary marginal sums). An active-set method (HiGHS's QP)
moves one constraint at a time and needs a number of iterations that grows with the size of the
node: tens of CPU seconds on a state's county node. An interior-point method needs a few dozen
Newton steps whatever the size, each one a sparse factorization. Clarabel (Apache-2.0, Goulart
& Chen 2024) is such a solver with prebuilt wheels. Its answer is strictly interior (zeros come
out as 1e-10), which the rounding step absorbs; when it does not reach a solution the caller
falls back to HiGHS.

The problem is stated once (``NodeQP``) so both solvers, the benchmark and the tests solve the
very same numbers. What Clarabel is handed is the same problem stated more cheaply
(``_Defined``): an auxiliary sum z = a x of nonnegative variables needs no bound of its own
(z >= 0 follows), and one over at most ``_FOLD`` variables is substituted into the objective
(1/2 h z^2 + c z becomes 1/2 h (a x)^2 + c a x, a small block of P) instead of being a
variable with an equality row. Fewer cone rows take the interior-point method fewer steps, and
the KKT system it factors at each step is smaller (measured on DHC nodes,
docs/performance/bench_topdown_dhc.md).
"""

from __future__ import annotations

import time

import attrs
import numpy as np
import scipy.sparse as sp

from dpspec.api import LazyModule

# heavy libraries, imported on first use
clarabel = LazyModule("clarabel", "clarabel", globals())

_OK = ("Solved", "AlmostSolved")


@attrs.frozen
class NodeQP:
    """minimize 1/2 x' diag(hess) x + cost' x  s.t.  lo <= a x <= hi,  lower <= x <= upper."""

    hess: np.ndarray
    cost: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    a: sp.csc_matrix
    lo: np.ndarray
    hi: np.ndarray
    n_x: int  # the first n_x variables are the histogram cells; the rest are auxiliary sums

    @property
    def n_var(self) -> int:
        return self.hess.size

    def objective(self, x: np.ndarray) -> float:
        return float(0.5 * np.dot(self.hess * x, x) + np.dot(self.cost, x))

    def violation(self, x: np.ndarray) -> float:
        """Largest violation of any row or bound (0 for a feasible x)."""
        act = self.a @ x
        worst = [0.0]
        if act.size:
            worst.append(float(np.max(np.maximum(self.lo - act, act - self.hi))))
        worst.append(float(np.max(np.maximum(self.lower - x, x - self.upper), initial=0.0)))
        return max(worst)


_FOLD = 4  # an auxiliary sum of at most this many variables is substituted into P
# Large fits (at least _LARGE_FROM variables) are solved first with Ruiz equilibration's scales
# kept within [1e-2, 1e2] (Clarabel's default 1e-4..1e4: a coarse margin's row of many sums is
# then scaled far less, and DHC nodes took fewer steps, 29 -> 22 at a root, 16 -> 11 in a block
# group) and without iterative refinement of each Newton step (a quarter of a step's time; the
# termination tolerances are the same, and they decide). Should that solve stop short of
# "Solved", the defaults are tried before HiGHS. Small fits (milliseconds) keep the defaults,
# and so the releases pinned before.
_LARGE_FIT = {"equilibrate_min_scaling": 1e-2, "equilibrate_max_scaling": 1e2, "iterative_refinement_enable": False}
_LARGE_FROM = 10_000


@attrs.frozen
class _Defined:
    """The auxiliary sums of a NodeQP: columns z defined by one zero equality row z = a x.

    ``implied``: columns whose lower bound 0 follows from their row (every term a positive
    multiple of a variable bounded below by 0, or of an implied column defined before it);
    ``folded``: implied columns of at most ``_FOLD`` terms and no upper bound, substituted
    into the objective; ``rows``: each folded column's defining row."""

    implied: np.ndarray  # (n_var,) bool
    folded: np.ndarray  # column indices
    rows: np.ndarray  # their defining rows


def _defined(problem: NodeQP, a_csr: sp.csr_matrix) -> _Defined:
    n, m = problem.n_var, a_csr.shape[0]
    a = a_csr.tocoo()
    r, c, v = a.row, a.col, a.data
    zero_eq = (problem.lo == problem.hi) & (problem.hi == 0)
    # a row defines a column: a zero equality row whose only negative entry is -1 on a column
    # bounded below by 0 (that column may be a term of other rows: a sum of sums)
    neg_per_row = np.bincount(r[v < 0], minlength=m)
    entry = (v == -1.0) & zero_eq[r] & (neg_per_row[r] == 1) & (problem.lower[c] == 0)
    defines = np.full(m, -1, dtype=np.int64)  # row -> the column it defines
    defines[r[entry]] = c[entry]
    defining = np.full(n, -1, dtype=np.int64)  # column -> one row that defines it
    defining[defines[defines >= 0]] = np.flatnonzero(defines >= 0)
    rows = np.flatnonzero((defines >= 0) & (defining[np.maximum(defines, 0)] == np.arange(m)))
    is_row = np.zeros(m, dtype=bool)
    is_row[rows] = True
    terms = is_row[r] & (v > 0)
    t_row, t_col = r[terms], c[terms]
    # implied bounds, in rounds: a term counts once it is a nonnegative variable whose bound is
    # kept, or a column already implied (so a cycle of definitions never drops its bounds)
    known = (problem.lower >= 0) & (defining < 0)
    implied = np.zeros(n, dtype=bool)
    open_rows = rows
    while open_rows.size:
        bad = np.bincount(t_row[~known[t_col]], minlength=m) > 0
        done = open_rows[~bad[open_rows]]
        if done.size == 0:
            break
        implied[defines[done]] = known[defines[done]] = True
        open_rows = np.setdiff1d(open_rows, done)
    length = np.bincount(t_row, minlength=m)
    col_count = np.bincount(c, minlength=n)
    fold_rows = rows[
        (length[rows] <= _FOLD)
        & implied[defines[rows]]
        & (col_count[defines[rows]] == 1)
        & ~np.isfinite(problem.upper[defines[rows]])
    ]
    return _Defined(implied, defines[fold_rows], fold_rows)


@attrs.frozen
class Stated:
    """A NodeQP with its auxiliary sums stated cheaply (``_Defined``), before any solver's own
    layout: minimize 1/2 x' p x + q' x (``p`` upper triangular) s.t. lo <= a x <= hi,
    lower <= x <= upper (lower -inf where a sum implies it); ``cols``, ``folded`` and ``sums``
    map its x back to the problem's (``expand``). Clarabel's cones (``conic_form``) and PIQP's
    bounds (qp_choice) are both laid out from it, so neither restates the other's."""

    p: sp.csc_matrix
    q: np.ndarray
    a: sp.csr_matrix  # the rows kept, over the kept columns
    lo: np.ndarray
    hi: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    cols: np.ndarray
    folded: np.ndarray
    sums: sp.csr_matrix
    n_all: int

    @property
    def eq(self) -> np.ndarray:
        return self.lo == self.hi

    def expand(self, x_stated) -> np.ndarray:
        x = np.zeros(self.n_all)
        x[self.cols] = np.asarray(x_stated, dtype=np.float64)
        x[self.folded] = self.sums @ x[self.cols]
        return x


def stated(problem: NodeQP) -> Stated:
    """``problem`` with its auxiliary sums stated cheaply (see the module doc and ``_Defined``)."""
    n_all = problem.n_var
    a_all = problem.a.tocsr()  # rows are picked below: cheap in CSR, slow in CSC
    defined = _defined(problem, a_all)
    kept_rows = np.ones(a_all.shape[0], dtype=bool)
    kept_rows[defined.rows] = False
    kept_cols = np.ones(n_all, dtype=bool)
    kept_cols[defined.folded] = False
    cols = np.flatnonzero(kept_cols)
    sums = a_all[defined.rows]  # each folded column's row: -1 on the column, its terms elsewhere
    sums = sums[:, cols]  # the terms, in the kept columns (the folded column itself drops out)
    h, c = problem.hess[defined.folded], problem.cost[defined.folded]
    p = (sp.diags(np.asarray(problem.hess[cols], dtype=np.float64)) + sums.T @ sp.diags(h) @ sums).tocsc()
    cost = np.asarray(problem.cost[cols], dtype=np.float64) + sums.T @ c
    a = a_all[np.flatnonzero(kept_rows)][:, cols]
    p = sp.triu(p, format="csc")
    p.sort_indices()
    return Stated(
        p,
        np.asarray(cost, dtype=np.float64),
        a,
        np.asarray(problem.lo[kept_rows], dtype=np.float64),
        np.asarray(problem.hi[kept_rows], dtype=np.float64),
        np.where(defined.implied[cols], -np.inf, problem.lower[cols]),
        problem.upper[cols],
        cols,
        defined.folded,
        sums,
        n_all,
    )


@attrs.frozen
class Conic:
    """A NodeQP as Clarabel is handed it: minimize 1/2 x' p x + q' x s.t. a x + s = b, s in
    {0}^n_zero x R+^n_nonneg (``p`` upper triangular); ``cols``, ``folded`` and ``sums`` map
    its x back to the problem's (``expand``)."""

    p: sp.csc_matrix
    q: np.ndarray
    a: sp.csc_matrix
    b: np.ndarray
    n_zero: int
    n_nonneg: int
    cols: np.ndarray
    folded: np.ndarray
    sums: sp.csr_matrix
    n_all: int

    def expand(self, x_conic) -> np.ndarray:
        x = np.zeros(self.n_all)
        x[self.cols] = np.asarray(x_conic, dtype=np.float64)
        x[self.folded] = self.sums @ x[self.cols]
        return x


def conic_form(problem: NodeQP | Stated) -> Conic:
    """``problem`` stated for Clarabel, the auxiliary sums stated cheaply (``stated``)."""
    st = problem if isinstance(problem, Stated) else stated(problem)
    a, lo, hi, lower, upper = st.a, st.lo, st.hi, st.lower, st.upper
    n = st.cols.size
    eq = lo == hi
    blocks, rhs, n_zero = [], [], 0
    if eq.any():  # a x + s = b, s = 0
        blocks.append(a[np.flatnonzero(eq)])
        rhs.append(hi[eq])
        n_zero = int(eq.sum())
    ineq_hi = ~eq & np.isfinite(hi)
    ineq_lo = ~eq & np.isfinite(lo)
    lb = np.isfinite(lower)
    ub = np.isfinite(upper)
    nonneg_a, nonneg_b = [], []
    if ineq_hi.any():  # a x <= hi
        nonneg_a.append(a[np.flatnonzero(ineq_hi)])
        nonneg_b.append(hi[ineq_hi])
    if ineq_lo.any():  # -a x <= -lo
        nonneg_a.append(-a[np.flatnonzero(ineq_lo)])
        nonneg_b.append(-lo[ineq_lo])
    if lb.any():  # -x <= -lower
        idx = np.flatnonzero(lb)
        nonneg_a.append(sp.csc_matrix((-np.ones(idx.size), (np.arange(idx.size), idx)), shape=(idx.size, n)))
        nonneg_b.append(-lower[lb])
    if ub.any():  # x <= upper
        idx = np.flatnonzero(ub)
        nonneg_a.append(sp.csc_matrix((np.ones(idx.size), (np.arange(idx.size), idx)), shape=(idx.size, n)))
        nonneg_b.append(upper[ub])
    blocks.extend(nonneg_a)
    rhs.extend(nonneg_b)
    big = sp.vstack(blocks).tocsc() if blocks else sp.csc_matrix((0, n))
    big.sort_indices()
    b = np.concatenate(rhs) if rhs else np.zeros(0)
    return Conic(
        st.p,
        st.q,
        big,
        b,
        n_zero,
        int(sum(x.size for x in nonneg_b)),
        st.cols,
        st.folded,
        st.sums,
        st.n_all,
    )


def violation_limit(problem: NodeQP) -> float:
    """The largest row or bound violation a fit may have to be taken (relative to the largest
    finite row bound): what the rounding absorbs."""
    return 1e-5 * (1.0 + float(np.max(np.abs(problem.hi[np.isfinite(problem.hi)]), initial=0.0)))


def solve_clarabel(problem: NodeQP, form: Conic | None = None, always: dict | None = None):
    """(ok, x, seconds, status): Clarabel's interior-point solution of ``problem``, stated as
    ``conic_form`` states it; x is of the problem as stated, every auxiliary sum in it.
    ``always``: settings every try takes (the node benchmark's direct solve methods)."""
    form = conic_form(problem) if form is None else form
    p, cost, big, b, n = form.p, form.q, form.a, form.b, form.cols.size
    cones = ([clarabel.ZeroConeT(form.n_zero)] if form.n_zero else []) + (
        [clarabel.NonnegativeConeT(form.n_nonneg)] if form.n_nonneg else []
    )
    # (settings, statuses taken): a large fit's first try must reach full accuracy ("Solved")
    tried = ((_LARGE_FIT, ("Solved",)), ({}, _OK)) if n >= _LARGE_FROM else (({}, _OK),)
    seconds, limit = 0.0, violation_limit(problem)
    for extra, taken in tried:
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        settings.max_threads = 1  # nodes run in parallel processes; one thread each
        for key, value in {**(always or {}), **extra}.items():
            setattr(settings, key, value)
        t0 = time.perf_counter()
        sol = clarabel.DefaultSolver(p, cost, big, b, cones, settings).solve()
        seconds += time.perf_counter() - t0
        status = str(sol.status)
        ok, x = status in taken, None
        if ok:
            x = form.expand(sol.x)
            if problem.violation(x) > limit:
                ok, x = False, None
        if ok:
            break
    return ok, x, seconds, status
