"""Multipass estimation and rounding (production's pass structure) on captured real nodes."""

import os
from fractions import Fraction

import attrs
import numpy as np
import pytest

from dpspec.errors import SpecError
from dpspec_topdown.estimation import node_solve
from dpspec_topdown.estimation import postprocess
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import RunContext
from dpspec_topdown.estimation.multipass import PassPlan, fit_in_passes, round_in_passes
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, generate_population

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINE = [("hhgq",), ("hhgq", "hispanic"), ("hhgq", "hispanic", "cenrace"), ("hhgq", "votingage", "hispanic", "cenrace")]
PASSES = {
    lv: {"estimation": [[()]], "rounding": [[()], FINE], "tolerance": Fraction(1, 10)}
    for lv in ("state", "county", "tract", "blockgroup")
}


def _production():
    import sys

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from bench_topdown import production_strategy

    return production_strategy()


@pytest.fixture(scope="module")
def captured():
    shares, strategy, recodes, rho, _ = _production()
    nodes = []
    solve = node_solve.solve_node

    def capture(task, queries, solver="clarabel", plan=None):
        nodes.append((postprocess.node_inputs(task, queries)[0], queries, plan))  # as the node solves it
        return solve(task, queries, solver, plan)

    node_solve.solve_node = capture
    try:
        persons = generate_population(6000, 200, seed=4)
        result = run_topdown(
            persons,
            Design(
                ["nation"] + LEVELS,
                PL94_VARIABLES,
                strategy,
                rho,
                shares,
                "hamming",
                [("state", ())],
                recodes=recodes,
                passes=PASSES,
            ),
            RunContext(np.random.default_rng(2), workers=1),
        )
    finally:
        node_solve.solve_node = solve
    return nodes, result, persons


def test_run_with_production_passes_keeps_every_guarantee(captured):
    nodes, result, persons = captured
    assert len(result.microdata) == len(persons)  # state total invariant
    levels = result.timings["levels"]
    assert levels["tract"]["estimation_passes"] == 2 and levels["tract"]["rounding_passes"] == 2
    assert levels["block"]["estimation_passes"] == 1
    assert sum(t.get("failsafe_nodes", 0) for t in levels.values()) == 0
    assert any(plan is not None and plan.multipass_fit for _, _, plan in nodes)


def _multipass_nodes(nodes):
    return [(t, q, p) for t, q, p in nodes if p is not None and p.multipass_fit and t.n_children > 1]


def test_later_pass_keeps_the_total_within_tolerance(captured):
    nodes, _, _ = captured
    checked = 0
    moved_without_passes = 0.0
    for task, queries, plan in _multipass_nodes(nodes):
        variables = postprocess._node_variables(task)
        cells, vc, va, vcell = variables
        first = PassPlan(estimation=(plan.estimation[0],), tolerance=plan.tolerance)
        x1, *_ = fit_in_passes(task, queries, first, variables)
        x2, _, _, _, _, failsafe = fit_in_passes(task, queries, plan, variables)
        one = postprocess.solve_qp(postprocess.build_node_qp(task, queries, variables))[0]
        assert not failsafe
        tot = lambda x: np.bincount(vc, weights=x[: vc.size], minlength=task.n_children)  # noqa: E731
        assert np.max(np.abs(tot(x2) - tot(x1))) <= plan.tolerance + 1e-6
        moved_without_passes = max(moved_without_passes, float(np.max(np.abs(tot(one) - tot(x1)))))
        checked += 1
    assert checked >= 2
    # the constraint matters: a single pass moves some total by more than the tolerance
    assert moved_without_passes > 0.1


def test_multipass_rounder_keeps_each_pass_margins(captured):
    nodes, _, _ = captured
    for task, queries, plan in _multipass_nodes(nodes)[:4]:
        variables = postprocess._node_variables(task)
        cells, vc, va, vcell = variables
        x, *_ = fit_in_passes(task, queries, plan, variables)
        xstar = np.maximum(x[: vc.size], 0.0)
        counts, _, _, failsafe = round_in_passes(task, xstar, variables, plan)
        assert not failsafe
        assert np.all(counts >= 0) and np.array_equal(counts, np.rint(counts))
        for margins in plan.rounding:
            for _, groups, n_groups in margins:
                key = vc * n_groups + groups[vcell]
                fit = np.bincount(key, weights=xstar, minlength=task.n_children * n_groups)
                got = np.bincount(key, weights=counts, minlength=task.n_children * n_groups)
                assert np.all(got >= np.floor(fit + 1e-6)) and np.all(got <= np.ceil(fit - 1e-6))
        # parent sums exact
        assert np.array_equal(np.bincount(va, weights=counts, minlength=cells.size), task.parent[cells])


def test_failsafe_redoes_an_infeasible_later_pass_in_one_pass(captured, monkeypatch):
    nodes, _, _ = captured
    task, queries, plan = _multipass_nodes(nodes)[0]
    real = postprocess.solve_qp
    calls = []

    def second_pass_fails(problem, solver="clarabel"):
        calls.append(problem.n_var)
        if len(calls) == 2:
            return None, False, 0.0, "clarabel", "PrimalInfeasible"
        return real(problem, solver)

    monkeypatch.setattr(postprocess, "solve_qp", second_pass_fails)
    result = node_solve.solve_node(task, queries, plan=plan)
    assert result.failsafe
    assert result.count.sum() == task.parent.sum()  # still a valid split of the parent


def test_estimation_pass_fitting_nothing_measured_is_a_spec_error():
    """A pass may name queries the level does not measure (production's orderings are shared by
    the levels), but one that fits nothing measured is an error."""
    shares, strategy, recodes, rho, _ = _production()
    persons = generate_population(500, 20, seed=1)
    with pytest.raises(SpecError, match="estimation pass 1 at level 'nation' fits no query measured at that level"):
        run_topdown(
            persons,
            Design(
                ["nation"] + LEVELS,
                PL94_VARIABLES,
                strategy,
                rho,
                shares,
                "hamming",
                [("state", ())],
                recodes=recodes,
                passes={"nation": {"estimation": [[()]]}},
            ),
            RunContext(np.random.default_rng(0), workers=1),
        )
    # the US level does not measure 'total': a pass naming it with a measured query runs
    result = run_topdown(
        persons,
        Design(
            ["nation"] + LEVELS,
            PL94_VARIABLES,
            strategy,
            rho,
            shares,
            "hamming",
            [("state", ())],
            recodes=recodes,
            passes={"nation": {"estimation": [[(), ("hhgq",)]]}},
        ),
        RunContext(np.random.default_rng(0), workers=1),
    )
    assert result.timings["levels"]["nation"]["estimation_passes"] == 2
    assert len(result.microdata) == len(persons)


def test_constrain_to_holds_queries_the_pass_did_not_fit(captured):
    """After a pass fitting the total, constrain-to [total, hhgq] holds hhgq's answers too."""

    nodes, result, _ = captured
    schema = result.schema
    total, hhgq = (schema.groups(()), 1), (schema.groups(("hhgq",)), schema.marginal_size(("hhgq",)))
    held_moved, free_moved = 0.0, 0.0
    for task, queries, plan in _multipass_nodes(nodes)[:4]:
        variables = postprocess._node_variables(task)
        cells, vc, va, vcell = variables
        key = vc * hhgq[1] + hhgq[0][vcell]
        margin = lambda x: np.bincount(key, weights=x[: vc.size], minlength=task.n_children * hhgq[1])  # noqa: E731
        x1, *_ = fit_in_passes(task, queries, PassPlan(estimation=(plan.estimation[0],), tolerance=0.1), variables)
        held = PassPlan(estimation=plan.estimation, tolerance=0.1, constrain=((total, hhgq),))
        x2, _, _, _, _, failsafe = fit_in_passes(task, queries, held, variables)
        assert not failsafe
        x3, *_ = fit_in_passes(task, queries, plan, variables)  # default: only the fitted total is held
        held_moved = max(held_moved, float(np.max(np.abs(margin(x2) - margin(x1)))))
        free_moved = max(free_moved, float(np.max(np.abs(margin(x3) - margin(x1)))))
    assert held_moved <= 0.1 + 1e-6
    assert free_moved > 0.1  # without the list the second pass moves hhgq: the test can fail


# --- structural zeros (production's nurse_nva_0) ----------------------------------------------

NURSE_NVA_0 = {"nurse_nva_0": {"hhgq": [3], "votingage": [0]}}


@pytest.mark.slow  # multipass TopDown over several seeds
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_structural_zero_is_kept_exactly_over_seeds(seed):
    persons = generate_population(3000, 120, seed=20 + seed)
    assert not ((persons["hhgq"] == 3) & (persons["votingage"] == 0)).any()
    shares, strategy, recodes, rho, _ = _production()
    # a tiny budget: without the constraint, noise would put minors in nursing facilities
    res = run_topdown(
        persons,
        Design(
            ["nation"] + LEVELS,
            PL94_VARIABLES,
            strategy,
            Fraction(1, 100),
            shares,
            "hamming",
            [("state", ())],
            recodes=recodes,
            structural_zeros=NURSE_NVA_0,
        ),
        RunContext(np.random.default_rng(seed), workers=1),
    )
    micro = res.microdata
    assert not ((micro["hhgq"] == 3) & (micro["votingage"] == 0)).any()
    assert len(micro) == len(persons)  # the state invariant, too
    assert ((micro["hhgq"] == 3) & (micro["votingage"] == 1)).any()  # the cell's neighbour is free


def test_data_breaking_a_structural_zero_is_a_data_error_naming_block_and_cell():
    from dpspec.errors import DataError

    persons = generate_population(500, 20, seed=3)
    persons.loc[7, "hhgq"] = 3
    persons.loc[7, "votingage"] = 0
    shares, strategy, recodes, rho, _ = _production()
    with pytest.raises(
        DataError, match=r"structural zero 'nurse_nva_0': 1 record, e.g. in block .*hhgq=3, votingage=0"
    ):
        run_topdown(
            persons,
            Design(
                ["nation"] + LEVELS,
                PL94_VARIABLES,
                strategy,
                rho,
                shares,
                "hamming",
                [("state", ())],
                recodes=recodes,
                structural_zeros=NURSE_NVA_0,
            ),
            RunContext(np.random.default_rng(0), workers=1),
        )


def test_constrain_to_in_a_spec(tmp_path):
    from dpspec.check.checker import check
    from dpspec.language.parser import parse

    text = open(os.path.join(ROOT, "specs", "pl94_production_topdown.dps")).read()
    text = text.replace(
        "  pass_tolerance: 0.1\n",
        '  pass_tolerance: 0.1\n  constrain_to: {\n    state: {\n      pass1: ["total", "hhgq"]\n    }\n  }\n',
    )
    text = text.replace('"data/pl94_synthetic/', '"' + os.path.join(ROOT, "specs", "data", "pl94_synthetic") + "/")
    check(parse(text, str(tmp_path / "s.dps")))
    two = text.replace('      pass1: ["total", "hhgq"]\n', '      pass1: ["total", "hhgq"]\n      pass2: ["total"]\n')
    with pytest.raises(SpecError, match="constrain_to at level 'state': 2 lists for the 1 estimation passes"):
        check(parse(two, str(tmp_path / "s.dps")))


# --- interleaved outer passes --------------------------------------------------------------------


def _outer_passes(strategy):
    rest = [q for q, _ in strategy["county"] if q != ()]
    outer = [{"estimation": [[()]], "rounding": [[()]]}, {"estimation": [rest], "rounding": [FINE]}]
    return {lv: {"outer": outer, "tolerance": Fraction(1, 10)} for lv in ("county", "tract")}


@pytest.mark.slow  # a production-strategy run and a re-solve of every node: ~5 s alone, ~20 s on a loaded machine
def test_interleaved_outer_passes_fix_each_outer_pass_exactly():
    """Each outer pass fits and rounds its queries; its last rounding pass's answers (here the
    children's totals) are then fixed exactly for the next outer pass."""
    from dpspec_topdown.estimation.multipass import solve_interleaved

    shares, strategy, recodes, rho, _ = _production()
    nodes = []
    solve = node_solve.solve_node

    def capture(task, queries, solver="clarabel", plan=None):
        nodes.append((postprocess.node_inputs(task, queries)[0], queries, plan))
        return solve(task, queries, solver, plan)

    node_solve.solve_node = capture
    try:
        persons = generate_population(3000, 400, seed=4)  # 13 block groups in 4 tracts
        result = run_topdown(
            persons,
            Design(
                ["nation"] + LEVELS,
                PL94_VARIABLES,
                strategy,
                Fraction(1, 20),
                shares,
                "hamming",
                [("state", ())],
                recodes=recodes,
                passes=_outer_passes(strategy),
            ),
            RunContext(np.random.default_rng(5), workers=1),
        )
    finally:
        node_solve.solve_node = solve
    assert len(result.microdata) == len(persons)
    assert result.timings["levels"]["tract"]["outer_passes"] == 2
    differs = 0
    for task, queries, plan in nodes:
        if plan is None or not plan.outer or task.n_children < 2:
            continue
        variables = postprocess._node_variables(task)
        cells, vc, va, vcell = variables
        tot = lambda c: np.bincount(vc, weights=c, minlength=task.n_children)  # noqa: E731
        first = attrs.evolve(plan, outer=plan.outer[:1])
        counts1, *_ = solve_interleaved(task, queries, first, variables)
        counts, *_ = solve_interleaved(task, queries, plan, variables)
        assert np.array_equal(tot(counts), tot(counts1))  # outer pass 1's totals, exactly
        alone, *_ = solve_interleaved(task, queries, attrs.evolve(plan, outer=plan.outer[1:]), variables)
        differs += not np.array_equal(tot(alone), tot(counts1))
    assert differs > 0  # without the first outer pass the totals come out otherwise: the test can fail


def test_outer_passes_with_passes_of_their_own_are_a_spec_error():
    shares, strategy, recodes, rho, _ = _production()
    persons = generate_population(500, 20, seed=1)
    passes = _outer_passes(strategy)
    passes["county"]["estimation"] = [[()]]
    with pytest.raises(SpecError, match="level 'county' has outer passes and estimation/rounding passes of its own"):
        run_topdown(
            persons,
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
            RunContext(np.random.default_rng(0), workers=1),
        )


OUTER_SPEC = """spec "outer passes"
domain d "d" {
  stage edited
  geography g { state > county > block }
  table persons unit person {
    state : category
    county : category in state
    block : category in county
    sex : {0, 1}
    age : {0, 1, 2}
  }
}
unit persons : hamming
premetric zcdp
mechanism topdown {
  table: persons
  variables: sex, age
  rho: 1
  outer_passes: {
    county: {
      outer1: {
        estimation: { pass1: ["total"] }
        rounding: { pass1: ["total"] }
      }
      outer2: {
        estimation: { pass1: ["sex", "detailed"] }
        rounding: { pass1: ["sex"]  pass2: ["detailed"] }
      }
    }
  }
  levels: { nation: 1/4  state: 1/4  county: 1/4  block: 1/4 }
  queries: { total: 1/4  sex: 1/4  detailed: 1/2 }
}
"""


def test_outer_passes_in_a_spec():
    from dpspec.check.checker import check
    from tests.topdown_geography import parse

    check(parse(OUTER_SPEC, "s.dps"))
    line = OUTER_SPEC.splitlines().index("      outer1: {") + 1  # the outer pass missing its rounding
    bad = OUTER_SPEC.replace('        rounding: { pass1: ["total"] }\n', "")
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*'outer_passes.county.outer1' needs the setting 'rounding'"):
        check(parse(bad, "s.dps"))
