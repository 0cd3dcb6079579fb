"""Randomized response: the epsilon formula, exact Bernoulli draws, flip rate and unbiasedness."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpspec.run.compiler import compile_spec, make_rng
from dpspec.language.parser import parse, read_source
import dpspec_rr as mod
from dpspec.run.noise import bernoulli


def test_epsilon_formula():
    assert mod.epsilon(Fraction(3, 4)) == pytest.approx(math.log(3))
    assert mod.epsilon(Fraction(1, 4)) == pytest.approx(math.log(3))
    assert mod.epsilon(Fraction(1, 2)) == 0
    assert mod.epsilon(Fraction(1)) == math.inf
    assert mod.epsilon(Fraction(0)) == math.inf
    assert mod.epsilon(Fraction(9, 10)) == pytest.approx(math.log(9))


def test_bernoulli_frequency_is_p():
    n = 400_000
    draws = bernoulli(Fraction(3, 7), n, make_rng(11))
    # Binomial standard deviation is about 0.00078; allow 5 of them.
    assert abs(draws.mean() - 3 / 7) < 5 * math.sqrt(3 / 7 * 4 / 7 / n)


def _people(n: int, share: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "region": pd.Categorical(["north"] * n),
            "district": pd.Categorical(["n1"] * n),
            "age": rng.integers(0, 100, n),
            "smoker": rng.random(n) < share,
            "status": pd.Categorical(["N"] * n, categories=["single", "married", "N"]),
        }
    )


def test_flip_rate_is_one_minus_p(small_spec):
    spec = parse(read_source(str(small_spec)), str(small_spec))
    data = {"people": _people(100_000, 0.3, 1)}
    result = compile_spec(spec, data=data, seed=5, audit=False)
    reported = result.published["responses"]["smoker"].to_numpy()
    flipped = (reported != data["people"]["smoker"].to_numpy()).mean()
    assert abs(flipped - 0.25) < 5 * math.sqrt(0.25 * 0.75 / 100_000)


def test_estimator_is_unbiased_and_its_standard_error_honest(small_spec):
    spec = parse(read_source(str(small_spec)), str(small_spec))
    data = {"people": _people(2_000, 0.3, 2)}
    truth = data["people"]["smoker"].mean()
    result = compile_spec(spec, data=data, seed=7, runs=400, audit=False)
    u = result.utility
    assert u["runs"] == 400
    assert u["true_proportion"] == pytest.approx(truth)
    se = result.published["estimate"]["standard_error"].iloc[0]
    # The mean of 400 unbiased estimates is within 4 standard errors of the mean of the truth.
    assert abs(u["mean_estimate"] - truth) < 4 * se / math.sqrt(400)
    # The reported standard error matches the spread over runs to within 15%.
    assert u["root_mean_squared_error"] == pytest.approx(se, rel=0.15)


def test_same_seed_same_release(small_spec):
    spec = parse(read_source(str(small_spec)), str(small_spec))
    data = {"people": _people(1_000, 0.5, 3)}
    a = compile_spec(spec, data=data, seed=1, audit=False).published["responses"]
    b = compile_spec(spec, data=data, seed=1, audit=False).published["responses"]
    c = compile_spec(spec, data=data, seed=2, audit=False).published["responses"]
    assert a.equals(b) and not a.equals(c)
