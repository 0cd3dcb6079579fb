"""The error `dpspec budget` states before any data is read, without numpy (a spec's check and
budget stay light): the noise's standard deviation and its 95% interval, as `accuracy` gives
them with every released value."""
from __future__ import annotations

import math
from fractions import Fraction

LEVEL = 0.95


def _laplace(t: Fraction) -> tuple[float, int, float]:
    """Closed forms for the discrete Laplace of scale t (a = e^(-1/t)): variance 2a/(1-a)², and
    P(|X| <= k) = 1 - 2a^(k+1)/(1+a)."""
    a = math.exp(-1 / float(t))
    mass = lambda k: 1 - 2 * a ** (k + 1) / (1 + a)  # noqa: E731
    k = max(0, math.ceil(math.log((1 - LEVEL) * (1 + a) / 2) / math.log(a) - 1))
    while k > 0 and mass(k - 1) >= LEVEL:  # the log's rounding, settled on the mass itself
        k -= 1
    while mass(k) < LEVEL:
        k += 1
    return 2 * a / (1 - a) ** 2, k, mass(k)


def _gaussian(sigma2: Fraction) -> tuple[float, int, float]:
    """The discrete Gaussian's weights e^(-n²/2σ²) summed out to 40σ (beyond, below 1e-300)."""
    s2 = float(sigma2)
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
