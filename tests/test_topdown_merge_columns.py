"""Identical free columns merged into one variable (merge_columns.py): the same problem."""

import numpy as np
import pytest
import scipy.sparse as sp

from dpspec_topdown.estimation import highs, postprocess, rounding
from dpspec_topdown.estimation.merge_columns import merge_free_duplicates
from dpspec_topdown.estimation.qp import NodeQP


def _problem():
    """Cells 0-1 fitted (objective); cells 2-7 free, in a sum row with cell 0 (2-4) or with cell 1
    (5-7); cell 8 free with the same rows as 5-7 but coefficient 2 (not identical)."""
    rows = [0, 0, 0, 0, 1, 1, 1, 1, 1]
    cols = [0, 2, 3, 4, 1, 5, 6, 7, 8]
    vals = [1.0, -1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -1.0, -2.0]
    a = sp.csc_matrix((vals, (rows, cols)), shape=(2, 9))
    hess = np.array([2.0, 2.0] + [0.0] * 7)
    cost = np.array([-2.0 * 7, -2.0 * 3] + [0.0] * 7)
    return NodeQP(
        hess=hess, cost=cost, lower=np.zeros(9), upper=np.full(9, np.inf), a=a, lo=np.zeros(2), hi=np.zeros(2), n_x=9
    )


def test_identical_free_columns_become_one_variable_and_the_optimum_is_the_same():
    problem = _problem()
    reduced, expand = merge_free_duplicates(problem)
    assert reduced.n_var == 5  # cells 0, 1, one of 2-4, one of 5-7, and 8 (its coefficient differs)
    x = expand(postprocess.solve_qp(reduced)[0])
    full = postprocess.solve_qp(problem)[0]
    assert abs(problem.objective(x) - problem.objective(full)) < 1e-6 * abs(problem.objective(full))
    assert problem.violation(x) < 1e-7
    assert np.allclose(x[2:5], x[2])  # split evenly among the merged columns
    assert np.allclose(x[5:8], x[5])


def test_nothing_merges_when_every_column_is_fitted_or_distinct():
    problem = _problem()
    fitted = NodeQP(
        hess=np.full(9, 2.0),
        cost=problem.cost,
        lower=problem.lower,
        upper=problem.upper,
        a=problem.a,
        lo=problem.lo,
        hi=problem.hi,
        n_x=9,
    )
    reduced, expand = merge_free_duplicates(fitted)
    assert reduced is fitted and expand(np.ones(9)).tolist() == [1.0] * 9
    bounded = NodeQP(
        hess=problem.hess,
        cost=problem.cost,
        lower=problem.lower,
        upper=np.full(9, 5.0),
        a=problem.a,
        lo=problem.lo,
        hi=problem.hi,
        n_x=9,
    )
    assert merge_free_duplicates(bounded)[0] is bounded  # an upper bound is not a free column's


def test_rounding_columns_alike_in_rows_and_cost_become_one_and_split_back_in_order():
    from dpspec_topdown.estimation.merge_columns import merge_parallel

    # columns 0-2 alike (row 0, cost -0.2); 3 as they are but costlier; 4-5 alike (rows 0 and 1)
    a = sp.csc_matrix(([1.0] * 6 + [1.0, 1.0], ([0] * 6 + [1, 1], [0, 1, 2, 3, 4, 5, 4, 5])), shape=(2, 6))
    cost = np.array([-0.2, -0.2, -0.2, 0.4, -0.6, -0.6])
    reduced, c, upper, split = merge_parallel(a, cost)
    assert reduced.shape == (2, 3) and c.tolist() == [-0.2, 0.4, -0.6] and upper.tolist() == [3.0, 1.0, 2.0]
    assert split(np.array([2.0, 0.0, 1.0])).tolist() == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]  # the first members
    assert merge_parallel(a, np.arange(6.0))[3] is None  # costs all differ: nothing merges


def test_a_rounding_with_alike_cells_is_as_close_to_the_fit_as_the_full_linear_program(monkeypatch):
    """A root node's eight cells of one child, six of them fitted at 0.5 (an even split): the
    rounding LP over the merged columns reaches the optimum of the LP over every cell."""
    task = postprocess.NodeTask(key=0, n_children=1, n_cells=8, parent=None, measurements=(), constraints=())
    cells = np.arange(8)
    x = np.array([0.5] * 6 + [0.3, 0.9])
    seen = []
    real = highs._highs

    def watched(cost, lower, upper, a, lo, hi, **kw):
        seen.append(len(cost))
        status, d, sec = real(cost, lower, upper, a, lo, hi, **kw)
        full = real(
            np.repeat(cost, upper.astype(int)),
            np.zeros(8),
            np.ones(8),
            sp.csc_matrix(np.repeat(a.toarray(), upper.astype(int), axis=1)),
            lo,
            hi,
            **kw,
        )[1]
        assert np.dot(cost, d) == pytest.approx(np.dot(np.repeat(cost, upper.astype(int)), full))
        return status, d, sec

    monkeypatch.setattr(highs, "_highs", watched)
    monkeypatch.setenv(rounding.SOLVER_ENV, "highs")  # the merged LP handed to HiGHS (not the min-cost flow)
    counts, _, _ = rounding._round(task, x, cells, np.zeros(8, dtype=np.int64), cells, cells)
    assert seen == [3]  # 0.5 x 6, 0.3 and 0.9
    assert counts.sum() in (4, 5) and counts[7] == 1 and counts[6] == 0  # the child's total 4.5 within floor/ceil
    assert np.abs(counts - x).sum() == pytest.approx(3.0 + 0.3 + 0.1)
