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
from dpspec.language.parser import parse
from dpspec_topdown.engine import run_topdown
from dpspec_topdown.spine import split_geography
from dpspec_topdown.synthetic import LEVELS, PL94_VARIABLES, PRODUCTION_LEVEL_SHARES, generate_population, pl94_strategy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALL_LEVELS = ["nation"] + LEVELS
SHARES = {"nation": PRODUCTION_LEVEL_SHARES["nation"], "state": PRODUCTION_LEVEL_SHARES["state"],
          "county": PRODUCTION_LEVEL_SHARES["county"],
          "tract": PRODUCTION_LEVEL_SHARES["tract"] + PRODUCTION_LEVEL_SHARES["blockgroup"],
          "block": PRODUCTION_LEVEL_SHARES["block"]}  # block groups unmeasured: sums of blocks


@pytest.fixture(scope="module")
def persons():
    frame = generate_population(3000, 120, seed=24)
    blocks = np.unique(frame["block"].astype(str))
    inside = set(blocks[::3])  # an AIAN area cutting across counties and tracts
    frame["aian"] = frame["block"].astype(str).isin(inside).astype(np.int64)
    return frame


def _run(persons, seed, rho=1, aian=("state", "aian")):
    return run_topdown(persons, ALL_LEVELS, PL94_VARIABLES, pl94_strategy(tuple(SHARES)), rho, SHARES, "hamming",
                       [("state", ())], np.random.default_rng(seed), workers=1, aian=aian)


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
    geo = pd.DataFrame({"state": ["01", "01", "02"], "county": ["01001", "01003", "02001"],
                        "block": ["a", "b", "c"], "aian": [1, 0, 0]})
    out, labels = split_geography(geo, ["nation", "state", "county", "block"], "state", "aian")
    assert list(out["state"]) == ["01/AIAN", "01/non-AIAN", "02/non-AIAN"]
    assert labels["state"] == {"01/AIAN": "01", "01/non-AIAN": "01", "02/non-AIAN": "02"}
    assert list(out["block"]) == ["a", "b", "c"]  # the finest units are whole
    with pytest.raises(DataError, match="must be 0 or 1, found 2"):
        split_geography(geo.assign(aian=[2, 0, 0]), ["nation", "state", "county", "block"], "state", "aian")


SPEC = '''spec "aian spine"
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
'''


def _spec(column="aian", invariant="state", aian_type="{0, 1}"):
    return SPEC.replace("COLUMN", column).replace("INVARIANT", invariant).replace("AIAN_TYPE", aian_type)


def test_spine_misuse_is_a_located_spec_error():
    check(parse(_spec(), "s.dps"))  # the well-formed spec checks
    check(parse(_spec(invariant="block"), "s.dps"))  # block invariants: blocks are whole
    line = SPEC.splitlines().index("    aian: COLUMN") + 1
    with pytest.raises(SpecError, match=f"s.dps:{line}:.*'nosuch', which is not a column") as exc:
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
    path.write_text(_spec())
    result = CliRunner().invoke(main, ["budget", "--json", str(path)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    spine = out["spine"]["aian"]
    assert spine["column"] == "aian" and spine["split_levels"] == ["state", "county"]
    assert [c["class"] for c in spine["geounit_classes"]] == ["AIAN part", "non-AIAN part"]
    # the parts take the level's share: the allocation itself is unchanged
    assert sum(float(r["rho"]) for r in out["allocation"]) == pytest.approx(1.0)


def test_production_spec_runs_on_the_aian_spine(tmp_path):
    """specs/pl94_production_topdown.dps end to end on the tracts its AIAN area cuts: the state
    and the counties are split, the release names the published codes, the total is exact."""
    from dpspec.run.compiler import compile_spec

    data_dir = os.path.join(ROOT, "specs", "data", "pl94_synthetic")
    persons = pd.read_parquet(os.path.join(data_dir, "pl94_synthetic.parquet"))
    facilities = pd.read_parquet(os.path.join(data_dir, "pl94_synthetic_facilities.parquet"))
    cut = persons.groupby(persons["tract"].astype(str))["aian"].nunique()
    tracts = cut.index[cut.to_numpy() == 2][:1]  # one tract the area cuts
    keep = lambda t: t[t["tract"].astype(str).isin(tracts)].reset_index(drop=True)  # noqa: E731
    persons, facilities = keep(persons), keep(facilities)
    (tmp_path / "data" / "pl94_synthetic").mkdir(parents=True)
    persons.to_parquet(tmp_path / "data" / "pl94_synthetic" / "pl94_synthetic.parquet")
    facilities.to_parquet(tmp_path / "data" / "pl94_synthetic" / "pl94_synthetic_facilities.parquet")
    spec_path = tmp_path / "pl94.dps"
    spec_path.write_text(open(os.path.join(ROOT, "specs", "pl94_production_topdown.dps")).read())
    result = compile_spec(parse(spec_path.read_text(), str(spec_path)), seed=3, audit=False)
    split = result.release.facts["aian_spine"]
    assert split["state"] == {"parts": 2, "units": 1, "split_units": 1}
    assert split["tract"]["split_units"] >= 1  # the area cuts a tract
    micro = result.published["persons"].to_pandas()
    assert len(micro) == len(persons)
    assert set(micro["tract"].astype(str)) == set(tracts)
    m = result.published["measurements"].to_pandas()
    assert {"01/AIAN", "01/non-AIAN"} <= set(m.loc[m["level"] == "state", "geocode"].astype(str))
