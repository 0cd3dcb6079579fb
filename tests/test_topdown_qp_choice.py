"""The node fit's solver choice: capture to .npz, alternatives held to the rounding's accuracy,
Clarabel as the default and the fallback."""

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
    assert optimal and used == "clarabel" and len(files) == 1
    back = qp_choice.load(str(files[0]))
    assert back.n_var == problem.n_var and back.n_x == problem.n_x
    assert (back.a != problem.a).nnz == 0 and np.array_equal(back.hi, problem.hi)
    assert back.objective(x) == problem.objective(x) and back.violation(x) == problem.violation(x)
    with np.load(files[0]) as z:  # Clarabel's statement travels too, with the tolerances
        form = conic_form(problem)
        assert int(z["n_zero"]) == form.n_zero and np.array_equal(z["b"], form.b)
        assert float(z["violation_limit"]) == violation_limit(problem)


def test_by_default_every_fit_is_clarabels(monkeypatch):
    monkeypatch.delenv(qp_choice.CHOICE_ENV, raising=False)
    problem = _problem()
    ok, x, _, status, used = qp_choice.solve(problem)
    ok_c, x_c, _, _ = solve_clarabel(problem)
    assert ok and ok_c and used == "clarabel"
    assert np.array_equal(x, x_c)  # the very same numbers: releases do not move


@pytest.mark.parametrize("name", ["piqp", "proxsuite", "cholmod"])
def test_an_alternative_solves_the_same_least_squares(monkeypatch, name):
    module = {"piqp": "piqp", "proxsuite": "proxsuite", "cholmod": "sksparse"}[name]
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


def test_the_rule_picks_by_size(monkeypatch):
    problem = _problem()
    form = conic_form(problem)
    monkeypatch.setattr(qp_choice, "RULE", ((form.cols.size + 1, "piqp"), (float("inf"), "clarabel")))
    assert qp_choice.rule(form) == "piqp"
    monkeypatch.setattr(qp_choice, "RULE", ((form.cols.size, "piqp"), (float("inf"), "clarabel")))
    assert qp_choice.rule(form) == "clarabel"
