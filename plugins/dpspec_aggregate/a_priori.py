"""The error `dpspec budget` states before any data is read, without numpy (a spec's check and
budget stay light): the noise's standard deviation and its 95% interval, as `accuracy` gives
them with every released value."""

from __future__ import annotations

import math
from fractions import Fraction

LEVEL = 0.95


def _laplace(t: Fraction) -> tuple[float, int, float]:
    """Closed forms for the discrete Laplace of scale t (a = e^(-1/t)): variance 2a/(1-a)², and
    P(|X| <= k) = 1 - 2a^(k+1)/(1+a); 1 - a as -expm1(-1/t), so a scale up to the samplers' 7.2e16
    (where a rounds to 1) keeps its digits."""
    u = 1 / float(t)
    a = math.exp(-u)
    one_minus_a = 1 - a if t < 10**6 else -math.expm1(-u)  # (the plain form below 1e6: figures as before)
    mass = lambda k: 1 - 2 * (a ** (k + 1) if t < 10**6 else math.exp(-u * (k + 1))) / (1 + a)  # noqa: E731
    k = max(0, math.ceil(math.log((1 - LEVEL) * (1 + a) / 2) / (math.log(a) if t < 10**6 else -u) - 1))
    while k > 0 and mass(k - 1) >= LEVEL:  # the log's rounding, settled on the mass itself
        k -= 1
    while mass(k) < LEVEL:
        k += 1
    return 2 * a / one_minus_a**2, k, mass(k)


_SUMMED = 10**6  # sigma² up to this: the weights summed; beyond, the normal law with continuity correction


def _gaussian(sigma2: Fraction) -> tuple[float, int, float]:
    """The discrete Gaussian's weights e^(-n²/2σ²) summed out to 40σ (beyond, below 1e-300); for
    sigma² above 1e6, P(|X| <= k) = erf((k + 1/2) / (σ√2)) to far below a float's precision (the
    lattice's correction is of order e^(-2π²σ²)), so a sigma² up to the samplers' 5.2e33 costs nothing."""
    s2 = float(sigma2)
    if s2 > _SUMMED:
        scale = math.sqrt(2 * s2)
        mass = lambda k: math.erf((k + 0.5) / scale)  # noqa: E731
        k = max(0, int(1.959963984540054 * math.sqrt(s2)) - 2)
        while k > 0 and mass(k - 1) >= LEVEL:
            k -= 1
        while mass(k) < LEVEL:
            k += 1
        return s2, k, mass(k)
    limit = int(40 * math.sqrt(s2)) + 10
    weights = [math.exp(-n * n / (2 * s2)) for n in range(1, limit + 1)]
    norm = 1 + 2 * math.fsum(weights)
    variance = s2 if s2 > 100 else 2 * math.fsum(n * n * w for n, w in enumerate(weights, 1)) / norm
    inside, k = 1 / norm, 0
    while inside < LEVEL:
        inside += 2 * weights[k] / norm
        k += 1
    return variance, k, inside


def expected_error(noise: str, parameter) -> tuple[float, int, float]:
    """(standard deviation, k, P(|noise| <= k)) with k the smallest integer holding 95%."""
    if parameter == 0:
        return 0.0, 0, 1.0
    variance, k, coverage = _laplace(parameter) if noise == "laplace" else _gaussian(parameter)
    return math.sqrt(variance), k, coverage
