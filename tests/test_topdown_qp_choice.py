"""The node fit's solver choice: capture to .npz, alternatives held to the rounding's accuracy,
the rule as the default, Clarabel as the fallback, and PIQP's set-up reused per pattern."""

import numpy as np
import pytest

from dpspec_topdown.estimation import postprocess
from dpspec_topdown.estimation import qp_choice
from dpspec_topdown.estimation.qp import conic_form, solve_clarabel, violation_limit


def _problem(seed=12, n_children=4):
    """A small node (24 cells, nested, shared and crossing sums) as test_topdown_qp builds it."""
    from tests.test_topdown_qp import _node

    task, queries = _node(np.random.default_rng(seed), n_children=n_children)
    return postprocess.build_node_qp(task, queries, postprocess._node_variables(task))


def test_capture_writes_the_problem_only_when_asked(tmp_path, monkeypatch):
    problem = _problem()
    monkeypatch.delenv(qp_choice.CAPTURE_ENV, raising=False)
    assert qp_choice.capture(problem, conic_form(problem)) is None
    monkeypatch.setenv(qp_choice.CAPTURE_ENV, str(tmp_path / "nodes"))
    x, optimal, _, used, _ = postprocess.solve_qp(problem)
    files = list((tmp_path / "nodes").glob("node-*.npz"))
    assert optimal and used == qp_choice.rule(conic_form(problem), problem) and len(files) == 1
    back = qp_choice.load(str(files[0]))
    assert back.n_var == problem.n_var and back.n_x == problem.n_x
    assert (back.a != problem.a).nnz == 0 and np.array_equal(back.hi, problem.hi)
    assert back.objective(x) == problem.objective(x) and back.violation(x) == problem.violation(x)
    with np.load(files[0]) as z:  # Clarabel's statement travels too, with the tolerances
        form = conic_form(problem)
        assert int(z["n_zero"]) == form.n_zero and np.array_equal(z["b"], form.b)
        assert float(z["violation_limit"]) == violation_limit(problem)


def test_by_default_the_rule_chooses(monkeypatch):
    monkeypatch.delenv(qp_choice.CHOICE_ENV, raising=False)
    problem = _problem()
    ok, x, _, status, used = qp_choice.solve(problem)
    assert ok and used == qp_choice.rule(conic_form(problem), problem) == "piqp"
    monkeypatch.setenv(qp_choice.CHOICE_ENV, "auto")
    assert qp_choice.solve(problem)[4] == "piqp"


def test_clarabel_named_solves_every_fit_as_before(monkeypatch):
    monkeypatch.setenv(qp_choice.CHOICE_ENV, "clarabel")
    problem = _problem()
    ok, x, _, status, used = qp_choice.solve(problem)
    ok_c, x_c, _, _ = solve_clarabel(problem)
    assert ok and ok_c and used == "clarabel"
    assert np.array_equal(x, x_c)  # the very same numbers as Clarabel alone


@pytest.mark.parametrize("name", ["piqp", "pdlp", "proxsuite", "cholmod"])
def test_an_alternative_solves_the_same_least_squares(monkeypatch, name):
    module = {"piqp": "piqp", "pdlp": "ortools", "proxsuite": "proxsuite", "cholmod": "sksparse"}[name]
    pytest.importorskip(module)
    monkeypatch.setenv(qp_choice.CHOICE_ENV, name)
    for seed in (12, 13):
        problem = _problem(seed)
        ok, x, _, status, used = qp_choice.solve(problem)
        _, x_c, _, _ = solve_clarabel(problem)
        assert ok and used == name, status
        assert problem.violation(x) <= violation_limit(problem)
        gap = abs(problem.objective(x) - problem.objective(x_c)) / (1 + abs(problem.objective(x_c)))
        assert gap < 1e-6


def test_a_failing_or_inaccurate_alternative_falls_back_to_clarabel(monkeypatch):
    problem = _problem()
    monkeypatch.setenv(qp_choice.CHOICE_ENV, "fake")
    far = np.full(problem.n_var, -5.0)  # violates every lower bound
    monkeypatch.setitem(qp_choice.SOLVERS, "fake", lambda p, f: (True, far, 0.01, "Solved"))
    ok, x, seconds, _, used = qp_choice.solve(problem)
    assert ok and used == "clarabel" and problem.violation(x) <= violation_limit(problem) and seconds >= 0.01

    def absent(p, f):
        raise ImportError("no such solver")

    monkeypatch.setitem(qp_choice.SOLVERS, "fake", absent)
    assert qp_choice.solve(problem)[4] == "clarabel"
    monkeypatch.setitem(qp_choice.SOLVERS, "fake", lambda p, f: (False, None, 0.0, "MaxIterations"))
    assert qp_choice.solve(problem)[4] == "clarabel"


class _Shape:
    def __init__(self, n):
        self.cols = np.arange(n)


@pytest.mark.parametrize(
    "variables, solver",
    [
        (143, "piqp"),  # P.L. 94 county and state fits
        (2_604, "piqp"),  # P.L. 94 block fits
        (4_761, "piqp"),  # DHC tract subset
        (6_959, "piqp"),  # DHC block group
        (8_072, "piqp"),  # fits of 8k-110k variables that are not grids (grids: below)
        (109_982, "piqp"),  # the 1M DHC run's place/MCD fits
        (176_711, "piqp"),  # the DHC root at 10k persons
        (524_982, "clarabel"),  # the DHC root at 1M persons
        (728_000, "clarabel"),  # the 1M county node: PIQP had no answer in 600 s
    ],
)
def test_the_rule_picks_what_the_node_benchmark_measured(variables, solver):
    assert qp_choice.rule(_Shape(variables)) == solver


def _grid(children, cells, within, seed=3):
    """A fit over children x cells: each cell in a row across the children (the parent's cell),
    in a row of ``within`` cells of its child (none when 0), and each child's total a sum column."""
    import scipy.sparse as sp

    from dpspec_topdown.estimation.qp import NodeQP

    rng = np.random.default_rng(seed)
    n_x = children * cells
    truth = rng.integers(0, 4, n_x).astype(float)
    cell = np.arange(n_x)
    kid, kind = cell // cells, cell % cells
    rows = [sp.csr_matrix((np.ones(n_x), (kind, cell)), shape=(cells, n_x + children))]
    if within:
        group = kid * (cells // within) + kind // within
        rows.append(sp.csr_matrix((np.ones(n_x), (group, cell)), shape=(group.max() + 1, n_x + children)))
    totals = sp.hstack([sp.csr_matrix((np.ones(n_x), (kid, cell)), shape=(children, n_x)), -sp.eye(children)])
    a = sp.vstack(rows + [totals]).tocsc()
    rhs = a @ np.concatenate([truth, np.zeros(children)])
    rhs[-children:] = 0.0
    noisy = np.concatenate([truth, truth.reshape(children, cells).sum(axis=1)]) + rng.normal(0, 2, n_x + children)
    return NodeQP(
        hess=np.full(n_x + children, 2.0),
        cost=-2.0 * noisy,
        lower=np.zeros(n_x + children),
        upper=np.full(n_x + children, np.inf),
        a=a,
        lo=rhs,
        hi=rhs,
        n_x=n_x,
    )


@pytest.mark.parametrize(
    "children, cells, within, wide",
    [
        (30, 60, 20, True),  # the DHC's block fits held to P.L. 94: tied both ways, both long
        (4, 600, 100, False),  # its block-group fits: tied both ways, across only four children
        (40, 60, 0, False),  # P.L. 94's block fits: each cell tied across the children only
        (30, 60, 1, False),  # a row per cell within its child is a bound, not a second tie
        (30, 60, 60, False),  # P.L. 94's later passes: each child held by one row, its total
        (30, 60, 30, True),  # two rows within each child already split it
    ],
)
def test_grid_tells_the_fits_whose_factor_fills_in(children, cells, within, wide):
    problem = _grid(children, cells, within)
    assert qp_choice.grid(problem) is wide
    assert qp_choice.rule(conic_form(problem), problem) == ("pdlp" if wide else "piqp")
    assert qp_choice.rule(conic_form(problem)) == "piqp"  # without the problem: by size alone


def test_a_wide_grid_is_solved_by_pdlp_by_default_to_the_roundings_accuracy(monkeypatch):
    monkeypatch.delenv(qp_choice.CHOICE_ENV, raising=False)
    problem = _grid(30, 60, 20)
    ok, x, _, status, used = qp_choice.solve(problem)
    assert ok and used == "pdlp", status
    assert problem.violation(x) <= violation_limit(problem) and x.min() >= 0.0  # cells never negative
    best = problem.objective(solve_clarabel(problem)[1])
    assert abs(problem.objective(x) - best) / (1 + abs(best)) < 1e-6
    assert np.array_equal(qp_choice.solve(problem)[1], x)  # the same answer every time
    assert not qp_choice.grid(_problem())  # the small test node stays on PIQP (above)


def test_a_grid_pdlp_does_not_finish_goes_to_clarabel(monkeypatch):
    import functools

    from dpspec_topdown.estimation import pdlp

    monkeypatch.delenv(qp_choice.CHOICE_ENV, raising=False)
    monkeypatch.setitem(qp_choice.SOLVERS, "pdlp", functools.partial(pdlp.solve_pdlp, iterations=10))
    problem = _grid(30, 60, 20)
    ok, x, _, status, used = qp_choice.solve(problem)
    assert ok and used == "clarabel" and np.array_equal(x, solve_clarabel(problem)[1])
    assert "ITERATION_LIMIT" in pdlp.solve_pdlp(problem, iterations=10)[3]


def test_a_grid_past_pdlps_band_goes_to_clarabel():
    problem = _grid(30, 60, 20)  # a grid, handed with the sizes of the bands around it
    assert qp_choice.rule(_Shape(qp_choice.GRID_UP_TO - 1), problem) == "pdlp"
    assert qp_choice.rule(_Shape(qp_choice.GRID_UP_TO), problem) == "clarabel"  # as the 1M cluster's place fits
    assert qp_choice.rule(_Shape(176_711), problem) == "clarabel"
    assert qp_choice.rule(_Shape(176_711), _grid(30, 60, 60)) == "piqp"  # one row within each child: no grid


def test_the_rule_is_read_in_order(monkeypatch):
    problem = _problem()
    form = conic_form(problem)
    monkeypatch.setattr(qp_choice, "RULE", ((form.cols.size + 1, "piqp"), (float("inf"), "clarabel")))
    assert qp_choice.rule(form) == "piqp"
    monkeypatch.setattr(qp_choice, "RULE", ((form.cols.size, "piqp"), (float("inf"), "clarabel")))
    assert qp_choice.rule(form) == "clarabel"


def test_a_missing_or_failing_chosen_solver_falls_back_to_clarabel(monkeypatch):
    monkeypatch.delenv(qp_choice.CHOICE_ENV, raising=False)  # the default: the rule names piqp here
    problem = _problem()

    def absent(p, f):
        raise ImportError("No module named 'piqp'")

    monkeypatch.setitem(qp_choice.SOLVERS, "piqp", absent)
    ok, x, _, _, used = qp_choice.solve(problem)
    assert ok and used == "clarabel" and np.array_equal(x, solve_clarabel(problem)[1])
    monkeypatch.setitem(qp_choice.SOLVERS, "piqp", lambda p, f: (False, None, 0.0, "PIQP_MAX_ITER_REACHED"))
    assert qp_choice.solve(problem)[4] == "clarabel"


def _inequality_problem(seed):
    """A node whose fit also has inequality rows, one-variable ones among them, and upper bounds."""
    import attrs
    import scipy.sparse as sp

    problem = _problem(seed)
    rng = np.random.default_rng(seed)
    n = problem.n_var
    rows = sp.random(6, n, density=0.3, random_state=seed, format="csr", data_rvs=lambda k: np.ones(k))
    single = sp.csr_matrix((np.array([2.0, -1.0]), (np.array([0, 1]), np.array([1, 3]))), shape=(2, n))
    extra = sp.vstack([rows, single])
    lo = np.concatenate([np.full(6, -np.inf), [0.0, -50.0]])
    hi = np.concatenate([rng.uniform(20, 40, 6), [80.0, np.inf]])
    return attrs.evolve(
        problem,
        a=sp.vstack([problem.a, extra]).tocsc(),
        lo=np.concatenate([problem.lo, lo]),
        hi=np.concatenate([problem.hi, hi]),
        upper=np.where(np.arange(n) % 5 == 0, 60.0, problem.upper),
    )


@pytest.mark.parametrize("seed", [12, 13, 14])
def test_piqp_is_handed_bit_for_bit_what_clarabels_statement_gives(seed):
    from dpspec_topdown.estimation.qp import stated

    for problem in (_problem(seed), _inequality_problem(seed)):
        direct = qp_choice._piqp_inputs(stated(problem))
        via = qp_choice._bounded(conic_form(problem))
        for d, v in zip(direct, via):
            if hasattr(d, "indptr"):
                assert d.shape == v.shape and np.array_equal(d.indptr, v.indptr)
                assert np.array_equal(d.indices, v.indices) and np.array_equal(d.data, v.data)
            else:
                assert np.array_equal(d, v)


def test_piqp_reused_for_a_pattern_gives_a_fresh_set_ups_answer(monkeypatch):
    pytest.importorskip("piqp")
    import attrs

    monkeypatch.setattr(qp_choice, "_piqp_kept", type(qp_choice._piqp_kept)())
    first = _problem(12)
    second = attrs.evolve(first, cost=first.cost * 1.5 - 3.0, hi=first.hi + (first.hi != first.lo) * 2.0)
    fresh = qp_choice.solve_piqp(second, reuse=False)
    qp_choice.solve_piqp(first)  # sets up a solver for the pattern
    assert len(qp_choice._piqp_kept) == 1
    reused = qp_choice.solve_piqp(second)  # updated, not set up again
    assert len(qp_choice._piqp_kept) == 1
    assert fresh[0] and reused[0]
    assert np.array_equal(reused[1], fresh[1])  # bit for bit: the preconditioner is recomputed
    gap = abs(second.objective(reused[1]) - second.objective(solve_clarabel(second)[1]))
    assert gap / (1 + abs(second.objective(fresh[1]))) < 1e-6
    other = _problem(13, n_children=5)  # another pattern: a solver of its own
    qp_choice.solve_piqp(other)
    assert len(qp_choice._piqp_kept) == 2


def test_a_large_piqp_fit_runs_in_a_child_with_the_same_bits(monkeypatch):
    pytest.importorskip("piqp")
    monkeypatch.delenv(qp_choice.CHOICE_ENV, raising=False)  # the rule names piqp here
    problem = _problem()
    in_process = qp_choice.solve(problem)
    children = []
    real = qp_choice.run_isolated
    monkeypatch.setattr(qp_choice, "run_isolated", lambda *a: children.append(1) or real(*a))
    monkeypatch.setitem(qp_choice.ISOLATE_FROM, "piqp", 1)
    isolated = qp_choice.solve(problem)
    assert children == [1] and isolated[4] == "piqp"
    assert np.array_equal(isolated[1], in_process[1]) and isolated[3] == in_process[3]


def test_a_solver_that_crashes_its_process_falls_back_to_clarabel(monkeypatch):
    import os
    import signal

    monkeypatch.delenv(qp_choice.CHOICE_ENV, raising=False)
    problem = _problem()

    def segfault(p, f):
        os.kill(os.getpid(), signal.SIGSEGV)

    monkeypatch.setitem(qp_choice.SOLVERS, "piqp", segfault)
    monkeypatch.setitem(qp_choice.ISOLATE_FROM, "piqp", 1)
    ok, x, _, _, used = qp_choice.solve(problem)  # this process lives on
    assert ok and used == "clarabel" and np.array_equal(x, solve_clarabel(problem)[1])
    from dpspec_topdown.estimation.isolated import run_isolated

    assert run_isolated(segfault, problem, None) == (False, None, 0.0, "crashed (SIGSEGV)")
    assert run_isolated(lambda: (True, None, 0.5, "no answer")) == (True, None, 0.5, "no answer")
    assert run_isolated(lambda: 1 / 0)[3] == "child exited with status 1"


def test_piqp_solves_with_its_baseline_build_on_every_cpu():
    """PIQP's package would load the build for the widest instruction set the CPU has, whose fits
    end in other bits (piqp_baseline.py); a fresh process, as a compile is, solves with the
    baseline build, and gives the bits of the fits solved here."""
    import subprocess
    import sys

    problem = _problem()
    code = (
        "import sys\n"
        "from tests.test_topdown_qp_choice import _problem\n"
        "from dpspec_topdown.estimation import qp_choice\n"
        "x = qp_choice.solve_piqp(_problem(), reuse=False)[1]\n"
        "print(qp_choice.piqp.build()); sys.stdout.buffer.write(x.tobytes())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    name, _, bits = out.partition(b"\n")
    from dpspec_topdown.estimation import piqp_baseline

    assert name.decode() == piqp_baseline.BASELINE
    assert bits == qp_choice.solve_piqp(problem, reuse=False)[1].tobytes()
