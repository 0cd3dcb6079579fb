"""The 2020 DHC units/households production specs (US and Puerto Rico): they check, their budget is
the strategy's exact allocation, they run on the bundled synthetic data with the release held to
the published H1 counts, and bad input is a located error.

Allocations pinned from the strategies themselves (the Census Bureau's DAS_2020_DHC_Production_Code,
commit 38ea5f2a, das_decennial/programs/strategies/dhch_strategies.py, byte-identical to the public copy
github.com/yashlala/cpsc464-topdown at commit fc85a036:
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
    """The 10 boxes of household-type factors no hhtype_dhch value has (hhtype_map.py: 97 of the
    7 x 5 x 2 x 4 size/couple/multig/ownchild combinations) and production's age_child zeros;
    the bundled households respect them all."""
    import itertools

    zeros = _zeros(run)
    assert {n for n in zeros if n.startswith("age_child")} == {"age_child_1", "age_child_2", "age_child_3"}
    factors = pd.DataFrame(list(itertools.product(range(1, 8), range(5), range(2), range(4))),
                           columns=["size", "couple", "multig", "ownchild"])
    absent = pd.Series(False, index=factors.index)
    for name, cells in zeros.items():
        if name.startswith("hhtype_"):
            absent |= _in_zero(factors, cells)
    assert int(absent.sum()) == 97  # 280 combinations, 183 of them some hhtype_dhch value
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
    with pytest.raises(DataError, match=rf"table 'households' break the structural zero 'hhtype_alone_couple': 1 record, "
                                        rf"e.g. in block {households.loc[at, 'block']}"):
        dpspec.compile(str(spec), seed=1)


@pytest.mark.slow
def test_the_release_keeps_h1_and_owned_on_the_bundled_data_on_both_engines(tmp_path, spark_session):
    """A full run of the Puerto Rico spec, elderly variable and all, on the local engine and on
    Spark (about 20 s each on an idle 2-core machine, a minute or more under load: the root's fit
    has a variable for every household cell outside the structural zeros, about 250,000 with
    production's elderly variable, in each of its three outer passes; see
    benchmarks/bench_dhch_elderly.py): both engines release the same bytes, the released units
    reproduce the H1 counts at every block, households equal occupied units by tenure, the
    units per block by gqhh_vect are invariant and no household lies in a structural zero."""
    from dpspec.engine.spark import SparkEngine
    from tests.test_engine_mechanisms import compile_on, release_bytes

    out = tmp_path / "out"
    local = release_bytes(compile_on(SPECS["pr"], "local"), out)
    on_spark = release_bytes(compile_on(SPECS["pr"], SparkEngine(session=spark_session)), tmp_path / "spark")
    assert set(local) == {"units.csv", "households.csv"}
    assert on_spark == local
    units = pd.read_csv(out / "units.csv", dtype=str)
    households = pd.read_csv(out / "households.csv", dtype=str)
    h1 = pd.read_parquet(os.path.join(DATA, "dhc_pr_h1.parquet")).astype(str)
    ten = {"mortgage": "0", "owned": "1", "rented": "2", "no_pay": "2"}  # hhtenshort_3lev of tenvacgq
    released = units.assign(h1=units["tenvacgq"].map(lambda t: "occupied" if t in ten else "gq" if t.startswith("gq")
                                                     else "vacant"))
    count = lambda frame, by: frame.groupby(by).size().sort_index()  # noqa: E731
    assert count(released, ["block", "h1"]).equals(count(h1, ["block", "h1"]))
    assert released.loc[released["h1"] == "vacant", "tenvacgq"].isin(
        ["for_rent", "rented_not_occupied", "for_sale", "sold_not_occupied", "seasonal", "migrant_workers",
         "other_vacant"]).all()
    occupied = released[released["h1"] == "occupied"].assign(ten=lambda f: f["tenvacgq"].map(ten))
    assert count(occupied, ["block", "ten"]).equals(count(households, ["block", "ten"]))
    source = pd.read_parquet(os.path.join(DATA, "dhc_pr_units.parquet")).astype(str)
    assert count(units, ["block", "gqhh_vect"]).equals(count(source, ["block", "gqhh_vect"]))  # gqhh_vect invariant
    assert (units["gqhh_vect"] == units["tenvacgq"].where(units["tenvacgq"].str.startswith("gq"), "housing_unit")).all()
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


GQ_TYPES = ["gq101", "gq102", "gq103", "gq104", "gq105", "gq106", "gq201", "gq202", "gq203", "gq301", "gq401",
            "gq402", "gq403", "gq404", "gq405", "gq501", "gq601", "gq602", "gq701", "gq801", "gq802", "gq900",
            "gq901", "gq997"]  # das_decennial hhgq.py:20-43, tenvacgq's levels 11-34 (tenvacgq.py:24-37)


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_unit_histogram_is_tenvacgq_with_its_24_gq_types_and_gqhh_vect_invariant(run):
    """tenvacgq has production's 35 levels (tenvacgq.legal = 0-34); gqhh_vect (the housing units,
    then each GQ type) is invariant per block; the bundled units hold GQ units, whose column
    gqhh_vect is the recode of tenvacgq."""
    from dpspec_topdown.plugin import TopDown, _schema

    spec = parse(open(SPECS[run], encoding="utf-8").read(), SPECS[run])
    params = check(spec).params
    schema = _schema(spec, params)
    (tenvacgq,) = schema.categories
    assert list(tenvacgq[11:]) == GQ_TYPES and len(tenvacgq) == 35
    recodes = {r.name: r for r in schema.recodes}
    gqhh = recodes["gqhh_vect"]
    assert list(gqhh.labels) == ["housing_unit", *GQ_TYPES]
    assert list(gqhh.group_of) == [0] * 11 + list(range(1, 25))
    assert [recodes["h1"].labels[g] for g in recodes["h1"].group_of] == ["occupied"] * 4 + ["vacant"] * 7 + ["gq"] * 24
    assert [q.describe() for q in TopDown().induced_invariants(spec, params)] == ["count units by block",
                                                                             "count units by block, gqhh_vect"]
    units = pd.read_parquet(os.path.join(DATA, "dhc_pr_units.parquet" if run == "pr" else "dhc_units.parquet"))
    gq = units[units["tenvacgq"].astype(str).str.startswith("gq")]
    assert len(gq) >= 2 and (gq["tenvacgq"].astype(str) == gq["gqhh_vect"].astype(str)).all()
    assert (units.loc[~units.index.isin(gq.index), "gqhh_vect"].astype(str) == "housing_unit").all()


def test_units_whose_gqhh_vect_is_not_the_recode_are_a_data_error(tmp_path):
    import dpspec

    spec = _copy(tmp_path, "pr")
    path = tmp_path / "data" / "dhc" / "dhc_pr_units.parquet"
    units = pd.read_parquet(path)
    at = units.index[units["tenvacgq"].astype(str).str.startswith("gq")][0]
    units["gqhh_vect"] = units["gqhh_vect"].astype(str)
    units.loc[at, "gqhh_vect"] = "housing_unit"
    units.to_parquet(path, index=False)
    with pytest.raises(DataError, match=r"table 'units': 1 record with gqhh_vect different from the recode 'gqhh_vect' "
                                        rf"of tenvacgq, e.g. in block '{units.loc[at, 'block']}'"):
        dpspec.compile(str(spec), seed=1)


def _production_elderly_zero(cell: dict) -> bool:
    """Production's elderly structural zeros (Constraints_DHCH.py:87-90, 108-112, 121, 132-135, 151,
    191-193), read on the four household-type factors where they can be: a cell is a zero when
    production's rule forbids it. elderly: 0 no one 60+, 1 60-64, 2 65-74, 3 75+ (hhelderly.py);
    hhage: 0 15-24, 5 60-64, 6 65-74, 7-8 75+ (hhage.py). The size-2 rules (108-111) on the
    own-child households only (the factors have no other child)."""
    age, eld, size, couple, own = cell["hhage"], cell["elderly"], cell["size"], cell["couple"], cell["ownchild"]
    implied = {5: 1, 6: 2, 7: 3, 8: 3}.get(age, 0)  # what the householder's age alone makes elderly
    if eld < implied:  # hh_elderly: someone at least as old as the householder is present
        return True
    alone = size == 1 or (size == 2 and own > 0) or (size == 3 and own == 3)  # nobody else can be 60+
    if alone and eld != implied:
        return True
    couple_young = age == 0 and couple > 0 and ((size == 2) or (size == 3 and own > 0) or (size == 4 and own == 3))
    return couple_young and eld == 3  # le25_eld3: a couple with a householder 15-24 has nobody 75+


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_specs_state_production_elderly_zeros_on_the_factors(run):
    """elderly is a histogram variable of the households, and the zeros naming it are exactly
    production's elderly rules on the factor cells outside the household-type zeros; the bundled
    households respect them all."""
    import itertools

    from dpspec_topdown.plugin import _joint

    spec = parse(open(SPECS[run], encoding="utf-8").read(), SPECS[run])
    (j,) = _joint(spec, check(spec).params)
    assert list(j["variables"]["elderly"]) == [0, 1, 2, 3]
    zeros = j["structural_zeros"]
    names = {n for n, cells in zeros.items() if "elderly" in cells}
    assert names == {"hh_elderly_eld3", "hh_elderly_2", "hh_elderly_3", *(f"living_alone_eld{i}" for i in range(4)),
                     *(f"size2_eld{i}" for i in range(4)), "size2_le25_eld3", "size3_le25_eld3",
                     *(f"size3_eld{i}" for i in range(4)), "size4_le25_eld3"}
    cells = pd.DataFrame(list(itertools.product(range(9), range(4), range(1, 8), range(5), range(2), range(4))),
                         columns=["hhage", "elderly", "size", "couple", "multig", "ownchild"])
    hhtype = pd.Series(False, index=cells.index)
    stated = pd.Series(False, index=cells.index)
    for name, box in zeros.items():
        if name.startswith("hhtype_"):
            hhtype |= _in_zero(cells, box)
        elif name in names:
            stated |= _in_zero(cells, box)
    rule = cells.apply(lambda r: _production_elderly_zero(r.to_dict()), axis=1)
    valid = ~hhtype  # cells some hhtype_dhch value has
    assert (stated[valid] == rule[valid]).all()
    households = pd.read_parquet(os.path.join(DATA, "dhc_pr_households.parquet" if run == "pr" else "dhc_households.parquet"))
    for name in names:
        assert not _in_zero(households, zeros[name]).any(), name
    assert households["elderly"].nunique() == 4  # the data exercise every level


@pytest.mark.parametrize("run", sorted(SPECS))
def test_every_household_query_but_detailed_is_production_s_on_the_factors(run):
    """The strategy's household queries (dhch_strategies.py:1665-1672) on the factors that make up
    each hhtype recode (hhtype_dhch.py:152-226): multig; partner_type x ownchild for
    partner_type_detailed_own_child_status; couple (five types) for coupled_hh_type; couple x multig
    x ownchild x size (1-7) for DetailedCoupleTypeMultGenDetOwnChildSize. The bundled households
    hold every couple type."""
    from dpspec_topdown.plugin import _joint

    spec = parse(open(SPECS[run], encoding="utf-8").read(), SPECS[run])
    (j,) = _joint(spec, check(spec).params)
    detailed = ("couple", "multig", "ownchild", "size")
    wanted = [("multig", "hisp", "hhtenshort_2lev"), ("hisp", "hhtenshort_2lev"), ("hisp", "hhtenshort_2lev", "race"),
              ("partner_type", "ownchild", "sex", "hhtenshort_2lev"), ("couple", "hisp", "hhtenshort_2lev"),
              ("sex", "hisp", "ten", "race", *detailed), ("sex", "hisp", "ten", "race", "hhage", *detailed),
              ("ten", "hhage", *detailed)]
    schema = j["schema"]
    for level, entries in j["strategy"].items():
        stated = [q for q, _ in entries if q != schema.canonical(schema.names)]
        assert stated == [schema.canonical(q) for q in wanted], level
    partner = next(r for r in schema.recodes if r.name == "partner_type")
    assert [partner.labels[g] for g in partner.group_of] == ["none", "married", "married", "cohabiting", "cohabiting"]
    assert [str(c) for c in j["variables"]["couple"]] == ["0", "1", "2", "3", "4"]
    assert list(j["variables"]["size"]) == list(range(1, 8))
    households = pd.read_parquet(os.path.join(DATA, "dhc_pr_households.parquet" if run == "pr" else "dhc_households.parquet"))
    assert set(households["couple"]) == {0, 1, 2, 3, 4}
