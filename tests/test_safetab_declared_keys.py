"""SafeTab releases its declared geography units and iterations, never the ones the records hold:
an empty declared county is measured and released with its noisy values, one person alone in a
tract does not change which units and groups the release has, an undeclared geography column or
iteration table is refused at check, and a run that leaves a declared unit out is stopped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpspec
from dpspec.check.data import load_data
from dpspec.errors import DataError, MechanismError, SpecError
from dpspec.run.compiler import compile_spec
from dpspec_safetab import plan as plan_mod
from tests.safetab_helpers import ROOT, variant

SEED = 38
GEOGRAPHY = ROOT / "specs" / "data" / "safetab" / "geography.csv"
# zero suppression off: every measured group then has a row, so the release's keys show every unit
NO_SUPPRESSION = ("suppress_at: county, tract, place, aiannh\n", "")
KEYS = ["table", "geography", "geocode", "group_level", "group"]


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory):
    return variant(tmp_path_factory.mktemp("no-suppression"), *NO_SUPPRESSION)


@pytest.fixture(scope="module")
def persons(spec_path):
    data, _ = load_data(dpspec.load(str(spec_path)))
    return data["persons"]


@pytest.fixture(scope="module")
def two_counties(persons):
    """The persons of the first two declared counties; the other eleven are declared and empty."""
    kept = sorted(pd.read_csv(GEOGRAPHY, dtype=str)["county"].unique())[:2]
    return persons[persons["county"].isin(kept)].reset_index(drop=True)


def _run(spec_path, persons):
    return compile_spec(dpspec.load(str(spec_path)), data={"persons": persons}, seed=SEED, audit=False)


def _frame(result) -> pd.DataFrame:
    counts = result.published["counts"]
    return counts.to_pandas() if hasattr(counts, "to_pandas") else counts


@pytest.fixture(scope="module")
def released(spec_path, two_counties):
    result = _run(spec_path, two_counties)
    return result, _frame(result)


def test_every_declared_county_is_released_with_noisy_totals_when_nobody_lives_in_eleven_of_them(
    released, two_counties
):
    result, counts = released
    declared = pd.read_csv(GEOGRAPHY, dtype=str)
    assert two_counties["county"].nunique() == 2
    county = counts[counts["geography"] == "county"]
    assert set(county["geocode"]) == set(declared["county"])  # today's code released the two occupied ones only
    assert set(counts.loc[counts["geography"] == "tract", "geocode"]) == set(declared["tract"])
    empty = county[~county["geocode"].isin(two_counties["county"])]
    totals = empty[empty["detail"] == "total"]["count"].to_numpy()
    # each empty county's groups: stage 1 chose the total (true total 0, noise sd ~ 17 against thresholds
    # from 971), released as 0 + discrete Gaussian noise of variance 9 / (2 * 0.9 * 0.159) ~ 31: centred
    # on 0 (mean within 0.5 of 0 over > 10,000 totals: 5 standard errors) and not all zero
    assert len(totals) > 10_000 and abs(totals.mean()) < 0.5 and (totals != 0).mean() > 0.8
    units = {(f["geography"], f["level"]): f["units"] for f in result.release.facts["design"]}
    assert units[("county", 1)] == units[("county", 2)] == declared["county"].nunique() == 13


def test_every_declared_iteration_is_released_at_the_nation_when_nobody_is_in_it(released, spec_path):
    """Groups are the public iteration table's (this held on the old code too; kept as a guard)."""
    _, counts = released
    spec = dpspec.load(str(spec_path))
    checked = dpspec.api.check(spec)
    table = checked.mechanism._iteration_table(spec, checked.params)
    nation = counts[counts["geography"] == "nation"]
    for level in (1, 2):
        declared = set(table.selection(level, "detailed")["iteration"])
        released_groups = set(nation.loc[nation["group_level"] == level, "group"])
        assert released_groups == declared
    level2 = nation[(nation["group_level"] == 2) & (nation["detail"] == "total")]
    assert (level2["count"].abs() < 40).mean() > 0.5  # most detailed groups hold nobody here: noise alone


@pytest.mark.slow  # two SafeTab releases that differ by one person
def test_one_person_alone_in_a_tract_changes_no_unit_nor_group_of_the_release(spec_path, two_counties, persons):
    """D: the two counties and one person of a third county's tract; D': without her. The keys
    (table, geography level, unit, iteration level, group) are the same; only a group's detail,
    chosen from its noisy stage-1 total, may differ (adaptive, paid for)."""
    far = persons[~persons["county"].isin(two_counties["county"])].iloc[[0]]
    with_her = pd.concat([two_counties, far], ignore_index=True)
    a, b = _frame(_run(spec_path, with_her)), _frame(_run(spec_path, two_counties))
    keys_a = set(a[KEYS].itertuples(index=False, name=None))
    keys_b = set(b[KEYS].itertuples(index=False, name=None))
    assert keys_a == keys_b
    assert far["tract"].iloc[0] in set(b.loc[b["geography"] == "tract", "geocode"])  # her tract, empty, in D'


def test_an_undeclared_geography_column_is_refused_at_check_located_at_the_column(tmp_path):
    path = variant(tmp_path, f'county : category in state values from "{GEOGRAPHY}"', "county : category in state")
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.strip() == "county : category in state")
    with pytest.raises(SpecError) as e:
        dpspec.api.check(dpspec.load(str(path)))
    d = next(d for d in e.value.diagnostics if "'county'" in d.message)
    assert d.line == line and "not declared" in d.message and "values from" in d.hint


def test_an_iteration_table_the_public_block_does_not_declare_is_refused_at_its_parameter(tmp_path):
    iterations = f'  keys "{ROOT}/specs/data/safetab/iterations.parquet" released'
    path = variant(tmp_path, iterations, "  # " + iterations.strip())
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.strip().startswith("iterations:"))
    with pytest.raises(SpecError) as e:
        dpspec.api.check(dpspec.load(str(path)))
    d = next(d for d in e.value.diagnostics if "iteration table" in d.message)
    assert d.line == line and "public" in d.hint


def test_a_record_in_an_undeclared_tract_is_a_data_error(tmp_path):
    rows = pd.read_csv(GEOGRAPHY, dtype=str)
    short = tmp_path / "geography.csv"
    rows.iloc[1:].to_csv(short, index=False)
    path = variant(tmp_path, "", "")
    path.write_text(path.read_text().replace(str(GEOGRAPHY), str(short)))
    with pytest.raises(DataError, match=rows["tract"].iloc[0]):
        load_data(dpspec.load(str(path)))


def test_a_run_that_leaves_out_an_empty_declared_county_is_stopped(spec_path, two_counties, monkeypatch):
    """Control: the run's own check has teeth (a unit dropped from the measurement is caught)."""
    empty = sorted(set(pd.read_csv(GEOGRAPHY, dtype=str)["county"]) - set(two_counties["county"]))[0]
    real = plan_mod.Plan.bucket_units

    def without(self, geo, bucket):
        codes = real(self, geo, bucket)
        return codes[codes != empty] if geo == "county" else codes

    monkeypatch.setattr(plan_mod.Plan, "bucket_units", without)
    with pytest.raises(MechanismError, match="12 units of county .* but 13 are declared"):
        _run(spec_path, two_counties)


@pytest.mark.slow  # a SafeTab-H release
def test_safetab_h_releases_a_declared_county_its_households_left(tmp_path):
    """SafeTab-H's detail comes from published totals; an empty declared county is measured too."""
    from tests.safetab_helpers import H_SPEC

    path = variant(tmp_path, "", "", spec=H_SPEC)
    spec = dpspec.load(str(path))
    data, _ = load_data(spec)
    households = data["households"]
    gone = sorted(households["county"].unique())[0]
    counts = _frame(
        compile_spec(spec, data={"households": households[households["county"] != gone]}, seed=SEED, audit=False)
    )
    county = counts[counts["geography"] == "county"]
    assert gone in set(county["geocode"])
    assert np.isfinite(county.loc[county["geocode"] == gone, "count"].to_numpy()).all()
