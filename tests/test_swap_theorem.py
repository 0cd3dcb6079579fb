"""Theorem II.1 (the PSA's budget), b, and the 1940 Massachusetts data it is computed from."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpspec.errors import DataError, MechanismError
from dpspec_swap.algorithm import largest_stratum
from dpspec_swap.theorem import as_rate, log_odds, psa_epsilon

MA1940 = Path(__file__).resolve().parents[1] / "specs" / "data" / "ma1940"
B_1940 = 264_331


# --- the seed paper's figure and its neighbours ---------------------------------------------


def test_paper_figure_1940_massachusetts():
    # Seed paper: b = 264,331 two-person households, p = 0.05 -> eps = 15.43.
    assert round(psa_epsilon(B_1940, 0.05), 2) == 15.43
    exact = math.log(B_1940 + 1) + math.log(19)  # o = 1/19
    assert psa_epsilon(B_1940, Fraction(1, 20)) == pytest.approx(exact)


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (Fraction(1, 100), 17.08),  # ln(264332) + ln(99)
        (Fraction(1, 10), 14.68),  # ln(264332) + ln(9)
        (Fraction(1, 2), 12.48),  # o = 1: eps = ln(b + 1)
        (Fraction(7, 10), 11.64),  # p > 1/2, second term wins: ln(b+1) - ln(7/3)
        (Fraction(99, 100), 7.89),  # p > 1/2, second term still wins: ln(b+1) - ln 99
    ],
)
def test_pinned_values_at_other_rates(p, expected):
    assert round(psa_epsilon(B_1940, p), 2) == expected


def test_formula_matches_theorem_for_both_branches():
    b = 1000
    for p in (Fraction(1, 50), Fraction(1, 3), Fraction(1, 2)):
        o = p / (1 - p)
        assert psa_epsilon(b, p) == pytest.approx(math.log(b + 1) - math.log(o), rel=1e-14)
    for p in (Fraction(51, 100), Fraction(9, 10), Fraction(999, 1000)):
        o = p / (1 - p)
        want = max(math.log(o), math.log(b + 1) - math.log(o))
        assert psa_epsilon(b, p) == pytest.approx(want, rel=1e-14)


def test_upper_branch_where_ln_o_wins():
    # Small strata, high rate: ln(o) exceeds ln(b+1) - ln(o).
    assert psa_epsilon(2, Fraction(9, 10)) == pytest.approx(math.log(9))
    assert psa_epsilon(2, Fraction(9, 10)) > math.log(3) - math.log(9)
    # At p = 1/2 the two branches agree (continuity).
    assert psa_epsilon(50, Fraction(1, 2)) == pytest.approx(math.log(51))


def test_edges():
    assert psa_epsilon(0, 0.05) == 0.0
    assert psa_epsilon(0, 0) == 0.0
    assert psa_epsilon(0, 1) == 0.0
    assert psa_epsilon(5, 0) == math.inf
    assert psa_epsilon(5, 1) == math.inf
    assert psa_epsilon(np.int64(5), "0.05") == psa_epsilon(5, Fraction(1, 20))


def test_budget_decreases_with_rate_up_to_one_half_and_grows_with_b():
    rates = [Fraction(k, 100) for k in range(1, 51)]
    eps = [psa_epsilon(10_000, p) for p in rates]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    assert psa_epsilon(10, 0.05) < psa_epsilon(100, 0.05) < psa_epsilon(1000, 0.05)


def test_log_odds_is_exact_near_zero_and_one():
    near_one = Fraction(10**20 - 1, 10**20)
    assert float(near_one) == 1.0  # a float would have lost it and reported inf
    assert log_odds(near_one) == pytest.approx(math.log(10**20 - 1), rel=1e-15)
    assert psa_epsilon(10, near_one) == pytest.approx(math.log(10**20 - 1), rel=1e-15)
    tiny = Fraction(1, 10**40)
    assert psa_epsilon(3, tiny) == pytest.approx(math.log(4) + math.log(10**40 - 1), rel=1e-15)


def test_rates_are_read_as_written():
    assert as_rate(0.05) == Fraction(1, 20)
    assert as_rate("0.05") == Fraction(1, 20)
    assert as_rate(Decimal("0.02")) == Fraction(1, 50)
    assert as_rate(np.float64(0.25)) == Fraction(1, 4)
    assert as_rate(1) == 1


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), float("inf"), "abc", True, None])
def test_bad_rates_are_mechanism_errors(bad):
    with pytest.raises(MechanismError):
        psa_epsilon(10, bad)


@pytest.mark.parametrize("bad", [-1, 2.5, True, "3"])
def test_bad_b_is_a_mechanism_error(bad):
    with pytest.raises(MechanismError):
        psa_epsilon(bad, 0.05)


# --- b -----------------------------------------------------------------------------------------


def test_largest_stratum_ignores_strata_of_identical_records():
    df = pd.DataFrame(
        {
            "state": ["A"] * 10 + ["B"] * 3 + ["C"],
            "size": [1] * 10 + [2] * 3 + [3],
            "county": ["x"] * 10 + ["x", "y", "x"] + ["z"],
            "tenure": ["own"] * 14,
        }
    )
    keys, other = ["state", "size"], ["county", "tenure"]
    assert largest_stratum(df, keys, other) == (3, {"state": "B", "size": 2})
    # A holding difference counts as much as a swapping one.
    df.loc[0, "tenure"] = "rent"
    assert largest_stratum(df, keys, other) == (10, {"state": "A", "size": 1})


def test_largest_stratum_none():
    df = pd.DataFrame({"state": ["A", "A", "B"], "county": ["x", "x", "y"]})
    assert largest_stratum(df, ["state"], ["county"]) == (0, None)
    assert largest_stratum(df.iloc[:0], ["state"], ["county"]) == (0, None)
    assert largest_stratum(df, ["state"], []) == (0, None)


def test_largest_stratum_ties_and_missing_keys():
    df = pd.DataFrame(
        {
            "state": pd.Categorical(["B", "B", None, None, None]),
            "county": pd.Categorical(["x", "y", "x", "y", "y"]),
        }
    )
    b, key = largest_stratum(df, ["state"], ["county"])
    assert b == 3 and pd.isna(key["state"])  # missing is a key value of its own
    df2 = pd.DataFrame({"s": [2, 2, 1, 1], "c": [0, 1, 0, 1]})
    assert largest_stratum(df2, ["s"], ["c"]) == (2, {"s": 2})  # first in data order


def test_largest_stratum_agrees_with_pandas_groupby():
    rng = np.random.default_rng(7)
    n = 20_000
    df = pd.DataFrame(
        {
            "a": rng.integers(0, 30, n),
            "b": pd.Categorical(rng.choice(list("pqr"), n)),
            "c": rng.integers(0, 3, n),
            "d": rng.choice(["u", "v"], n, p=[0.999, 0.001]),
        }
    )
    df.loc[df["a"] % 3 == 0, ["c", "d"]] = [0, "u"]  # a third of the strata hold one record type
    b, key = largest_stratum(df, ["a", "b"], ["c", "d"])
    g = df.groupby(["a", "b"], observed=True)
    sizes = g.size()
    distinct = g[["c", "d"]].apply(lambda x: len(x.drop_duplicates()))
    assert b == sizes[distinct >= 2].max()
    assert sizes[(key["a"], key["b"])] == b


def test_largest_stratum_missing_column():
    with pytest.raises(DataError, match="nope"):
        largest_stratum(pd.DataFrame({"a": [1]}), ["a"], ["nope"])


# --- the 1940 data -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def households():
    return pd.read_parquet(MA1940 / "ma1940_households.parquet")


def test_ma1940_file_matches_published_table(households):
    published = pd.read_csv(MA1940 / "ma1940_county_tenure.csv").set_index("county")
    table = households.groupby(["county", "tenure"], observed=True).size().unstack()
    table = table.loc[published.index]
    assert (table["owned"].to_numpy() == published["owned"].to_numpy()).all()
    assert (table["rented"].to_numpy() == published["rented"].to_numpy()).all()
    assert (published["owned"] + published["rented"] == published["total"]).all()
    assert len(households) == 1_144_424
    assert (households["tenure"] == "owned").sum() == 435_805
    assert (households["tenure"] == "rented").sum() == 708_619
    assert households["hhid"].is_unique
    assert set(households["state"].unique()) == {"MA"}


def test_ma1940_sizes(households):
    by_size = households["size"].value_counts()
    assert by_size[2] == B_1940
    assert by_size.idxmax() == 2 and (by_size.drop(2) < B_1940).all()
    assert households["size"].between(1, 20).all()
    assert 3.5 < households["size"].mean() < 3.9  # 1940-like persons per household


def test_ma1940_file_is_small_and_typed(households):
    assert (MA1940 / "ma1940_households.parquet").stat().st_size < 200_000
    for col in ("state", "county", "tenure"):
        assert isinstance(households[col].dtype, pd.CategoricalDtype)
    assert list(households.columns) == ["state", "county", "tenure", "size", "hhid"]


def test_paper_b_from_the_1940_file(households):
    b, key = largest_stratum(households, ["state", "size"], ["county", "tenure"])
    assert (b, key) == (B_1940, {"state": "MA", "size": 2})
    assert round(psa_epsilon(b, 0.05), 2) == 15.43
