"""Production's DHC solver constructs on small hand-made nodes: the opt_tol pass tolerance,
the failsafe over a minimal schema and joint histograms with a cross constraint."""
import attrs
import numpy as np
import pytest

from dpspec_topdown import postprocess
from dpspec_topdown.multipass import PassPlan, _with_rows, fit_in_passes, optimal_tolerance
from dpspec_topdown.postprocess import GroupConstraint, MeasuredQuery, NodeTask

# 4 cells: (a, b) with a, b in {0, 1}; cell = 2 a + b
TOTAL = MeasuredQuery("total", np.zeros(4, dtype=np.int64), 1, 1.0)
DETAILED = MeasuredQuery("detailed", np.arange(4, dtype=np.int64), 4, 1.0)


def _task(parent, totals, detailed, constraints=()):
    return NodeTask(key=0, n_children=len(totals), n_cells=4, parent=np.asarray(parent, dtype=np.int64),
                    measurements=(np.asarray(totals, dtype=np.int64).reshape(-1, 1),
                                  np.asarray(detailed, dtype=np.int64)),
                    constraints=tuple(constraints))


def _only_detailed(task):
    return attrs.evolve(task, measurements=task.measurements[1:])


def _totals(x, vc, n):
    return np.bincount(vc, weights=x[:vc.size], minlength=n)


def test_optimal_tolerance_is_the_lp_optimum_when_the_held_answers_are_not_feasible():
    task = _task([4, 3, 2, 1], [3, 3, 3], [[1, 1, 1, 0]] * 3)
    variables = postprocess._node_variables(task)
    problem = postprocess.build_node_qp(task, [TOTAL], variables)
    vc = variables[1]
    # the children must add up to 10; held at 3 each, the best any solution can do is 1/3 off
    t = optimal_tolerance(problem, [(vc, 3, np.array([3.0, 3.0, 3.0]))])
    assert t == pytest.approx(1 / 3, abs=1e-7)
    # held at a feasible split, the optimum is 0
    assert optimal_tolerance(problem, [(vc, 3, np.array([5.0, 3.0, 2.0]))]) == pytest.approx(0.0, abs=1e-9)
    # an infeasible model has no tolerance at all
    bad = _with_rows(problem, [(np.zeros(vc.size, dtype=np.int64), 1, np.array([-5.0]))], 0.0)
    assert optimal_tolerance(bad, [(vc, 3, np.array([3.0, 3.0, 3.0]))]) is None


@pytest.mark.parametrize("opt_tol", [False, True])
def test_later_pass_holds_the_first_within_the_optimal_tolerance_plus_slack(opt_tol):
    rng = np.random.default_rng(7)
    parent = [40, 25, 20, 15]
    totals = [38, 30, 29]
    detailed = rng.integers(0, 15, size=(3, 4))
    task = _task(parent, totals, detailed)
    variables = postprocess._node_variables(task)
    vc = variables[1]
    plan = PassPlan(estimation=((0,), (1,)), tolerance=0.1, opt_tol=opt_tol)
    first, *_ = fit_in_passes(task, [TOTAL, DETAILED], PassPlan(estimation=((0,),), tolerance=0.1), variables)
    used: list = []
    x, *_, failsafe = fit_in_passes(task, [TOTAL, DETAILED], plan, variables, tolerances=used)
    assert not failsafe and len(used) == 1
    if opt_tol:
        # recomputed independently: the second pass's model with the first pass's totals held
        sub = postprocess.build_node_qp(_only_detailed(task), [DETAILED], variables)
        best = optimal_tolerance(sub, [(vc, 3, _totals(first, vc, 3))])
        assert best is not None and used[0] == pytest.approx(best + 0.1, abs=1e-9)
        assert best < 1e-6  # the first pass's own solution meets every constraint of the second
    else:
        assert used[0] == 0.1
    assert np.max(np.abs(_totals(x, vc, 3) - _totals(first, vc, 3))) <= used[0] + 1e-6
    # without the hold the detailed fit would move the totals further than the tolerance
    free = postprocess.solve_qp(postprocess.build_node_qp(_only_detailed(task), [DETAILED], variables))[0]
    assert np.max(np.abs(_totals(free, vc, 3) - _totals(first, vc, 3))) > 0.5
