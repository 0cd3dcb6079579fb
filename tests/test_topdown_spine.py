"""Production's geographic spine: the AIAN / non-AIAN split of every state (spine.py).

The parts are measured as separate state-level geounits with the state's budget, every level
below is nested in one part, the release names the published geography, and the state
invariant holds on the sum of the two parts only."""

import json
import os

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpspec.check.checker import check
from dpspec.cli.main import main
from dpspec.errors import DataError, SpecError
from tests.topdown_geography import parse
from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import Records, RunContext
from dpspec_topdown.geography.spine import split_geography
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, PRODUCTION_LEVEL_SHARES, generate_population, pl94_strategy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALL_LEVELS = ["nation"] + LEVELS
SHARES = {
    "nation": PRODUCTION_LEVEL_SHARES["nation"],
    "state": PRODUCTION_LEVEL_SHARES["state"],
    "county": PRODUCTION_LEVEL_SHARES["county"],
    "tract": PRODUCTION_LEVEL_SHARES["tract"] + PRODUCTION_LEVEL_SHARES["blockgroup"],
    "block": PRODUCTION_LEVEL_SHARES["block"],
}  # block groups unmeasured: sums of blocks


@pytest.fixture(scope="module")
def persons():
    frame = generate_population(3000, 120, seed=24)
    blocks = np.unique(frame["block"].astype(str))
    inside = set(blocks[::3])  # an AIAN area cutting across counties and tracts
    frame["aian"] = frame["block"].astype(str).isin(inside).astype(np.int64)
    return frame


def _run(persons, seed, rho=1, aian=("state", "aian")):
    return run_topdown(
        persons,
        Design(
            ALL_LEVELS, PL94_VARIABLES, pl94_strategy(tuple(SHARES)), rho, SHARES, "hamming", [("state", ())], aian=aian
        ),
        RunContext(np.random.default_rng(seed), workers=1),
    )


@pytest.mark.slow  # TopDown on the AIAN spine
def test_states_are_measured_as_two_parts_and_held_only_on_their_sum(persons):
    res = _run(persons, 0, rho=1 / 100)
    state = res.hierarchy.level("state")
    assert sorted(state.codes) == ["01/AIAN", "01/non-AIAN"] and list(state.labels) == ["01", "01"]
    county = res.hierarchy.level("county")
    # every county the area cuts is split; each part lies under one state part
    assert county.n_units == len(set(county.labels)) + len({c for c in county.codes if c.endswith("/AIAN")})
    assert all(str(c).split("/")[1] == str(state.codes[p]).split("/")[1] for c, p in zip(county.codes, county.parent))
    # the measurements name the parts, with the state level's variance for both
    m = res.measurements
    at_state = m[m["level"] == "state"]
    assert set(at_state["geocode"].astype(str)) == {"01/AIAN", "01/non-AIAN"}
    total = at_state[at_state["query"] == "total"]
    assert total["variance"].nunique() == 1
    # the release names the published geography; the state total is exact
    micro = res.microdata
    assert set(micro["state"].astype(str)) == {"01"}
    assert set(micro["county"].astype(str)) == set(persons["county"].astype(str))
    assert len(micro) == len(persons)


def test_the_parts_are_not_invariant(persons):
    """At a small budget the AIAN part's total moves (it would not if the parts were invariant)."""
    truth = int(persons["aian"].sum())
    moved = 0
    for seed in range(4):
        res = _run(persons, seed, rho=1 / 100)
        hist = res.histograms["state"]
        part = list(res.hierarchy.level("state").codes).index("01/AIAN")
        moved += int(hist[part].sum()) != truth
        assert int(hist.sum()) == len(persons)  # the sum is kept exactly
    assert moved >= 3


def test_without_the_split_the_spine_is_the_hierarchy(persons):
    res = _run(persons, 0, aian=None)
    assert list(res.hierarchy.level("state").codes) == ["01"]
    assert res.hierarchy.level("state").labels is None


def test_a_block_on_both_sides_is_a_data_error(persons):
    bad = persons.copy()
    block = bad["block"].iloc[0]
    rows = np.flatnonzero((bad["block"] == block).to_numpy())
    assert rows.size >= 2
    bad.loc[bad.index[rows[0]], "aian"] = 1 - bad["aian"].iloc[rows[0]]
    with pytest.raises(DataError, match=f"block '{block}' has records with aian = 0 and aian = 1"):
        _run(bad, 0)


def test_split_geography_keeps_published_codes():
    geo = pd.DataFrame(
        {
            "state": ["01", "01", "02"],
            "county": ["01001", "01003", "02001"],
            "block": ["a", "b", "c"],
            "aian": [1, 0, 0],
        }
    )
    out, labels = split_geography(geo, ["nation", "state", "county", "block"], "state", "aian")
    assert list(out["state"]) == ["01/AIAN", "01/non-AIAN", "02/non-AIAN"]
    assert labels["state"] == {"01/AIAN": "01", "01/non-AIAN": "01", "02/non-AIAN": "02"}
    assert list(out["block"]) == ["a", "b", "c"]  # the finest units are whole
    with pytest.raises(DataError, match="must be 0 or 1, found 2"):
        split_geography(geo.assign(aian=[2, 0, 0]), ["nation", "state", "county", "block"], "state", "aian")


SPEC = """spec "aian spine"
domain d "d" {
  stage edited
  geography g { state > county > block }
  table persons unit person {
    state : category
    county : category in state
    block : category in county
    aian : AIAN_TYPE
    sex : {0, 1}
  }
}
invariants {
  count persons by INVARIANT
}
unit persons : hamming
premetric zcdp
mechanism topdown {
  table: persons
  variables: sex
  rho: 1
  spine: {
    aian: COLUMN
  }
  levels: { nation: 1/4  state: 1/4  county: 1/4  block: 1/4 }
  queries: { total: 1/2  detailed: 1/2 }
}
"""


def _spec(column="aian", invariant="state", aian_type="{0, 1}"):
    return SPEC.replace("COLUMN", column).replace("INVARIANT", invariant).replace("AIAN_TYPE", aian_type)


def test_spine_misuse_is_a_located_spec_error():
    check(parse(_spec(), "s.dps"))  # the well-formed spec checks
    check(parse(_spec(invariant="block"), "s.dps"))  # block invariants: blocks are whole
    line = SPEC.splitlines().index("    aian: COLUMN") + 1
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*unknown column 'nosuch'") as exc:
        check(parse(_spec(column="nosuch"), "s.dps"))
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*must be boolean or take the values 0 and 1"):
        check(parse(_spec(aian_type="{0, 1, 2}"), "s.dps"))
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*a geography level or histogram variable"):
        check(parse(_spec(column="sex"), "s.dps"))
    inv_line = SPEC.splitlines().index("  count persons by INVARIANT") + 1
    with pytest.raises(SpecError, match=f"s.dps:{inv_line}:.*keeps 'count persons by county' only at state"):
        check(parse(_spec(invariant="county"), "s.dps"))
    assert exc.value.diagnostics[0].line == line


def test_budget_json_lists_the_spine(tmp_path):
    path = tmp_path / "s.dps"
    path.write_text(parse(_spec(), str(path)).text)  # its geography declared (a placeholder file)
    result = CliRunner().invoke(main, ["budget", "--json", str(path)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    spine = out["spine"]["aian"]
    assert spine["column"] == "aian" and spine["split_levels"] == ["state", "county"]
    assert [c["class"] for c in spine["geounit_classes"]] == ["AIAN part", "non-AIAN part"]
    # the parts take the level's share: the allocation itself is unchanged
    assert sum(float(r["rho"]) for r in out["allocation"]) == pytest.approx(1.0)


def _production_on_a_cut_tract(tmp_path, n_blockgroups=None):
    """(spec path, persons, tracts): specs/pl94_production_topdown.dps on one tract its AIAN area
    cuts (on its first AIAN block group holding group quarters and first non-AIAN one, if
    `n_blockgroups` is 2)."""
    data_dir = os.path.join(ROOT, "specs", "data", "pl94_synthetic")
    persons = pd.read_parquet(os.path.join(data_dir, "pl94_synthetic.parquet"))
    facilities = pd.read_parquet(os.path.join(data_dir, "pl94_synthetic_facilities.parquet"))
    cut = persons.groupby(persons["tract"].astype(str))["aian"].nunique()
    tracts = cut.index[cut.to_numpy() == 2][:1]  # one tract the area cuts
    keep = lambda t: t[t["tract"].astype(str).isin(tracts)].reset_index(drop=True)  # noqa: E731
    persons, facilities = keep(persons), keep(facilities)
    if n_blockgroups == 2:
        by_bg = persons.groupby(persons["blockgroup"].astype(str)).agg(aian=("aian", "max"), gq=("hhgq", "max"))
        bgs = [by_bg.index[(by_bg["aian"] == 1) & (by_bg["gq"] > 0)][0], by_bg.index[by_bg["aian"] == 0][0]]
        persons = persons[persons["blockgroup"].astype(str).isin(bgs)].reset_index(drop=True)
        facilities = facilities[facilities["blockgroup"].astype(str).isin(bgs)].reset_index(drop=True)
    (tmp_path / "data" / "pl94_synthetic").mkdir(parents=True)
    persons.to_parquet(tmp_path / "data" / "pl94_synthetic" / "pl94_synthetic.parquet")
    facilities.to_parquet(tmp_path / "data" / "pl94_synthetic" / "pl94_synthetic_facilities.parquet")
    # the cut's public geography: the bundled file's rows for the blocks kept
    geography = pd.read_csv(os.path.join(data_dir, "geography.csv"), dtype=str)
    blocks = set(persons["block"].astype(str)) | set(facilities["block"].astype(str))
    geography[geography["block"].isin(blocks)].to_csv(
        tmp_path / "data" / "pl94_synthetic" / "geography.csv", index=False
    )
    spec_path = tmp_path / "pl94.dps"
    spec_path.write_text(open(os.path.join(ROOT, "specs", "pl94_production_topdown.dps")).read())
    return spec_path, persons, tracts


def test_production_spec_runs_on_the_aian_spine(tmp_path):
    """specs/pl94_production_topdown.dps end to end on a tract its AIAN area cuts: the state
    and the counties are split, the release names the published codes, the total is exact."""
    from dpspec.run.compiler import compile_spec

    spec_path, persons, tracts = _production_on_a_cut_tract(tmp_path)
    result = compile_spec(parse(spec_path.read_text(), str(spec_path)), seed=3, audit=False)
    split = result.release.facts["split_spine"]
    assert split["state"] == {"parts": 2, "units": 1, "split_units": 1}
    assert split["tract"]["split_units"] >= 1  # the area cuts a tract
    assert split["blockgroup"]["split_units"] >= 1  # a block group with a group-quarters block is split
    micro = result.published["persons"].to_pandas()
    assert len(micro) == len(persons)
    assert set(micro["tract"].astype(str)) == set(tracts)
    m = result.published["measurements"].to_pandas()
    assert {"01/AIAN", "01/non-AIAN"} <= set(m.loc[m["level"] == "state", "geocode"].astype(str))
    # the optimized spine: each county part holds one tract part, which it measures with both shares
    bypass = result.release.facts["bypass_spine"]
    assert "0" not in bypass["county"] and bypass["tract"]["bypassed"] == 2
    assert not (m["level"] == "tract").any()  # bypassed geounits publish no measurement


# --- the optimized spine: single-child geounits bypassed --------------------------------------

BYPASS = ["county", "tract", "blockgroup"]


def test_bypass_classes_follow_single_child_chains():
    from dpspec_topdown.geography.hierarchy import build_hierarchy
    from dpspec_topdown.geography.spine import BYPASSED, bypass_classes, check_budget_per_person

    # county A: one tract with one block group with one block (a chain); county B: two tracts,
    # B1 with one block group of two blocks, B2 with one block group of one block
    geo = pd.DataFrame(
        {
            "county": ["A", "B", "B", "B"],
            "tract": ["A1", "B1", "B1", "B2"],
            "blockgroup": ["A1a", "B1a", "B1a", "B2a"],
            "block": ["A1a1", "B1a1", "B1a2", "B2a1"],
        }
    )
    hier = build_hierarchy(geo, ["nation", "county", "tract", "blockgroup", "block"], counted=True)
    classes = bypass_classes(hier, BYPASS)
    names = hier.names
    got = {names[k]: dict(zip(hier.levels[k].codes, c.tolist())) for k, c in classes.items()}
    # A's chain ends at its top: the county spends county + tract + block group + block
    assert got["county"] == {"A": 3, "B": 0}
    assert got["tract"] == {"A1": BYPASSED, "B1": 1, "B2": 2}  # B2's chain runs down to its block
    assert got["blockgroup"] == {"A1a": BYPASSED, "B1a": BYPASSED, "B2a": BYPASSED}
    assert got["block"] == {"A1a1": BYPASSED, "B1a1": 0, "B1a2": 0, "B2a1": BYPASSED}
    from fractions import Fraction as F

    shares = [F(0), F(1, 4), F(1, 4), F(1, 4), F(1, 4)]
    check_budget_per_person(hier, classes, shares)  # every block's geounits spend rho exactly
    broken = dict(classes)
    broken[names.index("block")] = np.zeros(4, dtype=np.int64)  # A1a1 measured again: spent twice
    with pytest.raises(Exception, match="do not spend rho exactly"):
        check_budget_per_person(hier, broken, shares)


@pytest.fixture(scope="module")
def single_child_persons():
    """Two tracts with a single block group and two with two, from the bundled state."""
    p = pd.read_parquet(os.path.join(ROOT, "specs", "data", "pl94_synthetic", "pl94_synthetic.parquet"))
    n = p.groupby(p["tract"].astype(str))["blockgroup"].nunique()
    tracts = list(n.index[n.to_numpy() == 1][:2]) + list(n.index[n.to_numpy() == 2][:2])
    return p[p["tract"].astype(str).isin(tracts)].reset_index(drop=True), tracts[:2]


def test_single_child_geounits_are_measured_once_with_both_shares(single_child_persons):
    from fractions import Fraction as F

    from dpspec.api import discrete_gaussian_variance, effective_sigma2

    persons, single = single_child_persons
    shares = dict(PRODUCTION_LEVEL_SHARES)
    rho = F(1)
    res = run_topdown(
        persons,
        Design(
            ALL_LEVELS,
            PL94_VARIABLES,
            pl94_strategy(tuple(shares)),
            rho,
            shares,
            "hamming",
            [("state", ())],
            bypass=BYPASS,
        ),
        RunContext(np.random.default_rng(1), workers=1),
    )
    tract, bg = res.hierarchy.level("tract"), res.hierarchy.level("blockgroup")
    cls_tract = dict(zip(tract.codes, res.budget_classes["tract"][0]))
    assert {c for c, v in cls_tract.items() if v == 1} == set(single)
    m = res.measurements
    # a bypassed block group has no measurement; its tract's total has the merged variance
    bgs_of_single = {c for c, p in zip(bg.codes, bg.parent) if tract.codes[p] in single}
    assert not set(m.loc[m["level"] == "blockgroup", "geocode"].astype(str)) & bgs_of_single
    total_share = dict(pl94_strategy(("x",))["x"])[()]
    merged = effective_sigma2(F(2) / (2 * rho * (shares["tract"] + shares["blockgroup"]) * total_share))
    plain = effective_sigma2(F(2) / (2 * rho * shares["tract"] * total_share))
    t = m[(m["level"] == "tract") & (m["query"] == "total")].set_index(
        m.loc[(m["level"] == "tract") & (m["query"] == "total"), "geocode"].astype(str)
    )
    for code in tract.codes:
        want = merged if code in single else plain
        assert t.loc[code, "variance"] == pytest.approx(discrete_gaussian_variance(want), rel=1e-12)
    # the bypassed child is its parent
    h_tract, h_bg = res.histograms["tract"], res.histograms["blockgroup"]
    for i, code in enumerate(bg.codes):
        if code in bgs_of_single:
            assert (h_bg[i] != h_tract[bg.parent[i]]).nnz == 0
    assert int(h_tract.sum()) == len(persons)


def test_bypass_misuse_is_a_located_spec_error():
    text = _spec().replace("    aian: aian\n", "    bypass: LEVELS\n")
    line = text.splitlines().index("    bypass: LEVELS") + 1
    check(parse(text.replace("LEVELS", "[county]"), "s.dps"))
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*'tract' is not a geography level"):
        check(parse(text.replace("LEVELS", "[tract]"), "s.dps"))
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*'block', the finest level"):
        check(parse(text.replace("LEVELS", "[block]"), "s.dps"))
    no_share = text.replace(
        "levels: { nation: 1/4  state: 1/4  county: 1/4  block: 1/4 }",
        "levels: { nation: 1/4  state: 1/4  block: 1/2 }",
    )
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*'county', which has no budget share.*without budget"):
        check(parse(no_share.replace("LEVELS", "[county]"), "s.dps"))


def test_budget_json_lists_the_bypass_classes_exactly():
    from fractions import Fraction as F

    result = CliRunner().invoke(main, ["budget", "--json", os.path.join(ROOT, "specs", "pl94_production_topdown.dps")])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    rows = out["spine"]["bypass"]["classes"]
    rho = F(542, 339) ** 2
    shares = {"county": F(447, 4099), "tract": F(687, 4099), "blockgroup": F(1256, 4099), "block": F(165, 4099)}
    row = next(r for r in rows if (r["level"], r["through"], r["query"]) == ("tract", "block", "total"))
    assert F(row["rho_exact"]) == rho * (shares["tract"] + shares["blockgroup"] + shares["block"]) * F(1567, 4102)
    assert {(r["level"], r["through"]) for r in rows} == {
        ("county", "tract"),
        ("county", "blockgroup"),
        ("county", "block"),
        ("tract", "blockgroup"),
        ("tract", "block"),
        ("blockgroup", "block"),
    }
    assert sum(F(r["rho_exact"]) for r in out["allocation"]) == rho  # the per-person total is unchanged


# --- spine block groups split by the group-quarters types present -------------------------------


def test_gq_signatures_and_the_split_keep_published_codes():
    from dpspec_topdown.geography.spine import gq_signatures, split_by_signature

    counts = pd.DataFrame({"block": ["a", "a", "b", "c"], "gqtype": [0, 3, 5, 0], "count": [4, 1, 2, 7]})
    sig = gq_signatures(counts, "block", "gqtype", [1, 2, 3, 4, 5, 6, 7])
    assert sig.to_dict() == {"a": 1 << 2, "b": 1 << 4}  # housing units (type 0) are not a GQ type
    geo = pd.DataFrame(
        {
            "state": ["01"] * 4,
            "blockgroup": ["g1", "g1", "g1", "g2"],
            "block": ["a", "b", "c", "d"],
            "aian": [0, 0, 0, 1],
        }
    )
    out, labels = split_geography(geo, ["nation", "state", "blockgroup", "block"], "state", "aian")
    out, labels = split_by_signature(out, ["nation", "state", "blockgroup", "block"], sig, labels)
    assert list(out["blockgroup"]) == ["g1/non-AIAN/gq4", "g1/non-AIAN/gq16", "g1/non-AIAN/gq0", "g2/AIAN/gq0"]
    assert labels["blockgroup"] == {
        "g1/non-AIAN/gq4": "g1",
        "g1/non-AIAN/gq16": "g1",
        "g1/non-AIAN/gq0": "g1",
        "g2/AIAN/gq0": "g2",
    }


def test_block_groups_are_split_by_their_gq_types(persons):
    from dpspec_topdown.geography.spine import gq_signatures

    blocks = np.unique(persons["block"].astype(str))
    counts = pd.DataFrame({"block": blocks[:6], "gqtype": [1, 1, 4, 4, 1, 7], "count": 1})
    sig = gq_signatures(counts, "block", "gqtype", list(range(1, 8)))
    res = run_topdown(
        Records(persons, gq_signature=sig),
        Design(ALL_LEVELS, PL94_VARIABLES, pl94_strategy(tuple(SHARES)), 1, SHARES, "hamming", [("state", ())]),
        RunContext(np.random.default_rng(2), workers=1),
    )
    bg = res.hierarchy.level("blockgroup")
    parts = pd.Series(list(bg.labels)).value_counts()
    assert parts.max() >= 2  # a block group with GQ blocks is measured as several geounits
    assert all(str(c).startswith(str(lab) + "/gq") for c, lab in zip(bg.codes, bg.labels))
    micro = res.microdata
    assert set(micro["blockgroup"].astype(str)) == set(persons["blockgroup"].astype(str))
    assert len(micro) == len(persons)


def test_gq_blockgroups_misuse_is_a_located_spec_error():
    text = SPEC.replace(
        "    aian: COLUMN\n",
        "    gq_blockgroups: {\n      table: TABLE\n      type: gqtype\n      types: [1, 2]\n    }\n",
    )
    text = text.replace("AIAN_TYPE", "{0, 1}").replace("INVARIANT", "state")
    text = text.replace(
        "    sex : {0, 1}\n  }\n",
        "    sex : {0, 1}\n  }\n  table facilities unit facility {\n"
        "    state : category\n    county : category in state\n    block : category in county\n"
        "    gqtype : {0, 1, 2}\n  }\n",
    )
    line = text.splitlines().index("    gq_blockgroups: {") + 1
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*declare them public: invariants"):
        check(parse(text.replace("TABLE", "facilities"), "s.dps"))
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*'persons', which must be a second table"):
        check(parse(text.replace("TABLE", "persons"), "s.dps"))
    public = text.replace(
        "  count persons by state\n", "  count persons by state\n  count facilities by block, gqtype\n"
    )
    check(parse(public.replace("TABLE", "facilities"), "s.dps"))


@pytest.mark.slow  # a Spark job per level: about 90 s on this loaded two-core machine
def test_the_spine_releases_the_same_bytes_on_spark(tmp_path, spark_session):
    """AIAN split, bypass and GQ block groups: local and Spark give byte-identical releases."""
    import dpspec
    from dpspec.engine.spark import SparkEngine
    from dpspec.publish.output import write_result

    (tmp_path / "in").mkdir()
    spec_path, _, _ = _production_on_a_cut_tract(tmp_path / "in", 2)  # outputs beside, never among the inputs

    def release(engine, out):
        write_result(dpspec.compile(str(spec_path), seed=7, engine=engine), str(out))
        return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix == ".csv"}

    local = release("local", tmp_path / "local")
    assert local
    assert release(SparkEngine(session=spark_session), tmp_path / "spark") == local
