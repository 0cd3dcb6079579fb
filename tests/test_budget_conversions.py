"""Conversions: published figures, closed forms, OpenDP agreement, round trips, monotonicity,
and the conversions that do not exist."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpspec.budget import (
    ApproxDP,
    Conversion,
    GaussianDP,
    PureDP,
    RenyiCurve,
    RenyiDP,
    ZCDP,
    bs16_delta,
    bs16_epsilon,
    cks20_delta,
    cks20_epsilon,
    convert,
    gdp_delta,
    gdp_epsilon,
    renyi_delta,
    renyi_epsilon,
)
from dpspec.errors import ConversionError

REL = 1e-12


def close(a, b, rel=REL):
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


# ---- published figures ---------------------------------------------------------------------

# (rho, eps at delta = 1e-10 by Bun-Steinke, two decimals): the 2020 Census figures.
PUBLISHED_BS16 = [
    (15.29, 52.82),  # P.L. 94-171 and DHC together (docs/theory.md, Currencies)
    (55.371, 126.78),  # the 2020 PLB quoted in the seed paper, Part I
    (4.96, 26.33),
    (7.70, 34.33),
    (Fraction(542, 339) ** 2, 17.90),
]


@pytest.mark.parametrize("rho,expected", PUBLISHED_BS16)
def test_published_bs16_figures(rho, expected):
    c = convert(ZCDP(rho), "approx", delta=1e-10, method="bs16")
    assert c.method == "bs16"
    assert "Bun & Steinke" in c.citation
    assert c.result.delta == 1e-10
    assert round(c.result.epsilon, 2) == pytest.approx(expected, abs=1e-9)


def test_published_cks20_figure():
    c = convert(ZCDP(15.29), "approx", delta=1e-10)  # cks20 is the default
    assert c.method == "cks20"
    assert "Canonne" in c.citation
    assert round(c.result.epsilon, 2) == pytest.approx(51.56, abs=1e-9)


def test_same_mechanism_two_conversions_two_figures():
    bs = convert(ZCDP(15.29), "approx", delta=1e-10, method="bs16")
    cks = convert(ZCDP(15.29), "approx", delta=1e-10, method="cks20")
    assert bs.result.epsilon - cks.result.epsilon == pytest.approx(1.2542, abs=1e-3)


def test_pure_to_zcdp_published():
    c = convert(PureDP(2), "zcdp")
    assert c.result == ZCDP(2)
    assert c.method == "pure-zcdp" and "Proposition 1.4" in c.citation
    assert c.exact and not c.lossless


# ---- closed forms to 1e-12 -----------------------------------------------------------------


@pytest.mark.parametrize("rho,delta", [(0.01, 1e-6), (0.5, 1e-3), (2.63, 1e-10), (15.29, 1e-10), (300.0, 1e-15)])
def test_bs16_closed_form(rho, delta):
    eps = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert close(bs16_epsilon(rho, delta), eps)
    assert close(bs16_delta(rho, eps), math.exp(-((eps - rho) ** 2) / (4 * rho)))
    assert close(bs16_delta(rho, eps), delta, 1e-10)


@pytest.mark.parametrize("eps", [0.1, 1.0, 2.0, 7.5])
def test_pure_to_zcdp_closed_form(eps):
    assert close(convert(PureDP(eps), "zcdp").result.rho, eps * eps / 2)


@pytest.mark.parametrize("rho,alpha", [(0.5, 2.0), (2.63, 7.25), (15.29, 1.5)])
def test_zcdp_to_renyi_closed_form(rho, alpha):
    c = convert(ZCDP(rho), "renyi", alpha=alpha)
    assert c.result == RenyiDP(alpha, Fraction(alpha) * Fraction(rho))  # exact: alpha rho
    curve = convert(ZCDP(rho), "renyi", alpha=[2, 4]).result
    assert curve == RenyiCurve([(2, 2 * rho), (4, 4 * rho)])


@pytest.mark.parametrize("alpha,tau,delta", [(2.0, 0.5, 1e-5), (10.0, 3.0, 1e-10), (1.5, 0.1, 1e-3)])
def test_renyi_closed_forms(alpha, tau, delta):
    mir = tau + math.log(1 / delta) / (alpha - 1)
    imp = tau + math.log(1 - 1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)
    assert close(convert(RenyiDP(alpha, tau), "approx", delta=delta, method="mironov17").result.epsilon, mir)
    assert close(convert(RenyiDP(alpha, tau), "approx", delta=delta).result.epsilon, imp)
    assert imp < mir  # the improved conversion is never worse
    # inverses
    assert close(renyi_delta(alpha, tau, mir, "mironov17"), delta, 1e-10)
    assert close(renyi_delta(alpha, tau, imp, "cks20"), delta, 1e-10)


def test_renyi_curve_takes_best_point():
    curve = RenyiCurve([(2, 0.2), (8, 1.0), (32, 4.0)])
    c = convert(curve, "approx", delta=1e-8)
    best = min(renyi_epsilon(a, t, 1e-8) for a, t in curve.points)
    assert c.result.epsilon == best
    assert "best order" in c.note
    c2 = convert(curve, "approx", epsilon=3.0)
    assert c2.result.delta == min(renyi_delta(a, t, 3.0) for a, t in curve.points)


def test_renyi_monotone_in_order():
    curve = RenyiCurve([(2, 0.2), (8, 1.0)])
    assert convert(curve, "renyi", alpha=4).result == RenyiDP(4, 1.0)
    assert convert(curve, "renyi", alpha=1.5).result == RenyiDP(1.5, 0.2)
    with pytest.raises(ConversionError, match="larger order"):
        convert(curve, "renyi", alpha=16)


def _phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


@pytest.mark.parametrize("mu,eps", [(0.5, 0.1), (1.0, 1.0), (1.0, 3.0), (2.0, 2.5), (0.3, 0.05)])
def test_gdp_closed_form(mu, eps):
    direct = _phi(-eps / mu + mu / 2) - math.exp(eps) * _phi(-eps / mu - mu / 2)
    assert close(gdp_delta(mu, eps), direct)
    c = convert(GaussianDP(mu), "approx", epsilon=eps)
    assert c.method == "drs22" and close(c.result.delta, direct)


def test_gdp_to_zcdp_and_renyi():
    assert convert(GaussianDP(2), "zcdp").result == ZCDP(2.0)
    c = convert(GaussianDP(2), "renyi", alpha=3)
    assert c.result == RenyiDP(3, 6.0)
    assert c.method == "gdp-zcdp then zcdp-renyi"
    assert len(c.steps) == 2


def test_pure_to_approx():
    c = convert(PureDP(1.5), "approx", delta=1e-10)
    assert c.result == ApproxDP(1.5, 0) and c.lossless
    # below epsilon: randomized response's privacy region
    c = convert(PureDP(1.0), "approx", epsilon=0.5)
    assert close(c.result.delta, (math.e - math.exp(0.5)) / (1 + math.e))
    assert convert(PureDP(1.0), "approx", epsilon=2.0).result.delta == 0


def test_pure_to_renyi():
    assert convert(PureDP(1), "renyi", alpha=2).result == RenyiDP(2, 1.0)  # alpha eps^2/2 = 1
    assert convert(PureDP(0.1), "renyi", alpha=10).result.epsilon == pytest.approx(0.05, rel=1e-15)
    assert convert(PureDP(3), "renyi", alpha=10).result.epsilon == 3.0  # D_alpha <= D_inf


def test_approx_weakening():
    assert convert(ApproxDP(1, 1e-9), "approx", delta=1e-6).result == ApproxDP(1, 1e-6)
    assert convert(ApproxDP(1, 1e-9), "approx").method == "identity"
    with pytest.raises(ConversionError):
        convert(ApproxDP(1, 1e-6), "approx", delta=1e-9)


# ---- CKS20 against a brute-force search and against OpenDP ---------------------------------


def _cks_bruteforce_log_delta(rho, eps):
    """Grid over log(alpha - 1), then a finer grid around the best point."""
    s = np.linspace(-30, 8, 20001)
    for _ in range(3):
        a = 1 + np.exp(s)
        f = (a - 1) * (a * rho - eps) + a * np.log1p(-1 / a) - np.log(a - 1)
        i = int(np.argmin(f))
        s = np.linspace(s[max(i - 1, 0)], s[min(i + 1, len(s) - 1)], 2001)
        best = f[i]
    return min(0.0, float(best))


@pytest.mark.parametrize("rho,eps", [(0.5, 3.0), (15.29, 51.56), (2.63, 10.0), (0.01, 0.3), (1.0, 1.5)])
def test_cks20_is_the_minimum_over_alpha(rho, eps):
    ours = math.log(cks20_delta(rho, eps))
    brute = _cks_bruteforce_log_delta(rho, eps)
    assert ours <= brute + 1e-12 * abs(brute)  # no grid point beats it
    assert ours == pytest.approx(brute, rel=1e-9)


OPENDP_POINTS = [
    (15.29, 1e-10),
    (2.63, 1e-10),
    (55.371, 1e-10),
    (0.5, 1e-3),
    (0.01, 1e-6),
    (1.0, 1e-5),
    (100.0, 1e-12),
    (0.3, 0.1),
]


@pytest.fixture(scope="module")
def opendp_profile():
    try:
        import opendp.prelude as dp
    except Exception as exc:  # pragma: no cover - opendp is a project dependency
        pytest.skip(f"opendp failed to import: {exc!r}")
    dp.enable_features("contrib", "honest-but-curious")

    def profile(rho):
        # A measurement whose zCDP map returns exactly rho, cast by OpenDP's own conversion.
        meas = dp.m.make_user_measurement(
            dp.atom_domain(T=float, nan=False),
            dp.absolute_distance(T=float),
            dp.zero_concentrated_divergence(),
            lambda x: x,
            lambda d_in: rho,
            TO=float,
        )
        return dp.c.make_zCDP_to_approxDP(meas).map(1.0)

    return profile


@pytest.mark.parametrize("rho,delta", OPENDP_POINTS)
def test_cks20_agrees_with_opendp(opendp_profile, rho, delta):
    profile = opendp_profile(rho)
    theirs = profile.epsilon(delta)
    ours = convert(ZCDP(rho), "approx", delta=delta, method="cks20").result.epsilon
    assert ours == pytest.approx(theirs, rel=1e-6)
    # and the other direction, delta at a given epsilon
    assert cks20_delta(rho, theirs) == pytest.approx(profile.delta(theirs), rel=1e-6)


def test_opendp_pure_to_zcdp_agrees(opendp_profile):
    import opendp.prelude as dp

    meas = dp.m.make_user_measurement(
        dp.atom_domain(T=float, nan=False),
        dp.absolute_distance(T=float),
        dp.max_divergence(),
        lambda x: x,
        lambda d_in: 2.0,
        TO=float,
    )
    assert dp.c.make_pureDP_to_zCDP(meas).map(1.0) == convert(PureDP(2), "zcdp").result.rho


# ---- round trips and monotonicity ----------------------------------------------------------

rhos = st.floats(min_value=1e-3, max_value=500.0)
deltas = st.floats(min_value=1e-15, max_value=0.5)
mus = st.floats(min_value=1e-2, max_value=20.0)


@settings(max_examples=60, deadline=None)
@given(rhos, deltas)
def test_round_trip_zcdp(rho, delta):
    for method, eps_of, delta_of in [("bs16", bs16_epsilon, bs16_delta), ("cks20", cks20_epsilon, cks20_delta)]:
        eps = convert(ZCDP(rho), "approx", delta=delta, method=method).result.epsilon
        if eps > 0:
            back = convert(ZCDP(rho), "approx", epsilon=eps, method=method).result.delta
            assert back == pytest.approx(delta, rel=1e-8)
            assert eps_of(rho, back) == pytest.approx(eps, rel=1e-8)


@settings(max_examples=60, deadline=None)
@given(mus, deltas)
def test_round_trip_gdp(mu, delta):
    eps = gdp_epsilon(mu, delta)
    if eps > 0:
        assert gdp_delta(mu, eps) == pytest.approx(delta, rel=1e-8)


@settings(max_examples=60, deadline=None)
@given(rhos, deltas, deltas)
def test_epsilon_decreases_with_delta(rho, d1, d2):
    lo, hi = sorted((d1, d2))
    assert cks20_epsilon(rho, hi) <= cks20_epsilon(rho, lo) + 1e-12
    assert bs16_epsilon(rho, hi) <= bs16_epsilon(rho, lo)


@settings(max_examples=60, deadline=None)
@given(rhos, rhos, deltas)
def test_epsilon_increases_with_rho(r1, r2, delta):
    lo, hi = sorted((r1, r2))
    assert cks20_epsilon(lo, delta) <= cks20_epsilon(hi, delta) * (1 + 1e-12)
    assert bs16_epsilon(lo, delta) <= bs16_epsilon(hi, delta)


@settings(max_examples=60, deadline=None)
@given(rhos, deltas)
def test_cks20_never_worse_than_bs16(rho, delta):
    assert cks20_epsilon(rho, delta) <= bs16_epsilon(rho, delta) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(mus, mus, deltas)
def test_gdp_monotone(m1, m2, delta):
    lo, hi = sorted((m1, m2))
    assert gdp_epsilon(lo, delta) <= gdp_epsilon(hi, delta) * (1 + 1e-9) + 1e-12


@settings(max_examples=60, deadline=None)
@given(mus, deltas)
def test_gdp_tighter_than_its_zcdp_image(mu, delta):
    """GDP -> (eps, delta) is exact, so it can only beat going through zCDP first."""
    direct = convert(GaussianDP(mu), "approx", delta=delta).result.epsilon
    via = convert(convert(GaussianDP(mu), "zcdp").result, "approx", delta=delta).result.epsilon
    assert direct <= via * (1 + 1e-9)


# ---- edge values ---------------------------------------------------------------------------


def test_edges():
    assert convert(ZCDP(0), "approx", delta=1e-10).result.epsilon == 0
    assert convert(ZCDP(math.inf), "approx", delta=1e-10).result.epsilon == math.inf
    assert convert(ZCDP(1), "approx", delta=0).result.epsilon == math.inf
    assert convert(ZCDP(1), "approx", delta=1).result.epsilon == 0
    assert 0 < cks20_delta(1e-300, 1.0) <= math.ulp(0.0)  # certified from above: the smallest float above 0
    assert 0 < cks20_delta(5.0, 0.0) <= 1
    assert gdp_epsilon(0.0, 1e-5) == 0 and gdp_delta(0.0, 1.0) == 0


@pytest.mark.parametrize("rho", [1e-320, 1e-300, 1e-12, 1.0, 1e8, 1e300])
@pytest.mark.parametrize("delta", [1e-300, 1e-10, 0.5, 0.999])
def test_extreme_values_stay_valid(rho, delta):
    eps = cks20_epsilon(rho, delta)
    assert 0 <= eps <= bs16_epsilon(rho, delta) * (1 + 1e-12)
    assert 0 <= cks20_delta(rho, eps) <= 1


def test_exact_flags():
    assert convert(ZCDP(1), "approx", delta=1e-6, method="bs16").exact
    assert not convert(ZCDP(1), "approx", delta=1e-6, method="cks20").exact  # a numerical optimum
    assert not convert(GaussianDP(1), "approx", delta=1e-6).exact  # a root
    assert convert(GaussianDP(1), "approx", epsilon=1).exact


def test_renyi_order_infinity_is_pure():
    c = convert(RenyiDP(math.inf, 1.5), "pure")
    assert c.result == PureDP(1.5) and c.method == "renyi-infinity"


# ---- conversions that do not exist ---------------------------------------------------------


@pytest.mark.parametrize(
    "budget,to,kwargs,words",
    [
        (ApproxDP(1, 1e-6), "pure", {}, "does not exist"),
        (ZCDP(1), "pure", {}, "does not exist"),
        (RenyiDP(2, 1), "pure", {}, "does not exist"),
        (GaussianDP(1), "pure", {}, "does not exist"),
        (ApproxDP(1, 1e-6), "zcdp", {}, "catastrophic"),
        (ApproxDP(1, 1e-6), "renyi", {"alpha": 2}, "catastrophic"),
        (ApproxDP(1, 1e-6), "gdp", {}, "does not exist"),
        (ZCDP(1), "gdp", {}, "does not exist"),
        (RenyiDP(2, 1), "zcdp", {}, "every order"),
        (ZCDP(1), "approx", {}, "needs"),
        (ZCDP(1), "renyi", {}, "alpha"),
        (ZCDP(1), "approx", {"delta": 1e-6, "epsilon": 1}, "not both"),
        (ZCDP(1), "approx", {"delta": 1e-6, "method": "magic"}, "unknown conversion method"),
        (ZCDP(1), "hockey", {}, "unknown premetric"),
    ],
)
def test_impossible_conversions(budget, to, kwargs, words):
    with pytest.raises(ConversionError, match=words):
        convert(budget, to, **kwargs)


def test_conversion_record_json():
    c = convert(ZCDP(15.29), "approx", delta=1e-10, method="bs16")
    assert isinstance(c, Conversion)
    j = c.to_json()
    assert j["source"] == {"premetric": "zcdp", "rho": 15.29}
    assert j["result"]["premetric"] == "approx" and j["method"] == "bs16" and j["exact"] is True
    inf = convert(ZCDP(math.inf), "approx", delta=1e-10).to_json()
    assert inf["result"]["epsilon"] == "inf"
