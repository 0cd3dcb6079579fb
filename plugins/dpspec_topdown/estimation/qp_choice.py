"""The least-squares solver chosen for each node's fit, and the capture of node QPs to .npz.

Why a choice: which interior-point solver is fastest depends on a node's size and shape
(benchmarks/bench_topdown_nodes.py times each installable one on captured nodes; its page is
docs/performance/bench_topdown_nodes.md). By default (``DPSPEC_TOPDOWN_QP`` unset or "auto")
``RULE`` names the solver for a node of its size; "clarabel", or any name in ``SOLVERS``, puts
every node on that one. Clarabel stays the fallback: it is used whenever the chosen solver is not
installed, does not report an optimum, or its answer violates a row or bound by more than the
rounding absorbs (qp.violation_limit). PIQP and PDLP (OR-Tools), the alternatives the rule
names, are therefore required dependencies (pyproject.toml): a release must not depend on what
happens to be installed.

Work done once: the problem is stated once (qp.stated) and each solver's layout is made from
that statement (Clarabel's cones only when Clarabel runs). A PIQP solver set up for one sparsity
pattern is kept (a few per process) and given the next fit of the same pattern by ``update``,
which reuses its symbolic analysis and gives bit for bit the answer of a fresh set-up (the
preconditioner is recomputed: tests/test_topdown_qp_choice.py). Clarabel's ``update`` is not
used: it keeps the first problem's equilibration, so a fit's answer would depend on which fit
the same worker solved before it, and a release on how nodes were spread over workers. Neither
solver takes a warm start (both interior point; Clarabel has no such option, PIQP none in its
Python interface), and a node's outer passes differ in their rows and variables, so there is no
pattern to share between them. PDLP could start from a given point, but only another fit's
answer could give it one, and that would make a fit's answer depend on the order of solving.

Capture: with ``DPSPEC_TOPDOWN_CAPTURE`` naming a directory, every fit this process (or a worker
it starts) solves is also written there as ``node-PID-N.npz``: the problem as stated (NodeQP)
and as Clarabel is handed it (P, q, A, b, cone sizes), with the tolerances taken. It is for the
benchmark only: nothing in a release reads or writes it.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import os
import time

import numpy as np
import scipy.sparse as sp

from dpspec.api import LazyModule

from .isolated import run_isolated
from .pdlp import solve_pdlp
from .qp import Conic, NodeQP, Stated, conic_form, solve_clarabel, stated, violation_limit

# heavy libraries, imported on first use
piqp = LazyModule("dpspec_topdown.estimation.piqp_baseline", "piqp", globals())  # one build on every CPU
proxsuite = LazyModule("proxsuite", "proxsuite", globals())
osqp = LazyModule("osqp", "osqp", globals())
_cholmod = LazyModule("sksparse.cholmod", "_cholmod", globals())

CAPTURE_ENV = "DPSPEC_TOPDOWN_CAPTURE"
CHOICE_ENV = "DPSPEC_TOPDOWN_QP"  # "auto" (default): RULE; "clarabel" or a name in SOLVERS: that one
_COUNTER = itertools.count()

# Clarabel's termination tolerances as configured (its defaults), which the others are held to
TOL_GAP = 1e-8
TOL_FEAS = 1e-8


def capture(problem: NodeQP, form: Conic, where: str | None = None) -> str | None:
    """Write ``problem`` to the capture directory (if one is named); the file's path."""
    where = os.environ.get(CAPTURE_ENV) if where is None else where
    if not where:
        return None
    os.makedirs(where, exist_ok=True)
    path = os.path.join(where, f"node-{os.getpid()}-{next(_COUNTER)}.npz")
    a, p, big = problem.a.tocsc(), form.p.tocsc(), form.a.tocsc()
    tmp = path + ".tmp.npz"
    np.savez_compressed(
        tmp,
        hess=problem.hess,
        cost=problem.cost,
        lower=problem.lower,
        upper=problem.upper,
        lo=problem.lo,
        hi=problem.hi,
        n_x=problem.n_x,
        a_data=a.data,
        a_indices=a.indices,
        a_indptr=a.indptr,
        a_shape=a.shape,
        p_data=p.data,
        p_indices=p.indices,
        p_indptr=p.indptr,
        p_shape=p.shape,
        q=form.q,
        c_data=big.data,
        c_indices=big.indices,
        c_indptr=big.indptr,
        c_shape=big.shape,
        b=form.b,
        n_zero=form.n_zero,
        n_nonneg=form.n_nonneg,
        cols=form.cols,
        folded=form.folded,
        tol_gap=TOL_GAP,
        tol_feas=TOL_FEAS,
        violation_limit=violation_limit(problem),
    )
    os.replace(tmp, path)
    return path


def load(path: str) -> NodeQP:
    """A captured node's problem as stated (the benchmark restates it with ``conic_form``)."""
    z = np.load(path)
    a = sp.csc_matrix((z["a_data"], z["a_indices"], z["a_indptr"]), shape=tuple(z["a_shape"]))
    return NodeQP(
        hess=z["hess"],
        cost=z["cost"],
        lower=z["lower"],
        upper=z["upper"],
        a=a,
        lo=z["lo"],
        hi=z["hi"],
        n_x=int(z["n_x"]),
    )


def rule(form: Conic | Stated, problem: NodeQP | None = None) -> str:
    """The solver RULE names for a node of this size (see the module doc and RULE); with the
    problem as stated, a fit RULE gives PIQP whose cells form a tied grid (``grid``) goes to
    PDLP instead below GRID_UP_TO variables, and to Clarabel from there."""
    n = form.cols.size
    by_size = next((name for upto, name in RULE if n < upto), "clarabel")
    if by_size != "piqp" or problem is None or not grid(problem):
        return by_size
    return "pdlp" if n < GRID_UP_TO else "clarabel"


def grid(problem: NodeQP) -> bool:
    """Whether the cells form a wide grid: each cell tied by two rows over cells alone (a sum
    across the children, the parent's cell; and a row within its child, as where a fit is held
    to an earlier release), the shorter of the two longer than GRID_SIDE terms for the median
    cell, and each child split by GRID_ROWS or more rows within it (the longer rows, counted,
    over the median shorter row's terms, which is the number of children). Such a grid's KKT
    factor fills in (see RULE), which makes every interior-point step dear; PDLP factors nothing
    (pdlp.py). A fit whose children are each held by one row (their total, as P.L. 94's later
    passes are held to the first) is not one. One sort of the rows' entries."""
    a = problem.a.tocsr()
    n_x = problem.n_x
    if n_x == 0 or a.nnz == 0:
        return False
    length = np.diff(a.indptr)
    row = np.repeat(np.arange(a.shape[0]), length)
    on_sums = np.bincount(row[a.indices >= n_x], minlength=a.shape[0])
    entry = (on_sums == 0)[row]  # the entries of rows over cells alone
    col, span, within = a.indices[entry], length[row[entry]], row[entry]
    order = np.lexsort((within, span, col))  # each cell's rows, shortest first
    col, span, within = col[order], span[order], within[order]
    starts = np.flatnonzero(np.r_[True, col[1:] != col[:-1]])
    ends = np.r_[starts[1:], col.size] - 1
    tied = ends > starts  # cells in two rows or more; 0 for the median cell tied one way or none
    side = np.zeros(n_x, dtype=np.int64)
    side[col[starts[tied]]] = span[starts[tied]]
    children = float(np.median(side))
    if children <= GRID_SIDE:
        return False
    return bool(np.unique(within[ends[tied]]).size >= GRID_ROWS * children)


# (variables as stated below, solver): the first entry that matches, for a fit that is not a
# grid (``grid``; grids are below). From the node benchmark (docs/performance/bench_topdown_nodes.md;
# 10k persons, P.L. 94 and DHC persons, and P.L. 94 at 1M, each node's largest and median fit):
# PIQP was the fastest configuration that met the accuracy on all 25 captured fits that are
# not grids (every one below 300,000 variables): P.L. 94's at 10k and 1M, the DHC's county to
# block-group fits, the DHC root at 10k (177k variables; 2026-12-08). On 42 of the 153 fits of
# 8,000-110,000 variables that are not grids in the 1M-person DHC run (place/MCD, tract subset,
# block-group and block fits), drawn evenly by size, PIQP took 0.28-0.77x Clarabel's time, 0.49x summed, every
# violation under 1e-7 of what the rounding absorbs and the objective within 1e-9 of Clarabel's;
# on the 12 P.L. 94 fits of 10,000-15,000 variables in two 1M runs (the bench_scale population's
# state node and tract fits, bench_topdown's county node), 0.23-0.50x (2026-12-07).
# PIQP is slower where its simplicial LDL' meets a factor that fills in: on the 1M-person county
# node of 728k variables it gave no answer in 600 s (issue 46's measurement) and it crashed, a
# segmentation fault in its set-up after 190 CPU-s, on the 1M DHC root of 722,829 variables
# (2026-12-07), so sizes from 300k on stay on Clarabel.
# Grids: the DHC's block fits held to P.L. 94 (each cell in a sum across the children, the
# parent's cell, and in a row within its child, over some tens of children, each child split by
# 9-14 such rows) fill in: CHOLMOD's AMD analysis of the captured KKT patterns gives a factor of
# 5.6-9.2x the matrix's nonzeros there, 0.7-2.4x for every other captured fit of 1,000-30,000
# variables, and PIQP took 1.7-6.4x Clarabel's time on them from 3,300 variables on. Size and
# density do not separate them (variables, rows, nonzeros per row or column, the normal
# equations' nonzeros were tried); ``grid`` does, from the rows alone, cheaply and with no
# solver's analysis: the median cell's shorter cells-only row held 12-27 terms in those block
# fits, 4 in the DHC's block-group fits (four children), 0 in P.L. 94's block fits (each cell
# tied one way only). PIQP's other KKT solvers do not close the gap: on the median block fit its
# condensed forms took 0.30 s (inequalities condensed) and 5.7 s (equalities or both), its
# multistage one 3.0 s, against 0.30 s for its default LDL' and 0.20 s for Clarabel; on a
# block-group fit of 6,986 variables 0.10 s, 53 s and 26 s against the default's 0.10 s
# (2026-12-07). Grids go to PDLP (pdlp.py) below GRID_UP_TO variables: on the DHC block fits held
# to P.L. 94 of 3,500-63,000 variables (the 10k run's eight and 13 of the 1M run's) it took
# 0.31-1.20x Clarabel's time at its tolerance (0.5x on the 10k run's, 0.76x summed over the 1M
# run's), with every violation under 1% of what the rounding absorbs and the objective within
# 1e-8 of Clarabel's; on the fits that are not grids (block-group to county fits) 2-29x.
GRID_SIDE = 8  # terms in the median cell's shorter cells-only row (see grid)
# rows within a child, at least: P.L. 94's fits held to their first pass (each child by its
# total, one row) are grids by GRID_SIDE alone at 1M persons (a state node's 10 or 17 children,
# the tract fits' 14-27): PIQP took 0.10-0.35x PDLP's time on all 29 of two 1M runs, violations
# under 1e-6 of the limit (2026-12-07); the DHC block fits held to P.L. 94, where PDLP is the
# fastest, have 9-14 rows within each child.
GRID_ROWS = 2
# Below 100,000 only, and Clarabel from there: on the local cluster's 1M-person DHC run (10 states
# of one county each) the place/MCD fits, grids by GRID_SIDE alone, of up to 114,157 variables,
# took the level 301.7 s with PDLP against 60.8 s with Clarabel, as PDLP took 4.3-4.8x Clarabel's
# time on the captured fits of that level of 107,214-109,450 variables; the largest block fit
# PDLP sped up there held 84,973. (PIQP was not measured on those fits.)
GRID_UP_TO = 100_000  # variables as stated: grids below go to PDLP, grids from here to Clarabel
RULE: tuple = ((300_000, "piqp"), (float("inf"), "clarabel"))
# variables as stated from which a solver's fit runs in a forked child (isolated.py), so that a
# crash in its native code falls back to Clarabel instead of killing the process: PIQP crashed on
# a fit of 722,829 variables, and the rule gives it fits from 150,000 (the fork costs milliseconds
# against those fits' seconds; the smaller fits it takes were all solved in the node benchmark).
ISOLATE_FROM = {"piqp": 150_000}


def solve(problem: NodeQP):
    """(ok, x, seconds, status, used): the fit by the chosen solver, Clarabel if that one is
    absent, fails or is not accurate enough."""
    st = stated(problem)
    form = conic_form(st) if os.environ.get(CAPTURE_ENV) else None
    if form is not None:
        capture(problem, form)
    choice = os.environ.get(CHOICE_ENV) or "auto"
    name = rule(st, problem) if choice == "auto" else choice
    seconds = 0.0
    if name != "clarabel":
        solver = SOLVERS.get(name)
        if solver is not None:
            try:
                if st.cols.size >= ISOLATE_FROM.get(name, float("inf")):
                    ok, x, sec, status = run_isolated(solver, problem, st)
                else:
                    ok, x, sec, status = solver(problem, st)
            except ImportError:
                ok, x, sec, status = False, None, 0.0, "absent"
            seconds += sec
            if ok:
                if problem.violation(x) <= violation_limit(problem):
                    return True, x, seconds, status, name
    ok, x, sec, status = solve_clarabel(problem, form if form is not None else conic_form(st))
    return ok, x, seconds + sec, status, "clarabel"


def _bounded(form: Conic | Stated):
    """(P upper, q, A_eq, b_eq, G, h, x_l, x_u): ``form`` with its single-variable rows of the
    nonnegative cone turned into bounds, for solvers that take bounds natively (from a
    statement: ``_piqp_inputs``, the same arrays)."""
    if isinstance(form, Stated):
        return _piqp_inputs(form)

    a = form.a.tocsr()
    g = a[form.n_zero :]
    h = form.b[form.n_zero :]
    n = form.cols.size
    count = np.diff(g.indptr)
    single = np.flatnonzero(count == 1)
    col = g.indices[g.indptr[single]]
    val = g.data[g.indptr[single]]
    bound = h[single] / val
    x_l = np.full(n, -np.inf)
    x_u = np.full(n, np.inf)
    up = val > 0
    np.minimum.at(x_u, col[up], bound[up])
    np.maximum.at(x_l, col[~up], bound[~up])
    rest = np.flatnonzero(count != 1)
    return (form.p, form.q, a[: form.n_zero].tocsc(), form.b[: form.n_zero], g[rest].tocsc(), h[rest], x_l, x_u)


def _full(p):
    return (p + sp.triu(p, 1).T).tocsc()


def _result(problem: NodeQP, form: Conic, ok, x_c, seconds, status):
    return ok, (form.expand(x_c) if ok else None), seconds, str(status)


def solve_clarabel_method(problem: NodeQP, form: Conic, method: str):
    """Clarabel as TopDown configures it (qp.solve_clarabel), with the given direct solve method."""
    return solve_clarabel(problem, form, {"direct_solve_method": method})


def _piqp_inputs(st: Stated):
    """What ``_bounded(conic_form(...))`` gives, made from the statement directly (no bound rows
    built to be taken apart again): bit for bit the same arrays (tests/test_topdown_qp_choice.py)."""
    a, lo, hi = st.a, st.lo, st.hi
    n = st.cols.size
    eq = lo == hi
    ineq_hi = np.flatnonzero(~eq & np.isfinite(hi))
    ineq_lo = np.flatnonzero(~eq & np.isfinite(lo))
    rows = [a[ineq_hi], -a[ineq_lo]]
    rhs = [hi[ineq_hi], -lo[ineq_lo]]
    g = sp.vstack(rows).tocsr() if ineq_hi.size or ineq_lo.size else sp.csr_matrix((0, n))
    h = np.concatenate(rhs)
    x_l = np.where(np.isfinite(st.lower), st.lower, -np.inf).astype(np.float64)
    x_u = np.where(np.isfinite(st.upper), st.upper, np.inf).astype(np.float64)
    count = np.diff(g.indptr)
    single = np.flatnonzero(count == 1)  # a one-variable row is a bound, as _bounded takes it
    col = g.indices[g.indptr[single]]
    val = g.data[g.indptr[single]]
    bound = h[single] / val
    up = val > 0
    np.minimum.at(x_u, col[up], bound[up])
    np.maximum.at(x_l, col[~up], bound[~up])
    rest = np.flatnonzero(count != 1)
    return st.p, st.q, a[np.flatnonzero(eq)].tocsc(), hi[eq], g[rest].tocsc(), h[rest], x_l, x_u


_PIQP_KEEP = 4  # PIQP solvers kept per process, by sparsity pattern (a node's passes differ)
_PIQP_UP_TO = 50_000  # variables: larger fits are few and their solvers large; not kept
_piqp_kept: collections.OrderedDict = collections.OrderedDict()


def _pattern(*parts) -> bytes:
    """A digest of sparsity patterns and shapes: equal for fits PIQP can ``update`` to."""
    h = hashlib.blake2b(digest_size=16)
    for m in parts:
        if m is None:
            h.update(b"-")
        elif hasattr(m, "indptr"):
            h.update(np.asarray(m.shape, dtype=np.int64).tobytes())
            h.update(m.indptr.tobytes())
            h.update(m.indices.tobytes())
        else:  # which bounds are finite
            h.update(np.packbits(np.isfinite(m)).tobytes() + np.int64(m.size).tobytes())
    return h.digest()


def solve_piqp(problem: NodeQP, form: Conic | Stated | None = None, reuse: bool = True):
    """PIQP (BSD-2, Schwan et al. 2023), sparse interface, bounds native, Clarabel's tolerances.
    ``reuse``: set up once per sparsity pattern (see the module doc)."""
    form = stated(problem) if form is None else form
    p, q, a, b, g, h, x_l, x_u = _bounded(form)
    has_g = g.shape[0] > 0
    g, h = (g, h) if has_g else (None, None)
    t0 = time.perf_counter()
    key = _pattern(p, a, g, x_l, x_u) if reuse and q.size < _PIQP_UP_TO else None
    solver = _piqp_kept.pop(key, None) if key is not None else None
    if solver is not None:
        solver.update(P=p, c=q, A=a, b=b, G=g, h_u=h, x_l=x_l, x_u=x_u)
    else:
        solver = piqp.SparseSolver()
        solver.settings.verbose = False
        solver.settings.eps_abs = TOL_FEAS
        solver.settings.eps_rel = TOL_GAP
        solver.setup(p, q, a, b, g, None, h, x_l, x_u)
    status = solver.solve()
    seconds = time.perf_counter() - t0
    x = np.array(solver.result.x)
    if key is not None:
        _piqp_kept[key] = solver
        while len(_piqp_kept) > _PIQP_KEEP:
            _piqp_kept.popitem(last=False)
    return _result(problem, form, status == piqp.PIQP_SOLVED, x, seconds, status)


def _proxsuite_setup(form: Conic):
    p, q, a, b, g, h, x_l, x_u = _bounded(form)
    n = q.size
    has = np.isfinite(x_l) | np.isfinite(x_u)
    box = sp.csc_matrix(
        (np.ones(int(has.sum())), (np.arange(int(has.sum())), np.flatnonzero(has))), shape=(int(has.sum()), n)
    )
    c = sp.vstack([g, box]).tocsc()
    big = 1e20
    lo = np.concatenate([np.full(g.shape[0], -big), np.where(np.isfinite(x_l[has]), x_l[has], -big)])
    hi = np.concatenate([h, np.where(np.isfinite(x_u[has]), x_u[has], big)])
    return _full(p), q, a, b, c, lo, hi


def solve_proxsuite(problem: NodeQP, form: Conic, warm=None):
    """proxsuite's sparse ProxQP (BSD-2, Bambade et al. 2022), Clarabel's tolerances; ``warm``
    (x, y, z): a warm start."""
    h, q, a, b, c, lo, hi = _proxsuite_setup(form)
    t0 = time.perf_counter()
    qp = proxsuite.proxqp.sparse.QP(q.size, a.shape[0], c.shape[0])
    qp.settings.eps_abs = TOL_FEAS
    qp.settings.eps_rel = 0.0
    qp.settings.verbose = False
    if warm is not None:
        qp.settings.initial_guess = proxsuite.proxqp.InitialGuess.WARM_START
    qp.init(h, q, a if a.shape[0] else None, b if a.shape[0] else None, c, lo, hi)
    if warm is None:
        qp.solve()
    else:
        qp.solve(*warm)
    seconds = time.perf_counter() - t0
    status = qp.results.info.status
    ok = status == proxsuite.proxqp.PROXQP_SOLVED
    return _result(problem, form, ok, np.array(qp.results.x), seconds, status)


def _osqp(form: Conic, eps: float):
    p, q, a, b, g, h, x_l, x_u = _bounded(form)
    n = q.size
    has = np.isfinite(x_l) | np.isfinite(x_u)
    box = sp.csc_matrix(
        (np.ones(int(has.sum())), (np.arange(int(has.sum())), np.flatnonzero(has))), shape=(int(has.sum()), n)
    )
    big = sp.vstack([a, g, box]).tocsc()
    lo = np.concatenate([b, np.full(g.shape[0], -np.inf), x_l[has]])
    hi = np.concatenate([b, h, x_u[has]])
    t0 = time.perf_counter()
    solver = osqp.OSQP()
    solver.setup(p, q, big, lo, hi, eps_abs=eps, eps_rel=eps, verbose=False, polishing=True, max_iter=200_000)
    res = solver.solve()
    return res, time.perf_counter() - t0, (a.shape[0], g.shape[0])


def solve_osqp(problem: NodeQP, form: Conic):
    """OSQP (Apache-2.0, Stellato et al. 2020) at 1e-5: first-order, to be a warm start."""
    res, seconds, _ = _osqp(form, 1e-5)
    ok = str(res.info.status).lower().startswith("solved")
    return _result(problem, form, ok, np.array(res.x), seconds, res.info.status)


def solve_osqp_proxsuite(problem: NodeQP, form: Conic):
    """OSQP at 1e-5, then proxsuite warm-started from its primal and dual answer."""
    res, seconds, (m_eq, m_g) = _osqp(form, 1e-5)
    y = np.asarray(res.y, dtype=np.float64)
    ok, x, sec, status = solve_proxsuite(problem, form, warm=(np.array(res.x), y[:m_eq], y[m_eq:]))
    return ok, x, seconds + sec, status


def _standard(problem: NodeQP):
    """(h, c, A, b, l, u, n): ``problem`` with equality rows only (a slack per inequality row,
    bounded as the row was), the Hessian still diagonal: what the normal equations need."""
    a = problem.a.tocsr()
    eq = problem.lo == problem.hi
    ineq = np.flatnonzero(~eq)
    n, k = problem.n_var, ineq.size
    slack = sp.csr_matrix((-np.ones(k), (ineq, np.arange(k))), shape=(a.shape[0], k))
    big = sp.hstack([a, slack]).tocsc()
    b = np.where(eq, problem.hi, 0.0)
    h = np.concatenate([problem.hess, np.zeros(k)])
    c = np.concatenate([problem.cost, np.zeros(k)])
    lo = np.concatenate([problem.lower, problem.lo[ineq]])
    hi = np.concatenate([problem.upper, problem.hi[ineq]])
    return h.astype(np.float64), c.astype(np.float64), big, b.astype(np.float64), lo, hi, n


def solve_cholmod_ipm(problem: NodeQP, form: Conic | None = None, tol: float = TOL_GAP, max_iter: int = 100):
    """A primal-dual interior point (Mehrotra predictor-corrector) whose Newton step is a
    supernodal CHOLMOD Cholesky of the normal equations A D^-1 A' (scikit-sparse): the
    Hessian is diagonal once inequality rows get slacks, so D is too. The symbolic analysis is
    done once per problem; each step only refactors numerically."""
    t0 = time.perf_counter()
    h, c, a, b, l, u, n_x = _standard(problem)
    m, n = a.shape
    at = a.T.tocsc()
    has_l, has_u = np.isfinite(l), np.isfinite(u)
    l0, u0 = np.where(has_l, l, 0.0), np.where(has_u, u, 0.0)
    x = np.where(has_l & has_u, 0.5 * (l0 + u0), np.where(has_l, l0 + 1.0, np.where(has_u, u0 - 1.0, 0.0)))
    zl, zu = has_l.astype(float), has_u.astype(float)
    y = np.zeros(m)
    n_b = max(1, int(has_l.sum() + has_u.sum()))
    scale_b, scale_c = 1.0 + np.max(np.abs(b), initial=0.0), 1.0 + np.max(np.abs(c), initial=0.0)
    reg = 1e-10
    factor = None
    status = "MaxIterations"
    for it in range(max_iter):
        w = np.where(has_l, x - l0, 1.0)
        v = np.where(has_u, u0 - x, 1.0)
        rd = h * x + c - at @ y - zl + zu
        rp = b - a @ x
        mu = (np.dot(w[has_l], zl[has_l]) + np.dot(v[has_u], zu[has_u])) / n_b
        obj = 0.5 * np.dot(h * x, x) + np.dot(c, x)
        if (
            np.max(np.abs(rp), initial=0.0) <= tol * scale_b
            and np.max(np.abs(rd), initial=0.0) <= tol * scale_c
            and mu * n_b <= tol * (1.0 + abs(obj))
        ):
            status = "Solved"
            break
        d = h + np.where(has_l, zl / w, 0.0) + np.where(has_u, zu / v, 0.0) + reg
        dinv = 1.0 / d
        scaled = a @ sp_diag(np.sqrt(dinv))
        try:
            if factor is None:
                factor = _cholmod.analyze_AAt(scaled, mode="supernodal")
            factor.cholesky_AAt_inplace(scaled, beta=1e-12 * scale_b)
        except _cholmod.CholmodError as exc:
            status = f"factorization: {exc}"
            break

        def newton(rl, ru):
            r1 = -rd + np.where(has_l, rl / w, 0.0) - np.where(has_u, ru / v, 0.0)
            dy = factor(rp - a @ (dinv * r1))
            dx = dinv * (r1 + at @ dy)
            dzl = np.where(has_l, (rl - zl * dx) / w, 0.0)
            dzu = np.where(has_u, (ru + zu * dx) / v, 0.0)
            return dx, dy, dzl, dzu

        def step(dx, dzl, dzu):
            ratios = [1.0]
            for val, dv, mask in ((w, dx, has_l), (v, -dx, has_u), (zl, dzl, has_l), (zu, dzu, has_u)):
                neg = mask & (dv < 0)
                if neg.any():
                    ratios.append(float(np.min(-val[neg] / dv[neg])))
            return min(ratios)

        dx, dy, dzl, dzu = newton(-w * zl * has_l, -v * zu * has_u)
        alpha = step(dx, dzl, dzu)
        mu_aff = (
            np.dot((w + alpha * dx)[has_l], (zl + alpha * dzl)[has_l])
            + np.dot((v - alpha * dx)[has_u], (zu + alpha * dzu)[has_u])
        ) / n_b
        sigma = (mu_aff / mu) ** 3 if mu > 0 else 0.0
        rl = (sigma * mu - w * zl - dx * dzl) * has_l
        ru = (sigma * mu - v * zu + dx * dzu) * has_u
        dx, dy, dzl, dzu = newton(rl, ru)
        alpha = min(1.0, 0.99 * step(dx, dzl, dzu))
        x, y, zl, zu = x + alpha * dx, y + alpha * dy, zl + alpha * dzl, zu + alpha * dzu
    seconds = time.perf_counter() - t0
    ok = status == "Solved"
    return ok, (x[:n_x].copy() if ok else None), seconds, f"{status} ({it + 1} iterations)"


def sp_diag(values):
    return sp.diags(values, format="csc")


SOLVERS = {"piqp": solve_piqp, "pdlp": solve_pdlp, "proxsuite": solve_proxsuite, "cholmod": solve_cholmod_ipm}
