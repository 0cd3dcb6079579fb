"""Accuracy with every number: each noisy answer's 95% interval from its exact noise law.

Why from the exact law: the discrete Laplace and discrete Gaussian are integer laws, so the
interval is value ± k with k the smallest integer whose two-sided mass reaches 95%; its exact
coverage (a little above 95%) is stated beside it. Post-processing by clamping at zero keeps the
coverage (a monotone map of an interval that covers still covers); a mean (a ratio of two noisy
answers) and a quantile (a draw on a grid) have no such interval, and say so.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpspec.api import discrete_gaussian_pmf, discrete_gaussian_variance

LEVEL = 0.95


def laplace_pmf(t: Fraction, support: np.ndarray) -> np.ndarray:
    """P(X = k) for the discrete Laplace with scale t: (1 - e^(-1/t)) / (1 + e^(-1/t)) · e^(-|k|/t)."""
    a = math.exp(-1 / float(t))
    return (1 - a) / (1 + a) * np.exp(-np.abs(support) / float(t))


def half_width(noise: str, parameter: Fraction) -> tuple[int, float]:
    """(k, P(|X| <= k)): the smallest k with at least LEVEL of the noise's mass within ±k."""
    if parameter == 0:
        return 0, 1.0
    spread = math.sqrt(float(parameter)) if noise == "gaussian" else float(parameter)
    limit = int(40 * spread) + 10
    support = np.arange(-limit, limit + 1)
    pmf = laplace_pmf(parameter, support) if noise == "laplace" else discrete_gaussian_pmf(parameter, support)
    centre = pmf[limit] + 2 * np.cumsum(pmf[limit + 1:])  # P(|X| <= k) for k = 1, 2, ...
    mass = np.concatenate([[pmf[limit]], centre])
    k = int(np.searchsorted(mass, LEVEL))
    return k, float(mass[k])


def variance(noise: str, parameter: Fraction) -> float:
    """The noise's exact variance: 2a/(1-a)² with a = e^(-1/t) (Laplace), or the discrete Gaussian's."""
    if parameter == 0:
        return 0.0
    if noise == "gaussian":
        return discrete_gaussian_variance(parameter)
    a = math.exp(-1 / float(parameter))
    return 2 * a / (1 - a) ** 2


def scale_of(noise: str, parameter: Fraction) -> float:
    """The number printed as the noise scale: t for the Laplace, sigma for the Gaussian."""
    return float(parameter) if noise == "laplace" else math.sqrt(float(parameter))
