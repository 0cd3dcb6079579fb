"""Production's facility constraints (hhgq_total_lb/ub): persons per block and hhgq type bounded
by a second table of housing units and group-quarters facilities, kept exactly at every level."""

import os
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpspec.check.checker import check
from dpspec.errors import DataError, SpecError
from tests.topdown_geography import parse
from dpspec_topdown.params.constraints import facility_bounds
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import Records, RunContext
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, generate_facilities, generate_population
from tests.test_topdown_multipass import NURSE_NVA_0, PASSES, _production

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "specs", "pl94_production_topdown.dps")
CON = {
    "name": "hhgq_total_lb_ub",
    "of": "hhgq",
    "table": "facilities",
    "type": "gqtype",
    "occupied": [1, 2, 3, 4, 5, 6, 7],
    "finest": "block",
}


def _facilities(persons, seed):
    """Housing units where households live, 1..residents facilities per occupied GQ type."""
    return generate_facilities(persons, seed, gq_rate=0.3)


def _bounds(facilities):
    lower, upper = facility_bounds(CON, facilities, PL94_VARIABLES["hhgq"])
    return [(CON["name"], ("hhgq",), lower, upper)]


def _run(persons, bounds, seed, rho=Fraction(1, 50), passes=PASSES):
    shares, strategy, recodes, _, _ = _production()
    return run_topdown(
        Records(persons, bounds=bounds),
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
            structural_zeros=NURSE_NVA_0,
        ),
        RunContext(np.random.default_rng(seed), workers=1),
    )


def _hhgq_by_block(micro):
    return micro.groupby([micro["block"].astype(str), micro["hhgq"].astype(int)]).size().unstack(fill_value=0)


def test_facility_bounds_from_the_table():
    fac = pd.DataFrame({"block": ["b1", "b1", "b1", "b2", "b2"], "gqtype": [0, 0, 3, 5, 5]})
    lower, upper = facility_bounds(CON, fac, list(range(8)))
    assert lower.loc["b1"].tolist() == [0, 0, 0, 1, 0, 0, 0, 0]  # housing units may be vacant
    assert lower.loc["b2"].tolist() == [0, 0, 0, 0, 0, 2, 0, 0]  # one resident per facility at least
    assert upper.loc["b1"].tolist() == [np.inf, 0, 0, np.inf, 0, 0, 0, 0]
    assert upper.loc["b2"].tolist() == [0, 0, 0, 0, 0, np.inf, 0, 0]  # no households: no HU


@pytest.mark.slow  # TopDown runs over several seeds
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_constraint_and_invariant_exact_over_seeds(seed):
    persons = generate_population(3000, 120, seed=30 + seed)
    fac = _facilities(persons, seed)
    res = _run(persons, _bounds(fac), seed)
    micro = res.microdata
    assert len(micro) == len(persons)  # state population invariant
    assert not ((micro["hhgq"] == 3) & (micro["votingage"] == 0)).any()  # structural zero
    got = _hhgq_by_block(micro).reindex(columns=range(8), fill_value=0)
    lower, upper = facility_bounds(CON, fac, list(range(8)))
    lower = lower.reindex(got.index, fill_value=0)
    upper = upper.reindex(got.index, fill_value=0.0)
    assert (got.to_numpy() >= lower.to_numpy()).all()
    assert (got.to_numpy() <= upper.to_numpy()).all()
    # blocks that have facilities of a type but whose persons the noise would drop keep them
    has_gq = lower.to_numpy()[:, 1:].sum()
    assert has_gq > 0 and got.to_numpy()[:, 1:].sum() >= has_gq


@pytest.mark.slow  # TopDown runs at a tiny budget over several seeds
def test_without_the_constraints_a_tiny_budget_breaks_them():
    """The test above could fail: the same runs without bounds put persons where none may be."""
    broken = 0
    for seed in range(3):
        persons = generate_population(3000, 120, seed=30 + seed)
        fac = _facilities(persons, seed)
        got = _hhgq_by_block(_run(persons, [], seed).microdata).reindex(columns=range(8), fill_value=0)
        lower, upper = facility_bounds(CON, fac, list(range(8)))
        lo = lower.reindex(got.index, fill_value=0).to_numpy()
        hi = upper.reindex(got.index, fill_value=0.0).to_numpy()
        broken += int(((got.to_numpy() < lo) | (got.to_numpy() > hi)).sum())
    assert broken > 0


def test_data_breaking_a_constraint_is_a_data_error_naming_block_and_cell():
    persons = generate_population(500, 20, seed=3)
    fac = _facilities(persons, 0)
    block = str(persons["block"].iloc[0])
    fac = fac[~((fac["block"] == block) & (fac["gqtype"] == 0))]  # the block loses its housing units
    with pytest.raises(
        DataError, match=rf"constraint 'hhgq_total_lb_ub': .*block {block}, hhgq = 0: \d+ persons, bounds \[0, 0\]"
    ):
        _run(persons, _bounds(fac), 0)


def test_facility_in_a_block_without_persons_is_a_data_error():
    persons = generate_population(500, 20, seed=3)
    fac = pd.concat([_facilities(persons, 0), pd.DataFrame({"block": ["999"], "gqtype": [2]})])
    with pytest.raises(DataError, match=r"block 999, hhgq = 2: no persons, at least 1 required"):
        _run(persons, _bounds(fac), 0)


def _spec_variant(old, new):
    text = open(SPEC).read()
    assert old in text
    return parse(text.replace(old, new), SPEC)


def test_production_spec_states_the_constraints():
    params = check(parse(open(SPEC).read(), SPEC)).params
    assert params["constraints"].get("hhgq_total_lb_ub") is not None


@pytest.mark.parametrize(
    "old,new,message",
    [
        (
            "  count facilities by block, gqtype\n",
            "",
            r"declare them public: invariants \{ count facilities by block, gqtype \}",
        ),
        # the constraint's type (the spec's first `type: gqtype` is the spine's gq_blockgroups, whose own error comes first)
        (
            "      type: gqtype\n      occupied:",
            "      type: gqkind\n      occupied:",
            r"table 'facilities' needs columns 'block' .* and 'gqkind'",
        ),
        (
            "      type: gqtype\n      types:",
            "      type: gqkind\n      types:",
            r"spine: gq_blockgroups reads 'facilities', which must be a second table of the domain with columns 'block' and 'gqkind'",
        ),
        ("      occupied: [1, 2, 3, 4, 5, 6, 7]\n", "      occupied: [1, 9]\n", r"occupied \[9\] are not categories"),
        (
            "      of: hhgq\n      table: facilities",
            "      of: county\n      table: facilities",
            r"'county', which is not a histogram variable",
        ),
    ],
)
def test_bad_constraint_is_a_check_error_at_its_line(old, new, message):
    spec = _spec_variant(old, new)
    with pytest.raises(SpecError, match=message) as info:
        check(spec)
    assert any(d.line for d in info.value.diagnostics)  # points at the constraint in the file


def test_infeasible_node_names_its_level_and_parent_unit(monkeypatch):
    """No silent relaxation: a node whose fit has no solution stops the run, naming where."""
    import highspy

    from dpspec.errors import MechanismError
    from dpspec_topdown.estimation import postprocess

    persons = generate_population(500, 20, seed=3)
    real, calls = postprocess.solve_qp, []

    def infeasible_below_the_county(problem, solver="clarabel"):
        calls.append(1)
        if len(calls) > 3:  # nation, state and county fits succeed; the first tract node fails
            return None, False, 0.0, "highs", highspy.HighsModelStatus.kInfeasible
        return real(problem, solver)

    monkeypatch.setattr(postprocess, "solve_qp", infeasible_below_the_county)
    with pytest.raises(
        MechanismError, match=r"cannot split the county \d+ into its tract units: .*no nonnegative split"
    ):
        _run(persons, [], 0, passes={})


def test_production_spec_compiles_with_its_facilities_table(tmp_path):
    """The spec path end to end (two tables read, bounds built by the plugin) on one tract."""
    from dpspec.run.compiler import compile_spec

    data_dir = os.path.join(ROOT, "specs", "data", "pl94_synthetic")
    persons = pd.read_parquet(os.path.join(data_dir, "pl94_synthetic.parquet"))
    facilities = pd.read_parquet(os.path.join(data_dir, "pl94_synthetic_facilities.parquet"))
    gq_tracts = persons.loc[persons["hhgq"] > 0, "tract"].astype(str).unique()[:1]
    keep = lambda t: t[t["tract"].astype(str).isin(gq_tracts)].reset_index(drop=True)  # noqa: E731
    persons, facilities = keep(persons), keep(facilities)
    (tmp_path / "data" / "pl94_synthetic").mkdir(parents=True)
    persons.to_parquet(tmp_path / "data" / "pl94_synthetic" / "pl94_synthetic.parquet")
    facilities.to_parquet(tmp_path / "data" / "pl94_synthetic" / "pl94_synthetic_facilities.parquet")
    spec_path = tmp_path / "pl94.dps"
    spec_path.write_text(open(SPEC).read())
    result = compile_spec(parse(spec_path.read_text(), str(spec_path)), seed=5, audit=False)
    micro = result.published["persons"].to_pandas()  # streamed; small here
    assert len(micro) == len(persons)
    got = _hhgq_by_block(micro).reindex(columns=range(8), fill_value=0)
    lower, upper = facility_bounds(CON, facilities, list(range(8)))
    assert (got.to_numpy() >= lower.reindex(got.index, fill_value=0).to_numpy()).all()
    assert (got.to_numpy() <= upper.reindex(got.index, fill_value=0.0).to_numpy()).all()
    assert lower.to_numpy()[:, 1:].sum() > 0  # the tracts hold occupied group quarters


def test_node_error_survives_the_trip_from_a_worker():
    import pickle

    from dpspec_topdown.estimation.postprocess import NodeError

    err = pickle.loads(pickle.dumps(NodeError(7, "no split")))
    assert err.key == 7 and str(err) == "no split"


@pytest.mark.slow  # TopDown runs with bounded recodes
def test_bounds_on_a_recode_hold_exactly():
    """Production states facility bounds on gqlevels, a recode of the detailed GQ types; here on
    hhinstlevels (household / institutional / non-institutional), from a facilities table by level."""
    persons = generate_population(1500, 60, seed=46)  # a seed whose blocks hold group quarters
    fac = _facilities(persons, 1)
    level = {
        0: "household",
        1: "institutional",
        2: "institutional",
        3: "institutional",
        4: "institutional",
        5: "noninstitutional",
        6: "noninstitutional",
        7: "noninstitutional",
    }
    fac = fac.assign(gqlevel=fac["gqtype"].astype(int).map(level))
    con = dict(CON, of="hhinstlevels", type="gqlevel", occupied=["institutional", "noninstitutional"])
    labels = ["household", "institutional", "noninstitutional"]
    lower, upper = facility_bounds(con, fac, labels)
    res = _run(persons, [(con["name"], ("hhinstlevels",), lower, upper)], 3, rho=Fraction(1, 200))
    micro = res.microdata
    got = (
        micro.assign(g=micro["hhgq"].astype(int).map(level))
        .groupby([micro["block"].astype(str), "g"])
        .size()
        .unstack(fill_value=0)
        .reindex(columns=labels, fill_value=0)
    )
    lo = lower.reindex(got.index, fill_value=0).to_numpy()
    hi = upper.reindex(got.index, fill_value=0.0).to_numpy()
    assert (got.to_numpy() >= lo).all() and (got.to_numpy() <= hi).all()
    assert lo[:, 1:].sum() > 0  # some blocks hold occupied facilities


def test_the_production_spec_may_bound_a_recode(tmp_path):
    text = open(SPEC).read()
    text = text.replace(
        "    gqtype     : {0, 1, 2, 3, 4, 5, 6, 7}\n  }\n  table units",
        "    gqtype     : {0, 1, 2, 3, 4, 5, 6, 7}\n    gqlevel    : {household, institutional, noninstitutional}\n  }\n  table units",
    )
    text = text.replace(
        "  count facilities by block, gqtype\n",
        "  count facilities by block, gqtype\n  count facilities by block, gqlevel\n",
    )
    text = text.replace(
        "      of: hhgq\n      table: facilities\n      type: gqtype\n      occupied: [1, 2, 3, 4, 5, 6, 7]",
        "      of: hhinstlevels\n      table: facilities\n      type: gqlevel\n      occupied: [institutional, noninstitutional]",
    )
    assert "of: hhinstlevels" in text
    path = tmp_path / "spec.dps"
    text = text.replace('"data/pl94_synthetic/', '"' + os.path.join(ROOT, "specs", "data", "pl94_synthetic") + "/")
    path.write_text(text)
    check(parse(text, str(path)))
    bad = text.replace("occupied: [institutional, noninstitutional]", "occupied: [institutional, prison]")
    with pytest.raises(SpecError, match=r"occupied \['prison'\] are not categories of 'hhinstlevels'"):
        check(parse(bad, str(path)))
