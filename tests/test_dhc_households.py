"""The 2020 DHC units/households production specs (US and Puerto Rico): they check, their budget is
the strategy's exact allocation, they run on the bundled synthetic data with the release held to
the published H1 counts, and bad input is a located error.

Allocations pinned from the strategies themselves (public copy of das_decennial at
github.com/yashlala/cpsc464-topdown, commit fc85a036, programs/strategies/dhch_strategies.py:
DecompTestStrategyDHCH_20220922_exp_iteration_23_1 lines 1681-1696 and
DecompTestStrategyDHCH_PR_20220922_exp_iteration_23_1 lines 1604-1617), as the n of Fr(n, 10000)."""
import json
import os
import shutil
from collections import Counter
from fractions import Fraction as F

import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.check.checker import check
from dpspec.cli.main import main
from dpspec.errors import DataError, SpecError
from dpspec.language.parser import parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = {"us": os.path.join(ROOT, "specs", "dhc_households_production_topdown.dps"),
         "pr": os.path.join(ROOT, "specs", "dhc_households_production_topdown_pr.dps")}
DATA = os.path.join(ROOT, "specs", "data", "dhc")
# level -> (the nine household queries' allocations, the unit query tenvacgq's), in 1/10000
STRATEGY = {
    "us": {"block": ([11, 3, 17, 22, 44, 15, 15, 3, 15], 15),
           "blockgroup": ([291, 78, 442, 581, 1162, 407, 407, 78, 407], 407),
           "tsubset": ([1150, 310, 1750, 2300, 4601, 1610, 1610, 310, 1610], 1610),
           "tsg": ([973, 214, 1500, 1946, 973, 973, 973, 214, 973], 973),
           "prim": ([973, 214, 1500, 1946, 973, 973, 973, 214, 973], 973),
           "county": ([986, 266, 1500, 1972, 3944, 1380, 1380, 266, 1380], 1380),
           "state": ([714, 193, 191, 1428, 714, 3216, 3216, 193, 3931], 3216),
           "nation": ([792, 212, 212, 792, 792, 257, 257, 212, 1049], 259)},
    "pr": {"block": ([11, 3, 17, 22, 44, 15, 15, 3, 15], 15),
           "blockgroup": ([346, 93, 526, 691, 1382, 484, 484, 93, 484], 484),
           "tsubset": ([1205, 325, 1833, 2410, 4820, 1687, 1687, 325, 1687], 1687),
           "tsg": ([1054, 232, 1624, 2107, 1054, 1054, 1054, 232, 1054], 1054),
           "prim": ([1054, 232, 1624, 2107, 1054, 1054, 1054, 232, 1054], 1054),
           "county": ([1041, 281, 1584, 2082, 4164, 1457, 1457, 281, 1457], 1457),
           "state": ([748, 202, 200, 1496, 748, 3368, 3368, 202, 4117], 3364)},
}


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_production_specs_check_and_are_formatted(run):
    for args in (["check", SPECS[run]], ["fmt", "--check", SPECS[run]]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("run", sorted(SPECS))
def test_budget_is_the_strategy_allocation_exactly(run):
    """Each level spends the strategy's household and unit allocations (exact Fr(n, 10000)), and
    rho is their sum, 15401/2000 (the registry entry specs/registry/dhc_households.dps)."""
    result = CliRunner().invoke(main, ["budget", "--json", SPECS[run]])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    rows = summary["allocation"]
    for lv, (household, unit) in STRATEGY[run].items():
        mine = [r for r in rows if r["level"] == lv]
        units = [F(r["rho_exact"]) for r in mine if not r["query"].startswith("households:")]
        joint = Counter(F(r["rho_exact"]) for r in mine if r["query"].startswith("households:"))
        assert units == [F(unit, 10000)], lv
        assert joint == Counter(F(n, 10000) for n in household), lv
    assert {r["level"] for r in rows} == set(STRATEGY[run])
    total = sum(F(r["rho_exact"]) for r in rows)
    assert total == sum(F(sum(h) + u, 10000) for h, u in STRATEGY[run].values()) == F(15401, 2000)
    assert F(summary["budget"]["rho"]).limit_denominator(10000) == F(15401, 2000)


def _copy(tmp_path, run):
    """The spec and its data in a scratch folder (inputs are never modified in place)."""
    shutil.copytree(DATA, tmp_path / "data" / "dhc")
    spec = tmp_path / os.path.basename(SPECS[run])
    spec.write_text(open(SPECS[run], encoding="utf-8").read(), encoding="utf-8")
    return spec


def test_a_cross_constraint_naming_a_table_not_solved_jointly_is_a_located_spec_error():
    lines = open(SPECS["pr"], encoding="utf-8").read().splitlines()
    at = next(i for i, line in enumerate(lines, 1) if line.strip().startswith("owned_mortgage:")) + 2  # its right side
    broken = "\n".join(line.replace('"households: ten = 0"', '"h1: h1 = occupied"') for line in lines)
    with pytest.raises(SpecError, match=rf"s.dps:{at}:.*not solved jointly"):
        check(parse(broken, "s.dps"))


def test_households_that_break_the_owned_constraint_are_a_data_error(tmp_path):
    import dpspec

    spec = _copy(tmp_path, "pr")
    path = tmp_path / "data" / "dhc" / "dhc_pr_households.parquet"
    households = pd.read_parquet(path)
    households.loc[households.index[0], "ten"] = (int(households["ten"].iloc[0]) + 1) % 3
    households.to_parquet(path, index=False)
    with pytest.raises(DataError, match=r"cross constraint 'owned_.*block"):
        dpspec.compile(str(spec), seed=1)


def _zeros(run):
    """The households' structural zeros as the spec states them: {name: {column: [codes]}}."""
    from dpspec_topdown.plugin import _joint

    spec = parse(open(SPECS[run], encoding="utf-8").read(), SPECS[run])
    (j,) = _joint(spec, check(spec).params)
    return j["structural_zeros"]


def _in_zero(frame, cells):
    hit = pd.Series(True, index=frame.index)
    for column, values in cells.items():
        hit &= frame[column].astype(str).isin([str(v) for v in values])
    return hit


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_specs_state_the_household_type_and_age_child_zeros(run):
    """The 10 boxes of household-type factors no hhtype_dhch value has (hhtype_map.py: 55 of the
    7 x 3 x 2 x 4 size/couple/multig/ownchild combinations) and production's age_child zeros;
    the bundled households respect them all."""
    import itertools

    zeros = _zeros(run)
    assert {n for n in zeros if n.startswith("age_child")} == {"age_child_1", "age_child_2", "age_child_3"}
    factors = pd.DataFrame(list(itertools.product(range(1, 8), range(3), range(2), range(4))),
                           columns=["size", "couple", "multig", "ownchild"])
    absent = pd.Series(False, index=factors.index)
    for name, cells in zeros.items():
        if name.startswith("hhtype_"):
            absent |= _in_zero(factors, cells)
    assert int(absent.sum()) == 55  # 168 combinations, 113 of them some hhtype_dhch value
    households = pd.read_parquet(os.path.join(DATA, "dhc_pr_households.parquet" if run == "pr" else "dhc_households.parquet"))
    for name, cells in zeros.items():
        assert not _in_zero(households, cells).any(), name


def test_a_household_in_a_structural_zero_is_a_data_error(tmp_path):
    import dpspec

    spec = _copy(tmp_path, "pr")
    path = tmp_path / "data" / "dhc" / "dhc_pr_households.parquet"
    households = pd.read_parquet(path)
    at = households.index[(households["size"] == 1)][0]
    households.loc[at, "couple"] = 1  # one person with a spouse
    households.to_parquet(path, index=False)
    with pytest.raises(DataError, match=rf"table 'households' break the structural zero 'hhtype_alone_couple': 1 records, "
                                        rf"e.g. in block {households.loc[at, 'block']}"):
        dpspec.compile(str(spec), seed=1)


@pytest.mark.slow
def test_the_release_keeps_h1_and_owned_on_the_bundled_data(tmp_path):
    """A full run of the Puerto Rico spec (about 16 s on a lightly loaded 2-core machine, a minute
    at a load of 8: the root's fit has a variable for every household cell outside the structural
    zeros, in each of its three outer passes): the released units
    reproduce the H1 counts at every block, households equal occupied units by tenure, the
    units per block are invariant and no household lies in a structural zero."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compile", SPECS["pr"], "-o", str(out)])
    assert result.exit_code == 0, result.output
    units = pd.read_csv(out / "units.csv", dtype=str)
    households = pd.read_csv(out / "households.csv", dtype=str)
    h1 = pd.read_parquet(os.path.join(DATA, "dhc_pr_h1.parquet")).astype(str)
    ten = {"mortgage": "0", "owned": "1", "rented": "2", "no_pay": "2"}  # hhtenshort_3lev of tenvacgq
    released = units.assign(h1=units["tenvacgq"].map(lambda t: "occupied" if t in ten else "vacant"))
    count = lambda frame, by: frame.groupby(by).size().sort_index()  # noqa: E731
    assert count(released, ["block", "h1"]).equals(count(h1, ["block", "h1"]))
    assert released.loc[released["h1"] == "vacant", "tenvacgq"].isin(
        ["for_rent", "rented_not_occupied", "for_sale", "sold_not_occupied", "seasonal", "migrant_workers",
         "other_vacant"]).all()
    occupied = released[released["h1"] == "occupied"].assign(ten=lambda f: f["tenvacgq"].map(ten))
    assert count(occupied, ["block", "ten"]).equals(count(households, ["block", "ten"]))
    source = pd.read_parquet(os.path.join(DATA, "dhc_pr_units.parquet")).astype(str)
    assert count(units, ["block"]).equals(count(source, ["block"]))
    for name, cells in _zeros("pr").items():  # production's structural zeros hold in the release
        assert not _in_zero(households, cells).any(), name


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_specs_state_production_interleaved_outer_passes(run):
    """dhch_strategies.py:1741-1765 at every level: the units' tenvacgq, then six household
    queries rounded on two, then the rest rounded on detailed (joint_passes.JointOuter)."""
    from dpspec_topdown.allocation import split_allocation
    from dpspec_topdown.joint_passes import joint_pass_plan
    from dpspec_topdown.plugin import TopDown, _joint, _joint_names, _passes, _schema

    spec = parse(open(SPECS[run], encoding="utf-8").read(), SPECS[run])
    params = check(spec).params
    (j,) = _joint(spec, params)
    main, other = split_allocation(TopDown()._allocation(spec, params), "households")
    passes = _passes(params, ["tenvacgq"], _joint_names([j]))
    assert set(passes) == set(STRATEGY[run])
    for level, plan in passes.items():
        outer = joint_pass_plan(level, plan, _schema(spec, params), main, j["schema"], other, "households",
                                groups=False)
        assert [(len(o.fit_main), len(o.fit_joint)) for o in outer] == [(1, 0), (0, 6), (0, 3)], level
        assert [[r[0] for r in o.round_main] for o in outer] == [["tenvacgq"], [], []], level
        assert [len(o.round_joint) for o in outer] == [0, 2, 1], level
