"""The interior-point fit (Clarabel) and HiGHS's active-set QP agree on real node problems.

The problems are captured from a TopDown run on synthetic data with the production strategy,
so they have the production structure (auxiliary marginal sums, parent sums, invariants)."""
import numpy as np
import pytest

from dpspec_topdown import postprocess
from dpspec_topdown.engine import run_topdown
from dpspec_topdown.qp import solve_clarabel
from dpspec_topdown.synthetic import (LEVELS, PL94_VARIABLES, PRODUCTION_LEVEL_SHARES, PRODUCTION_RHO,
                                      generate_population, pl94_strategy)


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
        result = run_topdown(persons, ["nation"] + LEVELS, PL94_VARIABLES,
                             pl94_strategy(tuple(PRODUCTION_LEVEL_SHARES)), PRODUCTION_RHO,
                             PRODUCTION_LEVEL_SHARES, "hamming", [("state", ())],
                             np.random.default_rng(3), workers=1)
    finally:
        postprocess.build_node_qp = build
    return problems, result


def test_every_node_was_fitted_by_the_interior_point_solver(captured):
    problems, result = captured
    assert len(problems) >= 5  # one per parent unit above the blocks
    levels = result.timings["levels"]
    assert sum(t.get("qp_highs_fallback_nodes", 0) for t in levels.values()) == 0


def test_clarabel_and_highs_agree_on_captured_nodes(captured):
    problems, _ = captured
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
        assert np.max(np.abs(x_ip[:problem.n_x] - x_as[:problem.n_x])) < 0.05


def test_a_failed_interior_point_solve_falls_back_to_highs(captured, monkeypatch):
    problems, _ = captured
    problem = max(problems, key=lambda p: p.n_var)
    monkeypatch.setattr(postprocess, "solve_clarabel", lambda p: (False, None, 0.0, "MaxIterations"))
    x, optimal, _, used, _ = postprocess.solve_qp(problem)
    assert used == "highs" and optimal and problem.violation(x) < 1e-6
