"""Protection in plain words: every figure recomputed independently of dpspec.budget.interpret
(standard-library normal distribution, closed forms written out here)."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

from dpspec.budget import ApproxDP, GaussianDP, PureDP, ZCDP
from dpspec.budget.interpret import posterior, read, tradeoff
from dpspec.language.parser import parse
from dpspec.report.model import build_model
from dpspec.report.render import render_html, render_markdown
from dpspec.report.render import pct

N = NormalDist()
CASES = Path(__file__).parent / "audit_cases"


def bayes(prior: float, eps: float) -> float:
    odds = prior / (1 - prior) * math.exp(eps)
    return odds / (1 + odds)


def test_pure_posteriors_are_prior_odds_times_e_eps():
    r = read(PureDP(math.log(3)), 1e-10)
    assert r.delta == 0
    # ln 3: prior 1% -> 3 / 102 = 2.94%; 10% -> 1/4; 50% -> 3/4
    assert [q for _, q in r.posteriors] == pytest.approx([3 / 102, 0.25, 0.75])
    # best power at alpha: min(1, e^eps alpha, 1 - e^-eps (1 - alpha))
    assert [w for _, w in r.powers] == pytest.approx([0.03, 0.15])


def test_approximate_dp_keeps_its_delta():
    r = read(ApproxDP(1.0, 1e-6), 1e-10)
    assert r.delta == 1e-6 and r.posteriors[2][1] == pytest.approx(bayes(0.5, 1.0))
    assert r.powers[0][1] == pytest.approx(math.e * 0.01 + 1e-6)


def test_gdp_reads_through_its_trade_off_curve():
    mu, delta = 1.0, 1e-6
    r = read(GaussianDP(mu), delta)
    # power: 1 - G_mu(alpha) = Phi(Phi^-1(alpha) + mu)
    assert [w for _, w in r.powers] == pytest.approx([N.cdf(N.inv_cdf(a) + mu) for a in (0.01, 0.05)], rel=1e-9)

    def delta_at(e):  # Dong, Roth & Su, Corollary 2.13
        return N.cdf(-e / mu + mu / 2) - math.exp(e) * N.cdf(-e / mu - mu / 2)

    lo, hi = 0.0, 50.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_at(mid) > delta else (lo, mid)
    assert r.epsilon == pytest.approx(hi, rel=1e-6)
    assert [q for _, q in r.posteriors] == pytest.approx([bayes(p, hi) for p in (0.01, 0.1, 0.5)], rel=1e-6)


def test_zcdp_curve_lies_below_the_gaussian_that_achieves_it():
    rho = 0.5
    alpha = np.linspace(0, 1, 201)
    f = tradeoff(ZCDP(rho), alpha)
    g = np.array([N.cdf(N.inv_cdf(1 - a) - math.sqrt(2 * rho)) if 0 < a < 1 else (1.0 - a) for a in alpha])
    # the Gaussian mechanism with mu = sqrt(2 rho) is rho-zCDP, so no valid zCDP bound exceeds its curve
    assert np.all(f <= g + 1e-9)
    assert np.all(np.diff(f) <= 1e-12) and f[0] == pytest.approx(1.0) and f[-1] == pytest.approx(0.0)
    r = read(ZCDP(rho), 1e-10)
    # CKS20 is tighter than Bun-Steinke's rho + 2 sqrt(rho ln(1/delta))
    assert r.epsilon < rho + 2 * math.sqrt(rho * math.log(1e10))
    assert r.posteriors[0][1] == pytest.approx(bayes(0.01, r.epsilon))


def test_posterior_is_stable_for_huge_and_infinite_budgets():
    assert posterior(0.01, 800.0) == 1.0 and posterior(0.5, math.inf) == 1.0 and posterior(0.0, 5.0) == 0.0
    assert pct(0.029411) == "2.941%" and pct(1.0) == "over 99.99%" and pct(0.25) == "25%"


def test_the_report_reads_the_unit_and_the_bounded_coarse_entity():
    spec = parse((CASES / "hospital_visits.dps").read_text(), str(CASES / "hospital_visits.dps"))
    model = build_model(spec=spec)
    w = model["plain_words"]
    assert [r["who"] for r in w["rows"]] == ["one visit", "one patient (at most 30 visits)"]
    visit, patient = w["rows"]
    assert visit["epsilon"] == pytest.approx(math.log(3)) and patient["epsilon"] == pytest.approx(30 * math.log(3))
    assert visit["posteriors"][0]["posterior"] == pytest.approx(3 / 102)
    html, md = render_html(model), render_markdown(model)
    assert 'id="plain-words"' in html and "What a test can do: trade-off curves" in html
    assert "posterior ≤ p e^eps / (p e^eps + 1 - p)" in md and "| one patient (at most 30 visits) |" in md


def test_an_unbounded_link_is_named_without_a_figure():
    path = CASES / "business_register.dps"
    w = build_model(spec=parse(path.read_text(), str(path)))["plain_words"]
    assert [r["who"] for r in w["rows"]] == ["one employee"] and w["unbounded"] == ["firm"]
