"""The derived ACS excerpt file, and TopDown on it end to end."""

import importlib.util
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpspec_topdown.run.topdown import run_topdown
from dpspec_topdown.design import Design
from dpspec_topdown.run.context import RunContext

ROOT = Path(__file__).resolve().parents[1]
DIR = ROOT / "specs" / "data" / "acs_national"
SOURCE = ROOT.parent / "shared" / "data" / "nist-acs-excerpts" / "national2019.csv"
VARIABLES = {"hhgq": [0, 1, 2], "votingage": [0, 1], "hispanic": [0, 1], "cenrace": list(range(7))}


@pytest.fixture(scope="module")
def persons():
    return pd.read_csv(DIR / "acs_national_pl94.csv", dtype={"state": str, "puma": str})


def test_derived_file_shape_and_domains(persons):
    assert len(persons) == 27_253
    assert list(persons.columns) == ["state", "puma", "hhgq", "votingage", "hispanic", "cenrace"]
    assert persons["puma"].nunique() == 20 and persons["state"].nunique() == 16
    assert (persons["puma"].str.slice(0, 2) == persons["state"]).all()
    for name, values in VARIABLES.items():
        assert persons[name].isin(values).all()
    # figures from the source: 24,400 non-Hispanic, 25,435 in housing units, 876 two or more races
    assert (persons["hispanic"] == 0).sum() == 24_400
    assert (persons["hhgq"] == 0).sum() == 25_435
    assert (persons["cenrace"] == 6).sum() == 876


@pytest.mark.skipif(not SOURCE.exists(), reason="shared ACS excerpt not present")
def test_builder_reproduces_the_file(persons):
    spec = importlib.util.spec_from_file_location("acs_build", DIR / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    derived = build.derive(pd.read_csv(SOURCE, dtype=str, keep_default_na=False))
    pd.testing.assert_frame_equal(derived.reset_index(drop=True), persons, check_dtype=False)


def test_topdown_on_the_excerpt(persons):
    queries = [
        ((), Fraction(1, 4)),
        (("hhgq",), Fraction(1, 4)),
        (("votingage", "hispanic", "cenrace"), Fraction(1, 4)),
        (("hhgq", "votingage", "hispanic", "cenrace"), Fraction(1, 4)),
    ]
    shares = {"nation": Fraction(1, 5), "state": Fraction(2, 5), "puma": Fraction(2, 5)}
    res = run_topdown(
        persons,
        Design(
            ["nation", "state", "puma"],
            VARIABLES,
            {lv: queries for lv in shares},
            Fraction(1),
            shares,
            "hamming",
            [("state", ())],
        ),
        RunContext(np.random.default_rng(0), workers=1),
    )
    micro = res.microdata
    assert list(micro.columns) == ["state", "puma"] + list(VARIABLES)
    pd.testing.assert_series_equal(micro.groupby("state").size(), persons.groupby("state").size())
    assert (micro["puma"].str.slice(0, 2) == micro["state"]).all()
    # with rho = 1 the PUMA totals are close to the truth but not exact
    diff = micro.groupby("puma").size() - persons.groupby("puma").size()
    assert diff.abs().max() < 60
