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
very same numbers.
"""
from __future__ import annotations

import time

import attrs
import numpy as np
import scipy.sparse as sp

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


def solve_clarabel(problem: NodeQP):
    """(ok, x, seconds, status): Clarabel's interior-point solution of ``problem``."""
    import clarabel

    n = problem.n_var
    a = problem.a.tocsr()  # rows are picked below: cheap in CSR, slow in CSC
    lo, hi = np.asarray(problem.lo, dtype=np.float64), np.asarray(problem.hi, dtype=np.float64)
    eq = lo == hi
    blocks, rhs, cones = [], [], []
    if eq.any():  # a x + s = b, s = 0
        blocks.append(a[np.flatnonzero(eq)])
        rhs.append(hi[eq])
        cones.append(clarabel.ZeroConeT(int(eq.sum())))
    ineq_hi = ~eq & np.isfinite(hi)
    ineq_lo = ~eq & np.isfinite(lo)
    lb = np.isfinite(problem.lower)
    ub = np.isfinite(problem.upper)
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
        nonneg_b.append(-problem.lower[lb])
    if ub.any():  # x <= upper
        idx = np.flatnonzero(ub)
        nonneg_a.append(sp.csc_matrix((np.ones(idx.size), (np.arange(idx.size), idx)), shape=(idx.size, n)))
        nonneg_b.append(problem.upper[ub])
    if nonneg_a:
        blocks.extend(nonneg_a)
        rhs.extend(nonneg_b)
        cones.append(clarabel.NonnegativeConeT(int(sum(b.size for b in nonneg_b))))
    big = sp.vstack(blocks).tocsc() if blocks else sp.csc_matrix((0, n))
    big.sort_indices()
    p = sp.diags(np.asarray(problem.hess, dtype=np.float64), format="csc")
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_threads = 1  # nodes run in parallel processes; one thread each
    t0 = time.perf_counter()
    solver = clarabel.DefaultSolver(p, np.asarray(problem.cost, dtype=np.float64), big,
                                    np.concatenate(rhs) if rhs else np.zeros(0), cones, settings)
    sol = solver.solve()
    seconds = time.perf_counter() - t0
    status = str(sol.status)
    ok = status in _OK
    x = np.asarray(sol.x, dtype=np.float64) if ok else None
    if ok and problem.violation(x) > 1e-5 * (1.0 + float(np.max(np.abs(problem.hi[np.isfinite(problem.hi)]), initial=0.0))):
        ok, x = False, None
    return ok, x, seconds, status
