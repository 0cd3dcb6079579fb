"""The post-processing alternative of seed 2's case study (Section 4.2, method 1): noisy counts made
congenial with the public information by a deterministic two-stage post-processing.

Stage 1 projects the noisy case counts onto {y >= 0, sum y = public total} (Euclidean projection
onto the scaled simplex, then integers by largest remainders, which keeps the total); stage 2
clips the noisy death counts to [0, cases]. Both stages map many noisy values to one output,
which is what Section 4.3 counts: ContractedCaseZeros (a negative noisy case count made 0),
ContractedDeathZeros (a negative noisy death count made 0) and ContractedRates (a noisy death
count above the county's cases made equal to them: a survival rate contracted to 0).
"""
from __future__ import annotations

import numpy as np

from dpspec.api import project_to_total  # shared with the aggregate's consistency with a public total

__all__ = ["project_to_total", "two_stage"]


def two_stage(noisy_cases: np.ndarray, noisy_deaths: np.ndarray | None, total: int):
    """(cases, deaths, contractions): stage 1 and 2 above, with per-cell contraction flags."""
    cases = project_to_total(noisy_cases, total)
    flags = {"ContractedCaseZeros": (cases == 0) & (np.asarray(noisy_cases) < 0)}
    deaths = None
    if noisy_deaths is not None:
        nd = np.asarray(noisy_deaths)
        deaths = np.clip(nd, 0, cases)
        flags["ContractedDeathZeros"] = nd < 0
        flags["ContractedRates"] = (nd > cases) & (cases > 0)
    return cases, deaths, flags
