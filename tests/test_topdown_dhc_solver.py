"""Production's DHC solver constructs on small hand-made nodes: the opt_tol pass tolerance,
the failsafe over a minimal schema and joint histograms with a cross constraint."""

from fractions import Fraction

import attrs
import numpy as np
import pytest

from dpspec_topdown.estimation import node_solve
from dpspec_topdown.estimation import postprocess
from dpspec_topdown.estimation.multipass import PassPlan, _with_rows, fit_in_passes, optimal_tolerance
from dpspec_topdown.estimation.postprocess import GroupConstraint, MeasuredQuery, NodeTask

# 4 cells: (a, b) with a, b in {0, 1}; cell = 2 a + b
TOTAL = MeasuredQuery("total", np.zeros(4, dtype=np.int64), 1, 1.0)
DETAILED = MeasuredQuery("detailed", np.arange(4, dtype=np.int64), 4, 1.0)


def _task(parent, totals, detailed, constraints=()):
    return NodeTask(
        key=0,
        n_children=len(totals),
        n_cells=4,
        parent=np.asarray(parent, dtype=np.int64),
        measurements=(np.asarray(totals, dtype=np.int64).reshape(-1, 1), np.asarray(detailed, dtype=np.int64)),
        constraints=tuple(constraints),
    )


def _only_detailed(task):
    return attrs.evolve(task, measurements=task.measurements[1:])


def _totals(x, vc, n):
    return np.bincount(vc, weights=x[: vc.size], minlength=n)


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


# --- the failsafe ------------------------------------------------------------------------------

# minimal schema [a]: the kept marginal adds over a, i.e. it is b (cell % 2)
KEEP_B = postprocess.Failsafe(np.arange(4, dtype=np.int64) % 2, 2)
A_OF_CELL = np.arange(4, dtype=np.int64) // 2


def _a_targets(targets):
    """Each child's a-margin held exactly (an equality target, as equal_to makes them)."""
    targets = np.asarray(targets, dtype=np.int64)
    return GroupConstraint("equal_to product", A_OF_CELL, 2, np.arange(len(targets), dtype=np.int64), targets)


def test_failsafe_relaxes_the_children_sums_and_keeps_the_minimal_schema_sums():
    parent = np.array([4, 3, 2, 1])  # a=0: 7, a=1: 3; b=0: 6, b=1: 4
    targets = [[2, 2], [2, 2], [2, 0]]  # a=1 totals 4: no split of the parent meets them
    task = _task(parent, [4, 4, 2], [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0]], [_a_targets(targets)])
    with pytest.raises(postprocess.NodeError, match="no nonnegative split|cannot be met|rounding"):
        node_solve.solve_node(task, [TOTAL, DETAILED])
    result = node_solve.solve_node(attrs.evolve(task, failsafe=KEEP_B), [TOTAL, DETAILED])
    assert result.relaxed and result.failsafe
    counts = np.zeros((3, 4), dtype=np.int64)
    np.add.at(counts, (result.child, result.cell), result.count)
    # the equality targets hold exactly, the b sums (the marginal over the non-minimal schema) too
    assert np.array_equal(np.stack([counts[:, A_OF_CELL == g].sum(axis=1) for g in (0, 1)], axis=1), targets)
    assert counts[:, 0::2].sum() == 6 and counts[:, 1::2].sum() == 4
    # the cells no longer add up to the parent's: by exactly the least slack (|3 - 4| + |7 - 6|)
    assert np.abs(counts.sum(axis=0) - parent).sum() == 2
    assert counts.min() >= 0


def test_a_node_without_a_solution_even_after_the_failsafe_is_a_failsafe_error():
    parent = np.array([4, 3, 2, 1])
    targets = [[3, 2], [3, 2], [2, 0]]  # 12 persons held where the parent has 10
    task = _task(parent, [5, 5, 2], [[1, 1, 1, 1]] * 3, [_a_targets(targets)])
    with pytest.raises(postprocess.FailsafeError, match="relaxed over the minimal schema"):
        node_solve.solve_node(attrs.evolve(task, failsafe=KEEP_B), [TOTAL, DETAILED])


def test_the_top_node_is_never_relaxed():
    task = attrs.evolve(
        _task([4, 3, 2, 1], [4, 4, 2], [[1, 1, 1, 1]] * 3, [_a_targets([[2, 2], [2, 2], [2, 0]])]),
        parent=None,
        failsafe=KEEP_B,
    )
    task = attrs.evolve(
        task, constraints=(GroupConstraint("x", A_OF_CELL, 2, np.zeros(3, dtype=np.int64), np.array([[-1, 2]])),)
    )
    with pytest.raises(postprocess.NodeError) as info:
        node_solve.solve_node(task, [TOTAL, DETAILED])
    assert not isinstance(info.value, postprocess.FailsafeError)


# --- the failsafe in a run ---------------------------------------------------------------------


def _run_forcing_one_node(monkeypatch, fail_relaxed: bool):
    """A small run whose first tract node is made to fail its exact solve (as an inconsistent
    product would make it), so the run must take the failsafe there."""
    from dpspec.errors import MechanismError
    from dpspec_topdown.run.topdown import run_topdown
    from dpspec_topdown.design import Design
    from dpspec_topdown.run.context import RunContext
    from dpspec_topdown.synthetic import (
        LEVELS,
        PL94_VARIABLES,
        PRODUCTION_LEVEL_SHARES,
        PRODUCTION_RHO,
        generate_population,
        pl94_strategy,
    )

    exact, relaxed = node_solve._solve_node, postprocess.solve_relaxed
    forced = []

    def failing(task, queries, solver, plan):
        if task.n_children > 1 and task.parent is not None and not forced and task.n_children < 20:
            forced.append(task.key)
            raise MechanismError("no nonnegative split (forced by the test)")
        return exact(task, queries, solver, plan)

    def relaxed_or_fail(task, queries, why=""):
        if fail_relaxed:
            raise postprocess.FailsafeError(task.key, "no solution even with the children sums relaxed (forced)")
        return relaxed(task, queries, why)

    monkeypatch.setattr(node_solve, "_solve_node", failing)
    monkeypatch.setattr(postprocess, "solve_relaxed", relaxed_or_fail)
    persons = generate_population(1500, 60, seed=3)
    shares = PRODUCTION_LEVEL_SHARES
    result = run_topdown(
        persons,
        Design(
            ["nation"] + LEVELS,
            PL94_VARIABLES,
            pl94_strategy(tuple(shares)),
            PRODUCTION_RHO,
            shares,
            "hamming",
            [("state", ())],
            failsafe=["hhgq"],
        ),
        RunContext(np.random.default_rng(0), workers=1),
    )
    return result, persons, forced


def test_a_run_takes_the_failsafe_and_re_adds_the_levels_above(monkeypatch):
    result, persons, forced = _run_forcing_one_node(monkeypatch, fail_relaxed=False)
    assert forced
    assert sum(t.get("relaxed_nodes", 0) for t in result.timings["levels"].values()) == 1
    assert len(result.microdata) == len(persons)  # the state total (an invariant) still holds
    # every level adds up (the run verifies it too): the level above the relaxed node was re-added
    from dpspec_topdown.measurement.histogram import aggregate

    hist, hier = result.histograms, result.hierarchy
    for k in range(1, len(hier.levels)):
        up = aggregate(hist[hier.names[k]], hier.levels[k].parent, hier.levels[k - 1].n_units)
        assert (up != hist[hier.names[k - 1]]).nnz == 0


def test_a_node_the_failsafe_cannot_save_stops_the_run_with_a_data_error(monkeypatch):
    from dpspec.errors import DataError

    with pytest.raises(DataError, match=r"TopDown cannot split the \w+ \S+ into its \w+ units"):
        _run_forcing_one_node(monkeypatch, fail_relaxed=True)


def test_failsafe_names_histogram_variables():
    from dpspec.errors import SpecError
    from dpspec_topdown.run.topdown import _failsafe
    from dpspec_topdown.measurement.histogram import Schema

    schema = Schema.from_variables({"a": [0, 1], "b": [0, 1]})
    fs = _failsafe(["a"], schema)
    assert np.array_equal(fs.groups, np.arange(4) % 2) and fs.n_groups == 2
    with pytest.raises(SpecError, match="minimal_schema names 'c'"):
        _failsafe(["c"], schema)


# --- the settings in a spec --------------------------------------------------------------------


def _pl94(replace):
    import os

    from dpspec.language.parser import parse, read_source
    from tests.conftest import SPECS

    path = os.path.join(SPECS, "pl94_production_topdown.dps")
    text = read_source(path)
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return parse(text, path)


def test_spec_states_the_opt_tol_tolerance_and_the_failsafe():
    from dpspec.check.checker import check
    from dpspec_topdown.params.passes import _passes
    from dpspec_topdown.design import design_from_spec

    spec = _pl94(
        {
            "  pass_tolerance: 0.1\n": "  pass_tolerance: 0.1\n  pass_tolerance_type: opt_tol\n"
            "  failsafe: {\n    minimal_schema: [hhgq]\n  }\n"
        }
    )
    params = check(spec).params
    assert params["failsafe"] == {"minimal_schema": ("hhgq",)}
    assert design_from_spec(spec, params).failsafe == ["hhgq"]
    passes = _passes(params, ["hhgq", "votingage", "hispanic", "cenrace"])
    assert {p["tolerance_type"] for p in passes.values()} == {"opt_tol"}


def test_a_failsafe_naming_no_histogram_variable_is_a_located_spec_error():
    from dpspec.check.checker import check
    from dpspec.errors import SpecError

    spec = _pl94(
        {"  pass_tolerance: 0.1\n": "  pass_tolerance: 0.1\n  failsafe: {\n    minimal_schema: [gqtype]\n  }\n"}
    )
    with pytest.raises(SpecError) as info:
        check(spec)
    found = [d for d in info.value.diagnostics if "minimal_schema names gqtype" in d.message]
    assert found and found[0].line is not None


def test_an_unknown_tolerance_type_is_a_spec_error():
    from dpspec.check.checker import check
    from dpspec.errors import SpecError

    spec = _pl94({"  pass_tolerance: 0.1\n": "  pass_tolerance: 0.1\n  pass_tolerance_type: optimal\n"})
    with pytest.raises(SpecError, match="opt_tol"):
        check(spec)


# --- joint histograms with a cross constraint --------------------------------------------------


def _counts(result, n_children, n_cells):
    out = np.zeros((n_children, n_cells), dtype=np.int64)
    np.add.at(out, (result.child, result.cell), result.count)
    return out


def test_joint_node_holds_households_equal_to_occupied_units_at_every_child():
    from dpspec_topdown.estimation.joint import CrossConstraint, solve_joint_node

    households = _task([9, 7, 5, 3], [10, 6, 12], [[4, 3, 2, 1], [3, 1, 2, 0], [2, 4, 1, 3]])
    # units: cell 0 occupied, cell 1 vacant; 24 occupied units = 24 households in the parent
    units = NodeTask(
        key=0,
        n_children=3,
        n_cells=2,
        parent=np.array([24, 5]),
        measurements=(np.array([[5, 1], [9, 2], [7, 2]]),),
        constraints=(),
    )
    unit_detail = MeasuredQuery("detailed", np.arange(2, dtype=np.int64), 2, 1.0)
    h1 = CrossConstraint("h1", np.zeros(4, dtype=np.int64), np.array([0, -1]), 1)
    res_h, res_u = solve_joint_node(households, [TOTAL, DETAILED], units, [unit_detail], [h1])
    h, u = _counts(res_h, 3, 4), _counts(res_u, 3, 2)
    assert np.array_equal(h.sum(axis=0), [9, 7, 5, 3]) and np.array_equal(u.sum(axis=0), [24, 5])
    assert np.array_equal(h.sum(axis=1), u[:, 0])  # the tie, child by child
    assert h.min() >= 0 and u.min() >= 0
    # solved apart, the two tables disagree somewhere: the tie is what holds them together
    alone_h = _counts(node_solve.solve_node(households, [TOTAL, DETAILED]), 3, 4)
    alone_u = _counts(node_solve.solve_node(units, [unit_detail]), 3, 2)
    assert not np.array_equal(alone_h.sum(axis=1), alone_u[:, 0])


def test_joint_node_without_a_solution_is_a_mechanism_error():
    from dpspec.errors import MechanismError
    from dpspec_topdown.estimation.joint import CrossConstraint, solve_joint_node

    households = _task([9, 7, 5, 3], [10, 6, 12], [[4, 3, 2, 1]] * 3)
    units = NodeTask(
        key=0,
        n_children=3,
        n_cells=2,
        parent=np.array([20, 5]),  # 20 occupied, 24 households
        measurements=(np.array([[5, 1], [9, 2], [7, 2]]),),
        constraints=(),
    )
    h1 = CrossConstraint("h1", np.zeros(4, dtype=np.int64), np.array([0, -1]), 1)
    with pytest.raises(MechanismError, match="cross constraints \\(h1\\)"):
        solve_joint_node(
            households,
            [TOTAL, DETAILED],
            units,
            [MeasuredQuery("detailed", np.arange(2, dtype=np.int64), 2, 1.0)],
            [h1],
        )


JOINT_SPEC = """
spec "households and housing units solved jointly"

domain tiny "two tables on one geography" {
  geography census { state > county > block }
  table households unit household {
    state  : category
    county : category in state
    block  : category in county
    hhsize : {1, 2, 3}
    tenure : {0, 1}
  }
  table units unit housing_unit {
    state  : category
    county : category in state
    block  : category in county
    vacs   : {0, 1, 2}
  }
}

unit households : hamming
premetric zcdp

mechanism topdown {
  table: households
  variables: hhsize, tenure
  rho: 1
  levels: { state: 1/4  county: 1/4  block: 1/2 }
  queries: { total: 1/4  detailed: 1/4 }
  joint: {
    units: {
      table: units
      variables: vacs
      recodes: { occupancy: { of: vacs  occupied: [0]  vacant: [1, 2] } }
      queries: { occupancy: 1/4  detailed: 1/4 }
    }
  }
  cross_constraints: {
    h1: {
      left: "households: total"
      right: "units: occupancy = occupied"
    }
  }
}

release {
  microdata households
}
"""


def _joint_spec(replace=None):
    from tests.conftest import edited_spec

    from tests.topdown_geography import parse

    return edited_spec(JOINT_SPEC, "joint.dps", replace, parse=parse)


def test_joint_spec_checks_and_its_budget_lists_both_tables_queries():
    from dpspec.check.checker import check
    from dpspec_topdown.params.joint import _cross_constraints
    from dpspec_topdown.params.tables import _joint
    from dpspec_topdown.plugin import TopDown

    spec = _joint_spec()
    checked = check(spec)
    params = checked.params
    joint = _joint(spec, params)
    assert [j["table"] for j in joint] == ["units"]
    (h1,) = _cross_constraints(spec, params, joint)
    assert h1["left"] == ("households", (), None) and h1["right"] == ("units", ("occupancy",), 0)
    rows = TopDown().budget_breakdown(spec, params).figures["allocation"]
    by = {(r["level"], r["query"]): r for r in rows}
    assert by[("block", "units: occupancy")]["rho_exact"] == "1/8"  # 1 x 1/2 x 1/4, exact
    assert by[("county", "detailed")]["rho_exact"] == "1/16"
    total = sum(Fraction(r["rho_exact"]) for r in rows)
    assert total == 1
    # `dpspec verify`'s neighbours change one household: the units' queries do not read it
    (pair,) = TopDown().neighbours(spec, params)
    assert pair.label.startswith("one households record")


@pytest.mark.parametrize(
    "replace, message",
    [
        (
            {'right: "units: occupancy = occupied"': 'right: "persons: total"'},
            "right side names table 'persons', which is not solved jointly",
        ),
        (
            {'right: "units: occupancy = occupied"': 'right: "units: occupancy"'},
            "the left side has 1 groups and the right side 2",
        ),
        (
            {'right: "units: occupancy = occupied"': 'right: "units: occupancy = empty"'},
            "'empty' is not a group of 'occupancy'",
        ),
        (
            {"queries: { occupancy: 1/4  detailed: 1/4 }": "queries: { occupancy: 1/4  detailed: 1/2 }"},
            "shares must sum to exactly 1",
        ),
        ({"table: units\n": "table: households\n"}, "names table 'households', which must be a further table"),
        (
            {
                "    tenure : {0, 1}\n": "    tenure : {0, 1}\n    aian   : {0, 1}\n",
                "  variables: hhsize, tenure\n": "  variables: hhsize, tenure\n  spine: { aian: aian }\n",
            },
            "table 'units' has no column aian",
        ),
    ],
)
def test_joint_misuse_is_a_located_spec_error(replace, message):
    from dpspec.check.checker import check
    from dpspec.errors import SpecError

    with pytest.raises(SpecError) as info:
        check(_joint_spec(replace))
    assert message in str(info.value)
    assert any(message in d.message and d.line is not None for d in info.value.diagnostics)


def _households_and_units(seed=1, n_blocks=40):
    """Housing units (vacs 0 = occupied) and one household per occupied unit, on 4 counties."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    blocks = np.array([f"{c:02d}{b:03d}" for c in range(4) for b in range(n_blocks // 4)], dtype=object)
    per_block = rng.integers(0, 8, size=blocks.size)
    unit_block = np.repeat(blocks, per_block)
    vacs = rng.integers(0, 3, size=unit_block.size)
    occupied = unit_block[vacs == 0]
    units = pd.DataFrame({"state": "01", "county": [b[:2] for b in unit_block], "block": unit_block, "vacs": vacs})
    households = pd.DataFrame(
        {
            "state": "01",
            "county": [b[:2] for b in occupied],
            "block": occupied,
            "hhsize": rng.integers(1, 4, size=occupied.size),
            "tenure": rng.integers(0, 2, size=occupied.size),
        }
    )
    return households, units


def _joint_run(households, units, **kwargs):
    from dpspec_topdown.design import Design
    from dpspec_topdown.run.context import JointTable, Records, RunContext
    from dpspec_topdown.run.topdown import run_topdown
    from dpspec_topdown.measurement.histogram import Recode

    shares = {"state": Fraction(1, 4), "county": Fraction(1, 4), "block": Fraction(1, 2)}
    occupancy = Recode.build("occupancy", "vacs", [0, 1, 2], {"occupied": [0], "vacant": [1, 2]})
    table = JointTable(
        "units",
        units,
        {"vacs": [0, 1, 2]},
        {lv: [(("occupancy",), Fraction(1, 4)), (("vacs",), Fraction(1, 4))] for lv in shares},
        recodes=[occupancy],
        invariants=[("block", ())],
        cross=[("h1", (), None, ("occupancy",), 0, 1)],
    )
    strategy = {lv: [((), Fraction(1, 4)), (("hhsize", "tenure"), Fraction(1, 4))] for lv in shares}
    return run_topdown(
        Records(households, joint=table),
        Design(
            ["nation", "state", "county", "block"],
            {"hhsize": [1, 2, 3], "tenure": [0, 1]},
            strategy,
            1,
            shares,
            "hamming",
            [("state", ())],
            **kwargs,
        ),
        RunContext(np.random.default_rng(0), workers=1),
    )


def test_a_joint_run_ties_households_to_occupied_units_at_every_level():
    from dpspec_topdown.estimation.joint_problem import side_sums

    households, units = _households_and_units()
    result = _joint_run(households, units)
    other = result.joint["units"]
    hier = result.hierarchy
    assert len(result.microdata) == len(households)  # the state invariant
    for k, name in enumerate(hier.names):
        left = np.asarray(result.histograms[name].sum(axis=1)).ravel()
        right = side_sums(other.histograms[name], np.array([0, -1, -1]), 1).ravel()
        assert np.array_equal(left, right), name
    # the units' invariant (units per block) holds exactly, and the release is not the data
    out = other.microdata
    assert out.groupby("block").size().sort_index().equals(units.groupby("block").size().sort_index())
    assert not np.array_equal(
        out.groupby("block")["vacs"].apply(lambda v: (v == 0).sum()).sort_index().to_numpy(),
        units.groupby("block")["vacs"].apply(lambda v: (v == 0).sum()).sort_index().to_numpy(),
    )
    # both tables' queries share one budget: rho 1 in all
    assert result.total_rho == 1 and other.allocation.total_rho + result.allocation.total_rho == 1
    # their noise streams differ (keyed by table): the measurements are not copies of each other
    assert set(other.measurements["query"]) == {"occupancy", "vacs"}


def test_data_breaking_a_cross_constraint_are_a_data_error_naming_the_unit():
    from dpspec.errors import DataError

    households, units = _households_and_units()
    extra = households.iloc[[0]].copy()
    block = str(extra["block"].iloc[0])
    with pytest.raises(
        DataError, match=rf"cross constraint 'h1': block {block}, cell total of the main table: \d+ there"
    ):
        _joint_run(_concat(households, extra), units)


def _concat(a, b):
    import pandas as pd

    return pd.concat([a, b], ignore_index=True)


def test_joint_tables_refuse_passes_other_than_outer_passes():
    from dpspec.errors import SpecError

    households, units = _households_and_units(n_blocks=8)
    with pytest.raises(SpecError, match="with a joint table, give the passes as outer_passes"):
        _joint_run(households, units, passes={"county": {"estimation": [[()]], "tolerance": Fraction(1, 10)}})


def _joint_spec_with_data(tmp_path, seed=5):
    households, units = _households_and_units(seed=seed)
    (tmp_path / "in").mkdir()
    households.to_csv(tmp_path / "in" / "households.csv", index=False)
    units.to_csv(tmp_path / "in" / "units.csv", index=False)
    text = JOINT_SPEC.replace(
        "unit households : hamming",
        'data households from "households.csv"\n'
        'data units from "units.csv"\n\ninvariants {\n  count households by state\n'
        "  count units by block\n}\n\nunit households : hamming",
    )
    text = text.replace(
        "release {\n  microdata households\n}",
        "release {\n  microdata households\n  microdata units\n  output joint_measurements\n}",
    )
    from tests.topdown_geography import write_declared

    write_declared(tmp_path / "in" / "joint.dps", text)
    return tmp_path / "in" / "joint.dps"


def test_a_joint_spec_compiles_and_releases_both_tables(tmp_path):
    import pandas as pd
    from click.testing import CliRunner

    from dpspec.cli.main import main

    spec = _joint_spec_with_data(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", str(spec), "-o", str(out), "--seed", "3"])
    # a known seed makes the audit's finding critical (exit 1), but the release is written
    assert result.exit_code == 1 and "[critical] known-seed" in result.output, result.output
    assert "Traceback" not in result.output and "error" not in result.output.lower().replace("errors", "")
    h = pd.read_csv(out / "households.csv", dtype=str)
    u = pd.read_csv(out / "units.csv", dtype=str)
    assert h["block"].notna().all()
    occupied = u[u["vacs"] == "0"].groupby("block").size()
    per_block = h.groupby("block").size().reindex(occupied.index.union(h["block"].unique()), fill_value=0)
    assert per_block.equals(occupied.reindex(per_block.index, fill_value=0))
    assert len(pd.read_csv(out / "joint_measurements.csv")) > 0


def test_a_second_joint_table_is_a_located_spec_error():
    from dpspec.check.checker import check
    from dpspec.errors import SpecError

    spec = _joint_spec(
        {
            "    vacs   : {0, 1, 2}\n  }\n": "    vacs   : {0, 1, 2}\n  }\n  table rooms unit room {\n    state  : category\n"
            "    county : category in state\n    block  : category in county\n"
            "    kind   : {0, 1}\n  }\n",
            "      queries: { occupancy: 1/4  detailed: 1/4 }\n    }\n": "      queries: { occupancy: 1/4  detailed: 1/8 }\n    }\n"
            "    rooms: {\n      table: rooms\n      variables: kind\n"
            "      queries: { total: 1/8 }\n    }\n",
        }
    )
    with pytest.raises(SpecError) as info:
        check(spec)
    found = [d for d in info.value.diagnostics if "one further table" in d.message]
    assert found and found[0].line is not None


# --- the spine from a reference geography ------------------------------------------------------


def _two_tracts():
    """Persons in tract 01 (block groups 1 and 2) and tract 02 (block group 1 only); the
    reference geography also has an empty block group 2 in tract 02."""
    import pandas as pd

    rows = []
    for tract, bg, block, n in (
        ("01", "1", "1001", 6),
        ("01", "1", "1002", 4),
        ("01", "2", "2001", 5),
        ("02", "1", "1001", 7),
        ("02", "1", "1002", 3),
    ):
        rows += [("1", "001", tract, tract + bg, tract + block, i % 2) for i in range(n)]
    persons = pd.DataFrame(rows, columns=["state", "county", "tract", "blockgroup", "block", "sex"])
    reference = pd.concat(
        [
            persons[["state", "county", "tract", "blockgroup", "block"]].drop_duplicates(),
            pd.DataFrame(
                [("1", "001", "02", "022", "022001")], columns=["state", "county", "tract", "blockgroup", "block"]
            ),
        ],
        ignore_index=True,
    )
    return persons, reference


def _spine_run(persons, reference):
    from dpspec_topdown.run.topdown import run_topdown
    from dpspec_topdown.design import Design
    from dpspec_topdown.run.context import Records, RunContext

    levels = ["nation", "state", "county", "tract", "blockgroup", "block"]
    shares = {lv: Fraction(1, 5) for lv in levels[1:]}
    strategy = {lv: [((), Fraction(1, 2)), (("sex",), Fraction(1, 2))] for lv in shares}
    return run_topdown(
        Records(persons, reference_geography=reference),
        Design(
            levels,
            {"sex": [0, 1]},
            strategy,
            4,
            shares,
            "hamming",
            [("state", ())],
            bypass=["county", "tract", "blockgroup"],
        ),
        RunContext(np.random.default_rng(1), workers=1),
    )


def test_the_spine_built_on_the_reference_geography_does_not_bypass_a_tract_with_an_empty_block_group():
    persons, reference = _two_tracts()
    from_data = _spine_run(persons, None)
    from_reference = _spine_run(persons, reference)
    tract = from_data.hierarchy.names.index("tract")
    codes = list(from_data.hierarchy.levels[tract].codes)
    # from the populated units only, tract 02 has a single block group: it is bypassed into it
    assert from_data.budget_classes["tract"][0][codes.index("02")] == 1
    # on the reference geography it has two (one empty): it is measured with its own share only
    ref_codes = list(from_reference.hierarchy.levels[tract].codes)
    classes = from_reference.budget_classes.get("tract")  # absent: every tract spends its own share
    assert classes is None or classes[0][ref_codes.index("02")] == 0
    assert from_reference.hierarchy.levels[-1].n_units == from_data.hierarchy.levels[-1].n_units + 1
    assert len(from_reference.microdata) == len(persons)  # the empty block stays empty or the total holds


def test_a_unit_missing_from_the_reference_geography_is_a_data_error():
    from dpspec.errors import DataError

    persons, reference = _two_tracts()
    with pytest.raises(DataError, match="the reference geography has no block 011001"):
        _spine_run(persons, reference[reference["block"] != "011001"])


def test_a_reference_geography_without_the_aian_flag_is_a_located_spec_error():
    from dpspec.check.checker import check
    from dpspec.errors import SpecError

    spec = _pl94({"    aian: aian\n    bypass": "    aian: aian\n    geography: facilities\n    bypass"})
    with pytest.raises(SpecError) as info:
        check(spec)
    found = [d for d in info.value.diagnostics if "spine: geography names 'facilities'" in d.message]
    assert found and found[0].line is not None and "aian" in found[0].message
    check(_pl94({"    aian: aian\n    bypass": "    aian: aian\n    geography: units\n    bypass"}))  # units has it


@pytest.mark.slow  # a Spark compile: a few seconds on an idle machine (CI runs every test)
def test_a_joint_spec_releases_the_same_bytes_on_spark(tmp_path, spark_session):
    from dpspec.engine.spark import SparkEngine
    from tests.test_engine_mechanisms import compile_on, release_bytes

    spec = str(_joint_spec_with_data(tmp_path, seed=9))
    local = release_bytes(compile_on(spec, "local"), tmp_path / "local")
    on_spark = release_bytes(compile_on(spec, SparkEngine(session=spark_session)), tmp_path / "spark")
    assert set(local) == {"households.csv", "units.csv", "joint_measurements.csv"}
    assert on_spark == local
