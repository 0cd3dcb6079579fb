"""HiGHS as TopDown calls it: one model passed as numpy buffers, the LP, QP and MILP solves of a
node, a QP that hits the iteration cap retried with a small regularization."""

from __future__ import annotations

import os
import sys
import time

import highspy
import numpy as np
import scipy.sparse as sp

from .rows import _f64, _i32


_INT_TOL = 1e-6


_BANNER_SHOWN = False  # HiGHS prints its banner once per process, at the first Highs()


def _new_highs():
    """A Highs object. The first one a process makes prints HiGHS's banner on file descriptor 1,
    which would land inside a command's standard output (a --json document, a release piped on):
    that one is made with descriptor 1 pointing at stderr, where the banner joins the progress."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        return highspy.Highs()
    _BANNER_SHOWN = True
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):
        return highspy.Highs()
    try:
        os.dup2(2, 1)
        return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


# The active-set QP solver can stall or cycle on degenerate fits (measurements with almost no
# noise: every residual and multiplier is 0 at the optimum). A dual tolerance of 1e-5 (on weights
# scaled to at most 1) avoids that at no visible cost in accuracy; if a solve still hits the
# iteration cap it is repeated with a small Hessian regularization.
_QP_ATTEMPTS = (
    {"dual_feasibility_tolerance": 1e-5},
    {"dual_feasibility_tolerance": 1e-5, "qp_regularization_value": 1e-4},
)


def _highs(cost, lower, upper, a: sp.csc_matrix, row_lo, row_hi, hess=None, integer=False, options=None):
    """Solve one LP / QP (diagonal Hessian) / MILP with HiGHS; returns (status, x, seconds).

    ``x`` is None unless the solve is optimal, or (QP only) stopped at its iteration cap with
    a primal feasible iterate.
    """
    h = _new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("random_seed", 0)
    # one thread for every problem: HiGHS starts one thread scheduler per process, with the first
    # run's count, and refuses a later problem asking for another (a MILP asking for 1 after an LP
    # had started 2 ended "not set", and the rounding's MILP steps never ran)
    h.setOptionValue("threads", 1)
    for key, value in (options or {}).items():
        h.setOptionValue(key, value)
    if integer:
        h.setOptionValue("mip_rel_gap", 0.0)
    n, m = len(cost), a.shape[0]
    # the model's arrays handed over as numpy buffers: HighsLp's list attributes convert element
    # by element (seconds for a rounding LP of 1.5 million columns); the same model either way
    f64, i32 = _f64, _i32
    integrality = np.full(n, int(highspy.HighsVarType.kInteger) if integer else 0, dtype=np.int32)
    lp_arrays = (
        f64(cost),
        f64(lower),
        f64(upper),
        f64(row_lo),
        f64(row_hi),
        i32(a.indptr),
        i32(a.indices),
        f64(a.data),
    )
    colwise, minimize = int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMinimize)
    if hess is not None:
        nz = np.flatnonzero(hess)
        start = np.searchsorted(nz, np.arange(n + 1))
        h.setOptionValue("qp_nullspace_limit", max(4000, n + 1))
        h.setOptionValue("qp_iteration_limit", 4 * n + 2000)
        h.passModel(
            n,
            m,
            a.nnz,
            nz.size,
            colwise,
            int(highspy.HessianFormat.kTriangular),
            minimize,
            0.0,
            *lp_arrays,
            i32(start),
            i32(nz),
            f64(np.asarray(hess, dtype=np.float64)[nz]),
            integrality,
        )
    else:
        h.passModel(n, m, a.nnz, colwise, minimize, 0.0, *lp_arrays, integrality)
    t0 = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t0
    status = h.getModelStatus()
    x = None
    if status == highspy.HighsModelStatus.kOptimal:
        x = np.asarray(h.getSolution().col_value, dtype=np.float64)
    elif hess is not None and status == highspy.HighsModelStatus.kIterationLimit:
        sol = h.getSolution()
        if sol.value_valid:
            x = np.asarray(sol.col_value, dtype=np.float64)
            act = a @ x
            tol = 1e-6 * (1.0 + np.abs(np.asarray(row_lo)))
            if np.any(act < row_lo - tol) or np.any(act > row_hi + tol) or np.any(x < lower - 1e-6):
                x = None
    return status, x, seconds
