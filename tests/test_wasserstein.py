"""The Wasserstein exponential mechanism's exact samplers against their exact pmfs, congeniality,
the post-processing alternative, refusal with a cost estimate, and `verify` (issue 23)."""

from __future__ import annotations

import itertools
import math
import os
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

import dpspec
from dpspec.api import RunContext
from dpspec.errors import MechanismError, SpecError
from dpspec_wasserstein import samplers
from dpspec_wasserstein.plugin import NoisyPostprocessed, WassersteinExponential
from dpspec_wasserstein.postprocess import project_to_total, project_with_threshold, two_stage

from .key_files import keys_from
from .verify_helpers import registered, write_spec

DRAWS = 40_000


def _chi2(observed_keys, pmf: dict, min_expected=20):
    """Chi-square p-value of draws against an exact pmf, rare outcomes pooled into one bin."""
    keys = list(pmf)
    probs = np.array([float(pmf[k]) for k in keys])
    probs /= probs.sum()
    index = {k: i for i, k in enumerate(keys)}
    counts = np.zeros(len(keys))
    for k in observed_keys:
        counts[index[k]] += 1
    expected = probs * len(observed_keys)
    big = expected >= min_expected
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return chisquare(obs, exp).pvalue


def test_naive_draws_follow_the_truncated_laplace_pmf():
    rng = np.random.default_rng(11)
    r = Fraction(2, 3)
    y, info = samplers.naive(np.array([0, 3]), r, DRAWS, rng)
    assert info["method"] == "product form" and (y >= 0).all()
    for j, c in enumerate((0, 3)):
        pmf = {k: math.exp(-float(r) * abs(k - c)) for k in range(0, 40)}
        assert _chi2(list(y[:, j]), pmf) > 1e-3


@pytest.mark.parametrize("centre, lo, hi", [(5, 0, 2), (1, 0, 4), (0, 3, None), (7, 6, 7)])
def test_truncated_laplace_on_bounded_supports(centre, lo, hi):
    rng = np.random.default_rng(12)
    r = Fraction(1, 2)
    x = samplers.truncated_laplace(
        np.full(DRAWS // 2, centre), lo, None if hi is None else np.full(DRAWS // 2, hi), r, rng
    )
    top = hi if hi is not None else lo + 60
    pmf = {k: math.exp(-0.5 * abs(k - centre)) for k in range(lo, top + 1)}
    assert x.min() >= lo and (hi is None or x.max() <= hi)
    assert _chi2(list(x), pmf) > 1e-3


def _compositions(total, n):
    for bars in itertools.combinations(range(total + n - 1), n - 1):
        edges = (-1,) + bars + (total + n - 1,)
        yield tuple(edges[i + 1] - edges[i] - 1 for i in range(n))


def test_congenial_draws_follow_the_exact_pmf_and_sum_to_the_total():
    rng = np.random.default_rng(13)
    counts, total, r = np.array([1, 2, 1]), 4, Fraction(1, 3)
    y, info = samplers.congenial(counts, total, r, DRAWS, rng)
    assert (y.sum(axis=1) == total).all() and (y >= 0).all()
    assert 0 < info["acceptance"] <= 1
    pmf = {v: math.exp(-float(r) * np.abs(np.array(v) - counts).sum()) for v in _compositions(total, 3)}
    assert _chi2([tuple(row) for row in y], pmf) > 1e-3


CONGENIAL_WIDE = (np.array([0, 2, 10]), 12, Fraction(1, 40))  # scale 40 against a total of 12


def _congenial_wide_pmf():
    counts, total, r = CONGENIAL_WIDE
    return {v: math.exp(-float(r) * np.abs(np.array(v) - counts).sum()) for v in _compositions(total, 3)}


def test_congenial_draws_at_a_scale_far_above_the_counts_follow_the_exact_pmf():
    """At a scale far above the counts no tilt within r/2 centres the discrete Laplace proposals
    (they sum to several times the total), so the draws come from the windowed integer tables
    with every concentration 1: the law must be exp(-r ||y - c||_1) on the vectors summing to 12."""
    counts, total, r = CONGENIAL_WIDE
    assert samplers._l1_tilt(counts, total, r) is None  # the case the old sampler never finished
    y, info = samplers.congenial(counts, total, r, DRAWS, np.random.default_rng(41))
    assert (
        (y.sum(axis=1) == total).all() and (y >= 0).all() and info["method"].startswith("exact rejection from windowed")
    )
    assert _chi2([tuple(row) for row in y], _congenial_wide_pmf()) > 1e-3


@pytest.mark.parametrize("broken", ["rate 3r/2", "last cell always kept"])
def test_the_congenial_chi_square_rejects_a_broken_sampler(monkeypatch, broken):
    """Controls for the test above: the same statistic on a sampler with a wrong rate, or one that
    keeps every nonnegative remainder (the last cell's weight forgotten), rejects them."""
    counts, total, r = CONGENIAL_WIDE
    if broken == "rate 3r/2":
        r = r * Fraction(3, 2)
    else:
        monkeypatch.setattr(
            samplers._PriorLaws, "logg_at", lambda self, cell, k: (np.zeros(len(k)), np.full(len(k), 1e-12))
        )
    y, _ = samplers.congenial(counts, total, r, DRAWS, np.random.default_rng(41))
    assert (y.sum(axis=1) == total).all()
    assert _chi2([tuple(row) for row in y], _congenial_wide_pmf()) < 1e-6


def test_a_pennsylvania_sized_congenial_draw_at_epsilon_a_hundredth_finishes():
    """March 2020's shape at epsilon 0.01 (rate 1/800, 67 counties, a total of
    4,655; a median near 6): the discrete Laplace proposals' remainder was negative in 2,000 of 2,000 proposals; the
    windowed tables draw it well inside the default limit on proposed counts."""
    rng = np.random.default_rng(42)
    counts = np.sort(np.round(np.exp(rng.normal(1.8, 1.6, size=67)))).astype(np.int64)
    counts[:9] = 0
    counts[-1] = 1197
    counts[-2] = 4655 - int(counts.sum() - counts[-2]) if counts.sum() < 4655 else counts[-2]
    total = int(counts.sum())
    r = Fraction(1, 800)
    assert samplers._l1_tilt(counts, total, r) is None
    y, info = samplers.congenial(counts, total, r, 20, rng)
    assert (y.sum(axis=1) == total).all() and (y >= 0).all()
    assert info["acceptance"] > 0.01 and info["proposals"] * 67 < 10**8


def test_congenial_draws_stay_exact_at_a_rate_with_a_large_denominator():
    """A sweep's log grid gives epsilons like 44457/2500000: the rate's and the tilt's denominators
    near 10^9 made the acceptance exponent's integer numerator overflow int64 (the sweep stopped
    with an error). The tilted discrete Laplace path (a tilt within r/2 exists here) must draw the
    exact law at such a rate."""
    counts, total, r = np.array([0, 4, 8]), 12, Fraction(333333331, 10**9)
    lam = samplers._l1_tilt(counts, total, r)
    assert lam is not None and lam > 0 and lam.denominator > 10**9
    y, info = samplers.congenial(counts, total, r, DRAWS, np.random.default_rng(13))
    assert info["method"] == "exact rejection" and (y.sum(axis=1) == total).all()
    pmf = {v: math.exp(-float(r) * np.abs(np.array(v) - counts).sum()) for v in _compositions(total, 3)}
    assert _chi2([tuple(row) for row in y], pmf) > 1e-3


def test_prior_congenial_draws_follow_the_exact_pmf():
    rng = np.random.default_rng(1)
    counts, alpha, total, r = np.array([0, 3, 1]), np.array([1, 3, 2]), 4, Fraction(1, 2)
    y, info = samplers.prior(counts, alpha, total, r, DRAWS // 2, rng)
    assert (y.sum(axis=1) == total).all()
    pmf = {
        v: math.exp(-float(r) * np.abs(np.array(v) - counts).sum())
        * math.prod(math.comb(v[i] + int(alpha[i]) - 1, v[i]) for i in range(3))
        for v in _compositions(total, 3)
    }
    assert _chi2([tuple(row) for row in y], pmf) > 1e-3


def test_prior_congenial_draws_stay_exact_when_every_decision_goes_through_interval_arithmetic(monkeypatch):
    """A float error bound widened a million-fold puts most acceptances in the doubt band, decided
    by exact interval arithmetic on C(k + a - 1, k) ratios and exp(-x): the law must not change."""
    monkeypatch.setattr(samplers, "_U", 2.0**-15)
    rng = np.random.default_rng(21)
    counts, alpha, total, r = np.array([2, 0, 3, 1]), np.array([2, 1, 4, 1]), 5, Fraction(2, 3)
    laws = samplers._PriorLaws(counts, alpha, total, r)
    assert 0.05 < laws.eta < 0.3  # a wide band: the exact path does much of the work
    y, info = samplers.prior(counts, alpha, total, r, 5000, rng)
    assert (y.sum(axis=1) == total).all() and info["method"].startswith("exact rejection")
    pmf = {
        v: math.exp(-float(r) * np.abs(np.array(v) - counts).sum())
        * math.prod(math.comb(v[i] + int(alpha[i]) - 1, v[i]) for i in range(4))
        for v in _compositions(total, 4)
    }
    assert _chi2([tuple(row) for row in y], pmf) > 1e-3


def test_prior_laws_float_error_stays_inside_the_stated_bound():
    """The fast path is exact only if the float log g_i(k) is within eta of the truth: check it
    against 40-digit arithmetic at a Pennsylvania-sized total, over each cell's whole range."""
    from decimal import Decimal, localcontext

    rng = np.random.default_rng(22)
    counts = rng.integers(0, 900, size=6)
    alpha = rng.integers(1, 900, size=6)
    total = int(counts.sum())
    laws = samplers._PriorLaws(counts, alpha, total, Fraction(1, 16))
    worst = 0.0
    with localcontext() as ctx:
        ctx.prec = 40
        for cell in range(6):
            lo, hi = int(laws.lo[cell]), int(laws.hi[cell])
            for k in (lo, lo + 1, int(laws.mode[cell]) + 1, int(counts[cell]), (lo + hi) // 2, hi):
                if not lo <= k <= hi:
                    continue
                ratio, x = laws.exact(cell, k)
                exact = (
                    Decimal(ratio.numerator).ln()
                    - Decimal(ratio.denominator).ln()
                    - Decimal(x.numerator) / Decimal(x.denominator)
                )
                worst = max(worst, abs(float(exact - Decimal(float(laws.logg[cell, k - lo])))))
    assert worst <= laws.eta and laws.eta < 1e-6  # inside the bound, and the band stays narrow


def test_prior_congenial_tails_beyond_the_windows_are_drawn_exactly():
    """Windows cut at e^-2 of each mode put much of the mass in the geometric tail envelopes
    (always decided by the exact path): the law must not change."""
    rng = np.random.default_rng(24)
    counts, alpha, total, r = np.array([2, 0, 5, 1]), np.array([3, 1, 2, 2]), 8, Fraction(1, 2)
    laws = samplers._PriorLaws(counts, alpha, total, r, cutoff=2.0)
    assert (laws.hi - laws.lo).max() < total and laws.right[2].any()  # the tails are in use
    y, _ = samplers.prior(counts, alpha, total, r, 4000, rng, cutoff=2.0)
    assert (y.sum(axis=1) == total).all()
    pmf = {
        v: math.exp(-float(r) * np.abs(np.array(v) - counts).sum())
        * math.prod(math.comb(v[i] + int(alpha[i]) - 1, v[i]) for i in range(4))
        for v in _compositions(total, 4)
    }
    assert _chi2([tuple(row) for row in y], pmf) > 1e-3


@pytest.mark.parametrize(
    "ratio, x", [(Fraction(3), Fraction(2)), (Fraction(1, 10), Fraction(-2)), (Fraction(1), Fraction(0))]
)
def test_bernoulli_scaled_exp_is_exact_in_its_doubt_band(ratio, x):
    """log_err = 1 sends every element to the exact path; the frequency must match R exp(-x)."""
    from dpspec.api import bernoulli_scaled_exp

    rng = np.random.default_rng(23)
    p = float(ratio) * math.exp(-float(x))
    n = 4000
    out = bernoulli_scaled_exp(np.full(n, math.log(p)), 1.0, lambda i: (ratio, x), rng)
    assert abs(out.mean() - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-9
    fast = bernoulli_scaled_exp(np.full(n, math.log(p)), 1e-12, lambda i: (ratio, x), rng)
    assert abs(fast.mean() - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-9


def test_a_too_expensive_exact_draw_is_refused_with_the_estimate():
    rng = np.random.default_rng(15)
    with pytest.raises(MechanismError) as err:
        samplers.congenial(np.arange(200), int(np.arange(200).sum()), Fraction(1, 50), 10, rng, max_proposals=1000)
    assert "proposed counts" in str(err.value) and "MCMC" in str(err.value)


def test_post_processing_is_congenial_and_counts_its_contractions():
    rng = np.random.default_rng(16)
    noisy = rng.integers(-30, 60, size=(200, 12))
    out = project_to_total(noisy, 150)
    assert (out.sum(axis=1) == 150).all() and (out >= 0).all()
    deaths = rng.integers(-10, 40, size=(200, 12))
    cases, d, flags = two_stage(noisy, deaths, 150)
    assert (d <= cases).all() and (d >= 0).all()
    assert flags["ContractedDeathZeros_strict"].sum() == (deaths < 0).sum()
    assert (flags["ContractedDeathZeros"] == ((deaths <= 0) | (cases == 0))).all()
    # an exactly congenial vector is its own projection
    assert (project_to_total(np.array([3, 0, 7]), 10) == [3, 0, 7]).all()


def test_the_case_zero_tally_is_the_projections_zero_region_positive_noisy_counts_included():
    # (12, 5, 3, 1) onto the total 10: theta = 7/2, so 3 and 1 are released as 0 although positive
    noisy = np.array([[12, 5, 3, 1], [-4, 20, 2, 1]])
    cases, _, flags = two_stage(noisy, None, 10)
    assert (cases == [[9, 1, 0, 0], [0, 10, 0, 0]]).all()
    zero = flags["ContractedCaseZeros"]
    assert (cases[zero] == 0).all()
    assert (
        zero[0, 2] and zero[0, 3] and not flags["ContractedCaseZeros_strict"][0, 3]
    )  # a positive noisy count in the zero region
    assert zero[1, 0] and flags["ContractedCaseZeros_strict"][1, 0]
    assert zero.sum() > flags["ContractedCaseZeros_strict"].sum()
    # on random rows: every released zero whose real projection is 0 is in the region, and the region is all zeros
    rng = np.random.default_rng(17)
    noisy = rng.integers(-30, 60, size=(400, 12))
    cases, theta = project_with_threshold(noisy, 150)
    _, _, flags = two_stage(noisy, None, 150)
    assert (cases[flags["ContractedCaseZeros"]] == 0).all()
    assert (flags["ContractedCaseZeros"] == (noisy <= theta[:, None])).all()
    # a negative noisy count outside the region was lifted by a negative threshold, and rounded down
    outside = flags["ContractedCaseZeros_strict"] & ~flags["ContractedCaseZeros"]
    assert ((noisy - theta[:, None])[outside] < 1).all()


SPEC = """spec "small"
domain d {
  table people unit person {
    county : {a, b, c}
  }
}
data people from "people.csv"
public {
  count people released "bulletin" used as total
}
pufferfish {
  class independent
}
unit people : symdiff
premetric pure
mechanism MECH {
  table: people
  cell: county
  epsilon: 2
  base: BASE
}
budget epsilon <= 2
"""
CSV = "county\n" + "\n".join(["a"] * 5 + ["b"] * 2 + ["c"] * 9) + "\n"


def test_a_congenial_release_sums_to_the_public_total_and_a_wrong_total_is_an_error_at_its_line(tmp_path):
    path = write_spec(tmp_path, SPEC.replace("MECH", "wasserstein_exponential").replace("BASE", "congenial"), CSV)
    spec = dpspec.load(path)
    from dpspec.check.checker import check
    from dpspec.check.data import load_data

    checked = check(spec)
    data, _ = load_data(spec)
    rel = checked.mechanism.run(spec, checked.params, data, RunContext(np.random.default_rng(1)))
    assert rel.outputs["counts"]["people"].sum() == 16
    bad = write_spec(
        tmp_path,
        SPEC.replace("MECH", "wasserstein_exponential")
        .replace("BASE", "congenial")
        .replace("epsilon: 2\n", "epsilon: 2\n  public_total: 15\n"),
        CSV,
        "bad.dps",
    )
    spec = dpspec.load(bad)
    checked = check(spec)
    with pytest.raises(SpecError) as err:
        checked.mechanism.run(spec, checked.params, data, RunContext(np.random.default_rng(1)))
    assert "disagrees with the data" in str(err.value) and err.value.diagnostics[0].line == 20


class Understated(WassersteinExponential):
    """Samples with a quarter of the sensitivity its budget states (rates four times too large)."""

    name = "wasserstein_understated"

    def rates(self, spec, params):
        r_c, r_o = super().rates(spec, params)
        return 4 * r_c, (None if r_o is None else 4 * r_o)


@pytest.mark.parametrize("base", ["naive", "congenial"])
def test_verify_is_consistent_for_the_honest_mechanism_and_refutes_an_understated_sensitivity(tmp_path, base):
    from dpspec.verify import verify

    honest = verify(
        dpspec.load(write_spec(tmp_path, SPEC.replace("MECH", "wasserstein_exponential").replace("BASE", base), CSV)),
        runs=10_000,
        seed=3,
    )
    assert honest.verdict == "consistent", honest.text()
    with registered(Understated()):
        broken = verify(
            dpspec.load(
                write_spec(
                    tmp_path, SPEC.replace("MECH", "wasserstein_understated").replace("BASE", base), CSV, "u.dps"
                )
            ),
            runs=10_000,
            seed=3,
        )
    assert broken.verdict == "refuted" and broken.lower_bound > 2, broken.text()


CASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "specs", "pa_covid")


@pytest.mark.parametrize(
    "name",
    [
        "postprocessing_high_privacy",
        "wasserstein_naive_high_privacy",
        "wasserstein_congenial_high_privacy",
        "wasserstein_prior_high_privacy",
    ],
)
def test_verify_runs_on_the_bundled_case_study_specs(name):
    """The case-study specs declare the previous month's county counts `used as base`: earlier
    periods' counts, not the released month's, so they fix no universe of the compared pair (before,
    verify refused every bundled spec: "'count cases by month, county' differs between its datasets")."""
    from dpspec.verify import verify

    result = verify(dpspec.load(os.path.join(CASE, name + ".dps")), runs=4000, seed=7)
    assert result.verdict == "consistent", result.text()
    assert result.path == "mechanism" and result.claimed == 0.5


@pytest.mark.parametrize("name", ["wasserstein_prior_high_privacy", "wasserstein_congenial_high_privacy"])
def test_verify_refutes_an_understated_sensitivity_on_the_bundled_case_study_specs(tmp_path, name):
    """The prior base too (the small spec above has no previous period for it): the bundled spec with
    a mechanism that samples at four times its rate is refuted."""
    from dpspec.verify import verify

    with open(os.path.join(CASE, name + ".dps")) as f:
        text = keys_from(f.read(), CASE).replace(
            "mechanism wasserstein_exponential", "mechanism wasserstein_understated"
        )
    with registered(Understated()):
        broken = verify(dpspec.load(write_spec(tmp_path, text, name="u.dps")), runs=10_000, seed=5)
    assert broken.verdict == "refuted" and broken.lower_bound > 0.5, broken.text()


class UnderstatedOutcome(WassersteinExponential):
    """Honest on the case counts, ten times too sharp on the death counts."""

    name = "wasserstein_understated_outcome"

    def rates(self, spec, params):
        r_c, r_o = super().rates(spec, params)
        return r_c, (None if r_o is None else 10 * r_o)


def test_verify_tests_the_outcome_counts_too(tmp_path):
    """The pair moves a person who died, so the death counts are part of what verify compares: a
    mechanism that understates only the deaths' sensitivity is refuted on the bundled spec."""
    from dpspec.verify import verify

    with open(os.path.join(CASE, "wasserstein_congenial_high_privacy.dps")) as f:
        text = keys_from(f.read(), CASE).replace(
            "mechanism wasserstein_exponential", "mechanism wasserstein_understated_outcome"
        )
    with registered(UnderstatedOutcome()):
        broken = verify(dpspec.load(write_spec(tmp_path, text, name="u.dps")), runs=20_000, seed=6)
    assert broken.verdict == "refuted", broken.text()


class UnderstatedPostprocessed(NoisyPostprocessed):
    """Adds a quarter of the noise its budget states."""

    name = "postprocessed_understated"

    def noise_scales(self, spec, params):
        return {k: v / 4 for k, v in super().noise_scales(spec, params).items()}


def test_verify_tests_the_post_processing_alternative_and_refutes_an_understated_noise(tmp_path):
    from dpspec.verify import verify

    text = SPEC.replace("MECH", "noisy_postprocessed").replace("  base: BASE\n", "")
    honest = verify(dpspec.load(write_spec(tmp_path, text, CSV)), runs=10_000, seed=3)
    assert honest.verdict == "consistent" and honest.path == "mechanism", honest.text()
    with registered(UnderstatedPostprocessed()):
        broken = verify(
            dpspec.load(
                write_spec(tmp_path, text.replace("noisy_postprocessed", "postprocessed_understated"), CSV, "u.dps")
            ),
            runs=10_000,
            seed=3,
        )
    assert broken.verdict == "refuted" and broken.lower_bound > 2, broken.text()
    # a DP spec (no pufferfish block): moving one person between cells is two symdiff steps, so the
    # pair's claim is the group budget 2 epsilon, which the DP-scale noise meets
    dp = verify(
        dpspec.load(write_spec(tmp_path, text.replace("pufferfish {\n  class independent\n}\n", ""), CSV, "dp.dps")),
        runs=10_000,
        seed=3,
    )
    assert dp.verdict == "consistent" and dp.pairs[0].distance == 2 and dp.claimed == 4, dp.text()


def test_post_processing_without_a_total_in_z_is_an_error_at_its_line(tmp_path):
    """Projecting onto the confidential total publishes it exactly; without it in Z the stated budget
    would be false (verify measured epsilon above 6 against a claim of 2 on such a spec)."""
    from dpspec.check.checker import check

    text = SPEC.replace("MECH", "noisy_postprocessed").replace("  base: BASE\n", "").replace(" used as total", "")
    with pytest.raises(SpecError) as err:
        check(dpspec.load(write_spec(tmp_path, text, CSV)))
    d = err.value.diagnostics[0]
    assert "publishes it exactly" in d.message and "used as total" in d.message
    assert text.splitlines()[d.line - 1].strip() == "cell: county"


KNG = """spec "kng"
domain d {
  table people unit person {
    vision : bool
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
  column: vision
  epsilon: 1
}
budget epsilon <= 1
"""


def test_kng_privacy_error_is_of_order_1_over_n_below_the_sampling_error_theorem_11():
    """Theorem 11: the K-norm gradient mechanism's error is O(1/n) while sampling error is
    O(1/sqrt(n)): n * (theta - S/n) keeps one spread as n grows, and its ratio to the sampling
    standard deviation sqrt(p(1-p)/n) falls like 1/sqrt(n)."""
    from dpspec.check.checker import check
    from dpspec.language.parser import parse

    spec = parse(KNG.replace("MECH", "wasserstein_kng"))
    checked = check(spec)
    mech, params = checked.mechanism, checked.params
    rng = np.random.default_rng(21)
    p, spreads, ratios = 0.3, [], []
    for n in (100, 10_000, 1_000_000):
        s = int(p * n)
        theta = mech.draw(spec, params, s, n, rng, draws=4000) / n
        spread = float(np.std(n * (theta - s / n)))
        spreads.append(spread)
        ratios.append(float(np.std(theta - s / n)) / math.sqrt(p * (1 - p) / n))
    # scale 2 Delta / epsilon = 2: a discrete Laplace of scale 2 has sd about 2.8, whatever n
    assert all(2.4 < v < 3.2 for v in spreads), spreads
    assert ratios[1] < ratios[0] / 5 and ratios[2] < ratios[1] / 5, ratios


@pytest.mark.parametrize("mech", ["wasserstein_kng"])
def test_kng_verify_consistent_and_understated_refuted(tmp_path, mech):
    from dpspec.verify import verify
    from dpspec_wasserstein.kng import WassersteinKNG

    class UnderstatedKNG(WassersteinKNG):
        name = "wasserstein_kng_understated"

        def rate(self, spec, params):
            return 4 * super().rate(spec, params)

    honest = verify(dpspec.load(write_spec(tmp_path, KNG.replace("MECH", mech))), runs=10_000, seed=4)
    assert honest.verdict == "consistent", honest.text()
    with registered(UnderstatedKNG()):
        broken = verify(
            dpspec.load(write_spec(tmp_path, KNG.replace("MECH", "wasserstein_kng_understated"), name="u.dps")),
            runs=10_000,
            seed=4,
        )
    assert broken.verdict == "refuted" and broken.lower_bound > 1, broken.text()


INFER = """spec "infer"
domain d {
  table cases unit person {
    county : {Cameron, Erie}
    died   : bool
  }
}
data cases from "cases.csv"
public {
  count cases released "bulletin" used as total
}
pufferfish {
  class independent
}
unit cases : symdiff
premetric pure
mechanism wasserstein_exponential {
  table: cases
  cell: county
  outcome: died
  epsilon: 4
  base: naive
}
budget epsilon <= 4
release {
  output counts
  output total
}
"""


def test_infer_conditions_on_cases_and_deaths_tied_by_deaths_at_most_cases(tmp_path):
    """The latent table is county x died, so deaths <= cases holds in every posterior draw; the
    deaths' likelihood is the truncated law on 0..released cases (the outcome's base measure)."""
    from dpspec.publish.output import write_result

    rows = ["county,died"] + ["Cameron,True"] + ["Cameron,False"] * 2 + ["Erie,True"] * 3 + ["Erie,False"] * 30
    src = tmp_path / "src"
    src.mkdir()
    (src / "cases.csv").write_text("\n".join(rows) + "\n")
    (src / "s.dps").write_text(INFER)
    out = tmp_path / "out"
    write_result(dpspec.compile(str(src / "s.dps"), seed=5), str(out))
    r = dpspec.infer(
        str(src / "s.dps"), str(out), "count cases by county, died", draws=300, seed=2, method="importance"
    )
    labels = [c["cell"] for c in r.cells]
    assert len(labels) == 4 and np.all(r.samples.sum(axis=1) == 36)
    died = [i for i, c in enumerate(labels) if "died=True" in c]
    truth = {"county=Cameron, died=True": 1, "county=Erie, died=True": 3}
    for i in died:
        assert r.cells[i]["q025"] <= truth[labels[i]] <= r.cells[i]["q975"]


def test_a_prior_base_with_zero_mass_on_the_confidential_counts_is_an_error_at_its_line(tmp_path):
    from dpspec.check.checker import check
    from dpspec.check.data import load_data

    text = (
        SPEC.replace("MECH", "wasserstein_exponential")
        .replace("BASE", "prior\n  period: month\n  prior_offset: 0")
        .replace("    county : {a, b, c}\n", "    month  : {m1, m2}\n    county : {a, b, c}\n")
        .replace(
            'count people released "bulletin" used as total',
            'count people by month released "bulletin" used as total\n'
            '  count people by month, county released "last month" used as base',
        )
    )
    csv = "month,county\n" + "\n".join(["m1,a"] * 3 + ["m1,b"] * 2 + ["m2,a"] * 4 + ["m2,c"] * 5) + "\n"
    spec = dpspec.load(write_spec(tmp_path, text, csv))
    checked = check(spec)
    data, _ = load_data(spec)
    with pytest.raises(SpecError) as err:
        checked.mechanism.run(spec, checked.params, data, RunContext(np.random.default_rng(1)))
    d = err.value.diagnostics[0]
    assert "no mass on the confidential counts" in d.message and "c (5 now)" in d.message
    assert spec.text.splitlines()[d.line - 1].strip() == "prior_offset: 0"
    # the default offset gives every cell mass, and the release sums to the month's total
    ok = dpspec.load(write_spec(tmp_path, text.replace("  prior_offset: 0\n", ""), csv, "ok.dps"))
    checked = check(ok)
    rel = checked.mechanism.run(ok, checked.params, data, RunContext(np.random.default_rng(1)))
    assert rel.outputs["counts"]["people"].sum() == 9


@pytest.mark.parametrize("lam", [Fraction(1, 8), Fraction(-1, 6)])
def test_tilted_truncated_laplace_follows_its_pmf(lam):
    rng = np.random.default_rng(31)
    r, c = Fraction(1, 3), 2
    x = samplers.tilted_truncated_laplace(np.full(DRAWS // 2, c), r, lam, rng)
    pmf = {k: math.exp(-float(r) * abs(k - c) - float(lam) * k) for k in range(0, 80)}
    assert x.min() >= 0 and _chi2(list(x), pmf) > 1e-3


def test_the_congenial_tilt_centres_the_proposals_at_national_size():
    """Truncation at 0 pushes small cells up; without the tilt 1,500 cells drift far above the total."""
    rng = np.random.default_rng(32)
    counts = np.tile(np.array([0, 1, 3, 40, 700]), 300)
    lam = samplers._l1_tilt(counts, int(counts.sum()), Fraction(1, 8))
    assert lam > 0
    drawn = samplers.tilted_truncated_laplace(np.broadcast_to(counts, (10, counts.size)), Fraction(1, 8), lam, rng).sum(
        axis=1
    )
    untilted = samplers.truncated_laplace(np.broadcast_to(counts, (10, counts.size)), 0, None, Fraction(1, 8), rng).sum(
        axis=1
    )
    sd = math.sqrt(counts.size * 2 * 64)
    assert abs(drawn.mean() - counts.sum()) < 2 * sd < untilted.mean() - counts.sum()
