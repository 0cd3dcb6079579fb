"""Variables a fit's rows force to 0 taken out before the solve (forced_zeros.py): the same
problem, smaller; a later outer pass's fit uses it (decompose.solve_pass)."""

import numpy as np
import scipy.sparse as sp

from dpspec_topdown.estimation import decompose
from dpspec_topdown.estimation import postprocess
from dpspec_topdown.estimation.forced_zeros import drop_forced_zeros
from dpspec_topdown.estimation.qp import NodeQP


def _problem(lo2=0.0, hi2=0.0):
    """Cells 0-5 fitted to noisy answers; row 0: cells 0-2 add up to 0 (a fixed margin's empty
    group); row 1: cells 3-5 add up to 7; z (column 6) = cells 0 + 1 (an auxiliary sum with an
    objective of its own, row 2); row 3: cells 2 + 5 within [lo2, hi2] (not forcing: cell 5 may be
    positive)."""
    rows = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3]
    cols = [0, 1, 2, 3, 4, 5, 0, 1, 6, 2, 5]
    vals = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0]
    a = sp.csc_matrix((vals, (rows, cols)), shape=(4, 7))
    y = np.array([0.4, -0.3, 1.2, 2.0, 3.5, 1.0, 0.9])
    return NodeQP(
        hess=np.full(7, 2.0),
        cost=-2.0 * y,
        lower=np.zeros(7),
        upper=np.full(7, np.inf),
        a=a,
        lo=np.array([0.0, 7.0, 0.0, lo2]),
        hi=np.array([0.0, 7.0, 0.0, hi2 if hi2 else 9.0]),
        n_x=6,
    )


def test_cells_in_a_group_fixed_at_0_and_sums_of_them_are_taken_out_and_the_optimum_is_the_same():
    problem = _problem()
    reduced, expand = drop_forced_zeros(problem)
    assert reduced.n_var == 3 and reduced.n_x == 3  # cells 3-5 left; z forced through its row
    assert reduced.a.shape[0] == 2  # rows 0 and 2 are empty and dropped; 1 and 3 stay
    x = expand(postprocess.solve_qp(reduced)[0])
    full = postprocess.solve_qp(problem)[0]
    assert x[[0, 1, 2, 6]].tolist() == [0.0, 0.0, 0.0, 0.0]  # exactly 0, not an interior 1e-10
    assert problem.violation(x) < 1e-7
    assert abs(problem.objective(x) - problem.objective(full)) < 1e-6 * abs(problem.objective(full))
    assert np.allclose(x, full, atol=1e-5)


def test_nothing_is_forced_without_a_zero_row_of_nonnegative_variables():
    problem = _problem()
    lifted = NodeQP(
        hess=problem.hess,
        cost=problem.cost,
        lower=problem.lower,
        upper=problem.upper,
        a=problem.a,
        lo=np.array([0.0, 7.0, 0.0, 0.0]),
        hi=np.array([0.5, 7.0, 0.0, 9.0]),
        n_x=6,
    )
    assert drop_forced_zeros(lifted)[0] is lifted  # row 0 may now hold 0.5
    free = NodeQP(
        hess=problem.hess,
        cost=problem.cost,
        lower=np.r_[-1.0, np.zeros(6)],
        upper=problem.upper,
        a=problem.a,
        lo=problem.lo,
        hi=problem.hi,
        n_x=6,
    )
    reduced, _ = drop_forced_zeros(free)  # cell 0 may be negative: row 0 forces nothing, so z is not forced
    assert reduced is free


def test_a_row_no_variable_is_left_to_meet_keeps_the_problem_as_stated():
    problem = _problem(lo2=1.0, hi2=1.0)  # row 3 needs cell 2 + cell 5 = 1 and row 0 forces cell 2 only
    assert drop_forced_zeros(problem)[0].n_var == 3
    impossible = NodeQP(
        hess=problem.hess,
        cost=problem.cost,
        lower=problem.lower,
        upper=problem.upper,
        a=sp.csc_matrix(problem.a.toarray()[:, [0, 1, 2, 3, 4, 2, 6]]),
        lo=problem.lo,
        hi=problem.hi,
        n_x=6,
    )  # row 3 now reads cell 2 twice: forced, and it needs 1
    assert drop_forced_zeros(impossible)[0] is impossible
    assert decompose.solve_pass(impossible, True)[0] is None  # the solver says there is no solution


def test_a_later_pass_solves_without_the_forced_variables(monkeypatch):
    problem = _problem()
    seen = []
    real = postprocess.solve_qp

    def watched(sub, *args):
        seen.append(sub.n_var)
        return real(sub, *args)

    monkeypatch.setattr(postprocess, "solve_qp", watched)
    x, ok, _, _, _ = decompose.solve_pass(problem, True)
    assert seen == [3] and ok and x.size == 7 and x[[0, 1, 2, 6]].tolist() == [0.0] * 4
    seen.clear()
    decompose.solve_pass(problem, False)  # a first outer pass is solved as stated
    assert seen == [7]


def test_unforced_keeps_the_variables_no_fixed_margin_holds_at_0():
    from dpspec_topdown.estimation.forced_zeros import unforced

    cells = np.arange(3)
    variables = (cells, np.array([0, 0, 0, 1, 1, 1]), np.array([0, 1, 2, 0, 1, 2]), np.array([0, 1, 2, 0, 1, 2]))
    margin = (np.array([0, 0, 1, 2, 2, 3]), 4, np.array([2.0, 0.0, 5.0, 1.0]))  # key 1 (variable 2) fixed at 0
    kept, fixed, live = unforced(variables, [margin])
    assert live.tolist() == [True, True, False, True, True, True]
    assert [v.tolist() for v in kept[1:]] == [[0, 0, 1, 1, 1], [0, 1, 0, 1, 2], [0, 1, 0, 1, 2]]
    assert fixed[0][0].tolist() == [0, 0, 2, 2, 3] and fixed[0][1] == 4
    assert unforced(variables, [(margin[0], 4, np.array([2.0, 1.0, 5.0, 1.0]))])[2] is None
    assert unforced(variables, [])[2] is None


def test_joint_outer_passes_fit_without_the_forced_cells_and_release_the_same(monkeypatch):
    """The joint outer passes' later fits are built over the cells their fixed margins leave free
    (fewer variables), and the release is the one the fits over every cell give."""
    from dpspec_topdown.estimation import forced_zeros
    from dpspec_topdown.estimation import joint_problem
    from tests.test_topdown_joint_production import OUTER, _data, _run_passes

    households, units = _data(n_blocks=9)
    sizes = []
    real_qp = joint_problem.joint_qp

    def watched(task_a, qa, task_b, qb, cross, va, vb):
        sizes.append(va[1].size + vb[1].size)
        return real_qp(task_a, qa, task_b, qb, cross, va, vb)

    monkeypatch.setattr(joint_problem, "joint_qp", watched)
    outer = [
        OUTER[0],
        {"estimation": [[()]], "rounding": [[("hhsize",)]]},
        {"estimation": [[("hhsize", "tenure")]], "rounding": [[("hhsize", "tenure")]]},
    ]
    taken_out = _run_passes(households, units, outer)
    taken_sizes, sizes[:] = list(sizes), []
    monkeypatch.setattr(forced_zeros, "unforced", lambda variables, fixed: (variables, fixed, None))
    every_cell = _run_passes(households, units, outer)
    assert sum(taken_sizes) < sum(sizes)  # some block's household sizes were fixed at 0
    for name in every_cell.hierarchy.names:
        assert (taken_out.histograms[name] != every_cell.histograms[name]).nnz == 0, name
        assert (taken_out.joint["units"].histograms[name] != every_cell.joint["units"].histograms[name]).nnz == 0
