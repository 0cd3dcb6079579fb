"""Identical free columns merged into one variable (merge_columns.py): the same problem."""
import numpy as np
import scipy.sparse as sp

from dpspec_topdown import postprocess
from dpspec_topdown.merge_columns import merge_free_duplicates
from dpspec_topdown.qp import NodeQP


def _problem():
    """Cells 0-1 fitted (objective); cells 2-7 free, in a sum row with cell 0 (2-4) or with cell 1
    (5-7); cell 8 free with the same rows as 5-7 but coefficient 2 (not identical)."""
    rows = [0, 0, 0, 0, 1, 1, 1, 1, 1]
    cols = [0, 2, 3, 4, 1, 5, 6, 7, 8]
    vals = [1.0, -1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -1.0, -2.0]
    a = sp.csc_matrix((vals, (rows, cols)), shape=(2, 9))
    hess = np.array([2.0, 2.0] + [0.0] * 7)
    cost = np.array([-2.0 * 7, -2.0 * 3] + [0.0] * 7)
    return NodeQP(hess=hess, cost=cost, lower=np.zeros(9), upper=np.full(9, np.inf), a=a, lo=np.zeros(2),
                  hi=np.zeros(2), n_x=9)


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
    fitted = NodeQP(hess=np.full(9, 2.0), cost=problem.cost, lower=problem.lower, upper=problem.upper,
                    a=problem.a, lo=problem.lo, hi=problem.hi, n_x=9)
    reduced, expand = merge_free_duplicates(fitted)
    assert reduced is fitted and expand(np.ones(9)).tolist() == [1.0] * 9
    bounded = NodeQP(hess=problem.hess, cost=problem.cost, lower=problem.lower, upper=np.full(9, 5.0),
                     a=problem.a, lo=problem.lo, hi=problem.hi, n_x=9)
    assert merge_free_duplicates(bounded)[0] is bounded  # an upper bound is not a free column's
