"""The exact discrete Gaussian sampler against the exact pmf, at several scales."""

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpspec.run import noise
from dpspec.run.noise import (
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace,
    effective_sigma2,
)


def _chi_square_pvalue(samples, pmf_at, lo, hi, n_bins=60):
    """Chi-square of samples against pmf on [lo, hi], bins of about equal mass, tails pooled."""
    support = np.arange(lo, hi + 1)
    p = pmf_at(support)
    cdf = np.cumsum(p)
    edges_q = np.linspace(0, cdf[-1], n_bins + 1)[1:-1]
    cut = np.unique(np.searchsorted(cdf, edges_q))  # bin ends (indices into support)
    bins = np.concatenate([[support[0] - 0.5], support[cut] + 0.5, [support[-1] + 0.5]])
    expected = np.add.reduceat(p, np.concatenate([[0], cut + 1]))[: len(bins) - 1]
    # mass outside [lo, hi] goes to the end bins
    expected[0] += (1.0 - p.sum()) / 2
    expected[-1] += (1.0 - p.sum()) / 2
    clipped = np.clip(samples, lo, hi)
    observed, _ = np.histogram(clipped, bins=bins)
    expected = expected * samples.size
    keep = expected > 0
    chi2 = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    return float(stats.chi2.sf(chi2, keep.sum() - 1))


SCALES = [Fraction(1, 2), Fraction(1), Fraction(10), Fraction(1000), Fraction(10**6)]


@pytest.mark.parametrize("sigma2", SCALES, ids=str)
def test_pmf_mean_and_variance(sigma2):
    n = 200_000
    x = discrete_gaussian(sigma2, n, np.random.default_rng(20260101))
    assert x.dtype == np.int64
    var = discrete_gaussian_variance(sigma2)
    sd = var**0.5
    # mean within 5 standard errors; sample variance within 5 of its standard errors (kurtosis ~3)
    assert abs(x.mean()) < 5 * sd / n**0.5
    assert abs(x.var() / var - 1) < 5 * (2 / n) ** 0.5
    span = int(8 * float(sigma2) ** 0.5) + 3
    p = _chi_square_pvalue(x, lambda s: discrete_gaussian_pmf(sigma2, s), -span, span)
    assert p > 1e-4


def test_chi_square_detects_wrong_variance():
    """The goodness-of-fit test has power: 10% more variance is rejected at the same n."""
    x = discrete_gaussian(Fraction(11), 200_000, np.random.default_rng(7))
    p = _chi_square_pvalue(x, lambda s: discrete_gaussian_pmf(Fraction(10), s), -30, 30)
    assert p < 1e-6


def test_small_sigma_pmf_exactly_symmetric_around_zero():
    x = discrete_gaussian(Fraction(1, 2), 100_000, np.random.default_rng(3))
    counts = {v: int(np.sum(x == v)) for v in (-2, -1, 0, 1, 2)}
    p0, p1 = discrete_gaussian_pmf(Fraction(1, 2), [0, 1])
    assert abs(counts[0] / 1e5 - p0) < 5 * (p0 * (1 - p0) / 1e5) ** 0.5
    assert abs((counts[1] + counts[-1]) / 2e5 - p1) < 5 * (p1 / 2e5) ** 0.5


def test_deterministic_for_a_seed():
    a = discrete_gaussian(Fraction(25, 3), 10_000, np.random.default_rng(42))
    b = discrete_gaussian(Fraction(25, 3), 10_000, np.random.default_rng(42))
    c = discrete_gaussian(Fraction(25, 3), 10_000, np.random.default_rng(43))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_shape_is_kept():
    x = discrete_gaussian(Fraction(3), (4, 5), np.random.default_rng(0))
    assert x.shape == (4, 5)


def test_big_integer_path_matches_pmf():
    """sigma² = 10^12 cannot be done in int64: the Python-integer path must still be exact."""
    s2 = Fraction(10**12)
    x = discrete_gaussian(s2, 20_000, np.random.default_rng(11))
    sd = 10**6
    assert abs(x.mean()) < 5 * sd / 20_000**0.5
    assert abs(x.var() / sd**2 - 1) < 5 * (2 / 20_000) ** 0.5
    # coarse bins of the standardized values against the normal limit (exact to 1e-12 here)
    z = x / sd
    observed, edges = np.histogram(z, bins=np.linspace(-3, 3, 13))
    expected = np.diff(stats.norm.cdf(edges)) * x.size
    assert stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > 1e-4


def test_huge_denominator_is_rounded_up_a_tiny_bit():
    s2 = Fraction(10**20 + 1, 10**17 + 3)  # about 1000, denominator far beyond 2**25
    eff = effective_sigma2(s2)
    assert eff >= s2
    assert (eff - s2) / s2 < Fraction(1, 2**24)
    assert eff.denominator <= 2**25
    small = Fraction(7, 3)
    assert effective_sigma2(small) == small  # small numerators are used exactly
    x = discrete_gaussian(s2, 100_000, np.random.default_rng(5))
    p = _chi_square_pvalue(x, lambda s: discrete_gaussian_pmf(s2, s), -260, 260)
    assert p > 1e-4


@pytest.mark.parametrize("num,den", [(1, 3), (5, 2), (7, 1), (0, 1)])
def test_bernoulli_exp_rational(num, den):
    n = 200_000
    rng = np.random.default_rng(num * 100 + den)
    got = noise._bern_exp_rational(np.full(n, num, dtype=np.int64), den, rng).mean()
    want = np.exp(-num / den)
    assert abs(got - want) <= 5 * (want * (1 - want) / n) ** 0.5 + 1e-12


def test_bernoulli_exp_rational_with_denominator_beyond_int64():
    """Digits of a uniform real against num/den when den >= 2**63."""
    n = 100_000
    den = 3 * 2**70 + 1
    num = den // 3  # gamma just above 1/3
    rng = np.random.default_rng(9)
    arr = np.array([num] * n, dtype=object)
    got = noise._bern_exp_rational(arr, den, rng).mean()
    want = np.exp(-num / den)
    assert abs(got - want) < 5 * (want * (1 - want) / n) ** 0.5


def test_discrete_laplace_pmf():
    t = 3
    x = discrete_laplace(t, 200_000, np.random.default_rng(1))
    support = np.arange(-40, 41)
    w = np.exp(-np.abs(support) / t)
    pmf = lambda s: np.exp(-np.abs(s) / t) / (1 + 2 * np.exp(-1 / t) / (1 - np.exp(-1 / t)))  # noqa: E731
    assert abs(w.sum() * pmf(0) - 1) < 1e-5
    assert _chi_square_pvalue(x, pmf, -40, 40) > 1e-4


def test_rejects_nonpositive_sigma2():
    with pytest.raises(ValueError):
        discrete_gaussian(Fraction(0), 3, np.random.default_rng(0))


# --- the alias-table fast path --------------------------------------------------------------

PRODUCTION_SIGMA2 = [Fraction(2487929, 2048), Fraction(50), Fraction(1, 2), Fraction(300000)]


@pytest.mark.parametrize("sigma2", PRODUCTION_SIGMA2, ids=str)
def test_table_path_pmf_at_speed(sigma2):
    """2M samples through the table path (the one TopDown uses) against the exact pmf."""
    s2 = effective_sigma2(sigma2)
    assert noise._gaussian_table(s2.numerator, s2.denominator) is not None
    x = discrete_gaussian(sigma2, 2_000_000, np.random.default_rng(17))
    span = int(8 * float(sigma2) ** 0.5) + 3
    assert _chi_square_pvalue(x, lambda s: discrete_gaussian_pmf(sigma2, s), -span, span, n_bins=100) > 1e-4
    var = discrete_gaussian_variance(sigma2)
    assert abs(x.var() / var - 1) < 5 * (2 / x.size) ** 0.5


def test_table_bounds_are_certified():
    """Every symbol's acceptance bounds bracket 2**k·c·f/w computed independently in floats."""
    t = noise._gaussian_table(2487929, 2048)
    s2 = 2487929 / 2048
    y = np.arange(-t.b, t.b + 1)
    exact = t.c * np.exp(-(y * y) / (2 * s2)) / np.array(t.weight[: y.size], dtype=float)
    k = 2.0**t.acc_bits
    assert np.all(exact <= 1.0 + 1e-12)  # weights are upper bounds: acceptance is a probability
    assert np.all(t.acc_lo[: y.size] <= k * exact * (1 + 1e-12))
    assert np.all(t.acc_hi[: y.size] >= k * exact * (1 - 1e-12))
    assert np.all(t.acc_hi[: y.size] - t.acc_lo[: y.size] <= 2)
    # the alias table gives every symbol exactly its weight
    cap = 1 << noise._ALIAS_BITS
    mass = np.zeros(len(t.weight), dtype=object)
    for i, (th, al) in enumerate(zip(t.thresh.tolist(), t.alias.tolist())):
        mass[i] += th
        mass[al] += cap - th
    assert list(mass) == list(t.weight)


@pytest.mark.slow  # many exact noise draws
def test_exact_decision_when_the_bits_are_inconclusive():
    """The slow path accepts with probability c·f_s/w_s whatever prefix it starts from."""
    t = noise._gaussian_table(50, 1)
    rng = np.random.default_rng(5)
    s = t.b + 12  # y = 12: f = exp(-144/100), w small enough that c·f/w is far from 0 and 1
    want = t.c * np.exp(-144 / 100) / t.weight[s]
    k = t.acc_bits
    n = 20_000
    prefixes = rng.integers(0, 1 << k, size=n)  # a uniform prefix: overall P(accept) = want
    got = np.mean([noise._accept_exactly(t, s, int(a), rng) for a in prefixes])
    assert abs(got - want) < 5 * (want * (1 - want) / n) ** 0.5


def test_tail_sampler_follows_the_gaussian_beyond_b():
    t = noise._gaussian_table(1, 2)  # sigma² = 1/2, b = 10
    rng = np.random.default_rng(8)
    x = np.array([noise._tail_sample(t, rng) for _ in range(3000)])
    assert np.all(np.abs(x) > t.b)
    beyond = np.abs(x) - t.b - 1
    # P(|y| = b+1+L) ∝ exp(-(b+1+L)²) for sigma² = 1/2: L = 0 almost always (ratio e^-23)
    assert np.mean(beyond == 0) > 0.99
    assert abs(np.mean(x > 0) - 0.5) < 5 * (0.25 / x.size) ** 0.5


def test_bernoulli_ratios_per_element_probabilities():
    """Each draw has its own num/den, in int64 and beyond it; bad probabilities are refused."""
    n = 60_000
    rng = np.random.default_rng(12)
    num = np.tile([0, 1, 2, 5], n // 4)
    den = np.tile([3, 3, 7, 5], n // 4)
    got = noise.bernoulli_ratios(num, den, rng).reshape(-1, 4).mean(axis=0)
    for g, w in zip(got, [0, 1 / 3, 2 / 7, 1]):
        assert abs(g - w) <= 5 * (w * (1 - w) / (n // 4)) ** 0.5 + 1e-12
    big = 3 * 2**70 + 1
    draws = noise.bernoulli_ratios(np.array([big // 3] * n, dtype=object), np.array([big] * n, dtype=object), rng)
    assert abs(draws.mean() - 1 / 3) < 5 * (2 / 9 / n) ** 0.5
    with pytest.raises(ValueError):
        noise.bernoulli_ratios([2], [1], rng)
    with pytest.raises(ValueError):
        noise.bernoulli_ratios([1, 1], [2], rng)
