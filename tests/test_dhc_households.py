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

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.check.checker import check
from dpspec.cli.main import main
from dpspec.errors import DataError, SpecError
from dpspec.language.parser import parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = {
    "us": os.path.join(ROOT, "specs", "dhc_households_production_topdown.dps"),
    "pr": os.path.join(ROOT, "specs", "dhc_households_production_topdown_pr.dps"),
}
DATA = os.path.join(ROOT, "specs", "data", "dhc")
# level -> (the nine household queries' allocations, the unit query tenvacgq's), in 1/10000
STRATEGY = {
    "us": {
        "block": ([11, 3, 17, 22, 44, 15, 15, 3, 15], 15),
        "blockgroup": ([291, 78, 442, 581, 1162, 407, 407, 78, 407], 407),
        "tsubset": ([1150, 310, 1750, 2300, 4601, 1610, 1610, 310, 1610], 1610),
        "tsg": ([973, 214, 1500, 1946, 973, 973, 973, 214, 973], 973),
        "prim": ([973, 214, 1500, 1946, 973, 973, 973, 214, 973], 973),
        "county": ([986, 266, 1500, 1972, 3944, 1380, 1380, 266, 1380], 1380),
        "state": ([714, 193, 191, 1428, 714, 3216, 3216, 193, 3931], 3216),
        "nation": ([792, 212, 212, 792, 792, 257, 257, 212, 1049], 259),
    },
    "pr": {
        "block": ([11, 3, 17, 22, 44, 15, 15, 3, 15], 15),
        "blockgroup": ([346, 93, 526, 691, 1382, 484, 484, 93, 484], 484),
        "tsubset": ([1205, 325, 1833, 2410, 4820, 1687, 1687, 325, 1687], 1687),
        "tsg": ([1054, 232, 1624, 2107, 1054, 1054, 1054, 232, 1054], 1054),
        "prim": ([1054, 232, 1624, 2107, 1054, 1054, 1054, 232, 1054], 1054),
        "county": ([1041, 281, 1584, 2082, 4164, 1457, 1457, 281, 1457], 1457),
        "state": ([748, 202, 200, 1496, 748, 3368, 3368, 202, 4117], 3364),
    },
}


@pytest.mark.slow  # checks and formats both production households specs
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


@pytest.mark.slow  # compiles the production households spec on bundled data
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
    from dpspec_topdown.params.tables import _joint

    spec = parse(open(SPECS[run], encoding="utf-8").read(), SPECS[run])
    (j,) = _joint(spec, check(spec).params)
    return j["structural_zeros"]


def _in_zero(frame, cells):
    hit = pd.Series(True, index=frame.index)
    for column, values in cells.items():
        hit &= frame[column].astype(str).isin([str(v) for v in values])
    return hit


def test_a_household_in_a_structural_zero_is_a_data_error(tmp_path):
    import dpspec

    spec = _copy(tmp_path, "pr")
    path = tmp_path / "data" / "dhc" / "dhc_pr_households.parquet"
    households = pd.read_parquet(path)
    at = households.index[households["hhage"] > 0][0]
    households.loc[at, "hhtype"] = 393  # a child living alone (hhtype_dhch.py:528-533), householder over 24
    households.to_parquet(path, index=False)
    with pytest.raises(
        DataError,
        match=rf"table 'households' break the structural zero 'living_alone_childalone': "
        rf"1 record, e.g. in block {households.loc[at, 'block']}",
    ):
        dpspec.compile(str(spec), seed=1)


@pytest.mark.slow
def test_the_release_keeps_h1_and_owned_on_the_bundled_data(tmp_path):
    """A full run of the Puerto Rico spec, production's 522 household types and elderly variable
    and all (the root holds a variable for every household cell outside the structural zeros of
    its two AIAN parts, 2.2 million; its outer passes fit them merged, or without those the fixed
    margins force to 0: docs/guides/dhc-topdown.md, "The Puerto Rico households compile in
    seconds"): the released units reproduce the H1 counts at every block, households equal
    occupied units by tenure, the units per block by gqhh_vect are invariant and no household
    lies in a structural zero. (That Spark, holding both tables read from Parquet, releases the
    local engine's bytes for a joint spec with zeros and outer passes is
    tests/test_topdown_joint_production.py's Spark test, in seconds rather than a minute.)"""
    from tests.test_engine_mechanisms import compile_on, release_bytes

    out = tmp_path / "out"
    local = release_bytes(compile_on(SPECS["pr"], "local"), out)
    assert set(local) == {"units.csv", "households.csv"}
    units = pd.read_csv(out / "units.csv", dtype=str)
    households = pd.read_csv(out / "households.csv", dtype=str)
    h1 = pd.read_parquet(os.path.join(DATA, "dhc_pr_h1.parquet")).astype(str)
    ten = {"mortgage": "0", "owned": "1", "rented": "2", "no_pay": "2"}  # hhtenshort_3lev of tenvacgq
    released = units.assign(
        h1=units["tenvacgq"].map(lambda t: "occupied" if t in ten else "gq" if t.startswith("gq") else "vacant")
    )
    count = lambda frame, by: frame.groupby(by).size().sort_index()  # noqa: E731
    assert count(released, ["block", "h1"]).equals(count(h1, ["block", "h1"]))
    assert (
        released.loc[released["h1"] == "vacant", "tenvacgq"]
        .isin(
            [
                "for_rent",
                "rented_not_occupied",
                "for_sale",
                "sold_not_occupied",
                "seasonal",
                "migrant_workers",
                "other_vacant",
            ]
        )
        .all()
    )
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
    from dpspec_topdown.measurement.allocation import split_allocation
    from dpspec_topdown.estimation.joint_passes import joint_pass_plan
    from dpspec_topdown.params.joint import _joint_names
    from dpspec_topdown.params.passes import _passes
    from dpspec_topdown.params.tables import _joint, _schema
    from dpspec_topdown.plugin import TopDown

    spec = parse(open(SPECS[run], encoding="utf-8").read(), SPECS[run])
    params = check(spec).params
    (j,) = _joint(spec, params)
    main, other = split_allocation(TopDown()._allocation(spec, params), "households")
    passes = _passes(params, ["tenvacgq"], _joint_names([j]))
    assert set(passes) == set(STRATEGY[run])
    for level, plan in passes.items():
        outer = joint_pass_plan(
            level, plan, _schema(spec, params), main, j["schema"], other, "households", groups=False
        )
        assert [(len(o.fit_main), len(o.fit_joint)) for o in outer] == [(1, 0), (0, 6), (0, 3)], level
        assert [[r[0] for r in o.round_main] for o in outer] == [["tenvacgq"], [], []], level
        assert [len(o.round_joint) for o in outer] == [0, 2, 1], level


GQ_TYPES = [
    "gq101",
    "gq102",
    "gq103",
    "gq104",
    "gq105",
    "gq106",
    "gq201",
    "gq202",
    "gq203",
    "gq301",
    "gq401",
    "gq402",
    "gq403",
    "gq404",
    "gq405",
    "gq501",
    "gq601",
    "gq602",
    "gq701",
    "gq801",
    "gq802",
    "gq900",
    "gq901",
    "gq997",
]  # das_decennial hhgq.py:20-43, tenvacgq's levels 11-34 (tenvacgq.py:24-37)


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_unit_histogram_is_tenvacgq_with_its_24_gq_types_and_gqhh_vect_invariant(run):
    """tenvacgq has production's 35 levels (tenvacgq.legal = 0-34); gqhh_vect (the housing units,
    then each GQ type) is invariant per block; the bundled units hold GQ units, whose column
    gqhh_vect is the recode of tenvacgq."""
    from dpspec_topdown.params.tables import _schema
    from dpspec_topdown.plugin import TopDown

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
    assert [q.describe() for q in TopDown().induced_invariants(spec, params)] == [
        "count units by block",
        "count units by block, gqhh_vect",
    ]
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
    with pytest.raises(
        DataError,
        match=r"table 'units': 1 record with gqhh_vect different from the recode 'gqhh_vect' "
        rf"of tenvacgq, e.g. in block '{units.loc[at, 'block']}'",
    ):
        dpspec.compile(str(spec), seed=1)


# Production's 522 household types as test data (tests/hhtype_dhch_522.csv: hhtype_map.py's table, its
# attributes recoded), read independently of the specs and of scripts/make_dhc_synthetic.py.
TYPES = pd.read_csv(os.path.join(ROOT, "tests", "hhtype_dhch_522.csv"), comment="#").set_index("hhtype")
COUPLE = {0: "none", 1: "mopp", 2: "msame", 3: "uopp", 4: "usame"}  # the couple codes of the csv
OWN = {0: "oc0", 1: "ocu6", 2: "oc617", 3: "ocboth"}


def _joint_of(run):
    from dpspec_topdown.params.tables import _joint

    spec = parse(open(SPECS[run], encoding="utf-8").read(), SPECS[run])
    (j,) = _joint(spec, check(spec).params)
    return j


def _households(run):
    return pd.read_parquet(os.path.join(DATA, "dhc_pr_households.parquet" if run == "pr" else "dhc_households.parquet"))


def _groups(schema, name):
    """The group label of every hhtype value under the spec's recode `name`."""
    recode = next(r for r in schema.recodes if r.name == name)
    assert recode.variable == "hhtype"
    return [recode.labels[g] for g in recode.group_of]


def test_the_test_data_are_522_distinct_household_types():
    assert list(TYPES.index) == list(range(522))
    assert not TYPES.duplicated().any()  # each value one combination of the seven attributes
    assert set(TYPES["size"]) == set(range(1, 8)) and set(TYPES["couple"]) == set(range(5))


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_household_type_is_production_s_522_values_each_one_cell_and_back(run):
    """hhtype has one category per production value (0-521), so a value is one cell of the
    household type and a cell one value; each recode the strategy names puts every value in the
    group its attributes say (hhtype_dhch.py:152-226), and its groups are the nonempty ones, in
    production's order."""
    j = _joint_of(run)
    schema = j["schema"]
    assert list(j["variables"]["hhtype"]) == list(TYPES.index)
    assert schema.names[-1] == "hhtype" and len(schema.categories[-1]) == 522
    multig = ["yes" if m else "no" for m in TYPES["multig"]]
    partner = {0: "none", 1: "married", 2: "married", 3: "cohabiting", 4: "cohabiting"}
    own = {0: "no_own", 1: "own_under6", 2: "own_6to17", 3: "own_both"}
    ptdocs = [f"{partner[c]}_{own[o]}" for c, o in zip(TYPES["couple"], TYPES["ownchild"])]
    coupled = {
        0: "no_spouse_or_partner",
        1: "married_opposite_sex",
        2: "married_same_sex",
        3: "unmarried_opposite_sex",
        4: "unmarried_same_sex",
    }
    detailed = [
        f"{COUPLE[c]}_mg{m}_{OWN[o]}_s{n}"
        for c, m, o, n in zip(TYPES["couple"], TYPES["multig"], TYPES["ownchild"], TYPES["size"])
    ]
    assert _groups(schema, "multig") == multig
    assert _groups(schema, "partner_type_detailed_own_child_status") == ptdocs
    assert _groups(schema, "coupled_hh_type") == [coupled[c] for c in TYPES["couple"]]
    assert _groups(schema, "DetailedCoupleTypeMultGenDetOwnChildSize") == detailed
    labels = {r.name: list(r.labels) for r in schema.recodes}
    order = [
        f"{p}_{o}" for p in ("none", "married", "cohabiting") for o in ("own_under6", "no_own", "own_6to17", "own_both")
    ]  # hhtype_dhch.py:181-182
    assert labels["partner_type_detailed_own_child_status"] == [g for g in order if g in set(ptdocs)]
    order = [
        f"{c}_mg{m}_{o}_s{n}"
        for c in ("none", "msame", "mopp", "usame", "uopp")
        for m in (0, 1)
        for o in OWN.values()
        for n in range(1, 8)
    ]  # hhtype_dhch.py:219-221
    assert labels["DetailedCoupleTypeMultGenDetOwnChildSize"] == [g for g in order if g in set(detailed)]
    assert len(labels["DetailedCoupleTypeMultGenDetOwnChildSize"]) == 183
    assert labels["coupled_hh_type"] == list(coupled[c] for c in (2, 1, 4, 3, 0))  # hhtype_dhch.py:194-198


def test_the_generator_numbers_the_household_types_as_production():
    """scripts/make_dhc_synthetic.py builds the 522 types from the rules of hhtype.csp (not from
    hhtype_map.py) and numbers them in its sort order: the same table as the test data, so a
    household's attributes name exactly one value and a value exactly one set of attributes."""
    import importlib.util

    where = importlib.util.spec_from_file_location(
        "make_dhc_synthetic", os.path.join(ROOT, "scripts", "make_dhc_synthetic.py")
    )
    make = importlib.util.module_from_spec(where)
    where.loader.exec_module(make)
    table = make.hhtype_table()
    assert list(table.columns) == list(TYPES.columns)
    assert (table.to_numpy() == TYPES.to_numpy()).all() and list(table.index) == list(TYPES.index)


def _production_zeros(coords: dict) -> dict:
    """Production's structural zeros (Constraints_DHCH.py:87-193, as listed at every level by
    dhch_2022_experiments_defaults.ini:20-22), written out from its rules on the test data's
    attributes: {name: mask over the cells}. hhage: 0 15-24, 1-4 25-59, 5 60-64, 6 65-74, 7-8 75+
    (hhage.py); elderly: 0 no one 60+, 1 60-64, 2 65-74, 3 75+ (hhelderly.py); sex 0 male."""
    sex, age, eld, h = coords["sex"], coords["hhage"], coords["elderly"], coords["hhtype"]
    size, couple, own, kids, u18 = (
        TYPES[a].to_numpy()[h] for a in ("size", "couple", "ownchild", "children", "under18")
    )
    implied = np.array([0, 0, 0, 0, 0, 1, 2, 3, 3])[age]  # the elderly presence the householder alone makes
    band = {0: age < 5, 1: age == 5, 2: age == 6, 3: age >= 7}
    paired, under6 = couple > 0, (own == 1) | (own == 3)
    out = {}
    for i in range(4):
        off = band[i] & (eld != implied)
        out[f"living_alone_eld{i}"] = (size == 1) & off
        out[f"size2_eld{i}"] = (size == 2) & ((own > 0) | (kids > 0) | (u18 == 1) & (i > 0)) & off
        out[f"size3_eld{i}"] = (size == 3) & (own == 3) & off
    out["living_alone_childalone"] = (size == 1) & (u18 == 1) & (age > 0)
    young_75 = (age == 0) & (eld == 3) & paired
    out["size2_le25_eld3"] = young_75 & (size == 2)
    out["size3_le25_eld3"] = young_75 & (size == 3) & (own > 0)
    out["size4_le25_eld3"] = young_75 & (size == 4) & (own == 3)
    out["age_child_1"] = (sex == 0) & (age >= 7) & under6
    out["age_child_2"] = (sex == 1) & (age >= 7) & (own > 0)
    out["age_child_3"] = (sex == 1) & (age >= 5) & under6
    out["hh_elderly_eld3"] = (age >= 7) & (eld < 3)
    out["hh_elderly_2"] = (age == 6) & (eld < 2)
    out["hh_elderly_3"] = (age == 5) & (eld < 1)
    return out


@pytest.mark.slow  # builds every cell of the production households histogram
@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_structural_zeros_are_production_s_on_every_cell(run):
    """Every one of the 1,578,528 cells of the households' histogram (2 x 9 x 2 x 7 x 4 x 3 x 522,
    Constraints_DHCH.py:9-10) is in a stated zero exactly when production's rule of the same name
    puts it there, living_alone_childalone and size2_eld0-3 in full included; every household type
    has cells outside the zeros, and the bundled households respect them all."""
    j = _joint_of(run)
    schema = j["schema"]
    assert schema.shape == (2, 9, 2, 7, 4, 3, 522)
    grid = np.indices(schema.shape, dtype=np.int16).reshape(len(schema.shape), -1)
    coords = dict(zip(schema.names, grid))
    stated = {}
    for name, box in j["structural_zeros"].items():
        mask = np.ones(grid.shape[1], dtype=bool)
        for var, values in box.items():
            cats = list(schema.categories[schema.names.index(var)])
            mask &= np.isin(coords[var], [cats.index(v) for v in values])
        stated[name] = mask
    wanted = _production_zeros(coords)
    assert set(stated) == set(wanted)
    for name in wanted:
        assert (stated[name] == wanted[name]).all(), name
        assert wanted[name].any(), name
    union = np.logical_or.reduce(list(stated.values()))
    assert (~union.reshape(-1, 522)).any(axis=0).all()  # no household type is all zeros
    households = _households(run)
    for name, cells in j["structural_zeros"].items():
        assert not _in_zero(households, cells).any(), name


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_household_queries_are_production_s(run):
    """The strategy's nine household queries (dhch_strategies.py:1665-1673 and 1589-1596) at every
    level, on production's recodes of hhtype and of tenure."""
    j = _joint_of(run)
    schema = j["schema"]
    detailed = "DetailedCoupleTypeMultGenDetOwnChildSize"
    wanted = [
        ("multig", "hisp", "hhtenshort_2lev"),
        ("hisp", "hhtenshort_2lev"),
        ("hisp", "hhtenshort_2lev", "race"),
        ("partner_type_detailed_own_child_status", "sex", "hhtenshort_2lev"),
        ("coupled_hh_type", "hisp", "hhtenshort_2lev"),
        ("sex", "hisp", "ten", "race", detailed),
        ("sex", "hisp", "ten", "race", "hhage", detailed),
        ("ten", "hhage", detailed),
        schema.names,
    ]
    for level, entries in j["strategy"].items():
        assert [q for q, _ in entries] == [schema.canonical(q) for q in wanted], level
    assert list(schema.names) == ["sex", "hhage", "hisp", "race", "elderly", "ten", "hhtype"]


@pytest.mark.parametrize("run", sorted(SPECS))
def test_the_bundled_households_are_production_household_types_of_their_units(run):
    """Every bundled household is a production household type whose size is its unit's (block and
    tenure alike), and the data hold every couple type, own and other children of every age range,
    households without relatives and, in the US file, children living alone or as householder,
    spouse or partner."""
    households = _households(run)
    units = pd.read_parquet(os.path.join(DATA, "dhc_pr_units.parquet" if run == "pr" else "dhc_units.parquet"))
    assert households["hhtype"].between(0, 521).all()
    kind = TYPES.loc[households["hhtype"]].reset_index(drop=True)
    ten = {"mortgage": 0, "owned": 1, "rented": 2}
    occupied = units[units["tenvacgq"].astype(str).isin(ten)]
    mine = households.assign(size=kind["size"].to_numpy(), ten=households["ten"].astype(int))
    theirs = occupied.assign(size=occupied["hhsize"].astype(int), ten=occupied["tenvacgq"].astype(str).map(ten))
    count = lambda frame: frame.groupby([frame["block"].astype(str), "ten", "size"]).size().sort_index()  # noqa: E731
    assert count(mine).equals(count(theirs))
    assert set(kind["couple"]) == set(range(5)) and set(kind["ownchild"]) == set(kind["children"]) == set(range(4))
    assert set(kind["relatives"]) == {0, 1} and (kind["children"] > kind["ownchild"]).any()
    if run == "us":
        assert ((kind["under18"] == 1) & (kind["children"] == 0)).sum() >= 2 and (households["hhtype"] == 393).any()
