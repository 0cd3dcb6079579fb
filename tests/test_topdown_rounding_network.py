"""The rounding LP as a min-cost flow (estimation/network.py): which row sets are a network, the
flow's optimum against HiGHS's on random and captured problems, and HiGHS where it is not one."""

import os

import numpy as np
import pytest
import scipy.sparse as sp

from dpspec_topdown.estimation import highs, network, postprocess, rounding


TIGHT = {"dual_feasibility_tolerance": 1e-10, "primal_feasibility_tolerance": 1e-10}


def _matrix(rows, n):
    """A 0/1 matrix with the given rows (lists of columns)."""
    r = np.concatenate([[i] * len(cols) for i, cols in enumerate(rows)])
    c = np.concatenate([list(cols) for cols in rows])
    return sp.csc_matrix((np.ones(r.size), (r, c)), shape=(len(rows), n))


def _highs_optimum(cost, upper, a, lo, hi):
    _, d, _ = highs._highs(cost, np.zeros(cost.size), upper, a, lo, hi, options=TIGHT)
    return float(cost @ d)


def test_a_laminar_family_is_a_forest_of_smallest_containing_rows():
    # rows over 6 columns: {0..5} > {0,1,2} > {0,1}; {3,4}; and {0,1} again (an equal set)
    a = sp.csr_matrix(_matrix([[0, 1, 2, 3, 4, 5], [0, 1, 2], [0, 1], [3, 4], [0, 1]], 6))
    parent, smallest = network.forest(a, np.arange(5))
    assert parent.tolist() == [-1, 0, 1, 0, 2]  # the later of the equal rows under the earlier
    assert smallest.tolist() == [4, 4, 1, 3, 3, 0]


def test_crossing_rows_are_no_forest():
    a = sp.csr_matrix(_matrix([[0, 1], [1, 2]], 3))
    assert network.forest(a, np.arange(2)) is None
    assert network.forest(a, np.arange(1)) is not None  # each alone is


def _cells_children():
    """2 children x 3 cells (variable = child * 3 + cell): parent sums per cell (cell side),
    each child's total and a margin over its cells 0-1 (child side)."""
    cell_rows = [[c, 3 + c] for c in range(3)]
    child_rows = [[0, 1, 2], [3, 4, 5], [0, 1], [3, 4]]
    a = _matrix(cell_rows + child_rows, 6)
    side = np.array([True] * 3 + [False] * 4)
    return a, side


def test_parent_sums_and_nested_child_rows_are_a_network():
    a, side = _cells_children()
    lo = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    hi = np.array([1.0, 1.0, 0.0, 2.0, 1.0, 1.0, 1.0])
    net = network.network_form(np.zeros(6), np.ones(6), a, lo, hi, side)
    assert net is not None and net.n_var == 6 and net.n_nodes == 8
    assert net.tail[:6].tolist() == [1, 2, 3, 1, 2, 3]  # a variable leaves its cell's node
    assert net.head[:6].tolist() == [6, 6, 4, 7, 7, 5]  # and enters its smallest child-side row


@pytest.mark.parametrize(
    "change",
    ["crossing child rows", "a coefficient of -1", "a fractional bound", "every row on one side"],
)
def test_what_is_not_a_network_here(change):
    a, side = _cells_children()
    a = sp.lil_matrix(a)
    lo, hi = np.zeros(7), np.ones(7)
    if change == "crossing child rows":
        a[6, 3], a[6, 4], a[6, 1], a[6, 2] = 0.0, 0.0, 1.0, 1.0  # {3, 4} becomes {1, 2}, crossing {0, 1}
    elif change == "a coefficient of -1":
        a[6, 0] = -1.0
    elif change == "a fractional bound":
        hi[4] = 1.5
    else:
        side = np.zeros(7, dtype=bool)  # a cell's row crosses a child's total
    assert network.network_form(np.zeros(6), np.ones(6), sp.csc_matrix(a), lo, hi, side) is None
    assert network.solve_flow(np.zeros(6), np.ones(6), sp.csc_matrix(a), lo, hi, side)[0] == "not a network"


def _random_network(seed):
    """A rounding LP of TopDown's shape around a random integer point: children x cells, each
    variable's bound 1 (or a merged column's few), equal parent sums per cell, each child's
    total and two nested margins per child (coarser groups of cells) within +-1 of the point."""
    rng = np.random.default_rng(seed)
    n_children, n_cells = int(rng.integers(2, 8)), int(rng.integers(4, 40))
    vc, vcell = np.repeat(np.arange(n_children), n_cells), np.tile(np.arange(n_cells), n_children)
    keep = rng.random(vc.size) < 0.8
    vc, vcell = vc[keep], vcell[keep]
    n = vc.size
    upper = np.where(rng.random(n) < 0.1, rng.integers(2, 5, n), 1).astype(np.float64)
    point = np.floor(rng.random(n) * (upper + 1))
    fine = rng.integers(0, max(2, n_cells // 3), n_cells)
    coarse = fine % 2
    blocks, side = [], []
    for key, n_keys, cell_side, slack in (
        (vcell, n_cells, True, 0),
        (vc, n_children, False, 1),
        (vc * 2 + coarse[vcell], n_children * 2, False, 1),
        (vc * n_cells + fine[vcell], n_children * n_cells, False, 1),
    ):
        present, local = np.unique(key, return_inverse=True)
        s = np.bincount(local, weights=point)
        blocks.append(
            (sp.csc_matrix((np.ones(n), (local, np.arange(n))), shape=(present.size, n)), s - slack, s + slack)
        )
        side.append(np.full(present.size, cell_side))
    a = sp.vstack([b[0] for b in blocks]).tocsc()
    lo, hi = np.concatenate([b[1] for b in blocks]), np.concatenate([b[2] for b in blocks])
    cost = rng.uniform(-1.0, 1.0, n)
    return cost, upper, a, lo, hi, np.concatenate(side)


@pytest.mark.parametrize("seed", range(12))
def test_the_flow_reaches_highs_optimum_on_random_networks(seed):
    cost, upper, a, lo, hi, side = _random_network(seed)
    status, d, _ = network.solve_flow(cost, upper, a, lo, hi, side)
    assert status == "optimal"
    assert np.all((d >= 0) & (d <= upper)) and np.array_equal(d, np.rint(d))
    act = a @ d
    assert np.all((act >= lo) & (act <= hi))
    best = _highs_optimum(cost, upper, a, lo, hi)
    assert abs(cost @ d - best) <= 1e-9 * max(1.0, abs(best))


def test_an_infeasible_network_is_reported_and_not_solved():
    cost, upper, a, lo, hi, side = _random_network(3)
    lo, hi = lo.copy(), hi.copy()
    lo[0] = hi[0] = a[0].sum() + 1  # a cell's sum beyond what its variables reach
    status, d, _ = network.solve_flow(cost, upper, a, lo, hi, side)
    assert status != "optimal" and d is None


@pytest.fixture(scope="module")
def captured_lps(tmp_path_factory):
    """The rounding LPs of a small TopDown run with production's strategy and passes, captured."""
    import sys

    from dpspec_topdown.design import Design
    from dpspec_topdown.run.context import RunContext
    from dpspec_topdown.run.topdown import run_topdown
    from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, generate_population

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    from bench_topdown import production_strategy

    where = tmp_path_factory.mktemp("round")
    shares, strategy, recodes, rho, passes = production_strategy()
    saved = os.environ.get(network.CAPTURE_ENV)
    os.environ[network.CAPTURE_ENV] = str(where)
    try:
        run_topdown(
            generate_population(3000, 100, seed=4),
            Design(
                ["nation"] + LEVELS,
                PL94_VARIABLES,
                strategy,
                rho,
                shares,
                "hamming",
                [("state", ())],
                recodes=recodes,
                passes=passes,
            ),
            RunContext(np.random.default_rng(2), workers=1),
        )
    finally:
        if saved is None:
            os.environ.pop(network.CAPTURE_ENV)
        else:
            os.environ[network.CAPTURE_ENV] = saved
    return sorted(where.glob("round-*.npz"))


def test_every_captured_rounding_is_a_network_with_highs_optimum(captured_lps):
    assert len(captured_lps) > 5
    for path in captured_lps:
        p = network.load(str(path))
        status, d, _ = network.solve_flow(p["cost"], p["upper"], p["a"], p["lo"], p["hi"], p["cell_side"])
        assert status == "optimal", path.name
        best = _highs_optimum(p["cost"], p["upper"], p["a"], p["lo"], p["hi"])
        assert abs(p["cost"] @ d - best) <= 1e-9 * max(1.0, abs(best)), path.name


def _crossing_task():
    """A root node of one child and four cells whose two margins cross ({0, 1} and {1, 2}):
    not a network as stated (both margins on the child side)."""
    task = postprocess.NodeTask(key=0, n_children=1, n_cells=4, parent=None, measurements=(), constraints=())
    x = np.array([0.5, 0.5, 0.5, 0.7])
    cells, vc = np.arange(4), np.zeros(4, dtype=np.int64)
    margins = (
        (np.array([0, 0, 1, 1]), 2, np.array([1.0, 0.0]), np.array([1.0, 2.0])),
        (np.array([1, 0, 0, 1]), 2, np.array([1.0, 0.0]), np.array([1.0, 2.0])),
    )
    return task, x, cells, vc, margins


def test_a_rounding_that_is_no_network_is_solved_by_highs(monkeypatch):
    task, x, cells, vc, margins = _crossing_task()
    monkeypatch.setenv(rounding.SOLVER_ENV, "flow")
    said = []
    real = network.solve_flow

    def watched(*args, **kwargs):
        out = real(*args, **kwargs)
        said.append(out[0])
        return out

    monkeypatch.setattr(network, "solve_flow", watched)
    counts, _, _ = rounding._round(task, x, cells, vc, cells, cells, margins=margins)
    assert said == ["not a network"]
    monkeypatch.setenv(rounding.SOLVER_ENV, "highs")
    assert np.array_equal(counts, rounding._round(task, x, cells, vc, cells, cells, margins=margins)[0])


def test_without_the_flow_solver_highs_solves_the_rounding(monkeypatch):
    from dpspec.api import LazyModule

    task = postprocess.NodeTask(key=0, n_children=2, n_cells=3, parent=None, measurements=(), constraints=())
    x = np.array([0.5, 1.5, 0.2, 2.5, 0.5, 0.8])
    vc, vcell = np.repeat([0, 1], 3), np.tile([0, 1, 2], 2)
    cells = np.arange(3)

    monkeypatch.setenv(rounding.SOLVER_ENV, "flow")
    with_flow = rounding._round(task, x, vcell, vc, vcell, cells)[0]
    # OR-Tools as a module that is not installed (network.py binds it once, as a LazyModule)
    absent = LazyModule("ortools_not_installed_here", "min_cost_flow", vars(network))
    monkeypatch.setattr(network, "min_cost_flow", absent)
    assert network.solve_flow(np.zeros(1), np.ones(1), sp.csc_matrix(np.ones((1, 1))), [0.0], [1.0], [False])[0] == (
        "not installed"
    )
    without = rounding._round(task, x, vcell, vc, vcell, cells)[0]
    assert np.abs(without - x).sum() == pytest.approx(np.abs(with_flow - x).sum())
