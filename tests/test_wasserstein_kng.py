"""The K-norm gradient mechanisms for a clipped mean and a regression slope (seed 2, Theorem 10):
exact draws against the K-norm density, the sensitivity derivations, and wrong-sensitivity controls."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chisquare

import dpspec
from dpspec.api import RunContext
from dpspec.errors import SpecError
from dpspec_wasserstein.kng import WassersteinKNGMean, WassersteinKNGSlope
from dpspec_wasserstein.samplers import grid_laplace

from .verify_helpers import registered, write_spec

DRAWS = 40_000

MEAN = """spec "kng_mean"
domain d {
  table people unit person {
    age : int 0..100
  }
}
public {
  count people released "bulletin" used as total
}
pufferfish {
  class CLASS
}
unit people : hamming
premetric pure
mechanism MECH {
  table: people
  column: age
  lower: 0
  upper: 10
  step: 1/2
  epsilon: 1
}
budget epsilon <= 1
"""

SLOPE = """spec "kng_slope"
domain d {
  table people unit person {
    x : int 0..10
    y : int -20..20
  }
}
public {
  count people released "bulletin" used as total
}
pufferfish {
  class independent
}
unit people : hamming
premetric pure
mechanism MECH {
  table: people
  x: x
  y: y
  x_lower: 0
  x_upper: 4
  y_lower: -10
  y_upper: 10
  intercept: INTERCEPT
  lower: -4
  upper: 4
  step: 1/4
  epsilon: 1
}
budget epsilon <= 1
"""


def _checked(text):
    from dpspec.check.checker import check
    from dpspec.language.parser import parse

    spec = parse(text)
    checked = check(spec)
    return spec, checked.mechanism, checked.params


def _pvalue(k, pmf, min_expected=20):
    """Chi-square p-value of grid indices against an exact pmf on 0..m, rare cells pooled."""
    counts = np.bincount(k, minlength=len(pmf)).astype(float)
    expected = np.asarray(pmf) * len(k)
    big = expected >= min_expected
    obs, exp = np.append(counts[big], counts[~big].sum()), np.append(expected[big], expected[~big].sum())
    if exp[-1] < min_expected:  # fold a thin pooled cell into the last big one
        obs, exp = np.append(obs[:-2], obs[-2:].sum()), np.append(exp[:-2], exp[-2:].sum())
    return chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


def _law(centre, r, top):
    w = [math.exp(-float(r * abs(k - Fraction(centre)))) for k in range(top + 1)]
    return [v / sum(w) for v in w]


@pytest.mark.parametrize(
    "centre, r, top",
    [
        (Fraction(7, 3), Fraction(3, 4), 10),
        (Fraction(5), Fraction(1, 2), 10),
        (Fraction(-5, 2), Fraction(1, 3), 8),
        (Fraction(41, 4), Fraction(1, 2), 8),
        (Fraction(1, 7), Fraction(9, 2), 6),
        (Fraction(3, 2), Fraction(0), 5),
    ],
)
def test_grid_laplace_follows_its_exact_law(centre, r, top):
    """Rational centres inside, on, below and above the grid, a sharp rate and r = 0 (uniform)."""
    k = grid_laplace(centre, r, top, DRAWS, np.random.default_rng(31))
    assert k.min() >= 0 and k.max() <= top
    assert _pvalue(k, _law(centre, r, top)) > 1e-3


def _mean_data(seed=1, n=50):
    return pd.DataFrame({"age": np.random.default_rng(seed).integers(0, 14, n)})  # some above the bound 10


def test_mean_sensitivity_is_the_counts_times_the_clipping_width_and_the_statistic_is_exact():
    spec, mech, params = _checked(MEAN.replace("MECH", "wasserstein_kng_mean").replace("CLASS", "independent"))
    assert mech.sensitivity(spec, params) == 1 * (10 - 0)
    data = _mean_data()
    n, s = mech.statistics(params, data)
    assert (n, s) == (50, int(np.clip(data["age"], 0, 10).sum()))
    centre, r = mech.law(spec, params, (n, s))
    assert centre == Fraction(s, 50) / Fraction(1, 2) and r == Fraction(1) * 50 * Fraction(1, 2) / (2 * 10)
    assert "1 (the count's) x 10" in mech.budget(spec, params, {}).notes[0]


def test_mean_refuses_a_class_stated_for_binary_secrets(tmp_path):
    text = MEAN.replace("MECH", "wasserstein_kng_mean").replace("CLASS", "dependence p0 0.2 p1 0.6 n 4")
    with pytest.raises(SpecError) as err:
        _checked(text)
    assert any("binary secrets" in d.message for d in err.value.diagnostics)


class _Understated:
    """A wrong sensitivity: a quarter of the derived one (the draws are four times too sharp)."""

    def sensitivity(self, spec, params):
        return super().sensitivity(spec, params) / 4


class UnderstatedMean(_Understated, WassersteinKNGMean):
    name = "wasserstein_kng_mean_understated"


class UnderstatedSlope(_Understated, WassersteinKNGSlope):
    name = "wasserstein_kng_slope_understated"


@pytest.mark.slow  # many K-norm draws against their density
def test_mean_draws_follow_the_k_norm_density_and_a_wrong_sensitivity_fails():
    """Chi-square of 40,000 released grid indices against exp(-epsilon |n theta_k - S| / (2 Delta))
    normalized on the grid: p > 1e-3 for the honest mechanism; p < 1e-6 for one whose sensitivity
    is a quarter of the derivation's (same seed, same test)."""
    spec, mech, params = _checked(MEAN.replace("MECH", "wasserstein_kng_mean").replace("CLASS", "independent"))
    stats = mech.statistics(params, _mean_data())
    pmf = mech.pmf(spec, params, stats)
    honest = mech.draw(spec, params, stats, np.random.default_rng(41), draws=DRAWS)
    assert _pvalue(honest, pmf) > 1e-3
    wrong = UnderstatedMean().draw(spec, params, stats, np.random.default_rng(41), draws=DRAWS)
    assert _pvalue(wrong, pmf) < 1e-6
    # the released value is on the declared grid, exact
    out = mech.run(spec, params, {"people": _mean_data()}, RunContext(np.random.default_rng(2))).outputs["mean"]
    assert Fraction(out["exact"].iloc[0]) == out["k"].iloc[0] * Fraction(1, 2) and out["n"].iloc[0] == 50


def _slope_data(seed=1, n=40):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, n)  # some above the bound 4
    return pd.DataFrame({"x": x, "y": np.clip(2 * x + rng.integers(-3, 4, n), -20, 20)})


@pytest.mark.parametrize("intercept", ["0", "3/2"])
def test_slope_sensitivity_matches_brute_force_over_every_record_and_the_grid(intercept):
    """The derivation's Delta = max over the slope range of (max - min over the box of
    beta x^2 - x (y - a)): every int record of the box at every grid slope, independently of the
    code's candidates and of its convexity argument (the supremum falls at an end)."""
    spec, mech, params = _checked(SLOPE.replace("MECH", "wasserstein_kng_slope").replace("INTERCEPT", intercept))
    a = Fraction(intercept)
    best = 0
    for j in range(33):
        beta = Fraction(-4) + j * Fraction(1, 4)
        g = [beta * x * x - x * (y - a) for x in range(0, 5) for y in range(-10, 11)]
        best = max(best, max(g) - min(g))
    assert mech.sensitivity(spec, params) == best
    if a == 0:
        assert best == 110  # at beta = -4: 6 at (x, y) = (1, -10) against -104 at (4, 10)


def test_slope_statistics_clip_x_and_y_and_centre_on_the_least_squares_slope():
    spec, mech, params = _checked(SLOPE.replace("MECH", "wasserstein_kng_slope").replace("INTERCEPT", "0"))
    data = _slope_data()
    n, A, B = mech.statistics(params, data)
    x, y = np.clip(data["x"], 0, 4), np.clip(data["y"], -10, 10)
    assert (n, A, B) == (40, int((x * x).sum()), int((x * y).sum()))
    centre, r = mech.law(spec, params, (n, A, B))
    assert Fraction(-4) + centre * Fraction(1, 4) == Fraction(B, A)  # the gradient's zero, on the grid's scale
    assert r == Fraction(1, 4) * A / (2 * 110)


def test_slope_draws_follow_the_k_norm_density_and_a_wrong_sensitivity_fails():
    """As for the mean: p > 1e-3 honest, p < 1e-6 with a quarter of the sensitivity."""
    spec, mech, params = _checked(SLOPE.replace("MECH", "wasserstein_kng_slope").replace("INTERCEPT", "0"))
    stats = mech.statistics(params, _slope_data())
    pmf = mech.pmf(spec, params, stats)
    honest = mech.draw(spec, params, stats, np.random.default_rng(43), draws=DRAWS)
    assert _pvalue(honest, pmf) > 1e-3
    wrong = UnderstatedSlope().draw(spec, params, stats, np.random.default_rng(43), draws=DRAWS)
    assert _pvalue(wrong, pmf) < 1e-6
    out = mech.run(spec, params, {"people": _slope_data()}, RunContext(np.random.default_rng(2))).outputs["slope"]
    assert Fraction(out["exact"].iloc[0]) == Fraction(-4) + out["k"].iloc[0] * Fraction(1, 4)


@pytest.mark.parametrize(
    "text, mech, broken",
    [
        (MEAN.replace("CLASS", "independent"), "wasserstein_kng_mean", UnderstatedMean),
        (SLOPE.replace("INTERCEPT", "0"), "wasserstein_kng_slope", UnderstatedSlope),
    ],
)
def test_verify_consistent_and_understated_refuted(tmp_path, text, mech, broken):
    """`dpspec verify` on the mechanism's own worst pair: one unit's record at the two extremes."""
    from dpspec.verify import verify

    honest = verify(dpspec.load(write_spec(tmp_path, text.replace("MECH", mech))), runs=10_000, seed=4)
    assert honest.verdict == "consistent", honest.text()
    with registered(broken()):
        bad = verify(
            dpspec.load(write_spec(tmp_path, text.replace("MECH", broken.name), name="u.dps")), runs=10_000, seed=4
        )
    assert bad.verdict == "refuted" and bad.lower_bound > 1, bad.text()


def test_slope_under_add_remove_counts_the_added_records_own_move():
    """Without n fixed (symdiff, a DP spec), an added record moves the gradient by g_beta itself:
    with x kept away from 0 that exceeds the replaced record's range, and Delta follows it."""
    text = (
        SLOPE.replace("MECH", "wasserstein_kng_slope")
        .replace("INTERCEPT", "0")
        .replace("x_lower: 0", "x_lower: 2")
        .replace("y_upper: 10", "y_upper: 2")
        .replace("lower: -4", "lower: 1")
        .replace("unit people : hamming", "unit people : symdiff")
    )
    spec, mech, params = _checked(text)
    best = 0
    for j in range(13):
        beta = Fraction(1) + j * Fraction(1, 4)
        g = [beta * x * x - x * y for x in range(2, 5) for y in range(-10, 3)]
        best = max(best, max(g) - min(g), max(abs(v) for v in g))
    assert mech.sensitivity(spec, params) == best
    assert best > mech.width(params, "hamming")


@pytest.mark.parametrize("centre", [3, -4, 15])
def test_a_scale_far_wider_than_the_grid_draws_the_same_law_uniformly_proposed(centre, monkeypatch):
    """r (hi - lo + 1) <= FLAT_BELOW (a budget near the samplers' limit): discrete Laplace proposals
    would almost all miss the grid, so k is proposed uniformly and kept exactly; the law is unchanged
    (centres inside, below and above the support; the threshold raised so the law's shape shows)."""
    from dpspec_wasserstein import samplers
    from dpspec_wasserstein.samplers import truncated_laplace

    monkeypatch.setattr(samplers, "FLAT_BELOW", Fraction(1))
    r, top = Fraction(1, 20), 10
    k = truncated_laplace(np.full(DRAWS, centre), 0, np.full(DRAWS, top), r, np.random.default_rng(7))
    assert k.min() >= 0 and k.max() <= top
    assert _pvalue(k, _law(centre, r, top)) > 1e-3
    assert _pvalue(k, _law(centre, 4 * r, top)) < 1e-6  # control: a sharper law is told apart
    monkeypatch.setattr(samplers, "FLAT_BELOW", Fraction(0))  # the Laplace proposals draw the same law
    k = truncated_laplace(np.full(DRAWS, centre), 0, np.full(DRAWS, top), r, np.random.default_rng(7))
    assert _pvalue(k, _law(centre, r, top)) > 1e-3


def test_a_scale_near_the_samplers_limit_on_a_small_grid_is_drawn_at_once():
    from dpspec_wasserstein.samplers import grid_laplace

    k = grid_laplace(Fraction(7, 3), Fraction(1, 10**16), 20, 1000, np.random.default_rng(1))
    assert k.min() >= 0 and k.max() <= 20 and len(set(k.tolist())) > 15  # about uniform
