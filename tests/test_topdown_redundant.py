"""Constraints an earlier outer pass's fixed margins imply are not stated again (redundant.py)."""

import os
import sys
from fractions import Fraction

import attrs
import numpy as np
import pytest

from dpspec_topdown.estimation import node_solve
from dpspec_topdown.estimation import postprocess
from dpspec_topdown.estimation import multipass, redundant
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import RunContext
from dpspec_topdown.estimation.multipass import solve_interleaved
from dpspec_topdown.estimation.postprocess import GroupConstraint, NodeTask
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, generate_population

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _task(target):
    """Two children, six cells, a per-child total as the only constraint."""
    con = GroupConstraint("total", np.zeros(6, dtype=np.int64), 1, np.array([0, 1]), np.array(target).reshape(2, 1))
    return NodeTask(
        key=0, n_children=2, n_cells=6, parent=np.array([1, 2, 1, 1, 1, 1]), measurements=(), constraints=(con,)
    )


def _fixed(vc, vcell, values, groups_of_cell):
    key = vc * 3 + groups_of_cell[vcell]
    return (key, 6, np.asarray(values, dtype=np.float64))


def test_a_constraint_a_fixed_margin_refines_and_adds_up_to_is_dropped():
    task = _task([[3], [4]])
    cells, vc, va, vcell = postprocess._node_variables(task)
    pairs = cells // 2  # fixed groups {0,1}, {2,3}, {4,5} per child: inside the child's total
    fixed = _fixed(vc, vcell, [1, 1, 1, 2, 1, 1], pairs)
    assert redundant.drop_implied(task, vc, vcell, [fixed]).constraints == ()


def test_a_constraint_kept_when_the_fixed_values_do_not_add_up_or_a_group_straddles():
    task = _task([[3], [4]])
    cells, vc, va, vcell = postprocess._node_variables(task)
    wrong = _fixed(vc, vcell, [1, 1, 1, 2, 2, 1], cells // 2)  # child 1 adds up to 5, not 4
    assert redundant.drop_implied(task, vc, vcell, [wrong]) is task
    # a constraint by cell parity: the fixed pair {0, 1} lies in two of its groups
    parity = GroupConstraint("parity", np.arange(6) % 2, 2, np.array([0, 1]), np.array([[2, 1], [2, 2]]))
    task = attrs.evolve(task, constraints=(parity,))
    assert redundant.drop_implied(task, vc, vcell, [_fixed(vc, vcell, [1, 1, 1, 2, 1, 1], cells // 2)]) is task


@pytest.mark.slow  # two multipass TopDown runs
def test_interleaved_passes_reach_the_same_release_without_the_implied_rows(monkeypatch):
    """On real nodes with two outer passes (the children's totals fixed, then the P.L. 94 queries):
    the tract-total invariant is implied and dropped, and the fit and rounding without it give
    the same counts as with it (the same problem; the rows were redundant)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from bench_topdown import production_strategy

    shares, strategy, recodes, rho, _ = production_strategy()
    rest = [q for q, _ in strategy["county"] if q != ()]
    outer = [{"estimation": [[()]], "rounding": [[()]]}, {"estimation": [rest], "rounding": [[("hhgq",)]]}]
    passes = {lv: {"outer": outer, "tolerance": Fraction(1, 10)} for lv in ("county", "tract")}
    nodes, solve = [], node_solve.solve_node

    def capture(task, queries, solver="clarabel", plan=None):
        nodes.append((postprocess.node_inputs(task, queries)[0], queries, plan))
        return solve(task, queries, solver, plan)

    monkeypatch.setattr(node_solve, "solve_node", capture)
    persons = generate_population(3000, 400, seed=4)  # 13 block groups in 4 tracts
    run_topdown(
        persons,
        Design(
            ["nation"] + LEVELS,
            PL94_VARIABLES,
            strategy,
            Fraction(1, 20),
            shares,
            "hamming",
            [("state", ()), ("tract", ())],
            recodes=recodes,
            passes=passes,
        ),
        RunContext(np.random.default_rng(5), workers=1),
    )
    monkeypatch.setattr(node_solve, "solve_node", solve)
    dropped = compared = 0
    for task, queries, plan in nodes:
        if plan is None or not plan.outer or task.n_children < 2:
            continue
        variables = postprocess._node_variables(task)
        counts, *_ = solve_interleaved(task, queries, plan, variables)
        calls = []
        real = redundant.drop_implied

        def spy(t, vc, vcell, fixed):
            out = real(t, vc, vcell, fixed)
            calls.append(len(t.constraints) - len(out.constraints))
            return out

        monkeypatch.setattr(multipass, "drop_implied", spy)
        solve_interleaved(task, queries, plan, variables)
        monkeypatch.setattr(multipass, "drop_implied", lambda t, *a: t)  # every row stated
        stated, *_ = solve_interleaved(task, queries, plan, variables)
        monkeypatch.setattr(multipass, "drop_implied", real)
        dropped += sum(calls)
        compared += 1
        assert np.array_equal(counts, stated)
    assert compared > 0 and dropped > 0  # the invariant was dropped somewhere: the test can fail


def test_a_cross_constraint_both_of_whose_sides_are_fixed_at_equal_values_is_implied():
    from dpspec_topdown.estimation.joint_problem import CrossConstraint

    task = _task([[3], [4]])
    var = postprocess._node_variables(task)
    cells, vc, va, vcell = var
    # left: cells 0-2 in group 0 and 3-5 in group 1; right: the same groups over the other table
    cross = CrossConstraint("tie", np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 0, 1, 1, 1]), 2)
    halves = (cells >= 3).astype(np.int64)  # fixed groups {0,1,2}, {3,4,5} per child
    left = [(vc * 2 + halves[vcell], 4, np.array([1.0, 2.0, 3.0, 1.0]))]
    assert redundant.cross_implied(cross, var, var, left, left, 2)
    right = [(vc * 2 + halves[vcell], 4, np.array([1.0, 2.0, 2.0, 2.0]))]  # child 1 splits 3 + 1 as 2 + 2
    assert not redundant.cross_implied(cross, var, var, left, right, 2)
    assert not redundant.cross_implied(cross, var, var, left, [], 2)  # the right side is not fixed
    pairs = [(vc * 3 + (cells // 2)[vcell], 6, np.ones(6))]  # {2, 3} straddles the side's two groups
    assert not redundant.cross_implied(cross, var, var, left, pairs, 2)


def test_a_problem_solved_by_parts_in_batches_is_solved_as_a_whole():
    """Three independent parts (each a sum of nonnegative cells fixed, a diagonal fit), in
    batches of one part: the same optimum as one solve; a part without a solution fails it."""
    import scipy.sparse as sp

    from dpspec_topdown.estimation import decompose
    from dpspec_topdown.estimation.qp import NodeQP

    rng = np.random.default_rng(3)
    n = 30
    part = np.repeat(np.arange(3), 10)
    a = sp.csc_matrix((np.ones(n), (part, np.arange(n))), shape=(3, n))
    target = np.array([5.0, 0.0, 12.0])
    problem = NodeQP(
        hess=np.full(n, 2.0),
        cost=-2.0 * rng.normal(1.0, 2.0, n),
        lower=np.zeros(n),
        upper=np.full(n, np.inf),
        a=a,
        lo=target,
        hi=target,
        n_x=n,
    )
    whole = postprocess.solve_qp(problem)
    seen = []

    def solve(sub):
        seen.append(sub.n_var)
        return postprocess.solve_qp(sub)

    old = decompose.BATCH
    decompose.BATCH = 10
    try:
        x, ok, _, _, _ = decompose.solve_by_parts(problem, solve)
        assert seen == [10, 10, 10]
        assert ok and abs(problem.objective(x) - problem.objective(whole[0])) < 1e-6 * abs(problem.objective(x))
        assert np.allclose(np.bincount(part, weights=x), target, atol=1e-7)
        bad = attrs.evolve(problem, lo=np.array([5.0, -1.0, 12.0]), hi=np.array([5.0, -1.0, 12.0]))
        assert decompose.solve_by_parts(bad, postprocess.solve_qp)[0] is None
    finally:
        decompose.BATCH = old
