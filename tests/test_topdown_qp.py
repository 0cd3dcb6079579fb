"""The interior-point fit (Clarabel) and HiGHS's active-set QP agree on real node problems.

The problems are captured from a TopDown run on synthetic data with the production strategy,
so they have the production structure (auxiliary marginal sums, parent sums, invariants)."""

import numpy as np
import pytest

from dpspec_topdown.estimation import highs, postprocess
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import RunContext
from dpspec_topdown.estimation.qp import solve_clarabel
from dpspec_topdown.synthetic import (
    LEVELS,
    PL94_VARIABLES,
    PRODUCTION_LEVEL_SHARES,
    PRODUCTION_RHO,
    generate_population,
    pl94_strategy,
)


@pytest.fixture(scope="module")
def captured():
    problems = []
    build = postprocess.build_node_qp

    def capture(task, queries, variables=None):
        problem = build(task, queries, variables)
        problems.append(problem)
        return problem

    postprocess.build_node_qp = capture
    try:
        persons = generate_population(4000, 160, seed=5)
        result = run_topdown(
            persons,
            Design(
                ["nation"] + LEVELS,
                PL94_VARIABLES,
                pl94_strategy(tuple(PRODUCTION_LEVEL_SHARES)),
                PRODUCTION_RHO,
                PRODUCTION_LEVEL_SHARES,
                "hamming",
                [("state", ())],
            ),
            RunContext(np.random.default_rng(3), workers=1),
        )
    finally:
        postprocess.build_node_qp = build
    return problems, result


def test_every_node_was_fitted_by_the_interior_point_solver(captured):
    problems, result = captured
    assert len(problems) >= 5  # one per parent unit above the blocks
    levels = result.timings["levels"]
    assert sum(t.get("qp_highs_fallback_nodes", 0) for t in levels.values()) == 0


@pytest.mark.parametrize("narrow", [False, True])
def test_clarabel_and_highs_agree_on_captured_nodes(captured, monkeypatch, narrow):
    problems, _ = captured
    if narrow:  # the settings large fits get, on these small ones
        from dpspec_topdown.estimation import qp

        monkeypatch.setattr(qp, "_LARGE_FROM", 0)
    largest = sorted(problems, key=lambda p: -p.n_var)[:8]
    assert largest[0].n_var > 500
    for problem in largest:
        ok, x_ip, _, status = solve_clarabel(problem)
        assert ok, status
        x_as, optimal, _, used, _ = postprocess.solve_qp(problem, solver="highs")
        assert used == "highs" and optimal
        assert problem.violation(x_ip) < 1e-6 and problem.violation(x_as) < 1e-6
        f_ip, f_as = problem.objective(x_ip), problem.objective(x_as)
        scale = 1.0 + abs(f_as)
        assert abs(f_ip - f_as) <= 1e-6 * scale, (problem.n_var, f_ip, f_as)
        # and the fitted histograms differ by far less than one person (the objective is flat in
        # directions that only low-weight queries see, and HiGHS stops at a dual tolerance of 1e-5)
        assert np.max(np.abs(x_ip[: problem.n_x] - x_as[: problem.n_x])) < 0.05


def test_a_failed_interior_point_solve_falls_back_to_highs(captured, monkeypatch):
    problems, _ = captured
    problem = max(problems, key=lambda p: p.n_var)
    from dpspec_topdown.estimation import qp_choice

    monkeypatch.setattr(qp_choice, "solve_clarabel", lambda p, form=None: (False, None, 0.0, "MaxIterations"))
    monkeypatch.setitem(qp_choice.SOLVERS, "piqp", lambda p, form=None: (False, None, 0.0, "MaxIterations"))
    x, optimal, _, used, _ = postprocess.solve_qp(problem)
    assert used == "highs" and optimal and problem.violation(x) < 1e-6


# --- the formulation: nested sums, shared sums, implied bounds, sums folded into P ----------------


def _node(rng, n_children=3):
    """A node over 24 cells (a, b, c) in 2 x 3 x 4 and queries: a (coarse), a * b (finer, nests
    in a), b * a (the same groups as a * b, another numbering), c (crosses the others) and the
    detailed histogram."""
    from dpspec_topdown.estimation.postprocess import MeasuredQuery, NodeTask

    cell = np.arange(24)
    a, b, c = cell // 12, (cell // 4) % 3, cell % 4
    queries = [
        MeasuredQuery("a", a, 2, 0.5),
        MeasuredQuery("a * b", a * 3 + b, 6, 1.0),
        MeasuredQuery("b * a", b * 2 + a, 6, 0.25),
        MeasuredQuery("c", c, 4, 0.5),
        MeasuredQuery("detailed", cell, 24, 2.0),
    ]
    parent = rng.integers(0, 4, size=24)
    answers = tuple(rng.integers(-2, 9, size=(n_children, q.n_groups)).astype(np.int64) for q in queries)
    task = NodeTask(key=0, n_children=n_children, n_cells=24, parent=parent, measurements=answers, constraints=())
    return task, queries


def _with_sums(problem, x):
    """The full variable vector: x and the sums its rows define."""
    import scipy.sparse.linalg as sla

    n_x = problem.n_x
    a = problem.a.tocsr()
    zcols = np.arange(n_x, problem.n_var)
    rows = np.flatnonzero(np.asarray((a[:, zcols] != 0).sum(axis=1)).ravel() > 0)
    z = sla.spsolve(a[rows][:, zcols].tocsc(), -(a[rows][:, :n_x] @ x))
    return np.concatenate([x, np.atleast_1d(z)])


def test_nested_and_shared_sums_state_the_same_least_squares():
    rng = np.random.default_rng(11)
    task, queries = _node(rng)
    variables = postprocess._node_variables(task)
    cells, vc, va, vcell = variables
    problem = postprocess.build_node_qp(task, queries, variables)
    # a's sums add a * b's sums, not cells; b * a shares a * b's sums; c adds cells
    n_multi = {q.name: np.count_nonzero(np.bincount(vc * q.n_groups + q.groups[vcell]) > 1) for q in queries}
    assert problem.n_var == problem.n_x + n_multi["a"] + n_multi["a * b"] + n_multi["c"]
    plain_terms = sum(
        np.sum(np.bincount(vc * q.n_groups + q.groups[vcell])[vc * q.n_groups + q.groups[vcell]] > 1)
        for q in queries[:4]
    )
    assert problem.a.nnz - (problem.n_var - problem.n_x) - problem.n_x < plain_terms - problem.n_x
    wmax = max(q.weight for q in queries)
    for _ in range(3):
        x = rng.uniform(0, 3, size=problem.n_x)
        direct = 0.0
        for q, y in zip(queries, task.measurements):
            key = vc * q.n_groups + q.groups[vcell]
            sums = np.bincount(key, weights=x, minlength=y.size)
            seen = np.bincount(key, minlength=y.size) > 0
            yy = y.ravel().astype(float)
            direct += q.weight / wmax * np.sum(((sums - yy) ** 2 - yy**2)[seen])
        assert problem.objective(_with_sums(problem, x)) == pytest.approx(direct, rel=1e-12, abs=1e-9)


def test_the_fit_of_the_nested_formulation_is_the_least_squares_optimum():
    rng = np.random.default_rng(12)
    task, queries = _node(rng, n_children=4)
    variables = postprocess._node_variables(task)
    problem = postprocess.build_node_qp(task, queries, variables)
    ok, x, _, status = solve_clarabel(problem)
    assert ok, status
    x_as, optimal, _, _, _ = postprocess.solve_qp(problem, solver="highs")
    assert optimal
    assert problem.objective(x) == pytest.approx(problem.objective(x_as), rel=1e-7, abs=1e-7)
    assert problem.violation(x) < 1e-6
    # the detailed query makes the fit strictly convex in the cells: one optimum
    assert np.max(np.abs(x[: problem.n_x] - x_as[: problem.n_x])) < 1e-3


def test_a_sum_keeps_its_bound_unless_its_terms_imply_it():
    import scipy.sparse as sp

    from dpspec_topdown.estimation.qp import NodeQP, _defined

    # columns: x0 >= 0, x1 free, z2 = x0 + x0', z3 = x0 + x1, z4 = z5 + x0, z5 = z4 + x0 (a cycle),
    # z6 = z2 + x0 (a sum of an implied sum); x0' is column 7 >= 0
    rows = [(2, {0: 1, 7: 1}), (3, {0: 1, 1: 1}), (4, {5: 1, 0: 1}), (5, {4: 1, 0: 1}), (6, {2: 1, 0: 1})]
    r, c, v = [], [], []
    for i, (col, terms) in enumerate(rows):
        r += [i] * (len(terms) + 1)
        c += [col, *terms]
        v += [-1.0, *terms.values()]
    a = sp.csc_matrix((v, (r, c)), shape=(len(rows), 8))
    lower = np.zeros(8)
    lower[1] = -np.inf
    problem = NodeQP(
        hess=np.ones(8),
        cost=np.zeros(8),
        lower=lower,
        upper=np.full(8, np.inf),
        a=a,
        lo=np.zeros(len(rows)),
        hi=np.zeros(len(rows)),
        n_x=2,
    )
    d = _defined(problem, a.tocsr())
    assert list(np.flatnonzero(d.implied)) == [2, 6]
    assert 2 not in d.folded  # a term of another row: substituting it would drop that row's column
    assert list(d.folded) == [6]
    ok, x, _, status = solve_clarabel(problem)
    assert ok, status
    assert problem.violation(x) < 1e-7


def test_a_large_fit_that_stops_short_is_solved_again_with_the_defaults(captured, monkeypatch):
    from dpspec_topdown.estimation import qp

    problems, _ = captured
    problem = max(problems, key=lambda p: p.n_var)
    monkeypatch.setattr(qp, "_LARGE_FROM", 0)
    monkeypatch.setattr(qp, "_LARGE_FIT", {"max_iter": 1})  # stops at MaxIterations
    ok, x, _, status = solve_clarabel(problem)
    assert ok and status == "Solved" and problem.violation(x) < 1e-6


def test_highs_solves_a_small_lp_qp_and_milp_handed_over_as_arrays():
    """highs._highs hands HiGHS its model as numpy buffers (one passModel call): the
    optimum of each kind of problem it is given, rows and bounds read correctly; a MILP after an
    LP in one process too (both on one thread: HiGHS refused a MILP asking for another thread
    count than the scheduler the LP had started)."""
    import scipy.sparse as sp

    # two variables, x0 + x1 = 3 and x0 - x1 <= 0.5, 0 <= x <= 2
    a = sp.csc_matrix(np.array([[1.0, 1.0], [1.0, -1.0]]))
    lo, hi = np.array([3.0, -np.inf]), np.array([3.0, 0.5])
    lower, upper = np.zeros(2), np.full(2, 2.0)
    _, x, _ = highs._highs(np.array([-1.0, 0.0]), lower, upper, a, lo, hi)  # LP: x0 up to its row
    assert x == pytest.approx([1.75, 1.25])
    _, x, _ = highs._highs(np.array([-1.0, 0.0]), lower, upper, a, lo, hi, integer=True)  # MILP
    assert x.tolist() == [1.0, 2.0]
    # QP: 1/2 (2 x0^2 + 2 x1^2) - 2 x0 - 4 x1 (the point (1, 2) nearest) on the same rows
    _, x, _ = highs._highs(np.array([-2.0, -4.0]), lower, upper, a, lo, hi, hess=np.array([2.0, 2.0]))
    assert x == pytest.approx([1.0, 2.0], abs=1e-6)


def test_the_highs_banner_goes_to_stderr_not_into_standard_output():
    """HiGHS prints a banner on file descriptor 1 at a process's first Highs(); a command's
    stdout (a --json document, a piped release) must not carry it."""
    import subprocess
    import sys

    code = (
        "from dpspec_topdown.estimation import highs; import numpy as np, scipy.sparse as sp\n"
        "highs._highs(np.ones(2), np.zeros(2), np.ones(2), sp.csc_matrix(np.ones((1, 2))),"
        " np.ones(1), np.ones(1))\nprint('done')"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "done\n"
    assert "HiGHS" in run.stderr
