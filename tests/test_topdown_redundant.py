"""Constraints an earlier outer pass's fixed margins imply are not stated again (redundant.py)."""
import os
import sys
from fractions import Fraction

import attrs
import numpy as np

from dpspec_topdown import postprocess, redundant
from dpspec_topdown.engine import run_topdown
from dpspec_topdown.multipass import solve_interleaved
from dpspec_topdown.postprocess import GroupConstraint, NodeTask
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, generate_population

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _task(target):
    """Two children, six cells, a per-child total as the only constraint."""
    con = GroupConstraint("total", np.zeros(6, dtype=np.int64), 1, np.array([0, 1]), np.array(target).reshape(2, 1))
    return NodeTask(key=0, n_children=2, n_cells=6, parent=np.array([1, 2, 1, 1, 1, 1]), measurements=(),
                    constraints=(con,))


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
    nodes, solve = [], postprocess.solve_node

    def capture(task, queries, solver="clarabel", plan=None):
        nodes.append((postprocess.node_inputs(task, queries)[0], queries, plan))
        return solve(task, queries, solver, plan)

    monkeypatch.setattr(postprocess, "solve_node", capture)
    persons = generate_population(3000, 400, seed=4)  # 13 block groups in 4 tracts
    run_topdown(persons, ["nation"] + LEVELS, PL94_VARIABLES, strategy, Fraction(1, 20), shares, "hamming",
                [("state", ()), ("tract", ())], np.random.default_rng(5), workers=1, recodes=recodes, passes=passes)
    monkeypatch.setattr(postprocess, "solve_node", solve)
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

        monkeypatch.setattr(redundant, "drop_implied", spy)
        solve_interleaved(task, queries, plan, variables)
        monkeypatch.setattr(redundant, "drop_implied", lambda t, *a: t)  # every row stated
        stated, *_ = solve_interleaved(task, queries, plan, variables)
        monkeypatch.setattr(redundant, "drop_implied", real)
        dropped += sum(calls)
        compared += 1
        assert np.array_equal(counts, stated)
    assert compared > 0 and dropped > 0  # the invariant was dropped somewhere: the test can fail
