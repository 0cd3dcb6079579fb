"""What a budget means for one person: an attacker's largest posterior belief and best test.

An oversight board asks what a number allows an attacker to learn. Two readings, each by a
formula the report names so anyone can recompute it:

* posterior belief: an attacker who believes with probability p that a person has a trait
  sees the release; under epsilon-DP the posterior odds are at most the prior odds times
  e^epsilon, so the belief is at most p e^eps / (p e^eps + 1 - p). Approximate DP allows the
  bound to fail with probability delta. zCDP and GDP have no single epsilon: they are read at a
  stated delta through their (epsilon, delta) profiles (CKS20 for zCDP, the exact GDP dual of
  Dong, Roth & Su for GDP), which is where their trade-off curves meet the posterior bound.
* hypothesis test: the attacker tests "has the trait" against "has not". The trade-off curve
  f(alpha) is the smallest type II error at type I error alpha; 1 - f(alpha) is the best power.
"""

from __future__ import annotations

import math

import attrs

from dpspec.lazy import LazyModule

from .conversions import cks20_epsilon, cks20_log_delta, gdp_epsilon
from .premetrics import ApproxDP, Budget, GaussianDP, PureDP, RenyiDP, ZCDP

# heavy libraries, imported on first use
_special = LazyModule("scipy.special", "_special", globals())  # Phi and its inverse; only GDP's curve needs them

PRIORS = (0.01, 0.10, 0.50)
TEST_ALPHAS = (0.01, 0.05)

FORMULAS = {
    "pure": "posterior ≤ p e^eps / (p e^eps + 1 - p) (posterior odds at most prior odds x e^eps; "
    "the Bayesian reading of Kasiviswanathan and Smith 2014)",
    "approx": "posterior ≤ p e^eps / (p e^eps + 1 - p), except on outcomes of total probability at most delta "
    "(the (eps, delta) definition: P[S | trait] ≤ e^eps P[S | no trait] + delta)",
    "zcdp": "eps = eps_CKS20(rho, delta), the tightest epsilon of the rho-zCDP privacy profile (Canonne, Kamath and "
    "Steinke 2020, Corollary 13); then posterior ≤ p e^eps / (p e^eps + 1 - p) except with probability delta",
    "gdp": "eps = eps_GDP(mu, delta), the exact (eps, delta) dual of the trade-off curve "
    "G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu) (Dong, Roth and Su 2022, Corollary 2.13); then "
    "posterior ≤ p e^eps / (p e^eps + 1 - p) except with probability delta",
}
CURVES = {
    "pure": "f(alpha) = max(0, 1 - e^eps alpha, e^-eps (1 - alpha)) (Wasserman and Zhou 2010; Kairouz, Oh and Viswanath 2015)",
    "approx": "f(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)) (Kairouz, Oh and Viswanath 2015)",
    "zcdp": "f(alpha) = the upper envelope, over eps, of the (eps, delta_CKS20(rho, eps)) curves (each point of the "
    "profile is a valid bound; computed on a grid, so it is conservative)",
    "gdp": "f(alpha) = G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu) (Dong, Roth and Su 2022, Definition 2.5)",
}


def posterior(prior: float, epsilon: float) -> float:
    """The largest posterior belief from prior p when the likelihood ratio is at most e^eps."""
    if math.isinf(epsilon):
        return 1.0
    if prior <= 0:
        return 0.0
    # p e^eps / (p e^eps + 1 - p), written to stay finite for large eps
    return 1.0 / (1.0 + (1.0 - prior) / prior * math.exp(-epsilon))


def approx_tradeoff(alpha: list[float], epsilon: float, delta: float) -> list[float]:
    """The (eps, delta)-DP trade-off curve at type I errors alpha."""
    if math.isinf(epsilon):
        return [0.0 for _ in alpha]
    up = math.exp(epsilon) if epsilon < 700 else math.inf  # (exp overflows past 709: epsilon 1000 is legal)
    down = math.exp(-epsilon)
    return [max(0.0, 1.0 - delta - (up * a if a else 0.0), down * (1.0 - delta - a)) for a in alpha]


def tradeoff(budget: Budget, alpha) -> list[float]:
    """The trade-off curve the budget guarantees, at type I errors alpha (see CURVES). Plain
    Python for every budget but GDP's: a hover's reading of a budget loads no array library."""
    alpha = [float(a) for a in alpha]
    # a picture of the guarantee, not a figure any bound is checked against: floats
    if isinstance(budget, PureDP):
        return approx_tradeoff(alpha, float(budget.epsilon), 0.0)
    if isinstance(budget, ApproxDP):
        return approx_tradeoff(alpha, float(budget.epsilon), float(budget.delta))
    if isinstance(budget, GaussianDP):
        if math.isinf(budget.mu):
            return [0.0 for _ in alpha]

        return [float(_special.ndtr(_special.ndtri(1.0 - min(max(a, 0.0), 1.0)) - float(budget.mu))) for a in alpha]
    if isinstance(budget, ZCDP):
        if math.isinf(budget.rho):
            return [0.0 for _ in alpha]
        rho = float(budget.rho)
        hi = max(8.0, rho + 8.0 * math.sqrt(rho) + 8.0)
        step = hi / 399  # the grid numpy.linspace(0, hi, 400) gives: the same figures as before
        grid = [i * step for i in range(399)] + [hi]
        curves = [approx_tradeoff(alpha, e, math.exp(cks20_log_delta(rho, e))) for e in grid]
        return [max(column) for column in zip(*curves)]
    raise ValueError(f"no trade-off curve for {budget.kind} budgets here; convert to zCDP or approximate DP first")


@attrs.frozen
class Reading:
    """One budget read as posterior beliefs and test powers, with the formula that gives them."""

    budget: Budget
    epsilon: float  # the epsilon the posterior bound uses
    delta: float  # the failure probability the bound allows (0 for pure DP)
    posteriors: tuple[tuple[float, float], ...]  # (prior, largest posterior)
    powers: tuple[tuple[float, float], ...]  # (type I error alpha, largest power 1 - f(alpha))
    formula: str
    curve: str


def read(budget: Budget, delta: float) -> Reading:
    """The budget's posterior bounds at PRIORS and test powers at TEST_ALPHAS. zCDP and GDP are
    read at `delta`; approximate DP at its own delta."""
    kind = budget.kind
    if isinstance(budget, PureDP):
        eps, d = budget.epsilon, 0.0
    elif isinstance(budget, ApproxDP):
        eps, d = budget.epsilon, budget.delta
    elif isinstance(budget, ZCDP):
        eps, d = cks20_epsilon(budget.rho, delta), delta
    elif isinstance(budget, GaussianDP):
        eps, d = gdp_epsilon(budget.mu, delta), delta
    elif isinstance(budget, RenyiDP):
        raise ValueError("a Rényi budget of one order is read after converting it to approximate DP")
    else:
        raise ValueError(f"cannot read a {kind} budget")
    f = tradeoff(budget, TEST_ALPHAS)
    eps, d = float(eps), float(d)  # certified figures, read as floats for the posterior's picture
    return Reading(
        budget,
        eps,
        d,
        tuple((p, posterior(p, eps)) for p in PRIORS),
        tuple((a, float(1.0 - v)) for a, v in zip(TEST_ALPHAS, f)),
        FORMULAS[kind],
        CURVES[kind],
    )
