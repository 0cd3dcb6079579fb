"""The bundled SafeTab data is what its README says: the synthetic state is the seeded
generator's output, with realistic detailed race multiplicity, places that cross county lines
and an AIAN/NH area; SafeTab-P's published totals are today's compile of the production spec on
it (seed 2020), so SafeTab-H conditions on what SafeTab-P really publishes."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest

from dpspec_safetab.synthetic import population
from tests.safetab_helpers import ROOT

DATA = ROOT / "specs" / "data" / "safetab"


@pytest.fixture(scope="module")
def build():
    spec = importlib.util.spec_from_file_location("safetab_build", DATA / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bundled_state_is_the_seeded_generator_output(build):
    codes = pd.read_parquet(DATA / "codes.parquet")["code"]
    households, persons = population(build.N_HOUSEHOLDS, codes, seed=build.SEED)
    pd.testing.assert_frame_equal(households, pd.read_parquet(DATA / "households.parquet"))
    pd.testing.assert_frame_equal(persons, pd.read_parquet(DATA / "persons.parquet"))


def test_the_bundled_state_has_realistic_multiplicity_and_crosscutting_areas():
    persons = pd.read_parquet(DATA / "persons.parquet")
    n_codes = persons[[f"QRACE{i}" for i in range(1, 9)]].notna().sum(axis=1)
    share = n_codes.value_counts(normalize=True)
    assert share[1] == pytest.approx(0.86, abs=0.01) and share[2] == pytest.approx(0.10, abs=0.01)
    assert n_codes.max() == 8  # every multiplicity up to production's max_race_codes occurs
    assert persons["QSPAN"].ne("1000").mean() == pytest.approx(0.19, abs=0.01)  # Hispanic
    counties_per_place = persons.dropna(subset=["place"]).groupby("place")["county"].nunique()
    assert (counties_per_place > 1).any()  # places do not nest in counties
    assert persons["aiannh"].notna().sum() > 500 and persons["place"].nunique() == 9
    assert persons["tract"].nunique() == 40 and persons["county"].nunique() == 13  # as the data README says


@pytest.mark.slow  # recomputes SafeTab-P's published totals from the bundled data
def test_safetab_p_published_totals_are_current(build):
    """Fails when SafeTab-P's output on the bundled persons changes (its noise streams, its
    design): rebuild with `python specs/data/safetab/build.py --published-only`."""
    pd.testing.assert_frame_equal(build.published_totals(), pd.read_parquet(DATA / "safetab_p_published.parquet"))
